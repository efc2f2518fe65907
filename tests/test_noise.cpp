// Noise sources: each has the statistics it should, and draws depend only on their keys.
#include <Random123/philox.h>
#include <catch2/catch.hpp>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <random>
#include <vector>

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

TEST_CASE("noise: normals in bulk are normal() element by element, from any first index") {
  for (std::uint32_t c0 : {0u, 1u, 6u, 7u})
    for (int n : {0, 1, 2, 5, 8}) {
      std::vector<double> v(static_cast<size_t>(n) + 1, -99.0);
      noise::normals(7, noise::Source::SlmPattern, 3, 4, c0, n, v.data());
      for (int k = 0; k < n; ++k) CHECK(v[k] == noise::normal(7, noise::Source::SlmPattern, 3, 4, c0 + k));
      CHECK(v[n] == -99.0);  // nothing past the n asked for
    }
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
  const MatrixXdR F = factor_optical_chain(hw48(), cfg, p.W).folded();
  const StepStages s = twin_step_stages(hw48(), cfg, p.W, p.bias, p.z.topRows(1), p.x.topRows(1));
  for (int j : {3, 30}) {
    double var = 0;
    for (int i = 0; i < 48; ++i) {
      const double a = (0.06 + s.after_led_pos(0, i)) * F(i, j) + (0.06 + s.after_led_neg(0, i)) * F(48 + i, j);
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

TEST_CASE("noise: a program seed holds the SLM's pattern (the chip) while the read noise's seed changes") {
  const Problem p(4);
  NoiseRun chip = only(&NoiseSpec::slm_fixed_pattern_sigma, 0.02, 11), read = chip, other = chip;
  const auto pattern_of = [&](std::uint64_t seed, std::optional<std::uint64_t> program_seed) {
    NoiseRun n = chip;
    n.seed = seed, n.program_seed = program_seed;
    return step<double>(p, &n);
  };
  // the pattern alone: the program seed decides it, whatever the noise seed
  const auto a = pattern_of(11, 5), b = pattern_of(12, 5), c = pattern_of(12, std::nullopt), d = pattern_of(5, std::nullopt);
  CHECK(std::memcmp(a.row(0), b.row(0), sizeof(double) * 48) == 0);
  CHECK(std::memcmp(a.row(0), d.row(0), sizeof(double) * 48) == 0);  // a program seed keys the pattern as the noise seed did
  CHECK(std::memcmp(b.row(0), c.row(0), sizeof(double) * 48) != 0);   // without one, the noise seed is a new chip
  // with read noise on, the same chip under two read seeds: the read noise differs
  read.spec.thermal_sigma = other.spec.thermal_sigma = 1e-3;
  read.program_seed = other.program_seed = 5;
  other.seed = 12;
  const auto r11 = step<double>(p, &read), r12 = step<double>(p, &other);
  CHECK(std::memcmp(r11.row(0), r12.row(0), sizeof(double) * 48) != 0);
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

TEST_CASE("noise: a noisy solve is bit-identical across thread counts and batch splits of 1, 3 and all samples") {
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
  // samples [from, to) as a batch of their own, told where its first sample sits in the whole
  auto solve = [&](int threads, int from, int to) {
    omp_set_num_threads(threads);
    const Batch<float> inj = core.injection(Batch<float>::from(x.middleRows(from, to - from)));
    SolverOptions so = SolverOptions::relative(1e-3, 30, 1.0);
    so.first_sample = from;
    return solve_fixed_point<float>(core.step_fn(), inj, Batch<float>(to - from, 48), so).z;
  };
  const MatrixXdR whole1 = solve(1, 0, 150), whole2 = solve(2, 0, 150);
  CHECK(std::memcmp(whole1.data(), whole2.data(), sizeof(double) * whole1.size()) == 0);
  for (int size : {1, 3, 89}) {  // 3: few rows, whose white noise is drawn ahead, several iterations at a time
    INFO("batches of " << size);
    for (int from = 0; from < 150; from += size) {
      const int to = std::min(150, from + size);
      const MatrixXdR part = solve(from % 2 ? 2 : 1, from, to);
      CHECK(std::memcmp(part.data(), whole1.row(from).data(), sizeof(double) * part.size()) == 0);
    }
  }
  omp_set_num_threads(1);
}

namespace {

// n float normals of one stream, in double for the statistics
std::vector<double> float_normals(noise::Source s, std::uint32_t a, std::uint32_t b, int n, std::uint64_t seed = 2024) {
  std::vector<float> f(n);
  noise::normals_f32(seed, s, a, b, 0, n, f.data());
  return std::vector<double>(f.begin(), f.end());
}

double normal_cdf(double z) { return 0.5 * std::erfc(-z / std::sqrt(2.0)); }

}  // namespace

TEST_CASE("noise: the vectorised Philox gives Random123's Philox4x32-10 words, for any offset and length", "[noise]") {
  using G = r123::Philox4x32;
  for (std::uint64_t seed : {0ULL, 0x0123456789abcdefULL, ~0ULL})
    for (std::uint32_t c0 : {0u, 1u, 3u, 62u, 0xfffffff0u})  // the last wraps past 2^32 - 1 to 0
      for (int n : {0, 1, 5, 64, 130}) {
        std::vector<std::uint32_t> w(n);
        noise::philox_words(seed, noise::Source::Rin, 7, 0xdeadbeef, c0, n, w.data());
        const G::key_type key = {{static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)}};
        for (int k = 0; k < n; ++k) {
          const std::uint32_t c = c0 + k;
          const G::ctr_type ctr = {{static_cast<std::uint32_t>(noise::Source::Rin), 7, 0xdeadbeef, c / 4}};
          INFO("seed " << seed << " c " << c);
          REQUIRE(w[k] == G()(ctr, key)[c % 4]);
        }
      }
}

TEST_CASE("noise: normal_f32 and normals_f32 agree to the bit for any offset, length and alignment", "[noise]") {
  std::vector<float> buf(1100);
  for (std::uint32_t c0 : {0u, 1u, 3u, 5u, 63u, 64u, 65u, 1000003u})
    for (int n : {0, 1, 3, 17, 48, 96, 112, 1000})  // whole vectors of 8 blocks, and a padded rest
      for (int shift : {0, 1, 3}) {  // out + 1 and out + 3 are not 8- or 16-byte aligned
        float* out = buf.data() + shift;
        noise::normals_f32(9, noise::Source::Shot, 4, 5, c0, n, out);
        for (int k = 0; k < n; ++k) {
          const float one = noise::normal_f32(9, noise::Source::Shot, 4, 5, c0 + k);
          INFO("c0 " << c0 << " n " << n << " k " << k);
          REQUIRE(std::memcmp(&one, out + k, sizeof one) == 0);
        }
      }
}

TEST_CASE("noise: float normals have mean 0, variance 1, skewness 0 and excess kurtosis 0", "[noise]") {
  const std::vector<double> x = float_normals(noise::Source::Thermal, 3, 4, 1 << 20);
  const double n = static_cast<double>(x.size());
  double m1 = 0, m2 = 0, m3 = 0, m4 = 0;
  for (double v : x) m1 += v / n;
  for (double v : x) {
    const double d = v - m1;
    m2 += d * d / n, m3 += d * d * d / n, m4 += d * d * d * d / n;
  }
  // 5 standard errors of each estimator for normal data
  CHECK(std::abs(m1) < 5 * std::sqrt(1 / n));
  CHECK(std::abs(m2 - 1) < 5 * std::sqrt(2 / n));
  CHECK(std::abs(m3 / std::pow(m2, 1.5)) < 5 * std::sqrt(6 / n));
  CHECK(std::abs(m4 / (m2 * m2) - 3) < 5 * std::sqrt(24 / n));
}

TEST_CASE("noise: float normals follow the normal CDF (Kolmogorov-Smirnov distance)", "[noise]") {
  std::vector<double> x = float_normals(noise::Source::Shot, 11, 12, 1 << 20);
  std::sort(x.begin(), x.end());
  const double n = static_cast<double>(x.size());
  double d = 0;
  for (size_t i = 0; i < x.size(); ++i) d = std::max({d, (i + 1) / n - normal_cdf(x[i]), normal_cdf(x[i]) - i / n});
  CHECK(d < 1.95 / std::sqrt(n));  // the 0.1% critical value
}

TEST_CASE("noise: float normals lie beyond 3 sigma as often as normals do (0.27%)", "[noise]") {
  const std::vector<double> x = float_normals(noise::Source::Rin, 5, 6, 1 << 20);
  const double p = 2 * normal_cdf(-3), n = static_cast<double>(x.size());
  const double beyond = std::count_if(x.begin(), x.end(), [](double v) { return std::abs(v) > 3; }) / n;
  CHECK(std::abs(beyond - p) < 5 * std::sqrt(p * (1 - p) / n));
}

TEST_CASE("noise: float normal streams of other sources, indices or seeds, and neighbours in one stream, are uncorrelated", "[noise]") {
  const int n = 1 << 18;
  auto corr = [](const std::vector<double>& x, const std::vector<double>& y) {
    double sxy = 0, sxx = 0, syy = 0;
    for (size_t i = 0; i < x.size(); ++i) sxy += x[i] * y[i], sxx += x[i] * x[i], syy += y[i] * y[i];
    return sxy / std::sqrt(sxx * syy);
  };
  const std::vector<double> base = float_normals(noise::Source::Shot, 1, 2, n + 4);
  const std::vector<double> x(base.begin(), base.begin() + n);
  const double tol = 5 / std::sqrt(static_cast<double>(n));
  CHECK(std::abs(corr(x, float_normals(noise::Source::Thermal, 1, 2, n))) < tol);
  CHECK(std::abs(corr(x, float_normals(noise::Source::Shot, 2, 2, n))) < tol);
  CHECK(std::abs(corr(x, float_normals(noise::Source::Shot, 1, 3, n))) < tol);
  CHECK(std::abs(corr(x, float_normals(noise::Source::Shot, 1, 2, n, 2025))) < tol);
  for (int lag = 1; lag <= 4; ++lag) {  // words of one Philox block and of the next
    INFO("lag " << lag);
    CHECK(std::abs(corr(x, std::vector<double>(base.begin() + lag, base.begin() + lag + n))) < tol);
  }
}

// The exact Box-Muller transform of the words, in double.
std::pair<double, double> exact_pair(std::uint32_t a, std::uint32_t b) {
  const double u = ((a >> 1) + 0.5) * 0x1p-31;
  const double r = std::sqrt(-2 * std::log(u)), t = 2 * M_PI * (b + 0.5) * 0x1p-32;
  return {r * std::cos(t), r * std::sin(t)};
}

TEST_CASE("noise: the word-pair-to-normals map is within 2e-6 of the exact Box-Muller transform", "[noise]") {
  std::vector<std::uint32_t> words;
  for (std::uint32_t m = 0; m < 4096; ++m) words.insert(words.end(), {m, ~m, 0x80000000u + m, 0x7fffffffu - m});
  for (std::uint32_t q = 0; q < 4; ++q)  // around every quarter and eighth turn
    for (std::uint32_t m = 0; m < 512; ++m) words.insert(words.end(), {(q << 30) + m, (q << 30) - m, (q << 30) + 0x20000000u + m, (q << 30) + 0x20000000u - m});
  std::mt19937 rng(1);
  for (int i = 0; i < 200000; ++i) words.push_back(rng());
  double worst = 0;
  for (size_t i = 0; i < words.size(); ++i) {
    const std::uint32_t a = words[i], b = words[(i * 7919) % words.size()];
    const auto [c, s] = noise::normal_pair(a, b);
    const auto [ce, se] = exact_pair(a, b);
    worst = std::max({worst, std::abs(c - ce), std::abs(s - se)});
  }
  CHECK(worst < 2e-6);
}

TEST_CASE("noise: the word-pair-to-normals map is finite, 6.66 at most, and odd under a half turn", "[noise]") {
  std::mt19937 rng(2);
  for (std::uint32_t m = 0; m < (1u << 16); ++m)
    for (std::uint32_t a : {m, ~m, 0x80000000u + m, 0x7fffffffu - m}) {
      const std::uint32_t b = rng();
      const auto [c, s] = noise::normal_pair(a, b);
      const auto [cn, sn] = noise::normal_pair(a, b + 0x80000000u);
      INFO("words " << a << ", " << b);
      REQUIRE(std::isfinite(c));
      REQUIRE(std::isfinite(s));
      REQUIRE(std::hypot(c, s) <= 6.662f);
      REQUIRE(cn == -c);
      REQUIRE(sn == -s);
    }
  const auto [top, zero] = noise::normal_pair(0, 0x0);  // u = 2^-32, the angle 2 pi 2^-33
  CHECK(std::abs(top - 6.66043) < 1e-4);
  CHECK(std::abs(zero) < 1e-8);
  const auto [c1, s1] = noise::normal_pair(0xffffffffu, 0x40000000u);  // u = 1 - 2^-32: radius 2^-15.5
  CHECK(std::abs(c1) < 1e-10);
  CHECK(std::abs(s1 - std::sqrt(0x1p-31)) < 1e-11);
}
