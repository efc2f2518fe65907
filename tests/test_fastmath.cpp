// The vectorised log and exp of the float hot loop (sim/fastmath.hpp) against the C library in
// double: within 2 float ulps over wide ranges, and log(0) that stays finite and makes
// exp(c * log 0) vanish, as the electronics sigmoid needs.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "sim/fastmath.hpp"

namespace {

using aoc::fastmath::f32x8;

constexpr double kTwoUlps = 2.4e-7;  // relative: 2 * 2^-23

f32x8 pack(const float* p) {
  f32x8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

template <class Fn>
std::vector<float> map_packets(Fn fn, const std::vector<float>& in) {
  std::vector<float> out(in.size());
  for (size_t i = 0; i < in.size(); i += 8) {
    const f32x8 r = fn(pack(in.data() + i));
    std::memcpy(out.data() + i, &r, sizeof r);
  }
  return out;
}

// n inputs (a multiple of 16) log-uniform in [lo, hi], plus exact powers of two and their
// neighbours, where the mantissa range switches.
std::vector<float> log_inputs(double lo, double hi, int n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> d(std::log(lo), std::log(hi));
  std::vector<float> v;
  for (int i = 0; i < n; ++i) v.push_back(static_cast<float>(std::exp(d(rng))));
  for (int e = -99; e <= 99; e += 3) {
    const float p = std::ldexp(1.0f, e);
    v.push_back(p);
    v.push_back(std::nextafter(p, 0.0f));
    v.push_back(std::nextafter(p, 1e38f));
    v.push_back(p * 0.70710678f);
  }
  while (v.size() % 16) v.push_back(1.5f);
  return v;
}

}  // namespace

TEST_CASE("fastmath: log_nonneg is within 2 float ulps of std::log from 1e-30 to 1e30") {
  const std::vector<float> in = log_inputs(1e-30, 1e30, 20000, 1);
  const std::vector<float> out = map_packets([](f32x8 x) { return aoc::fastmath::log_nonneg(x); }, in);
  double worst = 0;
  float worst_at = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const double ref = std::log(static_cast<double>(in[i]));
    if (ref == 0) {
      CHECK(out[i] == 0.0f);
      continue;
    }
    const double rel = std::abs(static_cast<double>(out[i]) - ref) / std::abs(ref);
    if (rel > worst) worst = rel, worst_at = in[i];
  }
  INFO("worst relative error " << worst << " at x = " << worst_at);
  CHECK(worst <= kTwoUlps);
}

TEST_CASE("fastmath: log_nonneg is within 2 float ulps of std::log just around 1") {
  std::vector<float> in;
  float x = 1.0f;
  for (int i = 0; i < 400; ++i) x = std::nextafter(x, 0.0f), in.push_back(x);
  x = 1.0f;
  for (int i = 0; i < 400; ++i) x = std::nextafter(x, 2.0f), in.push_back(x);
  std::mt19937_64 rng(2);
  std::uniform_real_distribution<double> d(0.5, 2.0);
  for (int i = 0; i < 800; ++i) in.push_back(static_cast<float>(d(rng)));
  const std::vector<float> out = map_packets([](f32x8 v) { return aoc::fastmath::log_nonneg(v); }, in);
  double worst = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const double ref = std::log(static_cast<double>(in[i]));
    worst = std::max(worst, std::abs(static_cast<double>(out[i]) - ref) / std::abs(ref));
  }
  INFO("worst relative error " << worst);
  CHECK(worst <= kTwoUlps);
}

TEST_CASE("fastmath: exp is within 2 float ulps of std::exp from -80 to 80") {
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> d(-80.0, 80.0);
  std::vector<float> in;
  for (int i = 0; i < 20000; ++i) in.push_back(static_cast<float>(d(rng)));
  for (int i = -80; i <= 80; ++i) {
    in.push_back(static_cast<float>(i));
    in.push_back(static_cast<float>(i * 0.69314718));  // near the reduction's switch points
    in.push_back(static_cast<float>((i + 0.5) * 0.69314718));
  }
  for (const float small : {0.0f, 1e-8f, -1e-8f, 1e-3f, -1e-3f}) in.push_back(small);
  while (in.size() % 16) in.push_back(0.25f);
  const std::vector<float> out = map_packets([](f32x8 x) { return aoc::fastmath::exp(x); }, in);
  double worst = 0;
  float worst_at = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const double ref = std::exp(static_cast<double>(in[i]));
    const double rel = std::abs(static_cast<double>(out[i]) - ref) / ref;
    if (rel > worst) worst = rel, worst_at = in[i];
  }
  INFO("worst relative error " << worst << " at x = " << worst_at);
  CHECK(worst <= kTwoUlps);
}

TEST_CASE("fastmath: log_nonneg(0) is finite and exp(4.27 * log_nonneg(0)) vanishes") {
  const f32x8 zero{};
  const f32x8 l = aoc::fastmath::log_nonneg(zero);
  const f32x8 e = aoc::fastmath::exp(4.27f * l);
  for (int i = 0; i < 8; ++i) {
    INFO("lane " << i << ": log " << l[i] << ", exp " << e[i]);
    CHECK(std::isfinite(l[i]));
    CHECK(l[i] < -80.0f);
    CHECK(e[i] >= 0.0f);
    CHECK(e[i] < 1e-30f);
  }
  // the sigmoid's (1 + |u|^c)^(-1/c) at u = 0 is then exactly 1
  const f32x8 one_plus = 1.0f + e;
  for (int i = 0; i < 8; ++i) CHECK(one_plus[i] == 1.0f);
}

TEST_CASE("fastmath: exp stays finite and positive outside its clamp range") {
  float in[8] = {-1000.0f, -200.0f, -100.0f, -88.0f, -87.5f, 88.5f, 100.0f, 1000.0f};
  const f32x8 e = aoc::fastmath::exp(pack(in));
  for (int i = 0; i < 8; ++i) {
    INFO("x = " << in[i] << ": " << e[i]);
    CHECK(std::isfinite(e[i]));
    CHECK(e[i] > 0.0f);
    if (in[i] < 0) CHECK(e[i] < 1e-37f);
    else CHECK(e[i] > 1e38f);
  }
}
