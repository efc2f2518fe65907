// The reference's matrix products (kernels::dot_rows): each element one dot product in the
// documented eight-lane order, whatever the batch, the block it falls in or the thread count.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "compiler/kernels.hpp"

using namespace aoc::ir::kernels;

namespace {

std::vector<double> random_values(std::size_t n, unsigned seed) {
  std::mt19937_64 g(seed);
  std::normal_distribution<double> d;
  std::vector<double> v(n);
  for (double& x : v) x = d(g);
  return v;
}

// The order written out: lane l sums the terms j = l mod 8 by fmadd, then the fixed tree.
double dot_by_definition(const double* a, const double* b, std::int64_t n) {
  double l[8] = {};
  for (std::int64_t j = 0; j < n; ++j) l[j % 8] = fmadd(a[j], b[j], l[j % 8]);
  return ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
}

}  // namespace

TEST_CASE("products: each element is the dot product in the eight-lane order, bit for bit") {
  for (std::int64_t in : {1, 7, 8, 9, 45, 48, 130}) {
    const std::int64_t rows = 7, out = 11;
    const auto x = random_values(static_cast<std::size_t>(rows * in), 1), W = random_values(static_cast<std::size_t>(out * in), 2);
    std::vector<double> y(static_cast<std::size_t>(rows * out));
    dot_rows(x.data(), rows, W.data(), out, in, y.data(), 1);
    INFO("in " << in);
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t o = 0; o < out; ++o) CHECK(y[r * out + o] == dot_by_definition(x.data() + r * in, W.data() + o * in, in));
  }
}

TEST_CASE("products: a row's result does not depend on the batch it is in or the thread count") {
  const std::int64_t in = 300, out = 517, rows = 100;
  const auto x = random_values(static_cast<std::size_t>(rows * in), 3), W = random_values(static_cast<std::size_t>(out * in), 4);
  std::vector<double> all(static_cast<std::size_t>(rows * out)), threaded(all.size()), one(static_cast<std::size_t>(out));
  dot_rows(x.data(), rows, W.data(), out, in, all.data(), 1);
  dot_rows(x.data(), rows, W.data(), out, in, threaded.data(), 3);
  CHECK(threaded == all);
  for (std::int64_t r : {0, 1, 47, 99}) {
    dot_rows(x.data() + r * in, 1, W.data(), out, in, one.data(), 2);
    CHECK(std::vector<double>(all.begin() + r * out, all.begin() + (r + 1) * out) == one);
  }
}

TEST_CASE("products: the sums are accurate to a few ulps of the terms' magnitude") {
  const std::int64_t in = 4096;
  const auto a = random_values(in, 5), b = random_values(in, 6);
  long double exact = 0, scale = 0;
  for (std::int64_t j = 0; j < in; ++j) exact += static_cast<long double>(a[j]) * b[j], scale += std::fabs(a[j] * b[j]);
  CHECK(std::fabs(static_cast<long double>(dot8(a.data(), b.data(), in)) - exact) < 1e-14L * scale);
}

TEST_CASE("products: no columns give zeros, and a signed zero term leaves no negative zero") {
  std::vector<double> y(6, 1.0);
  dot_rows(nullptr, 2, nullptr, 3, 0, y.data(), 1);
  CHECK(y == std::vector<double>(6, 0.0));
  const double a[3] = {-0.0, 1.0, -0.0}, b[3] = {1.0, 0.0, 1.0};
  const double d = dot8(a, b, 3);
  CHECK(d == 0.0);
  CHECK_FALSE(std::signbit(d));
}
