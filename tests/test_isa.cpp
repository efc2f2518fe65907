// The hot kernels' copies per instruction set (sim/isa.hpp): every copy the CPU runs gives the
// same bits, and the choice of copy is the user's to name.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "compiler/kernels.hpp"
#include "sim/batch.hpp"
#include "sim/error.hpp"
#include "sim/isa.hpp"
#include "sim/kernels.hpp"
#include "tests/support.hpp"

using namespace aoc;

namespace {

// f(level) for every copy this CPU runs, then the level in use as it was.
template <class F>
void for_each_level(F f) {
  const isa::Level was = isa::kernels();
  for (isa::Level level : isa::compiled()) {
    if (!isa::runs(level)) continue;
    isa::use(level);
    f(level);
  }
  isa::use(was);
}

template <class T>
bool same_bits(const T& a, const T& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(a[0])) == 0;
}

}  // namespace

TEST_CASE("isa: this binary has a kernel copy per x86-64 level and the CPU runs the baseline") {
  const auto levels = isa::compiled();
  REQUIRE(!levels.empty());
#if defined(__x86_64__)
  CHECK(levels.size() == 3);
  CHECK(isa::runs(isa::Level::X86_64));
#endif
  CHECK(isa::runs(isa::cpu()));
  CHECK(isa::parse(isa::name(isa::cpu())) == isa::cpu());
}

TEST_CASE("isa: every kernel copy gives the tile's float, half and double products the same bits") {
  const int K = 77, ld = 144, rows = 7;  // 7 rows: a block of four and three single rows
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> u(-1, 1);
  AlignedVector<float> Lf(static_cast<size_t>(rows) * K), Ff(static_cast<size_t>(K) * ld);
  AlignedVector<kern::Half> Fh(Ff.size());
  AlignedVector<double> Ld(Lf.size()), Fd(Ff.size());
  for (size_t i = 0; i < Lf.size(); ++i) Ld[i] = u(rng), Lf[i] = static_cast<float>(Ld[i]);
  for (size_t i = 0; i < Ff.size(); ++i) {
    Fd[i] = u(rng), Ff[i] = static_cast<float>(Fd[i]);
    const auto h = static_cast<_Float16>(Ff[i]);
    std::memcpy(&Fh[i], &h, sizeof h);
  }
  std::vector<AlignedVector<float>> f32, f16;
  std::vector<AlignedVector<double>> f64;
  for_each_level([&](isa::Level) {
    const size_t n = static_cast<size_t>(rows) * ld;
    AlignedVector<float> a(n), b(n);
    AlignedVector<double> d(n);
    kern::product(Lf.data(), K, K, Ff.data(), ld, 0, ld, rows, a.data(), ld);
    kern::product(Lf.data(), K, K, Fh.data(), ld, 16, ld, rows, b.data(), ld);
    kern::product(Ld.data(), K, K, Fd.data(), ld, 0, ld, rows, d.data(), ld);
    f32.push_back(a), f16.push_back(b), f64.push_back(d);
  });
  for (size_t i = 1; i < f32.size(); ++i) {
    CHECK(same_bits(f32[i], f32[0]));
    CHECK(same_bits(f16[i], f16[0]));
    CHECK(same_bits(f64[i], f64[0]));
  }
  // and the sums are the products (so that equal copies are not equally wrong)
  double ref = 0;
  for (int k = 0; k < K; ++k) ref += Ld[2 * K + k] * Fd[static_cast<size_t>(k) * ld + 5];
  CHECK(f64[0][2 * ld + 5] == Approx(ref).epsilon(1e-12));
}

TEST_CASE("isa: every kernel copy gives the reference's dot products and scan readout the same bits") {
  const std::int64_t rows = 5, out = 13, in = 203, N = 37;  // odd sizes: every remainder path
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> x(rows * in), W(out * in), states(8 * N), C(N);
  for (auto* v : {&x, &W, &states, &C}) for (double& a : *v) a = u(rng);
  std::vector<std::vector<double>> ys, readouts;
  std::vector<double> dots;
  for_each_level([&](isa::Level) {
    std::vector<double> y(rows * out), acc(8);
    ir::kernels::dot_rows(x.data(), rows, W.data(), out, in, y.data(), 2);
    ir::kernels::readout8(states.data(), N, C.data(), acc.data());
    ys.push_back(y), readouts.push_back(acc), dots.push_back(ir::kernels::dot8(x.data(), W.data(), in));
  });
  for (size_t i = 1; i < ys.size(); ++i) {
    CHECK(same_bits(ys[i], ys[0]));
    CHECK(same_bits(readouts[i], readouts[0]));
    CHECK(std::memcmp(&dots[i], &dots[0], sizeof(double)) == 0);
  }
  double ref = 0;
  for (std::int64_t n = 0; n < N; ++n) ref = std::fma(C[n], states[3 * N + n], ref);
  CHECK(std::memcmp(&readouts[0][3], &ref, sizeof ref) == 0);  // the readout's chain, in order
}

TEST_CASE("isa: a level this binary does not have is unknown, and one the CPU cannot run is refused") {
  CHECK_FALSE(isa::parse("avx9").has_value());
  CHECK_FALSE(isa::parse("").has_value());
  for (isa::Level level : isa::compiled())
    if (!isa::runs(level)) CHECK_THROWS_AS(isa::use(level), Error);
}

TEST_CASE("isa: AOC_ISA chooses the copy aoc runs, and names one it cannot run in one line") {
  ::setenv("AOC_ISA", "x86-64", 1);
  const test::Run low = test::run_aoc("--version");
  ::setenv("AOC_ISA", "avx9", 1);
  const test::Run bad = test::run_aoc("--version");
  ::unsetenv("AOC_ISA");
  INFO(low.out);
  CHECK(low.status == 0);
  CHECK(low.out.find("kernels x86-64 (of ") != std::string::npos);
  INFO(bad.out);
  CHECK(bad.status == 1);
  CHECK(bad.out == "aoc: error: AOC_ISA: unknown instruction set 'avx9' (this binary has " + std::string(isa::name(isa::compiled().front())) +
                       (isa::compiled().size() > 1 ? ", x86-64-v3, x86-64-v4)\n" : ")\n"));
}
