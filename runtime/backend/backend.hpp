// Backends run compiled programs (compiler/program.hpp) on token sequences. Each one is the graph
// interpreter with hooks for the hardware ops (compiler/interpret.hpp):
//   cpu  the digital reference: every optical op is the exact product in double over its whole
//        matrix (its tiles cover it once; kernels::dot_rows, the interpreter's own products, so the
//        values do not depend on the tiling), every Convert the identity: the interpreter.
//   sim  the simulated machine: one OpticalTile (sim/tile.hpp, the model every path uses) per tile
//        of each plan, programmed once per run with its SLM codes (when the program was quantized)
//        at its place in its module's core, through the machine's calibrated optical chain (or
//        ideal optics), with the hardware's noise (SLM pattern, LED intensity, shot, receiver,
//        drift, 1/f); read in float (or double) once per product and iteration. The DAC and ADC of
//        every Convert (the run's bits over the range compiled in), and the ADC of partial sums of
//        split matrices when the hardware adds them digitally.
//   cuda, cuda-f32  the cpu backend's semantics with the products on a GPU by cuBLAS, in float64
//        or float32 (runtime/backend/cuda_backend.hpp; built with AOC_CUDA, else an error saying so).
// docs/program.md, "Running programs".
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "compiler/interpret.hpp"
#include "compiler/program.hpp"
#include "sim/config.hpp"
#include "sim/physics_spec.hpp"
#include "sim/quantize.hpp"
#include "sim/solver.hpp"

namespace aoc {

struct Hardware;

struct BackendOptions {
  int threads = 1;
  std::uint64_t seed = 0;      // sim: noise seed
  std::optional<std::uint64_t> program_seed;  // sim: the SLM's programming errors (TileNoise::program_seed); none: seed
  double verify_tolerance = 0;  // sim: write-verify each SLM pixel to this relative error (TileNoise::verify_tolerance; 0: none)
  int verify_rounds = 8;        // sim: at most this many writes again per pixel
  int zero_reads = kZeroReads;  // sim: auto-zero reads after each programming (TileNoise::zero_reads; 0: none)
  std::optional<double> after_programming_us;  // sim: the run this long after programming (TileNoise::after_programming_us)
  std::optional<double> zero_every_us;         // sim: the auto-zero again this often (TileNoise::zero_every_us)
  bool noise = true;           // sim: the hardware's noise section (required when on)
  bool quantize = true;        // sim: SLM codes and the converters (when the program has them)
  bool optics = true;          // sim: each tile through the machine's calibrated optical chain (false: ideal optics)
  bool f64 = false;            // sim: the tiles' products in float64 (default float32, as the loop core)
  LightMap light_map = LightMap::Auto;  // sim: how each tile keeps its light map (OpticalTile::set_light_map; F16 not with f64)
  ir::Mode mode = ir::Mode::Simultaneous;
  // sim: the index of the inputs' first sample (axis 0) in the user's whole input: noise is keyed by
  // a sample's index there, so a batch split over several runs draws what one run of the whole would
  int first_sample = 0;
  bool trace = false;          // every top-level value, not only the outputs
  // sim, with noise: a FixedPoint stops a sample (the released rule: the batch) whose residual has
  // made no progress for this many steps: it is at the noise floor (SolverOptions::floor_patience; 0: off)
  int floor_patience = SolverOptions::kNoisyPatience;
  // Progress: after each token (sequential) or fixed-point step (simultaneous); see ir::InterpretOptions.
  std::function<void(long long done, long long total)> progress;
};

// What a run did beside its outputs (the sim backend counts its conversions).
struct RunCounters {
  long long dac = 0, adc = 0;          // values converted
  long long dac_clipped = 0, adc_clipped = 0;  // of those, outside the converter's range
  long long slm_rewrites = 0;  // SLM pixels written again by write-verify (BackendOptions::verify_tolerance)
};

struct ProgramResult {
  std::map<std::string, ir::Tensor> values;  // the graph's outputs (every top-level value with trace)
  std::vector<ir::FixedPointStats> fixed_points;
  RunCounters counters;
  double programming_seconds = 0;  // the sim backend: programming the tiles (SLM patterns, the chain factored), before the first token
  int tiles = 0, half_map_tiles = 0;  // the sim backend: tiles programmed, and of those, with half-precision light maps
};

// The sim backend's precision as runs print and record it: "f32", "f64", "f32, f16 light maps", or
// "f32, f16 light maps on 3 of 7 tiles".
std::string precision_text(const std::string& precision, const ProgramResult& r);

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual ProgramResult run(const ir::Program& p, const std::map<std::string, ir::Tensor>& inputs, const BackendOptions& o) const = 0;
};

// "cpu", "sim", "cuda" or "cuda-f32" (the sim backend needs the hardware the program was compiled
// for; noise needs its noise section; the cuda backends a CUDA build and a device, else the error
// says which is missing). Any other name is an error listing the backends.
std::unique_ptr<Backend> make_backend(const std::string& name, const Hardware* hw = nullptr);

// A program run through the interpreter with the given hooks for its optical and Convert ops: what
// every backend is. noisy: the hooks draw noise (o.floor_patience applies).
ProgramResult run_with_hooks(const ir::Program& p, const std::map<std::string, ir::Tensor>& inputs, const BackendOptions& o,
                             const ir::Hooks& hooks, bool noisy = false);

// Calibration of the converters: runs the program exactly (the cpu backend) on sample inputs and
// sets every Convert's range (attrs lo, hi) to +-margin x the largest |value| it saw, so that each
// conversion uses its converter's full range (the gain before a DAC and after an ADC is the
// compiler's), and every split matrix's partial-sum ADC range (OpticalPlan::sum_range) to +-margin x
// the largest |partial sum| of one of its tiles. Returns how many ranges were set; one that saw only
// zeros keeps its range.
// progress: as BackendOptions::progress (fixed-point steps, bounded by max_iter).
int calibrate_converters(ir::Program& p, const std::map<std::string, ir::Tensor>& inputs, double margin = 1.0,
                         ir::Mode mode = ir::Mode::Simultaneous, std::function<void(long long, long long)> progress = {});

// Per Convert op, the largest |value| of each channel (the last axis) it sees when the program runs
// exactly on sample inputs: what the compiler's balance pass scales the channels by.
std::map<std::string, std::vector<double>> converter_channel_largest(const ir::Program& p, const std::map<std::string, ir::Tensor>& inputs,
                                                                     ir::Mode mode = ir::Mode::Simultaneous,
                                                                     std::function<void(long long, long long)> progress = {});

// The sim backend's hooks for one program outside a run: each optical op's product on its
// programmed tiles and each Convert's converter, one call at a time (hardware-aware training reads
// a model's products so: runtime/train/train_machine.hpp). p, hw and o must outlive them.
std::unique_ptr<ir::Hooks> make_sim_hooks(const ir::Program& p, const Hardware& hw, const BackendOptions& o);

// The converter a Convert op describes (its bits over [lo, hi]); nullopt for an ideal one (no bits).
std::optional<UniformConverter> converter_of(const ir::Op& convert);

// The names make_backend accepts.
const std::vector<std::string>& backend_names();

}  // namespace aoc
