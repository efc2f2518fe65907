// The energy and latency of a compiled program, per token and per sequence (`aoc estimate PROG`,
// docs/energy.md "Programs"). One token's actions are counted by walking the program (its ops in
// order, a FixedPoint's body K times, every optical op's tiles, every Convert op, the digital ops
// with a documented op count each) and a simulation of which tile each module holds (the weight
// reloads); the counts go to the one energy model, sim/energy.hpp's estimate().
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "compiler/program.hpp"
#include "sim/energy.hpp"
#include "sim/hardware.hpp"
#include "sim/physics_spec.hpp"

namespace aoc {

// The iterations a FixedPoint is counted with when they were measured (e.g. from an `aoc run`).
struct MeasuredIterations {
  double k = 0;      // per token
  std::string from;  // how it was measured, for the report
};

struct ProgramEstimateOptions {
  std::optional<double> iterations;  // K of every FixedPoint; nullopt: measured, else each one's max_iter (an upper bound)
  std::map<std::string, MeasuredIterations> measured;  // by FixedPoint (op_label), used where `iterations` is unset
  std::int64_t seq_len = 1024;       // L: tokens per sequence; attention's mean context is L / 2
  // B sequences stepped together, token by token: each programming of a module serves the B
  // sequences' vectors before the next reload, so a token's reloads, weight writes and the
  // electronics' wait through them are shared by B (the counts below are per sequence-token).
  // Everything else runs one vector at a time on the modules, as at batch 1.
  double batch = 1;
  std::optional<double> photons_per_sample;  // photon-budget mode (as `aoc estimate --photons`)
  // Write-verify after each programming (as `aoc run --write-verify`): each SLM pixel off by more
  // than this fraction of its transmission is written again, up to verify_rounds times (0: none).
  double write_verify = 0;
  int verify_rounds = 8;
  // The auto-zero after each programming (as `aoc run --zero-reads`): this many ADC samples of every
  // reprogrammed channel with the values at 0, the channels lit and detected meanwhile (0: none).
  int zero_reads = kZeroReads;
  // The auto-zero taken again this often on the machine's clock (as `aoc run --zero-every-us`): a
  // token's share of its zero_reads ADC samples of every channel of the modules in use (none: never).
  std::optional<double> zero_every_us;
  GpuChoice gpu;                              // the GPU the token is compared with
};

// A FixedPoint of the program and the iterations it is counted with.
struct LoopCount {
  std::string name, layout;  // layout: native or assisted
  double iterations = 0;     // K per token
  bool upper_bound = false;  // K is the FixedPoint's max_iter (neither given nor measured)
  std::string from;          // where K came from: given, measured (how), or max_iter
  int depth = 0;             // 0: at the top level
};

// An optical op's use of its matrix per token: a Conv2d sends every output position's patch through
// the one programmed matrix (products > 1, programmings stay its passes).
struct OpticalUse {
  std::string op;
  std::int64_t rows = 0, cols = 0;
  int tiles = 0;
  int programmings = 0;  // the passes its tiles are programmed in (1: programmed once, at load)
  double products = 0;   // vectors through the matrix per evaluation of the op (a Conv2d: Ho x Wo)
  double per_token = 0;  // of those, per token (times a loop's evaluations)
};

// Digital work of one kind of op per token, with the rule that counted it.
struct DigitalCount {
  double ops = 0;
  std::string rule;
};

struct ProgramEstimate {
  std::string program;   // the graph's name
  std::string machine;   // the hardware's name
  std::int64_t parameters = 0;       // elements of every weight of the graph
  std::int64_t optical_weights = 0;  // elements of the optical ops' matrices
  int channels = 0, modules = 0;     // the machine's
  int tiles = 0;                     // over all optical ops
  int cores = 0;                     // distinct (module, pass) programmings (= modules a weight-stationary mapping needs)
  int modules_used = 0;              // distinct modules holding a tile
  int passes = 0;                    // programmings of the busiest module (max tile.pass + 1)
  std::int64_t seq_len = 0;
  double batch = 1;  // sequences sharing each programming (ProgramEstimateOptions::batch)

  std::map<std::string, int> placement;  // ops by place (optical, analog, digital), Convert by direction (dac, adc)
  std::vector<LoopCount> loops;

  // Per token (the workload's counts are per token too).
  double tile_runs = 0;            // tile executions (an op's tiles times its executions)
  double partial_sum_adc = 0;      // of adc_conversions: column tiles summed digitally
  double initial_writes = 0;       // weights programmed once per model load (the pass-0 tiles)
  double utilisation = 0;          // analog MACs / (tile executions x channels^2)
  std::map<std::string, DigitalCount> digital;  // by op kind (and "partial sums")
  std::vector<OpticalUse> optical_ops;           // per optical op, in program order
  Workload work;                   // per token, explicit counts
  EnergyReport token;              // per token
  EnergyReport load;               // the initial programming, once per model load
  std::vector<std::string> notes;
};

// Counts one token of `p` on `hw` and estimates it. The hardware must be the program's target
// (same name, channels and modules: else an error saying to recompile). Throws aoc::Error, e.g.
// naming timing.digital_gmac_per_s when the program has digital work and the file lacks it.
ProgramEstimate estimate_program(const ir::Program& p, const Hardware& hw, const ProgramEstimateOptions& o = {});

// The machine a compiled program is estimated on: the file it was compiled for (`hw_given` instead
// when not empty; the recorded file, else its bundled name when the file is not here) with its
// compile-time overrides, then `set`. `source` says what is estimated, for the report.
struct EstimateTarget {
  Hardware hw;
  std::string path;
  std::vector<std::string> overrides;
  std::string source;
};
EstimateTarget estimate_target(const ir::Program& p, const std::string& program_name, const std::string& hw_given,
                               const std::vector<std::string>& set);

// A graph compiled for `hw` in memory, shapes only: the pipeline without quantize (for estimates
// of a graph JSON; `aoc compile` writes a program file).
ir::Program compile_for_estimate(const ir::Graph& g, const Hardware& hw, const std::string& hw_path,
                                 const std::vector<std::string>& overrides);

}  // namespace aoc
