// A GPU as a roofline, for the estimates' comparison: some work takes the longer of its compute at
// the GPU's dense tensor peak and the weights it streams from memory at the memory's bandwidth, and
// draws the board power meanwhile. The GPUs are data (scenarios/gpus.json), each with its source.
#pragma once
#include <map>
#include <string>
#include <vector>

namespace aoc {

struct GpuSpec {
  std::string key, name;
  std::map<std::string, double> dense_tops;  // TOPS (TFLOPS) by precision: bf16, fp8, int8
  double memory_tb_per_s = 0, memory_gb = 0, l2_mb = 0, board_watts = 0;
  double l2_tb_per_s = 0;  // the L2's bandwidth to the SMs (what a pass over weights held in it streams at)
  double launch_us = 0;    // the time a dependent kernel adds: its launch, synchronisation and ramp
  std::string source;
};

// The bundled catalogue, scenarios/gpus.json (under AOC_DATA_DIR when set).
std::string bundled_gpus_path();
// The GPUs of a catalogue file, in the file's order; a malformed file is a one-line error naming it
// and the field.
std::vector<GpuSpec> read_gpus(const std::string& path);
// The GPU of that key in the bundled catalogue (read once per process); an unknown key is an error
// listing the known ones.
GpuSpec find_gpu(const std::string& key);

// What the estimate compares with: which GPU, at which precision (empty: the machine's weight
// precision, fp8 for weights of 8 bits or fewer, bf16 above), and how many samples (or sequences)
// share each pass over the weights.
struct GpuChoice {
  std::string gpu = "h100-sxm";
  std::string precision;
  double batch = 1;
};

int bytes_per_weight(const std::string& precision);  // bf16: 2; fp8, int8: 1

// Some work on one GPU. Each pass over the weights streams them to the SMs: from the L2 where they
// fit in it (read from memory once for the whole work), else from memory; a pass serves the whole
// batch. Passes that depend on each other (a fixed point's iterations, a token's layers) are
// kernels one after another, each adding its launch time. The time is the largest of compute,
// memory and L2 streaming, plus the launches. Activations, state and caches are not counted, so
// the streaming times are lower bounds. Figures are for the work itself: a batch's pass takes
// batch x seconds.
struct GpuRoofline {
  std::string gpu, name, precision, source;
  double batch = 1;
  double tops = 0, memory_tb_per_s = 0, l2_mb = 0, l2_tb_per_s = 0, launch_us = 0, watts = 0;  // the GPU
  double macs = 0;          // the work's MACs
  double distinct_weight_bytes = 0;  // the work's distinct weights
  bool weights_in_l2 = false;        // they fit in the L2: read from memory once
  double weight_bytes = 0;           // read from memory: the distinct weights once, or weight MACs x bytes / batch
  double l2_bytes = 0;               // streamed from the L2 (weights in it): weight MACs x bytes / batch
  double kernels = 0;                // dependent kernels: the work's dependent passes / batch
  double compute_seconds = 0, memory_seconds = 0, l2_seconds = 0, launch_seconds = 0;
  double seconds = 0;       // max(compute, memory, L2) + launches
  double joules = 0;        // board power x seconds
  double pj_per_mac = 0;    // joules / macs
  double tops_per_watt = 0;  // 2 macs / joules
  // What bounds it: the largest term (compute, memory, L2 or launch).
  std::string bound() const;
};

// macs: all the work's MACs; weight_macs: those that multiply by a weight (each reads one at batch
// 1); distinct_weights: how many different weights those are; dependent_passes: the products that
// must wait for the one before (the AOC's loop periods in series), each a kernel at batch 1.
GpuRoofline gpu_roofline(const GpuSpec& g, const std::string& precision, double batch, double macs, double weight_macs,
                         double distinct_weights, double dependent_passes);

}  // namespace aoc
