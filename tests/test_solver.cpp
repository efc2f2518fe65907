// The fixed-point loop executor (sim/solver.hpp): the twin's stop rule, the per-sample relative
// rule, the fixed count, the residual bookkeeping, option checks, and a real solve of the
// 48-variable core.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <vector>

#include "tests/support.hpp"
#include "sim/batch.hpp"
#include "sim/config.hpp"
#include "sim/core.hpp"
#include "sim/error.hpp"
#include "sim/hardware.hpp"
#include "sim/solver.hpp"

namespace {

using namespace aoc;
using namespace aoc::test;

RowMatrix<double> uniform(int rows, int cols, double lo, double hi, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> d(lo, hi);
  RowMatrix<double> m(rows, cols);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) m(r, c) = d(rng);
  return m;
}

// f(z) = q*z + inj: a contraction with fixed point inj/(1-q), row by row.
template <class T>
StepFn<T> linear_map(double q) {
  return [q](const Batch<T>& z, const Batch<T>& inj, const Batch<T>*, Batch<T>& out, const StepContext&) {
    if (out.rows != z.rows || out.n != z.n) out = Batch<T>(z.rows, z.n);
    for (int r = 0; r < z.rows; ++r)
      for (int j = 0; j < z.n; ++j) out.row(r)[j] = static_cast<T>(q) * z.row(r)[j] + inj.row(r)[j];
  };
}

double row_norm(const RowMatrix<double>& m, int r) { return m.row(r).norm(); }

bool same_bits(const RowMatrix<double>& a, const RowMatrix<double>& b) {
  return a.rows() == b.rows() && a.cols() == b.cols() &&
         std::memcmp(a.data(), b.data(), sizeof(double) * static_cast<size_t>(a.size())) == 0;
}

// A 48-variable core with the twin's defaults, weights like a torch Linear init.
struct CoreProblem {
  OpticalCore<double> core;
  RowMatrix<double> x;
  explicit CoreProblem(std::uint64_t seed, int B, CoreConfig cfg = CoreConfig::twin_defaults(hw48()))
      : core(hw48(), std::move(cfg)) {
    std::mt19937_64 rng(seed);
    const double k = 1.0 / std::sqrt(48.0);
    const RowMatrix<double> W = uniform(48, 48, -k, k, rng);
    const Eigen::VectorXd bias = uniform(48, 1, -k, k, rng).col(0);
    core.load_weights(W, bias);
    x = uniform(B, 48, -1.3, 1.3, rng);
  }
  StepFn<double> step() const { return core.step_fn(); }
};

}  // namespace

// ---------------------------------------------------------------------------------------------
// Twin rule

TEST_CASE("solver: the twin rule stops at the first step whose batch-max residual is below tol") {
  // From z0 = 0 the residual of row r at step k is ||inj_r|| * 0.5^(k-1).
  std::mt19937_64 rng(1);
  RowMatrix<double> inj = uniform(5, 8, -1, 1, rng);
  inj.row(2) *= 0.001;  // a sample that alone would stop much earlier
  const double biggest = [&] {
    double b = 0;
    for (int r = 0; r < 5; ++r) b = std::max(b, row_norm(inj, r));
    return b;
  }();
  int expected = 1;
  while (biggest * std::pow(0.5, expected - 1) >= 1e-3) ++expected;
  const SolveResult res = solve_fixed_point<double>(linear_map<double>(0.5), Batch<double>::from(inj),
                                                    Batch<double>(5, 8), SolverOptions::twin());
  CHECK(res.steps == expected);
  REQUIRE(res.max_residual.size() == static_cast<size_t>(res.steps));
  for (int k = 0; k + 1 < res.steps; ++k) CHECK(res.max_residual[static_cast<size_t>(k)] >= 1e-3);
  CHECK(res.max_residual.back() < 1e-3);
  for (int r = 0; r < 5; ++r) {
    INFO("sample " << r);
    // the residual decreases monotonically, so every sample keeps the batch's last iterate
    CHECK(res.iterations[static_cast<size_t>(r)] == expected);
    CHECK(res.converged[static_cast<size_t>(r)] == 1);
    CHECK((res.z.row(r) - 2.0 * inj.row(r)).norm() < 2e-3);
  }
}

TEST_CASE("solver: each sample's settling step is the first whose residual met the tolerance, 0 when none did") {
  // From z0 = 0 the residual of row r at step k is ||inj_r|| * 0.5^(k-1): a small row settles first.
  std::mt19937_64 rng(3);
  RowMatrix<double> inj = uniform(4, 8, -1, 1, rng);
  inj.row(1) *= 1e-3;
  inj.row(3) *= 1e6;  // never below the tolerance within the cap
  SolverOptions opt = SolverOptions::twin();
  opt.max_iter = 12;
  const SolveResult res = solve_fixed_point<double>(linear_map<double>(0.5), Batch<double>::from(inj), Batch<double>(4, 8), opt);
  for (int r = 0; r < 3; ++r) {
    INFO("sample " << r);
    int first = 1;
    while (row_norm(inj, r) * std::pow(0.5, first - 1) >= opt.tol) ++first;
    CHECK(res.settled[static_cast<size_t>(r)] == first);
  }
  CHECK(res.settled[1] < res.settled[0]);
  CHECK(res.settled[3] == 0);
  CHECK(res.steps == 12);
}

TEST_CASE("solver: the twin rule never runs more than max_iter steps") {
  // f(z) = z + 1 never converges: its residual is sqrt(N) at every step.
  const StepFn<double> drift = [](const Batch<double>& z, const Batch<double>&, const Batch<double>*, Batch<double>& out, const StepContext&) {
    out = z;
    for (int r = 0; r < z.rows; ++r)
      for (int j = 0; j < z.n; ++j) out.row(r)[j] += 1.0;
  };
  int calls = 0;
  const StepFn<double> counted = [&](const Batch<double>& z, const Batch<double>& i, const Batch<double>* p, Batch<double>& o, const StepContext& c) {
    ++calls;
    drift(z, i, p, o, c);
  };
  const SolveResult res = solve_fixed_point<double>(counted, Batch<double>(3, 4), Batch<double>(3, 4), SolverOptions::twin());
  CHECK(SolverOptions::twin().max_iter == 40);
  CHECK(calls == 40);
  CHECK(res.steps == 40);
  CHECK(res.max_residual.size() == 40);
  for (int r = 0; r < 3; ++r) {
    CHECK(res.converged[static_cast<size_t>(r)] == 0);
    CHECK(res.iterations[static_cast<size_t>(r)] == 1);  // all residuals tie: the first one is kept
    CHECK(res.residual[static_cast<size_t>(r)] == Approx(2.0));
  }
}

TEST_CASE("solver: the twin rule returns per sample the lowest-residual iterate and reports its step") {
  // Step k (1-based) adds d_k(r) to every element of row r; the residual is |d_k(r)| * sqrt(N).
  // Row r's residual falls until step r + 3 and rises after it.
  const int B = 4, N = 6;
  auto d = [](int k, int r) { return 0.05 + 0.1 * std::abs(k - (r + 3)); };
  int call = 0;
  const StepFn<double> f = [&](const Batch<double>& z, const Batch<double>&, const Batch<double>*, Batch<double>& out, const StepContext&) {
    ++call;
    out = z;
    for (int r = 0; r < z.rows; ++r)
      for (int j = 0; j < z.n; ++j) out.row(r)[j] += d(call, r);
  };
  SolverOptions opt = SolverOptions::twin();
  opt.tol = 1e-6;  // never met
  const SolveResult res = solve_fixed_point<double>(f, Batch<double>(B, N), Batch<double>(B, N), opt);
  CHECK(res.steps == 40);
  for (int r = 0; r < B; ++r) {
    INFO("sample " << r);
    const int best = r + 3;
    double expect_z = 0;
    for (int k = 1; k <= best; ++k) expect_z += d(k, r);
    CHECK(res.iterations[static_cast<size_t>(r)] == best);
    CHECK(res.residual[static_cast<size_t>(r)] == Approx(0.05 * std::sqrt(double(N))).epsilon(1e-12));
    CHECK(res.converged[static_cast<size_t>(r)] == 0);
    for (int j = 0; j < N; ++j) CHECK(res.z(r, j) == Approx(expect_z).epsilon(1e-12));
  }
}

// ---------------------------------------------------------------------------------------------
// Relative rule

TEST_CASE("solver: under the relative rule each sample stops on its own relative residual") {
  // f(z) = 0.5 z + inj from z0 = z* + delta_r: the residual of row r at step k is 0.5^k ||delta_r||,
  // so rows that start closer to the fixed point stop earlier.
  const int B = 4, N = 5;
  std::mt19937_64 rng(2);
  const RowMatrix<double> inj = uniform(B, N, 0.5, 1.0, rng);
  RowMatrix<double> z0 = 2.0 * inj;
  const RowMatrix<double> delta = uniform(B, N, -1, 1, rng);
  for (int r = 0; r < B; ++r) z0.row(r) += delta.row(r) * std::pow(10.0, -2 * r);
  const double tol = 1e-9;
  const SolveResult res = solve_fixed_point<double>(linear_map<double>(0.5), Batch<double>::from(inj),
                                                    Batch<double>::from(z0), SolverOptions::relative(tol, 100, 1.0));
  std::set<int> counts;
  int longest = 0;
  for (int r = 0; r < B; ++r) {
    INFO("sample " << r);
    // the step at which the rule stops this sample, iterating it alone by hand
    int expect = 0;
    RowMatrix<double> z = z0.row(r);
    for (int k = 1; k <= 100; ++k) {
      const RowMatrix<double> fz = 0.5 * z + inj.row(r);
      const double rel = (fz - z).norm() / (fz.norm() + 1e-9);
      z = fz;
      if (rel < tol) {
        expect = k;
        break;
      }
    }
    REQUIRE(expect > 0);
    CHECK(res.iterations[static_cast<size_t>(r)] == expect);
    CHECK(res.converged[static_cast<size_t>(r)] == 1);
    counts.insert(expect);
    longest = std::max(longest, expect);
  }
  CHECK(counts.size() == static_cast<size_t>(B));  // the samples really did stop at different steps
  CHECK(res.steps == longest);
}

TEST_CASE("solver: under the relative rule a sample's result and iteration count do not depend on the rest of the batch") {
  const int B = 10;
  CoreProblem p(3, B);
  std::mt19937_64 rng(4);
  const RowMatrix<double> z0 = uniform(B, 48, -2.0, 2.0, rng);
  const SolverOptions opt = SolverOptions::relative(1e-7, 60, 0.8);
  const Batch<double> inj = p.core.injection(Batch<double>::from(p.x));
  const SolveResult all = solve_fixed_point<double>(p.step(), inj, Batch<double>::from(z0), opt);
  std::set<int> counts;
  for (int r = 0; r < B; ++r) {
    INFO("sample " << r);
    const Batch<double> inj_r = p.core.injection(Batch<double>::from(p.x.middleRows(r, 1)));
    const SolveResult one = solve_fixed_point<double>(p.step(), inj_r, Batch<double>::from(z0.middleRows(r, 1)), opt);
    CHECK(same_bits(one.z, all.z.middleRows(r, 1)));
    CHECK(one.iterations[0] == all.iterations[static_cast<size_t>(r)]);
    CHECK(one.converged[0] == all.converged[static_cast<size_t>(r)]);
    CHECK(one.residual[0] == all.residual[static_cast<size_t>(r)]);
    counts.insert(all.iterations[static_cast<size_t>(r)]);
  }
  CHECK(counts.size() > 1);  // samples left the batch at different steps
}

TEST_CASE("solver: with floor_patience a noisy sample stops at its noise floor under every rule, a contraction on its way does not") {
  // f(z) = q z + inj + e_k, e_k a fresh draw of size sigma each step: the residual falls as q^k
  // until it reaches the draws' level, where no tolerance under it is met.
  const int B = 3, N = 16;
  std::mt19937_64 rng(7);
  const RowMatrix<double> inj = uniform(B, N, 0.5, 1.0, rng);
  const double sigma = 1e-3;
  const StepFn<double> noisy = [&](const Batch<double>& z, const Batch<double>& in, const Batch<double>*, Batch<double>& out,
                                   const StepContext& ctx) {
    if (out.rows != z.rows || out.n != z.n) out = Batch<double>(z.rows, z.n);
    for (int r = 0; r < z.rows; ++r) {
      std::mt19937_64 g(static_cast<std::uint64_t>(1000 * ctx.iteration + (ctx.samples ? ctx.samples[r] : r)));
      std::normal_distribution<double> e(0.0, sigma);
      for (int j = 0; j < z.n; ++j) out.row(r)[j] = 0.5 * z.row(r)[j] + in.row(r)[j] + e(g);
    }
  };
  const Batch<double> zero(B, N);
  SolverOptions o = SolverOptions::relative(1e-9, 400, 1.0);
  const SolveResult endless = solve_fixed_point<double>(noisy, Batch<double>::from(inj), zero, o);
  o.floor_patience = 8;
  const SolveResult floor = solve_fixed_point<double>(noisy, Batch<double>::from(inj), zero, o);
  for (int r = 0; r < B; ++r) {
    INFO("sample " << r);
    CHECK(endless.iterations[static_cast<size_t>(r)] == 400);
    CHECK(endless.at_floor[static_cast<size_t>(r)] == 0);
    CHECK(floor.converged[static_cast<size_t>(r)] == 0);
    CHECK(floor.at_floor[static_cast<size_t>(r)] == 1);
    CHECK(floor.iterations[static_cast<size_t>(r)] < 60);  // ~15 steps down to sigma, then the patience
    // it stopped at the fixed point 2 inj, to the noise's level
    CHECK((floor.z.row(r) - 2.0 * inj.row(r)).norm() < 20 * sigma * std::sqrt(N));
  }
  // The result at the floor is the mean of the last 8 iterates: closer to the fixed point than one
  // iterate (the last of the endless run), whose error is the noise of a single step and its echoes.
  const double err_mean = (floor.z - 2.0 * inj).squaredNorm(), err_one = (endless.z - 2.0 * inj).squaredNorm();
  INFO("squared error: mean at the floor " << err_mean << ", one iterate " << err_one);
  CHECK(err_mean < 0.7 * err_one);
  // The released rule (one residual for the batch) stops the batch at its floor the same way, its
  // final call at the mean of the last 8 iterates.
  SolverOptions rel{StopRule::Released, 400, 1e-9, 1.0, false};
  const SolveResult rel_endless = solve_fixed_point<double>(noisy, Batch<double>::from(inj), zero, rel);
  rel.floor_patience = 8;
  const SolveResult rel_floor = solve_fixed_point<double>(noisy, Batch<double>::from(inj), zero, rel);
  CHECK(rel_endless.steps == 400);
  CHECK(rel_floor.steps < 60);
  CHECK(rel_floor.at_floor == std::vector<std::uint8_t>(B, 1));
  CHECK(rel_floor.converged == std::vector<std::uint8_t>(B, 0));
  CHECK((rel_floor.z - 2.0 * inj).norm() < 20 * sigma * std::sqrt(B * N));
  // The twin rule (the loop core's) stops the batch once every sample is at its floor, each at
  // the mean of its last 8 iterates; without the rule it runs to max_iter.
  SolverOptions tw = SolverOptions::twin();
  tw.max_iter = 400, tw.tol = 1e-9;
  const SolveResult tw_endless = solve_fixed_point<double>(noisy, Batch<double>::from(inj), zero, tw);
  tw.floor_patience = 8;
  const SolveResult tw_floor = solve_fixed_point<double>(noisy, Batch<double>::from(inj), zero, tw);
  CHECK(tw_endless.steps == 400);
  CHECK(tw_endless.at_floor == std::vector<std::uint8_t>(B, 0));
  CHECK(tw_floor.steps < 60);
  CHECK(tw_floor.at_floor == std::vector<std::uint8_t>(B, 1));
  CHECK(tw_floor.converged == std::vector<std::uint8_t>(B, 0));
  CHECK((tw_floor.z - 2.0 * inj).squaredNorm() < 0.7 * (tw_endless.z - 2.0 * inj).squaredNorm());
  // Noise-free contractions, fast or slow (0.95 per step: 8 steps fall by 0.66 < 0.9), reach the
  // tolerance with the same steps and the same bits as without the rule, under either rule.
  for (double q : {0.5, 0.95}) {
    SolverOptions twin_plain = SolverOptions::twin(), twin_patient;
    twin_plain.max_iter = 2000, twin_plain.tol = 1e-10, twin_patient = twin_plain, twin_patient.floor_patience = 8;
    const SolveResult ta = solve_fixed_point<double>(linear_map<double>(q), Batch<double>::from(inj), zero, twin_plain);
    const SolveResult tb = solve_fixed_point<double>(linear_map<double>(q), Batch<double>::from(inj), zero, twin_patient);
    CHECK(ta.steps == tb.steps);
    CHECK(tb.at_floor == std::vector<std::uint8_t>(B, 0));
    CHECK(same_bits(ta.z, tb.z));
    INFO("q = " << q);
    SolverOptions plain = SolverOptions::relative(1e-10, 2000, 1.0), patient = plain;
    patient.floor_patience = 8;
    const SolveResult a = solve_fixed_point<double>(linear_map<double>(q), Batch<double>::from(inj), zero, plain);
    const SolveResult b = solve_fixed_point<double>(linear_map<double>(q), Batch<double>::from(inj), zero, patient);
    CHECK(a.iterations == b.iterations);
    CHECK(b.converged == std::vector<std::uint8_t>(B, 1));
    CHECK(b.at_floor == std::vector<std::uint8_t>(B, 0));
    CHECK(same_bits(a.z, b.z));
  }
}

TEST_CASE("solver: damping below 1 changes the trajectory but reaches the same fixed point of a contraction") {
  const int B = 3, N = 4;
  std::mt19937_64 rng(5);
  const RowMatrix<double> inj = uniform(B, N, -1, 1, rng);
  const RowMatrix<double> z0 = uniform(B, N, -3, 3, rng);
  const RowMatrix<double> fixed = 2.0 * inj;
  const SolveResult plain = solve_fixed_point<double>(linear_map<double>(0.5), Batch<double>::from(inj),
                                                      Batch<double>::from(z0), SolverOptions::relative(1e-10, 200, 1.0));
  const SolveResult damped = solve_fixed_point<double>(linear_map<double>(0.5), Batch<double>::from(inj),
                                                       Batch<double>::from(z0), SolverOptions::relative(1e-10, 200, 0.5));
  // one step: z0 + 0.5 (f(z0) - z0) instead of f(z0)
  const SolveResult one_plain = solve_fixed_point<double>(linear_map<double>(0.5), Batch<double>::from(inj),
                                                          Batch<double>::from(z0), SolverOptions::relative(1e-10, 1, 1.0));
  const SolveResult one_damped = solve_fixed_point<double>(linear_map<double>(0.5), Batch<double>::from(inj),
                                                           Batch<double>::from(z0), SolverOptions::relative(1e-10, 1, 0.5));
  const RowMatrix<double> f0 = 0.5 * z0 + inj;
  CHECK((one_plain.z - f0).cwiseAbs().maxCoeff() <= 1e-15);
  CHECK((one_damped.z - (0.5 * z0 + 0.5 * f0)).cwiseAbs().maxCoeff() <= 1e-15);
  for (int r = 0; r < B; ++r) {
    INFO("sample " << r);
    CHECK(plain.converged[static_cast<size_t>(r)] == 1);
    CHECK(damped.converged[static_cast<size_t>(r)] == 1);
    // rate 0.75 instead of 0.5: more steps
    CHECK(damped.iterations[static_cast<size_t>(r)] > plain.iterations[static_cast<size_t>(r)]);
    CHECK((plain.z.row(r) - fixed.row(r)).norm() <= 1e-8 * (1 + fixed.row(r).norm()));
    CHECK((damped.z.row(r) - fixed.row(r)).norm() <= 1e-8 * (1 + fixed.row(r).norm()));
  }
}

// ---------------------------------------------------------------------------------------------
// Fixed count

TEST_CASE("solver: a fixed count runs exactly max_iter steps and equals applying the step function that often") {
  // With momentum the step function reads the previous iterate: the solver must pass it along.
  CoreConfig cfg = CoreConfig::twin_defaults(hw48());
  cfg.gamma = 0.25;
  const int B = 5, count = 13;
  CoreProblem p(6, B, cfg);
  std::mt19937_64 rng(7);
  const Batch<double> z0 = Batch<double>::from(uniform(B, 48, -1, 1, rng));
  const Batch<double> inj = p.core.injection(Batch<double>::from(p.x));
  int calls = 0;
  const StepFn<double> f = [&](const Batch<double>& z, const Batch<double>& i, const Batch<double>* prev, Batch<double>& out, const StepContext&) {
    ++calls;
    p.core.step(z, i, prev, out);
  };
  SolverOptions opt = SolverOptions::fixed(count);
  opt.tol = 1e3;  // met at once: the fixed count must not stop early anyway
  const SolveResult res = solve_fixed_point<double>(f, inj, z0, opt);
  CHECK(calls == count);
  CHECK(res.steps == count);
  CHECK(res.max_residual.size() == static_cast<size_t>(count));
  for (int r = 0; r < B; ++r) CHECK(res.iterations[static_cast<size_t>(r)] == count);
  // by hand: z_{k+1} = f(z_k, z_{k-1}), with no previous state on the first step
  Batch<double> prev, cur = z0, next;
  for (int k = 0; k < count; ++k) {
    p.core.step(cur, inj, k == 0 ? nullptr : &prev, next);
    prev = cur;
    cur = next;
  }
  CHECK(same_bits(res.z, cur.to_double()));
}

// ---------------------------------------------------------------------------------------------
// Residual bookkeeping

TEST_CASE("solver: the per-step max residual list has one entry per step and the trace has steps x B entries") {
  std::mt19937_64 rng(8);
  const int B = 6, N = 5;
  const RowMatrix<double> inj = uniform(B, N, -1, 1, rng);
  SECTION("twin rule") {
    SolverOptions opt = SolverOptions::twin();
    opt.trace = true;
    const SolveResult res = solve_fixed_point<double>(linear_map<double>(0.6), Batch<double>::from(inj), Batch<double>(B, N), opt);
    REQUIRE(res.steps > 1);
    CHECK(res.max_residual.size() == static_cast<size_t>(res.steps));
    REQUIRE(res.residual_trace.rows() == res.steps);
    REQUIRE(res.residual_trace.cols() == B);
    for (int k = 0; k < res.steps; ++k) {
      INFO("step " << k);
      CHECK(res.residual_trace.row(k).allFinite());
      CHECK(res.residual_trace.row(k).maxCoeff() == res.max_residual[static_cast<size_t>(k)]);
    }
    CHECK(res.residual_trace.row(0).transpose().isApprox(
        Eigen::VectorXd((inj.rowwise().norm()))));  // first residual: ||inj|| from z0 = 0
  }
  SECTION("relative rule: a stopped sample's later entries are NaN") {
    RowMatrix<double> z0 = 2.5 * inj;
    z0.row(0) = 2.0 * inj.row(0);  // sample 0 starts at the fixed point and stops at step 1
    SolverOptions opt = SolverOptions::relative(1e-8, 100, 1.0);
    opt.trace = true;
    const SolveResult res = solve_fixed_point<double>(linear_map<double>(0.5), Batch<double>::from(inj), Batch<double>::from(z0), opt);
    REQUIRE(res.steps > 2);
    CHECK(res.iterations[0] == 1);
    CHECK(res.max_residual.size() == static_cast<size_t>(res.steps));
    REQUIRE(res.residual_trace.rows() == res.steps);
    REQUIRE(res.residual_trace.cols() == B);
    CHECK(std::isfinite(res.residual_trace(0, 0)));
    for (int k = 1; k < res.steps; ++k) CHECK(std::isnan(res.residual_trace(k, 0)));
    for (int r = 1; r < B; ++r) CHECK(std::isfinite(res.residual_trace(res.iterations[static_cast<size_t>(r)] - 1, r)));
  }
  SECTION("without trace no trace is kept") {
    const SolveResult res = solve_fixed_point<double>(linear_map<double>(0.6), Batch<double>::from(inj), Batch<double>(B, N), SolverOptions::twin());
    CHECK(res.max_residual.size() == static_cast<size_t>(res.steps));
    CHECK(res.residual_trace.size() == 0);
  }
}

// ---------------------------------------------------------------------------------------------
// A real solve

TEST_CASE("solver: the twin's 48-variable core with its defaults converges under the twin rule in fewer than 40 steps") {
  const int B = 16;
  CoreProblem p(9, B);
  REQUIRE(p.core.config().alpha == std::vector<double>{0.5});
  const Batch<double> inj = p.core.injection(Batch<double>::from(p.x));
  const SolveResult res = solve_fixed_point<double>(p.step(), inj, Batch<double>(B, 48), SolverOptions::twin());
  CHECK(res.steps < 40);
  CHECK(res.max_residual.back() < 1e-3);
  for (int r = 0; r < B; ++r) {
    CHECK(res.converged[static_cast<size_t>(r)] == 1);
    CHECK(res.residual[static_cast<size_t>(r)] < 1e-3);
  }
  // and the result is a fixed point of the core to the tolerance
  Batch<double> fz;
  p.core.step(Batch<double>::from(res.z), inj, nullptr, fz);
  CHECK((fz.to_double() - res.z).rowwise().norm().maxCoeff() < 1e-3);
}

TEST_CASE("solver: the float core reaches the same fixed point as the double core") {
  const int B = 8;
  CoreProblem p(10, B);
  OpticalCore<float> coref(hw48(), CoreConfig::twin_defaults(hw48()));
  {
    std::mt19937_64 rng(10);
    const double k = 1.0 / std::sqrt(48.0);
    const RowMatrix<double> W = uniform(48, 48, -k, k, rng);
    const Eigen::VectorXd bias = uniform(48, 1, -k, k, rng).col(0);
    coref.load_weights(W, bias);
  }
  const StepFn<float> ff = [&](const Batch<float>& z, const Batch<float>& i, const Batch<float>* prev, Batch<float>& o, const StepContext&) {
    coref.step(z, i, prev, o);
  };
  const SolveResult rd = solve_fixed_point<double>(p.step(), p.core.injection(Batch<double>::from(p.x)), Batch<double>(B, 48), SolverOptions::fixed(60));
  const SolveResult rf = solve_fixed_point<float>(ff, coref.injection(Batch<float>::from(p.x)), Batch<float>(B, 48), SolverOptions::fixed(60));
  REQUIRE(rd.max_residual.back() < 1e-9);  // converged far below float precision
  const double diff = (rd.z - rf.z).cwiseAbs().maxCoeff();
  INFO("max abs difference " << diff);
  CHECK(diff < 1e-4);
}

// ---------------------------------------------------------------------------------------------
// Options

TEST_CASE("solver: bad options are rejected: max_iter below 1, damping 0 or above 1") {
  const Batch<double> z(2, 3), inj(2, 3);
  const StepFn<double> f = linear_map<double>(0.5);
  CHECK_THROWS_AS(solve_fixed_point<double>(f, inj, z, SolverOptions::fixed(0)), Error);
  CHECK_THROWS_AS(solve_fixed_point<double>(f, inj, z, SolverOptions::relative(1e-3, 0, 1.0)), Error);
  CHECK_THROWS_AS(solve_fixed_point<double>(f, inj, z, SolverOptions::relative(1e-3, -5, 1.0)), Error);
  CHECK_THROWS_AS(solve_fixed_point<double>(f, inj, z, SolverOptions::relative(1e-3, 10, 0.0)), Error);
  CHECK_THROWS_AS(solve_fixed_point<double>(f, inj, z, SolverOptions::relative(1e-3, 10, -0.5)), Error);
  CHECK_THROWS_AS(solve_fixed_point<double>(f, inj, z, SolverOptions::relative(1e-3, 10, 1.5)), Error);
  CHECK_THROWS_AS(solve_fixed_point<double>(f, inj, z, SolverOptions::relative(1e-3, 10, std::nan(""))), Error);
  SolverOptions twin = SolverOptions::twin();
  twin.damping = 2.0;
  CHECK_THROWS_AS(solve_fixed_point<double>(f, inj, z, twin), Error);
  CHECK_THROWS_AS(solve_fixed_point<float>(linear_map<float>(0.5), Batch<float>(2, 3), Batch<float>(2, 3), SolverOptions::fixed(0)), Error);
  // the edges of the valid range are accepted
  CHECK_NOTHROW(solve_fixed_point<double>(f, inj, z, SolverOptions::relative(1e-3, 1, 1.0)));
  CHECK_NOTHROW(solve_fixed_point<double>(f, inj, z, SolverOptions::relative(1e-3, 1, 1e-6)));
}

TEST_CASE("solver: inputs and an initial state of different shapes are rejected") {
  CHECK_THROWS_AS(solve_fixed_point<double>(linear_map<double>(0.5), Batch<double>(2, 3), Batch<double>(3, 3), SolverOptions::twin()), Error);
  CHECK_THROWS_AS(solve_fixed_point<double>(linear_map<double>(0.5), Batch<double>(2, 4), Batch<double>(2, 3), SolverOptions::twin()), Error);
}

TEST_CASE("solver: the relative rule on the whole batch returns what the compacted batch returns") {
  std::mt19937_64 rng(11);
  const Batch<double> inj = Batch<double>::from(uniform(5, 7, -1, 1, rng));
  const Batch<double> z0(5, 7);
  SolverOptions o = SolverOptions::relative(1e-6, 200, 0.7);
  const SolveResult packed = solve_fixed_point<double>(linear_map<double>(0.5), inj, z0, o);
  o.compact = false;
  int widest = 0;
  const StepFn<double> whole = [&](const Batch<double>& z, const Batch<double>& in, const Batch<double>* p, Batch<double>& out,
                                   const StepContext& c) {
    widest = std::max(widest, z.rows);
    CHECK(z.rows == 5);  // never compacted
    linear_map<double>(0.5)(z, in, p, out, c);
  };
  const SolveResult full = solve_fixed_point<double>(whole, inj, z0, o);
  CHECK(widest == 5);
  CHECK(same_bits(full.z, packed.z));
  CHECK(full.iterations == packed.iterations);
  CHECK(full.converged == packed.converged);
}

TEST_CASE("solver: the released rule stops on one residual over the batch and returns f(z) of a final call") {
  // f(z) = 0.5 z + inj, undamped from 0: z_k = inj (2 - 2^(1-k)); the batch residual tested at step k
  // is ||z_k - z_(k-1)|| / (||z_(k-1)|| + 1e-6) = 2^(1-k) / (2 - 2^(2-k)): 0.016 at step 6, 0.0079 at
  // step 7, the first below 0.01. The final call returns f(z_7) = z_8.
  std::mt19937_64 rng(12);
  const Batch<double> inj = Batch<double>::from(uniform(3, 4, 0.5, 1, rng));
  SolverOptions o;
  o.rule = StopRule::Released, o.max_iter = 50, o.tol = 0.01, o.damping = 1.0;
  int finals = 0, last = -1;
  const StepFn<double> f = [&](const Batch<double>& z, const Batch<double>& in, const Batch<double>* p, Batch<double>& out,
                               const StepContext& c) {
    finals += c.final;
    last = c.iteration;
    linear_map<double>(0.5)(z, in, p, out, c);
  };
  const SolveResult r = solve_fixed_point<double>(f, inj, Batch<double>(3, 4), o);
  CHECK(finals == 1);
  CHECK(last == 7);  // the final call follows the 7 steps
  CHECK(r.steps == 7);
  CHECK(r.iterations == std::vector<int>{7, 7, 7});
  CHECK(r.converged == std::vector<std::uint8_t>{1, 1, 1});
  for (int j = 0; j < 4; ++j) CHECK(r.z(0, j) == Approx(inj.row(0)[j] * (2 - std::pow(2.0, -7))).epsilon(1e-12));
}

TEST_CASE("solver: a step that returns NaN gives NaN results flagged non-finite under every rule, never uninitialised memory") {
  const StepFn<double> poison = [](const Batch<double>& z, const Batch<double>&, const Batch<double>*, Batch<double>& out, const StepContext&) {
    if (out.rows != z.rows || out.n != z.n) out = Batch<double>(z.rows, z.n);
    for (int r = 0; r < z.rows; ++r)
      for (int j = 0; j < z.n; ++j) out.row(r)[j] = r == 1 ? std::numeric_limits<double>::quiet_NaN() : 0.5 * z.row(r)[j] + 1;
  };
  std::vector<SolverOptions> rules{SolverOptions::twin(), SolverOptions::relative(1e-9, 30, 0.8), SolverOptions::fixed(5)};
  rules.push_back(SolverOptions::fixed(30, 1e-9));
  rules.back().rule = StopRule::Released;
  for (const SolverOptions& o : rules) {
    INFO("rule " << static_cast<int>(o.rule));
    const SolveResult r = solve_fixed_point<double>(poison, Batch<double>(3, 4), Batch<double>(3, 4), o);
    CHECK(r.finite[0] == 1);
    CHECK(r.finite[1] == 0);
    CHECK(r.converged[1] == 0);
    CHECK(r.z.row(1).array().isNaN().all());
    CHECK(std::isnan(r.max_residual.back()));
    CHECK(non_finite_samples(r) == 1);
  }
  CHECK(non_finite_text(solve_fixed_point<double>(poison, Batch<double>(3, 4), Batch<double>(3, 4), SolverOptions::twin())) ==
        "1 of 3 samples diverged to NaN or inf (sample 1 first)");
}
