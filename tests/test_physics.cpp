// Converters and iteration physics: hand-worked codes, bandwidth, annealing.
#include <random>
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>

#include "tests/support.hpp"
#include "sim/core.hpp"
#include "sim/physics_spec.hpp"
#include "sim/quantize.hpp"
#include "runtime/run/loop_run.hpp"

using namespace aoc;
using namespace aoc::test;

TEST_CASE("quantize: 9-bit SLM codes of a hand-worked matrix") {
  MatrixXdR W(2, 3);
  W << 1.0, -0.5, 0.25, -1.0, 0.002, -0.75;
  const WeightCodes q = quantize_weights(W, 9);
  // codes = round(W / max|W| * 255), ties to even; -0.5*255 = -127.5 -> -128; 0.25*255 = 63.75 -> 64;
  // 0.002*255 = 0.51 -> 1; -0.75*255 = -191.25 -> -191
  CHECK(q.codes(0, 0) == 255);
  CHECK(q.codes(0, 1) == -128);
  CHECK(q.codes(0, 2) == 64);
  CHECK(q.codes(1, 0) == -255);
  CHECK(q.codes(1, 1) == 1);
  CHECK(q.codes(1, 2) == -191);
  CHECK(q.scale == 1.0 / 255);
  CHECK(q.values()(0, 2) == 64.0 / 255);
}

TEST_CASE("quantize: a 4-bit SLM clamps to -8..7 and keeps the scale") {
  MatrixXdR W(1, 3);
  W << -2.0, 2.0, 0.3;
  const WeightCodes q = quantize_weights(W, 4);
  CHECK(q.codes(0, 0) == -7);  // -2/2*7 = -7: the negative end is reachable only below -max|W|
  CHECK(q.codes(0, 1) == 7);
  CHECK(q.codes(0, 2) == 1);  // 0.3/2*7 = 1.05
  CHECK(q.scale == 2.0 / 7);
}

TEST_CASE("quantize: an 8-bit converter over the injection range gives the hand-worked codes") {
  const UniformConverter dac{-1.3, 1.3, 8};
  CHECK(dac.step() == 2.6 / 255);
  CHECK(dac.code(-1.3) == 0);
  CHECK(dac.code(1.3) == 255);
  CHECK(dac.code(0.0) == 128);  // 127.5 rounds to even
  CHECK(dac.code(0.01) == 128);  // (0.01 + 1.3) / (2.6/255) = 128.48
  CHECK(dac.code(-7.0) == 0);
  CHECK(dac.code(7.0) == 255);
  CHECK(dac.value(128) == -1.3 + 128 * (2.6 / 255));
}

TEST_CASE("quantize: a converter quantizes a whole array to the value of each element's code, counting the clipped") {
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> u(-3, 3);
  for (const UniformConverter c : {UniformConverter{-1.3, 1.3, 8}, UniformConverter{-0.2, 2.5, 4}, UniformConverter{-1, 1, 16}}) {
    std::vector<double> v(203);  // not a multiple of a vector's width
    for (double& x : v) x = u(rng);
    v[5] = std::nan(""), v[6] = INFINITY, v[7] = -INFINITY, v[8] = c.lo, v[9] = c.hi;
    long long outside = 0;
    std::vector<double> expect(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) {
      expect[i] = c.value(c.code(v[i]));
      outside += v[i] < c.lo || v[i] > c.hi;
    }
    std::vector<double> all = v;
    CHECK(c.quantize_all(all.data(), all.size()) == outside);
    for (std::size_t i = 0; i < v.size(); ++i) {
      CHECK(all[i] == expect[i]);
      CHECK(c.quantize(v[i]) == expect[i]);
    }
  }
}

TEST_CASE("quantize: bad widths and non-finite weights are rejected") {
  MatrixXdR W = MatrixXdR::Ones(2, 2);
  CHECK_THROWS(quantize_weights(W, 1));
  CHECK_THROWS(quantize_weights(W, 25));
  W(0, 0) = std::nan("");
  CHECK_THROWS(quantize_weights(W, 9));
}

TEST_CASE("physics: the step fraction of a first-order loop follows its bandwidth") {
  TimingSpec t;
  t.loop_period_ns = 20;
  t.bandwidth_mhz = 10;
  CHECK(step_fraction(t) == Approx(1 - std::exp(-2 * M_PI * 10e6 * 20e-9)).epsilon(1e-15));
  t.bandwidth_mhz = 0;
  CHECK(step_fraction(t) == 1.0);
  t.bandwidth_mhz = 200;  // the built machines' LEDs: settles within a period
  CHECK(step_fraction(t) > 1 - 1e-10);
}

TEST_CASE("physics: with a finite bandwidth the state moves only part of its step") {
  MatrixXdR W = MatrixXdR::Random(48, 48) * 0.1;
  const Eigen::VectorXd b = Eigen::VectorXd::Zero(48);
  const MatrixXdR z = MatrixXdR::Random(3, 48), x = MatrixXdR::Random(3, 48);
  CoreConfig full = CoreConfig::twin_defaults(hw48()), part = full;
  part.step_fraction = 0.25;
  OpticalCore<double> a(hw48(), full), c(hw48(), part);
  a.load_weights(W, b);
  c.load_weights(W, b);
  const Batch<double> zb = Batch<double>::from(z);
  Batch<double> fa, fc;
  a.step(zb, a.injection(Batch<double>::from(x)), nullptr, fa);
  c.step(zb, c.injection(Batch<double>::from(x)), nullptr, fc);
  const MatrixXdR expect = z + 0.25 * (fa.to_double() - z);
  CHECK((fc.to_double() - expect).cwiseAbs().maxCoeff() < 1e-14);
}

TEST_CASE("physics: an annealing schedule sets alpha at each iteration") {
  AlphaSchedule lin{AlphaSchedule::Kind::Linear, 0.2, 0.6, 4};
  CHECK(lin.at(0) == 0.2);
  CHECK(lin.at(2) == Approx(0.4));
  CHECK(lin.at(9) == 0.6);
  AlphaSchedule ex{AlphaSchedule::Kind::Exponential, 0.2, 0.6, 5};
  CHECK(ex.at(5) == Approx(0.6 - 0.4 * std::exp(-1.0)));

  MatrixXdR W = MatrixXdR::Random(48, 48) * 0.1;
  const Eigen::VectorXd b = Eigen::VectorXd::Zero(48);
  const MatrixXdR z = MatrixXdR::Random(2, 48), x = MatrixXdR::Random(2, 48);
  CoreConfig sched = CoreConfig::twin_defaults(hw48()), fixed = sched;
  sched.alpha_schedule = lin;
  fixed.alpha = {lin.at(2)};
  OpticalCore<double> a(hw48(), sched), c(hw48(), fixed);
  a.load_weights(W, b);
  c.load_weights(W, b);
  const Batch<double> zb = Batch<double>::from(z);
  Batch<double> fa, fc;
  a.step(zb, a.injection(Batch<double>::from(x)), nullptr, fa, StepContext{2, nullptr});
  c.step(zb, c.injection(Batch<double>::from(x)), nullptr, fc);
  CHECK((fa.to_double() - fc.to_double()).cwiseAbs().maxCoeff() < 1e-14);
}

TEST_CASE("physics: the hardware readout averages its sample window, which beats down white noise") {
  const Hardware hw = load_hardware(resolve_hardware_path("aoc-48"),
                                    {"noise.photons_per_sample=0", "noise.rin_sigma=0", "noise.slm_fixed_pattern_sigma=0",
                                     "noise.drift_sigma=0", "noise.flicker_sigma=0", "noise.thermal_sigma=0.01"});
  const LoopProblem p = random_problem(48, 32, 4);
  const CoreConfig cfg = CoreConfig::twin_defaults(hw);
  LoopRunOptions clean;
  clean.solver = SolverOptions::relative(1e-9, 200, 1.0);
  const RowMatrix<double> ref = run_loop(hw, cfg, p, clean).solve.z;
  LoopRunOptions noisy = clean;
  noisy.solver = SolverOptions::fixed(60);
  noisy.noise = true;
  noisy.seed = 5;
  const LoopRunResult instant = run_loop(hw, cfg, p, noisy);
  noisy.hardware_readout = true;
  const LoopRunResult averaged = run_loop(hw, cfg, p, noisy);
  const double rms_instant = std::sqrt((instant.readout - ref).squaredNorm() / ref.size());
  const double rms_window = std::sqrt((averaged.readout - ref).squaredNorm() / ref.size());
  // 40 samples 8 iterations apart are nearly independent: about sqrt(40) = 6.3 less noise
  CHECK(rms_window < rms_instant / 4);
  CHECK(rms_window > rms_instant / 10);
}
