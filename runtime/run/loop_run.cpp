#include "runtime/run/loop_run.hpp"

#include <cmath>
#include <optional>
#include <type_traits>

#include "sim/core.hpp"
#include "sim/error.hpp"
#include "sim/readout.hpp"
#include "sim/threads.hpp"

namespace aoc {

NoiseRun noise_run(const Hardware& hw, std::uint64_t seed, int max_iter, std::optional<std::uint64_t> program_seed) {
  if (!hw.noise) throw Error(hw.path + ": noise: missing (needed for a noisy run)");
  NoiseRun n;
  n.spec = *hw.noise;
  n.seed = seed;
  n.program_seed = program_seed;
  const TimingSpec t = hw.timing.value_or(TimingSpec{});
  n.loop_period_us = t.loop_period_ns * 1e-3;
  n.sample_spacing_us = (max_iter * t.loop_period_ns + t.settle_ns) * 1e-3 + t.readout_samples / t.readout_rate_mhz;
  return n;
}

std::optional<double> readout_tolerance(const Hardware& hw, int n) {
  if (!hw.converters) return std::nullopt;
  const ConverterSpec& c = *hw.converters;
  const double step = (c.adc_range[1] - c.adc_range[0]) / std::ldexp(1.0, c.adc_bits);
  return 0.5 * step * std::sqrt(static_cast<double>(n));
}

namespace {

template <class T, class S>
LoopRunResult run(const Hardware& hw, const CoreConfig& cfg, const LoopView<S>& p, const LoopRunOptions& o) {
  if (o.quantize && !hw.converters) throw Error(hw.path + ": converters: missing (needed for quantization)");
  if ((o.bandwidth || o.hardware_readout) && !hw.timing)
    throw Error(hw.path + ": timing: missing (needed for a finite bandwidth and the hardware readout)");
  const ScopedThreads threads(o.threads);  // the core's row tiles and Eigen's products
  LoopRunResult res;
  CoreConfig c = cfg;
  if (o.bandwidth) c.step_fraction = step_fraction(*hw.timing);
  OpticalCore<T> core(hw, c);
  if (o.noise) {
    NoiseRun n = noise_run(hw, o.seed, o.solver.max_iter, o.program_seed);
    n.zero_reads = o.zero_reads;
    n.after_programming_us = o.after_programming_us;
    n.zero_every_us = o.zero_every_us;
    core.set_noise(n);
  }
  // The SLM is programmed in double: a float32 W is widened once, a float64 one read in place.
  MatrixXdR widened;
  const Eigen::Map<const MatrixXdR> W = [&] {
    if constexpr (std::is_same_v<S, double>) return p.W;
    else return Eigen::Map<const MatrixXdR>((widened = p.W.template cast<double>()).data(), p.W.rows(), p.W.cols());
  }();
  const Eigen::VectorXd bias = p.bias.template cast<double>();
  if (o.quantize) {
    const WeightCodes q = quantize_weights(W, hw.converters->slm_bits);
    res.slm_codes = q.codes;
    res.slm_scale = q.scale;
    core.load_weights(q.values(), bias);
  } else {
    core.load_weights(W, bias);
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
  // What leaves the machine. Ideal readout: the fixed point itself. Hardware readout: the loop
  // keeps running on the machine's clock; after the settle time the ADC takes readout_samples
  // samples at its rate and they are averaged (digitally, after the saturation curve and the ADC).
  std::vector<RowMatrix<double>> samples;
  if (o.hardware_readout) {
    const TimingSpec& t = *hw.timing;
    const int settle = static_cast<int>(std::ceil(t.settle_ns / t.loop_period_ns));
    const int spacing = std::max(1, static_cast<int>(std::lround(1e3 / t.readout_rate_mhz / t.loop_period_ns)));
    Batch<T> z = Batch<T>::from(res.solve.z), prev = z, next;
    int k = res.solve.steps;
    auto advance = [&] {
      core.step(z, inj, &prev, next, StepContext{k++, nullptr, false, o.solver.first_sample});
      std::swap(prev, z);
      std::swap(z, next);
    };
    while (k < settle) advance();
    for (int s = 0; s < t.readout_samples; ++s) {
      for (int i = 0; i < spacing; ++i) advance();
      samples.push_back(z.to_double());
    }
  } else {
    samples.push_back(res.solve.z);
  }
  const Eigen::Index B = res.solve.z.rows(), N = res.solve.z.cols();
  res.readout = RowMatrix<double>::Zero(B, N);
  std::optional<UniformConverter> adc;
  if (o.quantize) adc = UniformConverter{hw.converters->adc_range[0], hw.converters->adc_range[1], hw.converters->adc_bits};
  RowMatrix<double> code_sum = RowMatrix<double>::Zero(B, N);
  for (const auto& smp : samples)
    for (Eigen::Index r = 0; r < B; ++r)
      for (Eigen::Index j = 0; j < N; ++j) {
        double v = smp(r, j);
        if (adc) {
          const std::int32_t c = adc->code(readout_saturation(hw.readout, v));
          code_sum(r, j) += c;
          v = adc->value(c);
        }
        res.readout(r, j) += v / static_cast<double>(samples.size());
      }
  if (adc) res.adc_codes = (code_sum / static_cast<double>(samples.size())).array().round().cast<std::int32_t>();
  return res;
}

}  // namespace

LoopView<double> view_of(const LoopProblem& p) {
  return {{p.W.data(), p.W.rows(), p.W.cols()}, {p.x.data(), p.x.rows(), p.x.cols()}, {p.z0.data(), p.z0.rows(), p.z0.cols()},
          {p.bias.data(), p.bias.size()}};
}

template <class S>
LoopRunResult run_loop(const Hardware& hw, const CoreConfig& cfg, const LoopView<S>& p, const LoopRunOptions& o) {
  return o.f64 ? run<double>(hw, cfg, p, o) : run<float>(hw, cfg, p, o);
}

LoopRunResult run_loop(const Hardware& hw, const CoreConfig& cfg, const LoopProblem& p, const LoopRunOptions& o) {
  return run_loop(hw, cfg, view_of(p), o);
}

template LoopRunResult run_loop<float>(const Hardware&, const CoreConfig&, const LoopView<float>&, const LoopRunOptions&);
template LoopRunResult run_loop<double>(const Hardware&, const CoreConfig&, const LoopView<double>&, const LoopRunOptions&);

}  // namespace aoc
