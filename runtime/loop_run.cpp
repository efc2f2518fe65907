#include "runtime/loop_run.hpp"

#include <omp.h>

#include "sim/core.hpp"
#include "sim/error.hpp"
#include "sim/readout.hpp"

namespace aoc {

namespace {

template <class T>
LoopRunResult run(const Hardware& hw, const CoreConfig& cfg, const LoopProblem& p, const LoopRunOptions& o) {
  if (o.quantize && !hw.converters) throw Error(hw.path + ": converters: missing (needed for quantization)");
  if (o.noise && !hw.noise) throw Error(hw.path + ": noise: missing (needed for a noisy run)");
  omp_set_num_threads(o.threads);
  LoopRunResult res;
  OpticalCore<T> core(hw, cfg);
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
  const StepFn<T> f = [&core](const Batch<T>& z, const Batch<T>& in, const Batch<T>* prev, Batch<T>& out) {
    core.step(z, in, prev, out);
  };
  res.solve = solve_fixed_point<T>(f, inj, Batch<T>::from(p.z0), o.solver);
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
