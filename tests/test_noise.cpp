// Noise sources: each has the statistics it should, and draws depend only on their keys.
#include <catch2/catch.hpp>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <random>

#include "tests/support.hpp"
#include "sim/core.hpp"
#include "sim/noise.hpp"
#include "sim/solver.hpp"

using namespace aoc;
using namespace aoc::test;

namespace {

struct Moments {
  double mean = 0, var = 0;
  long n = 0;
};
Moments moments(const std::vector<double>& v) {
  Moments m;
  m.n = static_cast<long>(v.size());
  for (double x : v) m.mean += x / m.n;
  for (double x : v) m.var += (x - m.mean) * (x - m.mean) / (m.n - 1);
  return m;
}

// A 48-variable core, twin defaults, torch-like weights; the same problem for every test.
struct Problem {
  MatrixXdR W, x, z;
  Eigen::VectorXd bias;
  explicit Problem(int B, std::uint64_t seed = 5) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> u(-1, 1);
    const double k = 1 / std::sqrt(48.0);
    W = MatrixXdR::NullaryExpr(48, 48, [&] { return k * u(rng); });
    bias = Eigen::VectorXd::NullaryExpr(48, [&] { return k * u(rng); });
    // every sample holds the same state, so differences between samples are pure noise
    const Eigen::RowVectorXd x0 = Eigen::RowVectorXd::NullaryExpr(48, [&] { return 1.3 * u(rng); });
    const Eigen::RowVectorXd z0 = Eigen::RowVectorXd::NullaryExpr(48, [&] { return u(rng); });
    x = x0.replicate(B, 1);
    z = z0.replicate(B, 1);
  }
};

NoiseRun only(double NoiseSpec::*field, double level, std::uint64_t seed = 11) {
  NoiseRun n;
  n.spec.led_bias = 0.06;
  n.spec.*field = level;
  n.seed = seed;
  return n;
}

template <class T>
Batch<T> step(const Problem& p, const NoiseRun* noise, int iteration = 0, const CoreConfig& cfg = CoreConfig::twin_defaults(hw48())) {
  OpticalCore<T> core(hw48(), cfg);
  if (noise) core.set_noise(*noise);
  core.load_weights(p.W, p.bias);
  const Batch<T> z = Batch<T>::from(p.z), inj = core.injection(Batch<T>::from(p.x));
  Batch<T> out;
  core.step(z, inj, nullptr, out, StepContext{iteration, nullptr});
  return out;
}

// noisy - clean, every element
std::vector<double> differences(const Batch<double>& noisy, const Batch<double>& clean, int channel = -1) {
  std::vector<double> d;
  for (int r = 0; r < noisy.rows; ++r)
    for (int j = 0; j < noisy.n; ++j)
      if (channel < 0 || j == channel) d.push_back(noisy.row(r)[j] - clean.row(r)[j]);
  return d;
}

}  // namespace

TEST_CASE("noise: Philox normals are standard normal and a pure function of their keys") {
  std::vector<double> v;
  for (std::uint32_t i = 0; i < 200000; ++i) v.push_back(noise::normal(7, noise::Source::Thermal, i, 3, 9));
  const Moments m = moments(v);
  CHECK(std::abs(m.mean) < 5 / std::sqrt(200000.0));
  CHECK(std::abs(m.var - 1) < 5 * std::sqrt(2 / 200000.0));
  CHECK(noise::normal(7, noise::Source::Thermal, 1, 2, 3) == noise::normal(7, noise::Source::Thermal, 1, 2, 3));
  CHECK(noise::normal(7, noise::Source::Thermal, 1, 2, 3) != noise::normal(8, noise::Source::Thermal, 1, 2, 3));
  CHECK(noise::normal(7, noise::Source::Thermal, 1, 2, 3) != noise::normal(7, noise::Source::Shot, 1, 2, 3));
}

TEST_CASE("noise: with every level at zero the noisy core gives the clean core's bits") {
  const Problem p(70);
  NoiseRun zero;
  zero.spec.led_bias = 0.06;
  const auto clean = step<double>(p, nullptr), noisy = step<double>(p, &zero);
  CHECK(std::memcmp(clean.data.data(), noisy.data.data(), sizeof(double) * clean.data.size()) == 0);
}

TEST_CASE("noise: receiver thermal noise adds zero-mean noise of the set rms to every channel") {
  const Problem p(2000);
  const NoiseRun n = only(&NoiseSpec::thermal_sigma, 0.01);
  const Moments m = moments(differences(step<double>(p, &n), step<double>(p, nullptr)));
  CHECK(std::abs(m.mean) < 5 * 0.01 / std::sqrt(m.n));
  CHECK(std::abs(std::sqrt(m.var) / 0.01 - 1) < 0.01);
}

TEST_CASE("noise: shot noise has the variance of the detected photon count, channel by channel") {
  const Problem p(4000);
  const NoiseRun n = only(&NoiseSpec::photons_per_sample, 1e4);
  const auto noisy = step<double>(p, &n), clean = step<double>(p, nullptr);
  // expected: light on channel j = sum_i fan_i (bias + LED_i) D_ij over both paths; photons =
  // photons_per_sample * light / (n * bias); rms in volts = gain_j * sqrt(photons) * (n * bias) / photons_per_sample
  const CoreConfig cfg = CoreConfig::twin_defaults(hw48());
  const StepStages s = twin_step_stages(hw48(), cfg, p.W, p.bias, p.z.topRows(1), p.x.topRows(1));
  const Eigen::VectorXd ones = Eigen::VectorXd::Ones(48);
  const Eigen::RowVectorXd fan_p = s.after_fanin_pos.row(0).cwiseQuotient(s.after_led_pos.row(0));
  const Eigen::RowVectorXd fan_n = s.after_fanin_neg.row(0).cwiseQuotient(s.after_led_neg.row(0));
  const Eigen::RowVectorXd light =
      s.after_fanin_pos.row(0) * s.W_pos_distorted_norm + s.after_fanin_neg.row(0) * s.W_neg_distorted_norm +
      0.06 * (fan_p * s.W_pos_distorted_norm + fan_n * s.W_neg_distorted_norm);
  const double ref = 0.06 * 48;
  for (int j : {0, 7, 20, 47}) {
    INFO("channel " << j);
    const double expect = s.detector_gain(j) * std::sqrt(light(j) * ref / 1e4);
    const Moments m = moments(differences(noisy, clean, j));
    CHECK(std::abs(m.mean) < 5 * expect / std::sqrt(m.n));
    CHECK(std::abs(std::sqrt(m.var) / expect - 1) < 5 / std::sqrt(2.0 * m.n));
  }
}

TEST_CASE("noise: LED intensity noise scales each LED's light and passes through the optics") {
  const Problem p(4000);
  const double rin = 1e-3;
  const NoiseRun n = only(&NoiseSpec::rin_sigma, rin);
  const auto noisy = step<double>(p, &n), clean = step<double>(p, nullptr);
  // expected: sum over LEDs i of rin * eps_i * [(bias + LED+_i) F_ij + (bias + LED-_i) F_{N+i,j}]
  const CoreConfig cfg = CoreConfig::twin_defaults(hw48());
  const FoldedChain f = fold_optical_chain(hw48(), cfg, p.W);
  const StepStages s = twin_step_stages(hw48(), cfg, p.W, p.bias, p.z.topRows(1), p.x.topRows(1));
  for (int j : {3, 30}) {
    double var = 0;
    for (int i = 0; i < 48; ++i) {
      const double a = (0.06 + s.after_led_pos(0, i)) * f.F(i, j) + (0.06 + s.after_led_neg(0, i)) * f.F(48 + i, j);
      var += rin * rin * a * a;
    }
    const Moments m = moments(differences(noisy, clean, j));
    INFO("channel " << j);
    CHECK(std::abs(std::sqrt(m.var / var) - 1) < 5 / std::sqrt(2.0 * m.n));
  }
}

TEST_CASE("noise: the SLM fixed pattern is drawn once per programming, the same for every sample and iteration") {
  const Problem p(8);
  const NoiseRun n = only(&NoiseSpec::slm_fixed_pattern_sigma, 0.02);
  const auto a0 = step<double>(p, &n, 0), a5 = step<double>(p, &n, 5), clean = step<double>(p, nullptr);
  // deterministic: every sample holds the same state, so every row is the same, and so is every iteration
  for (int r = 1; r < 8; ++r) CHECK(std::memcmp(a0.row(0), a0.row(r), sizeof(double) * 48) == 0);
  CHECK(std::memcmp(a0.row(0), a5.row(0), sizeof(double) * 48) == 0);
  CHECK(std::memcmp(a0.row(0), clean.row(0), sizeof(double) * 48) != 0);
  // a second programming of the same weights draws a new pattern
  OpticalCore<double> core(hw48(), CoreConfig::twin_defaults(hw48()));
  core.set_noise(n);
  core.load_weights(p.W, p.bias);
  core.load_weights(p.W, p.bias);
  const Batch<double> z = Batch<double>::from(p.z), inj = core.injection(Batch<double>::from(p.x));
  Batch<double> second;
  core.step(z, inj, nullptr, second);
  CHECK(std::memcmp(a0.row(0), second.row(0), sizeof(double) * 48) != 0);
}

TEST_CASE("noise: the SLM fixed pattern's relative error has the set rms") {
  const Problem p(1);
  const CoreConfig cfg = CoreConfig::twin_defaults(hw48());
  SlmPattern pat;
  pat.pos = MatrixXdR::NullaryExpr(48, 48, [](Eigen::Index i, Eigen::Index j) {
    return 1 + 0.02 * noise::normal(11, noise::Source::SlmPattern, 0, i, j);
  });
  std::vector<double> rel;
  for (Eigen::Index i = 0; i < pat.pos.size(); ++i) rel.push_back(pat.pos(i) - 1);
  const Moments m = moments(rel);
  CHECK(std::abs(std::sqrt(m.var) / 0.02 - 1) < 5 / std::sqrt(2.0 * m.n));
}

TEST_CASE("noise: drift is slow, per channel, and has the set rms at its knots") {
  std::vector<double> knots, steps;
  for (std::uint32_t ch = 0; ch < 2000; ++ch) {
    for (int k = 0; k < 5; ++k) knots.push_back(noise::drift(3, ch, k, 0.004));
    steps.push_back(noise::drift(3, ch, 1.001, 0.004) - noise::drift(3, ch, 1.0, 0.004));
  }
  const Moments m = moments(knots);
  CHECK(std::abs(std::sqrt(m.var) / 0.004 - 1) < 0.05);
  // over a thousandth of its correlation time it barely moves
  for (double s : steps) CHECK(std::abs(s) < 0.004 * 0.01);
  CHECK(noise::drift(3, 1, 2.5, 0.004) != noise::drift(3, 2, 2.5, 0.004));
}

TEST_CASE("noise: 1/f noise has the set rms over a sequence and a falling spectrum") {
  const int L = 256;
  double low = 0, high = 0;
  for (std::uint32_t s = 0; s < 200; ++s) {
    const auto x = noise::flicker(9, s, 4, L, 0.003);
    double ss = 0, mean = 0;
    for (double v : x) ss += v * v, mean += v / L;
    CHECK(std::abs(std::sqrt(ss / L) / 0.003 - 1) < 1e-9);
    CHECK(std::abs(mean) < 1e-12);
    // power in a low and a high band of the periodogram
    for (int k = 1; k <= 64; ++k) {
      std::complex<double> X = 0;
      for (int n = 0; n < L; ++n) X += x[n] * std::polar(1.0, -2 * M_PI * k * n / L);
      (k <= 4 ? low : high) += (k <= 4 || k >= 33) ? std::norm(X) : 0;
    }
  }
  // 1/f: mean power per bin in k=1..4 over k=33..64 is (mean 1/k over 1..4) / (mean 1/k over
  // 33..64) = 0.521 / 0.0214 = 24.3; white noise would give 1
  const double ratio = (low / 4) / (high / 32);
  CHECK(ratio > 20);
  CHECK(ratio < 29);
}

TEST_CASE("noise: a noisy solve is bit-identical across thread counts and batch splits") {
  const Problem p(150);
  NoiseRun n;
  n.spec = NoiseSpec{0.06, 1e5, 1e-3, 1e-3, 5e-3, 1e-3, 100, 1e-3};
  n.seed = 99;
  OpticalCore<float> core(hw48(), CoreConfig::twin_defaults(hw48()));
  core.set_noise(n);
  core.load_weights(p.W, p.bias);
  MatrixXdR x = p.x;
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> u(-1.3, 1.3);
  for (auto& v : x.reshaped()) v = u(rng);  // distinct samples
  auto solve = [&](int threads, int from, int to) {
    omp_set_num_threads(threads);
    const MatrixXdR xs = x.middleRows(from, to - from);
    const Batch<float> inj = core.injection(Batch<float>::from(xs));
    // sample ids of the sub-batch are its rows' ids in the whole batch
    std::vector<int> ids(to - from);
    for (int i = 0; i < to - from; ++i) ids[i] = from + i;
    const StepFn<float> f = [&](const Batch<float>& z, const Batch<float>& in, const Batch<float>* prev, Batch<float>& out,
                                const StepContext& ctx) {
      std::vector<int> map(z.rows);
      for (int r = 0; r < z.rows; ++r) map[r] = ids[ctx.sample(r)];
      core.step(z, in, prev, out, StepContext{ctx.iteration, map.data()});
    };
    return solve_fixed_point<float>(f, inj, Batch<float>(to - from, 48), SolverOptions::relative(1e-3, 30, 1.0)).z;
  };
  const MatrixXdR whole1 = solve(1, 0, 150), whole2 = solve(2, 0, 150);
  CHECK(std::memcmp(whole1.data(), whole2.data(), sizeof(double) * whole1.size()) == 0);
  const MatrixXdR a = solve(2, 0, 61), b = solve(1, 61, 150);
  CHECK(std::memcmp(a.data(), whole1.data(), sizeof(double) * a.size()) == 0);
  CHECK(std::memcmp(b.data(), whole1.row(61).data(), sizeof(double) * b.size()) == 0);
  omp_set_num_threads(1);
}
