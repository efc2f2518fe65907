// Running a sweep (`aoc sweep`): the points not yet in the journal, on a pool of threads, and under
// `mpirun` on every rank; rank 0 hands out the points, and writes each finished row to the journal
// as it arrives, then the results file. The rows are pure functions of their points and the file is
// sorted by point, so it is the same for any thread or rank count. docs/scenarios.md.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "runtime/sweep/sweep.hpp"
#include "runtime/sweep/sweep_results.hpp"

namespace aoc::sweep {

struct SweepOptions {
  std::string output;  // RESULTS.h5
  std::string csv;     // also a CSV of the rows (optional)
  bool resume = false;
  bool quiet = false;  // no progress bar
  int threads = 0;     // per process; 0: the machine's cores (shared among the ranks on it)
};

struct SweepSummary {
  std::size_t points = 0;       // in the scenario
  std::size_t done_before = 0;  // read back from the journal (--resume)
  std::size_t ran = 0;          // by this sweep, over every rank
  std::size_t failed = 0;       // rows with status "error", all of them
  double seconds = 0;
  int ranks = 1, threads = 1;
  bool root = true;             // this process wrote the results (rank 0)
  bool stopped = false;         // another rank's error stopped this one before the points started
};

// Reads the scenario and runs it. Under mpirun (when aoc is built with MPI) every rank calls it;
// an error on any rank before the points start stops them all.
SweepSummary run_sweep(const std::string& scenario_path, const SweepOptions& o);

// Evaluates pts with `eval` (an Evaluator's evaluate, or a search's screen before it) on `threads`
// threads of this process; `done` gets each batch of finished rows on the calling thread as they
// arrive (in any order). A search's generation runs through it.
using PointEval = std::function<Row(const Point&)>;
void evaluate_points(const PointEval& eval, const std::vector<Point>& pts, int threads, const std::function<void(std::vector<Row>&)>& done);

// The threads a process uses: `asked`, or the machine's cores shared by the MPI ranks on it.
int default_threads(int asked);

}  // namespace aoc::sweep
