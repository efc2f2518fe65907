#include "runtime/loop_run.hpp"

#include <omp.h>

#include "sim/core.hpp"
#include "sim/error.hpp"
#include "sim/readout.hpp"

namespace aoc {

NoiseRun noise_run(const Hardware& hw, std::uint64_t seed, int max_iter) {
  if (!hw.noise) throw Error(hw.path + ": noise: missing (needed for a noisy run)");
  NoiseRun n;
  n.spec = *hw.noise;
  n.seed = seed;
  const TimingSpec t = hw.timing.value_or(TimingSpec{});
  n.loop_period_us = t.loop_period_ns * 1e-3;
  n.sample_spacing_us = (max_iter * t.loop_period_ns + t.settle_ns) * 1e-3 + t.readout_samples / t.readout_rate_mhz;
  n.flicker_length = 2;
  while (n.flicker_length < max_iter) n.flicker_length *= 2;
  return n;
}

namespace {

template <class T>
LoopRunResult run(const Hardware& hw, const CoreConfig& cfg, const LoopProblem& p, const LoopRunOptions& o) {
  if (o.quantize && !hw.converters) throw Error(hw.path + ": converters: missing (needed for quantization)");
  if (o.bandwidth && !hw.timing) throw Error(hw.path + ": timing: missing (needed for a finite bandwidth)");
  omp_set_num_threads(o.threads);
  LoopRunResult res;
  CoreConfig c = cfg;
  if (o.bandwidth) c.step_fraction = step_fraction(*hw.timing);
  OpticalCore<T> core(hw, c);
  if (o.noise) core.set_noise(noise_run(hw, o.seed, o.solver.max_iter));
  if (o.quantize) {
    const WeightCodes q = quantize_weights(p.W, hw.converters->slm_bits);
    res.slm_codes = q.codes;
    res.slm_scale = q.scale;
    core.load_weights(q.values(), p.bias);
  } else {
    core.load_weights(p.W, p.bias);
  }
  Batch<T> inj = core.injection(Batch<T>::from(p.x));
  if (o.quantize) {
    const UniformConverter dac{hw.converters->dac_range[0], hw.converters->dac_range[1], hw.converters->dac_bits};
    res.dac_codes.resize(inj.rows, inj.n);
    for (int r = 0; r < inj.rows; ++r)
      for (int j = 0; j < inj.n; ++j) {
        res.dac_codes(r, j) = dac.code(inj.row(r)[j]);
        inj.row(r)[j] = static_cast<T>(dac.value(res.dac_codes(r, j)));
      }
  }
  res.solve = solve_fixed_point<T>(core.step_fn(), inj, Batch<T>::from(p.z0), o.solver);
  res.readout = res.solve.z;
  if (o.quantize) {
    const UniformConverter adc{hw.converters->adc_range[0], hw.converters->adc_range[1], hw.converters->adc_bits};
    res.adc_codes.resize(res.readout.rows(), res.readout.cols());
    for (Eigen::Index r = 0; r < res.readout.rows(); ++r)
      for (Eigen::Index j = 0; j < res.readout.cols(); ++j) {
        res.adc_codes(r, j) = adc.code(readout_saturation(hw.readout, res.readout(r, j)));
        res.readout(r, j) = adc.value(res.adc_codes(r, j));
      }
  }
  return res;
}

}  // namespace

LoopRunResult run_loop(const Hardware& hw, const CoreConfig& cfg, const LoopProblem& p, const LoopRunOptions& o) {
  return o.f64 ? run<double>(hw, cfg, p, o) : run<float>(hw, cfg, p, o);
}

}  // namespace aoc
