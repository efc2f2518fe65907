// One fixed-point run of the optical core as `aoc run` does it: optional converters (SLM weight
// codes, input DAC, readout ADC), the core in float or double, the solver, the readout. With
// quantization and noise off it is exactly the foundation's core + solver, bit for bit.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "runtime/run/loop_problem.hpp"
#include "sim/config.hpp"
#include "sim/core.hpp"
#include "sim/hardware.hpp"
#include "sim/quantize.hpp"
#include "sim/solver.hpp"

namespace aoc {

struct LoopRunOptions {
  bool f64 = true;
  SolverOptions solver;
  bool quantize = false;   // SLM codes, DAC and ADC from hw.converters (required when on)
  bool noise = false;      // noise sources from hw.noise (required when on)
  std::uint64_t seed = 0;  // noise seed
  std::optional<std::uint64_t> program_seed;  // the SLM's programming errors (NoiseRun::program_seed); none: seed
  int zero_reads = kZeroReads;  // the auto-zero after each programming (NoiseRun::zero_reads; 0: none)
  std::optional<double> after_programming_us;  // the run this long after the programming (NoiseRun::after_programming_us)
  std::optional<double> zero_every_us;         // the auto-zero again this often (NoiseRun::zero_every_us)
  int threads = 1;
  bool bandwidth = false;  // finite loop bandwidth from hw.timing (each iteration reaches part of its step)
  bool hardware_readout = false;  // read out on the machine's clock: settle, then average a sample window
};

// The noise clock and sequence lengths of a run on this machine: iterations last the loop period,
// consecutive samples start one solve plus one readout apart.
NoiseRun noise_run(const Hardware& hw, std::uint64_t seed, int max_iter, std::optional<std::uint64_t> program_seed = std::nullopt);

// The residual ||f(z) - z|| (L2 over n channels) below which the readout cannot tell two iterates
// apart: half an ADC step, rms per channel (the readout curve is the identity over its middle, so a
// state step is a volt step there). nullopt without a converters section.
std::optional<double> readout_tolerance(const Hardware& hw, int n);

// The loop's inputs where they lie: W (N x N, AOC convention), bias (N), x and z0 (B x N), row-major,
// float32 or float64. The core programs W and reads x and z0 once into its own padded batches; nothing
// is copied before that (the Python module maps NumPy and torch buffers here).
template <class S>
struct LoopView {
  Eigen::Map<const RowMatrix<S>> W, x, z0;
  Eigen::Map<const Eigen::Matrix<S, Eigen::Dynamic, 1>> bias;
};
LoopView<double> view_of(const LoopProblem& p);

struct LoopRunResult {
  SolveResult solve;                      // fixed points, iterations, convergence, residuals (+ trace)
  RowMatrix<std::int32_t> slm_codes;      // N x N, when quantized
  double slm_scale = 0;                   // value of one SLM code step
  RowMatrix<std::int32_t> dac_codes;      // B x N injection codes, when quantized
  RowMatrix<std::int32_t> adc_codes;      // B x N readout codes (the window's mean code, rounded), when quantized
  RowMatrix<double> readout;              // B x N: what leaves the machine (window mean; saturation and ADC when quantized)
};

template <class S>
LoopRunResult run_loop(const Hardware& hw, const CoreConfig& cfg, const LoopView<S>& p, const LoopRunOptions& o);
LoopRunResult run_loop(const Hardware& hw, const CoreConfig& cfg, const LoopProblem& p, const LoopRunOptions& o);

extern template LoopRunResult run_loop<float>(const Hardware&, const CoreConfig&, const LoopView<float>&, const LoopRunOptions&);
extern template LoopRunResult run_loop<double>(const Hardware&, const CoreConfig&, const LoopView<double>&, const LoopRunOptions&);

}  // namespace aoc
