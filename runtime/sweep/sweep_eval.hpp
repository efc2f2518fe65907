// One point of a sweep evaluated: the base machine with the point's hardware overrides, the
// workload compiled for it, run on the simulator against the digital reference (when the workload
// runs) and estimated (energy, latency, TOPS/W per token). docs/scenarios.md.
//
// A compiled program depends on the machine only through its compiler target (channels, modules,
// analog functions, partial sums, converter bits and ranges), so points that differ in other
// parameters (energy figures, timing, noise, iterations, seeds) share one compilation, one
// calibration and one reference run, made once whatever the thread count.
#pragma once
#include <memory>

#include "runtime/sweep/sweep.hpp"
#include "runtime/sweep/sweep_results.hpp"

namespace aoc::sweep {

class Evaluator {
 public:
  // Reads the workload (imports the model's config, reads its weights); throws aoc::Error.
  explicit Evaluator(const Scenario& s);
  ~Evaluator();
  // Safe to call from several threads; the row is a pure function of the point. An aoc::Error (or
  // any other exception) of the point is its row's error; the metrics are then NaN. `fraction` < 1
  // runs a model on that share of its batch (the first of its test sequences, its converters
  // calibrated on as many): a search's screen. Other workloads ignore it.
  Row evaluate(const Point& p, double fraction = 1) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace aoc::sweep
