// `aoc bench`'s reference section: the digital reference (the cpu backend) on a multi-layer model
// against the memory roofline of its products (docs/bench.md, "The digital reference"):
//   reference 1t / 2t  the model compiled for the machine (exact weights), run token by token on
//                      the cpu backend with 1 and with 2 threads, alternately: seconds per
//                      fixed-point evaluation (a run's time over its evaluations);
//   gemv               an Eigen GEMV over each optical op's weight in place (one thread, double, as
//                      the reference): the loop's matrices once per evaluation and the top level's
//                      once per token, the least time any product of these weights can take;
//   ratios             the 1-thread run over that roofline (target 1.5x) and the 1-thread time over
//                      the 2-thread time, the median over the pairs;
//   batch              the same runs on a batch of sequences (default 16), whose products are
//                      GEMMs bound by the FMA units, not the memory: its 2-thread speedup (target
//                      1.7x). One token's GEMV streams the weights from memory, and a second thread
//                      adds only what the memory has left: the section measures that ceiling too
//                      (a streaming read's bandwidth with 1 and 2 threads).
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace aoc {

struct ReferenceBenchOptions {
  std::string hardware = "aoc-48";
  std::string config;  // a config.json aoc import reads; "": bench/mamba2-12-layer (45M loop weights)
  int length = 3;      // tokens of one sequence, run one at a time (sequential mode, batch 1)
  int runs = 5;        // runs of each thread count, alternating
  int batch = 16;      // sequences of the batched runs (the 2-thread target's)
  std::uint64_t seed = 1;  // the tokens' seed (the weights are aoc import's, seed 0)
};

constexpr double kReferenceOverGemvTarget = 1.5;  // issue 20
constexpr double kTwoThreadSpeedupTarget = 1.7;

// Runs of one batch size with 1 and 2 threads.
struct ThreadRuns {
  int batch = 1;
  long long evaluations = 0;  // fixed-point evaluations of a run (steps and commits, the batch at once)
  double one_s = 0, two_s = 0;  // best seconds per run
  double speedup = 0;           // median over the pairs of the 1-thread time over the 2-thread time
};

struct ReferenceBench {
  ReferenceBenchOptions opt;
  std::string model, config_path, config_hash;
  std::int64_t loop_weights = 0, top_weights = 0;  // weights of the optical ops in and outside the fixed point
  double prepare_s = 0;                           // import and compile
  ThreadRuns token, batched;                      // batch 1, and opt.batch
  double gemv_loop_s = 0, gemv_top_s = 0;         // best seconds of one GEMV pass over the loop's / the top level's weights
  double read_gb_s_1 = 0, read_gb_s_2 = 0;        // a streaming read's bandwidth, 1 and 2 threads
  double roofline_s() const { return token.evaluations * gemv_loop_s + opt.length * gemv_top_s; }
  double over_roofline() const { return token.one_s / roofline_s(); }
};

// Imports and compiles the model in-process (as aoc import and aoc compile --no-quantize), times it;
// throws aoc::Error (one line) on a missing config or an option out of range.
ReferenceBench run_reference_bench(const ReferenceBenchOptions& opt, bool progress);
nlohmann::json reference_bench_json(const ReferenceBench& b);
std::string reference_bench_table(const ReferenceBench& b);

}  // namespace aoc
