// Fixed-point loop executor: iterates a step function z <- f(z) under one of four stop rules and
// reports iterations, convergence and residuals. The one solver of aoc: the simulated core, the
// digital reference and the graph interpreter's FixedPoint (compiler/interpret.cpp) all run it.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "sim/batch.hpp"

namespace aoc {

enum class StopRule {
  // The twin as it actually runs (torchdeq fixed_point_iter with its defaults): at most max_iter
  // steps; stop when the batch maximum of the per-sample L2 residual ||f(z)-z|| is below tol;
  // return, per sample, the iterate f(z) with the lowest residual seen.
  Twin,
  // Per sample: z <- (1-damping) z + damping f(z) until ||f(z)-z|| / (||f(z)|| + 1e-9) < tol or
  // max_iter. A converged sample stops being iterated, so results do not depend on the batch.
  Relative,
  // Exactly `max_iter` steps for every sample; returns the last iterate.
  FixedCount,
  // The released implicit language models' loop (microsoft/implicit_languagemodels): at most
  // max_iter damped steps, stopping when ||f(z)-z|| / (||z|| + 1e-6), one number over the whole
  // batch, is below tol (tested before the update); then one more call, marked final, whose f(z)
  // is the result. Every sample reports the same step count.
  Released,
};

struct SolverOptions {
  StopRule rule = StopRule::Twin;
  int max_iter = 40;
  double tol = 1e-3;
  double damping = 1.0;
  bool trace = false;  // keep every sample's residual at every step
  // Relative rule: true, a converged sample leaves the batch the step function sees (rows compacted,
  // StepContext::samples maps them); false, every step sees the whole batch and a converged
  // sample's row is held (for a step function whose rows are not independent inputs, a graph body).
  bool compact = true;
  int first_sample = 0;  // StepContext::first_sample: the batch's first sample in the whole input
  // Twin, relative and released rules, for a noisy machine: a sample (released: the batch) whose
  // residual has not fallen under kFloorGain of its lowest for this many steps has reached the
  // noise floor and stops there (counted in SolveResult::at_floor, not as converged), its result
  // the mean of the iterates of those steps (released: the final call's f at that mean); they
  // scatter about the fixed point, and their mean is closer to it than any one of them. A residual
  // made of noise draws hovers at a level no tolerance under it is ever met; a contraction still on
  // its way falls by more every few steps. Under the twin rule the batch stops once every sample
  // has met the tolerance or reached its floor. 0: off (the reference and every noise-free run);
  // kNoisyPatience on every noisy run unless the user says otherwise.
  int floor_patience = 0;
  static constexpr double kFloorGain = 0.9;
  static constexpr int kNoisyPatience = 8;

  static SolverOptions twin() { return {}; }
  static SolverOptions relative(double tol, int max_iter, double damping) { return {StopRule::Relative, max_iter, tol, damping, false}; }
  static SolverOptions fixed(int count, double tol = 1e-3) { return {StopRule::FixedCount, count, tol, 1.0, false}; }
};

struct SolveResult {
  RowMatrix<double> z;                 // B x N fixed points (the returned iterates)
  std::vector<int> iterations;         // per sample: steps until its stop (twin: step of the kept iterate)
  std::vector<std::uint8_t> converged; // per sample: its residual met the tolerance
  std::vector<double> residual;        // per sample: residual of the returned iterate
  std::vector<int> settled;            // per sample: the first step whose residual met the tolerance (0: none did)
  std::vector<std::uint8_t> at_floor;  // per sample: stopped at the noise floor (SolverOptions::floor_patience)
  std::vector<std::uint8_t> finite;    // per sample: its returned iterate and residual are finite (0: it diverged to NaN or inf)
  int steps = 0;                       // steps run on the batch (the longest sample)
  std::vector<double> max_residual;    // per step: max over the samples still iterating
  RowMatrix<double> residual_trace;    // steps x B when options.trace (NaN once a sample stopped)
  RowMatrix<double> state_trace;       // (steps * B) x N when options.trace: f(z) of step k, sample b at row k*B + b
};

// One iteration of every row of z: out = f(z). z_prev is the previous iterate (nullptr on the first
// step: zeros), for momentum; inj is the per-sample injection, constant over the solve; ctx says
// which iteration this is and which sample each row holds.
template <class T>
using StepFn = std::function<void(const Batch<T>& z, const Batch<T>& inj, const Batch<T>* z_prev, Batch<T>& out,
                                  const StepContext& ctx)>;

template <class T>
SolveResult solve_fixed_point(const StepFn<T>& f, const Batch<T>& inj, const Batch<T>& z0, const SolverOptions& opt);

// The samples whose result is NaN or inf (SolveResult::finite == 0), for the one-line report a
// command gives of a diverged solve: "2 of 64 samples diverged to NaN or inf (sample 3 first)".
int non_finite_samples(const SolveResult& r);
std::string non_finite_text(const SolveResult& r);

extern template SolveResult solve_fixed_point<float>(const StepFn<float>&, const Batch<float>&, const Batch<float>&, const SolverOptions&);
extern template SolveResult solve_fixed_point<double>(const StepFn<double>&, const Batch<double>&, const Batch<double>&, const SolverOptions&);

}  // namespace aoc
