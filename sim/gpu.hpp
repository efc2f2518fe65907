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

// Some work on one GPU. Weights that fit in the L2 cache are read from memory once for the whole
// work (the L2's own bandwidth is taken as not limiting); larger ones stream from memory once per
// pass and serve the whole batch. Activations, state and caches are not counted, so the memory time
// is a lower bound (and a memory-bound verdict safe). Figures are for the work itself: a batch's
// pass takes batch x seconds. Kernel launches and synchronisation between dependent passes are not
// counted either.
struct GpuRoofline {
  std::string gpu, name, precision, source;
  double batch = 1;
  double tops = 0, memory_tb_per_s = 0, l2_mb = 0, watts = 0;  // the GPU: dense peak at the precision, bandwidth, L2, board power
  double macs = 0;          // the work's MACs
  double distinct_weight_bytes = 0;  // the work's distinct weights
  bool weights_in_l2 = false;        // they fit in the L2: read from memory once
  double weight_bytes = 0;           // read from memory: the distinct weights once, or weight MACs x bytes / batch
  double compute_seconds = 0, memory_seconds = 0;
  double seconds = 0;       // the larger of the two
  double joules = 0;        // board power x seconds
  double pj_per_mac = 0;    // joules / macs
  double tops_per_watt = 0;  // 2 macs / joules
  bool memory_bound() const { return memory_seconds > compute_seconds; }
};

// macs: all the work's MACs; weight_macs: those that multiply by a weight (each reads one at batch
// 1); distinct_weights: how many different weights those are.
GpuRoofline gpu_roofline(const GpuSpec& g, const std::string& precision, double batch, double macs, double weight_macs,
                         double distinct_weights);

}  // namespace aoc
