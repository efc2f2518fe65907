// The simulator against the digital reference (`aoc check`, and the sweeps' agreement metrics): one
// run's outputs compared with the reference's (errors, decisions, ADC codes, convergence), and the
// statistics of a figure over several noise seeds.
#pragma once
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "compiler/program.hpp"
#include "runtime/backend/backend.hpp"

namespace aoc {

struct Comparison {
  double max_abs = 0, max_rel = 0;  // over every output element; rel: against the reference's largest |value|
  double argmax = 1, codes = 1;     // fraction of positions / elements that agree
  int failures = 0;                 // fixed points of the run checked that missed their tolerance (and did not settle at the noise floor)
  int at_floor = 0;                 // fixed points stopped at the noise floor (above their tolerance, no longer falling)
  double iterations = 0;            // their mean iterations
  int iterations_differ = 0;        // solves (per sample, or per sample and token) whose step count is not the reference's
};

// `dut` (the run checked) against `ref` on the program's outputs. ADC codes are read through the ADC
// that reads each output out (its Convert's calibrated range, else the target's ADC).
Comparison compare_runs(const ir::Program& p, const ProgramResult& dut, const ProgramResult& ref);

struct Stat {
  double mean = 0, sd = 0, min = 0, max = 0;
};
Stat stat(const std::vector<double>& v);  // v not empty

// The comparisons of runs on several noise seeds, figure by figure.
struct SeedStats {
  Stat abs, rel, argmax, codes, failures, at_floor, iterations, iterations_differ;
};

// `dut` run on the seeds base.seed, base.seed + 1, ... (`seeds` of them), each run compared with
// `ref`. `before(k, options)` may adjust run k's options (progress); `after(k, run)` sees each run's
// outputs before they are dropped (accuracy against labels).
SeedStats check_over_seeds(const Backend& dut, const ir::Program& p, const std::map<std::string, ir::Tensor>& inputs,
                           const BackendOptions& base, int seeds, const ProgramResult& ref,
                           const std::function<void(int, BackendOptions&)>& before = {},
                           const std::function<void(int, const ProgramResult&)>& after = {});

// With labels: the fraction of positions whose argmax (of the program's first output) is the label,
// the same at each sequence's last labelled position, the fraction of sequences right at every
// position, and the accuracy at each position (labels [B, L, ...]: state tracking is judged at the
// end, where the mean over positions hides a state lost late; rank 1: one position). `aoc check
// --labels` and Program.check(labels=...) score with it; an error names `file` (the labels' file).
struct LabelScore {
  double all = 0, last = 0, whole = 0;
  std::vector<double> per_position;
};
LabelScore label_score(const ir::Program& p, const ProgramResult& r, const ir::Tensor* labels, const std::string& file);

}  // namespace aoc
