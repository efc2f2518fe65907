// `aoc bench`: iteration throughput of the 48-variable machine, next to an Eigen loop that does
// only the two matrix products of the same shapes, and the twin's own figures.
#pragma once
#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace aoc {

struct BenchOptions {
  std::string hardware = "aoc-48";
  std::vector<int> batches{1, 64, 1024};
  int iterations = 100;    // iterations per timed run
  double min_seconds = 0.3;  // repeat runs until this much time is spent (at least 5 runs)
  int threads = 1;
  bool f64 = false;
  unsigned long long seed = 1;
};

struct BenchRow {
  std::string cell;  // what was timed
  int batch = 0;
  double best = 0, median = 0;      // sample-iterations per second
  double ratio_to_matmul = 0;       // best / best of the matrix-product-only loop at this batch
  double twin = 0;                  // the twin's figure for this cell and batch (0: none)
  double noise_cost = 0;            // "twin + noise": its time over the noiseless "twin default"'s, the median over the turns they took
};

// What noise may cost the loop (project issue 12): noise-on time at most this times noise-off.
constexpr double kNoiseCostTarget = 1.5;

// The median over paired measurements of a[i] / b[i] (times taken in turns): what a costs relative
// to b with the load each turn saw falling on both (a ratio of two bests can pair a quiet moment of
// one with a busy one of the other).
double median_ratio(const std::vector<double>& a, const std::vector<double>& b);

// Seconds since t0 on the steady clock: how every section times a run.
inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::vector<BenchRow> run_loop_bench(const BenchOptions& opt, bool progress);
nlohmann::json bench_json(const BenchOptions& opt, const std::vector<BenchRow>& rows);
std::string bench_table(const BenchOptions& opt, const std::vector<BenchRow>& rows);

}  // namespace aoc
