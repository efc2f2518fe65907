#include "sim/solver.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "sim/error.hpp"

namespace aoc {

namespace {

// The residuals' sums square and add in two roundings on every machine: contracted into FMAs they
// would round once where GCC's tuning for the CPU chose to (it keeps reduction chains unfused on
// AMD's cores, fuses them on Intel's), and a residual decides where a solve stops.
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")
template <class T>
double l2_diff(const T* a, const T* b, int n) {
  double s = 0;
  for (int j = 0; j < n; ++j) {
    const double d = static_cast<double>(a[j]) - static_cast<double>(b[j]);
    s += d * d;
  }
  return std::sqrt(s);
}

// l2_diff of rows [0, B) of two batches into d: each row's sum in l2_diff's order (the same bits),
// four rows' sums interleaved, since one row's is a chain of dependent adds that leaves the FPU idle.
template <class T>
void l2_diff_rows(const Batch<T>& a, const Batch<T>& b, int B, int n, double* d) {
  int r = 0;
  for (; r + 4 <= B; r += 4) {
    const T *a0 = a.row(r), *a1 = a.row(r + 1), *a2 = a.row(r + 2), *a3 = a.row(r + 3);
    const T *b0 = b.row(r), *b1 = b.row(r + 1), *b2 = b.row(r + 2), *b3 = b.row(r + 3);
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (int j = 0; j < n; ++j) {
      const double d0 = static_cast<double>(a0[j]) - static_cast<double>(b0[j]);
      const double d1 = static_cast<double>(a1[j]) - static_cast<double>(b1[j]);
      const double d2 = static_cast<double>(a2[j]) - static_cast<double>(b2[j]);
      const double d3 = static_cast<double>(a3[j]) - static_cast<double>(b3[j]);
      s0 += d0 * d0, s1 += d1 * d1, s2 += d2 * d2, s3 += d3 * d3;
    }
    d[r] = std::sqrt(s0), d[r + 1] = std::sqrt(s1), d[r + 2] = std::sqrt(s2), d[r + 3] = std::sqrt(s3);
  }
  for (; r < B; ++r) d[r] = l2_diff(a.row(r), b.row(r), n);
}
#pragma GCC pop_options

template <class T>
double l2(const T* a, int n) {
  double s = 0;
  for (int j = 0; j < n; ++j) s += static_cast<double>(a[j]) * static_cast<double>(a[j]);
  return std::sqrt(s);
}

// The larger, NaN winning: a diverged sample shows in the per-step maximum instead of vanishing.
double worse(double worst, double d) {
  if (std::isnan(worst)) return worst;
  return std::isnan(d) || d > worst ? d : worst;
}

template <class T>
void copy_row(const Batch<T>& from, int rf, Batch<T>& to, int rt) {
  std::copy(from.row(rf), from.row(rf) + from.ld, to.row(rt));
}

template <class T>
void write_row(const T* src, int n, RowMatrix<double>& dst, int r) {
  for (int j = 0; j < n; ++j) dst(r, j) = static_cast<double>(src[j]);
}

void trace_step(SolveResult& res, bool trace, int B, int N) {
  res.max_residual.push_back(0.0);
  if (trace) {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    res.residual_trace.conservativeResize(res.steps, B);
    res.residual_trace.row(res.steps - 1).setConstant(nan);
    res.state_trace.conservativeResize(static_cast<Eigen::Index>(res.steps) * B, N);
    res.state_trace.bottomRows(B).setConstant(nan);
  }
}

// SolverOptions::floor_patience for one residual series (a sample's, or the released rule's batch):
// whether it has stopped falling, and the sum of the iterates since it last fell under kFloorGain of
// its lowest (their mean is the result at the floor).
struct FloorWatch {
  double lowest = std::numeric_limits<double>::infinity();
  int since = 0;
  // d: this step's residual; add(sum) adds this step's iterate(s) to the n values of sum. True once
  // the residual has not fallen for `patience` steps.
  template <class Add>
  bool observe(double d, int patience, double* sum, std::size_t n, Add add) {
    if (d < SolverOptions::kFloorGain * lowest) {
      lowest = d, since = 0;
      std::fill(sum, sum + n, 0.0);
      return false;
    }
    add(sum);
    return ++since >= patience;
  }
};

template <class T>
void add_row(double* sum, const T* row, int n) {
  for (int j = 0; j < n; ++j) sum[j] += static_cast<double>(row[j]);
}

// Twin rule and fixed count: every sample steps together. With floor_patience (twin rule, a noisy
// machine) a sample whose residual has stopped falling is at its floor: its result is the mean of
// those iterates, and the batch stops once every sample has met the tolerance or reached its floor.
template <class T>
void solve_together(const StepFn<T>& f, const Batch<T>& inj, const Batch<T>& z0, const SolverOptions& opt,
                    SolveResult& res) {
  const int B = z0.rows, N = z0.n;
  const bool twin = opt.rule == StopRule::Twin;
  Batch<T> z = z0, fz(B, N), prev(B, N);
  std::vector<double> best(B, std::numeric_limits<double>::infinity());
  const bool watch_floor = twin && opt.floor_patience > 0;
  std::vector<FloorWatch> watch(watch_floor ? static_cast<std::size_t>(B) : 0);
  std::vector<double> window(watch_floor ? static_cast<std::size_t>(B) * N : 0, 0.0);
  std::vector<double> residuals(static_cast<std::size_t>(B));
  for (int k = 0; k < opt.max_iter; ++k) {
    f(z, inj, k == 0 ? nullptr : &prev, fz, StepContext{k, nullptr, false, opt.first_sample});
    ++res.steps;
    trace_step(res, opt.trace, B, N);
    double worst = 0;
    l2_diff_rows(fz, z, B, N, residuals.data());
    for (int r = 0; r < B; ++r) {
      const double d = residuals[static_cast<std::size_t>(r)];
      worst = worse(worst, d);
      if (!res.settled[r] && d < opt.tol) res.settled[r] = k + 1;
      if (opt.trace) {
        res.residual_trace(k, r) = d;
        write_row(fz.row(r), N, res.state_trace, k * B + r);
      }
      if (res.at_floor[r]) continue;  // its result is kept
      if (!twin) {  // the fixed count: the last step's, its state written once after the loop
        best[r] = d;
        res.iterations[r] = k + 1;
        continue;
      }
      // twin: the lowest residual seen; a NaN one is kept only until a comparable one comes
      if (res.iterations[r] == 0 || std::isnan(best[r]) || d < best[r]) {
        best[r] = d;
        res.iterations[r] = k + 1;
        write_row(fz.row(r), N, res.z, r);
      }
      if (watch_floor && !(best[r] < opt.tol)) {
        double* sum = window.data() + static_cast<std::size_t>(r) * N;
        const T* row = fz.row(r);
        if (watch[r].observe(d, opt.floor_patience, sum, static_cast<std::size_t>(N), [&](double* s) { add_row(s, row, N); })) {
          res.at_floor[r] = 1;
          res.iterations[r] = k + 1;
          for (int j = 0; j < N; ++j) res.z(r, j) = sum[j] / watch[r].since;
        }
      }
    }
    res.max_residual.back() = worst;
    std::swap(prev, z);
    std::swap(z, fz);
    if (twin && worst < opt.tol) break;
    if (watch_floor) {
      bool all = true;
      for (int r = 0; r < B && all; ++r) all = res.at_floor[r] || best[r] < opt.tol;
      if (all) break;
    }
  }
  if (!twin && res.steps > 0)  // z holds the last step's iterates
    for (int r = 0; r < B; ++r) write_row(z.row(r), N, res.z, r);
  for (int r = 0; r < B; ++r) {
    res.residual[r] = best[r];
    res.converged[r] = best[r] < opt.tol;
  }
}

// Per-sample relative rule: converged samples leave the active set, which is kept compact; without
// opt.compact every step sees the whole batch and a converged sample's row is held.
template <class T>
void solve_per_sample(const StepFn<T>& f, const Batch<T>& inj, const Batch<T>& z0, const SolverOptions& opt,
                      SolveResult& res) {
  const int B = z0.rows, N = z0.n;
  std::vector<int> idx(B);
  for (int r = 0; r < B; ++r) idx[r] = r;
  Batch<T> z = z0, in = inj, prev(B, N), fz(B, N);
  const T tau = static_cast<T>(opt.damping);
  std::vector<std::uint8_t> held(static_cast<std::size_t>(B), 0);  // converged, row kept (compact = false)
  std::vector<FloorWatch> watch(opt.floor_patience > 0 ? static_cast<std::size_t>(B) : 0);  // per sample, with its window
  std::vector<double> window(opt.floor_patience > 0 ? static_cast<std::size_t>(B) * N : 0, 0.0);
  int n_active = B;
  for (int k = 0; k < opt.max_iter && n_active > 0; ++k) {
    const int A = static_cast<int>(idx.size());
    f(z, in, k == 0 ? nullptr : &prev, fz, StepContext{k, idx.data(), false, opt.first_sample});
    ++res.steps;
    trace_step(res, opt.trace, B, N);
    std::vector<int> keep;
    keep.reserve(A);
    double worst = 0;
    for (int a = 0; a < A; ++a) {
      const int r = idx[a];
      if (held[r]) {
        copy_row(z, a, fz, a);
        keep.push_back(a);
        continue;
      }
      const double d = l2_diff(fz.row(a), z.row(a), N);
      const double rel = d / (l2(fz.row(a), N) + 1e-9);
      worst = worse(worst, d);
      if (opt.trace) {
        res.residual_trace(k, r) = d;
        write_row(fz.row(a), N, res.state_trace, k * B + r);
      }
      // damped update, written into fz so that fz holds the next iterate
      T* nz = fz.row(a);
      const T* oz = z.row(a);
      if (tau != T(1))
        for (int j = 0; j < N; ++j) nz[j] = (T(1) - tau) * oz[j] + tau * nz[j];
      res.iterations[r] = k + 1;
      res.residual[r] = d;
      bool floor = false;
      double* sum = window.empty() ? nullptr : window.data() + static_cast<std::size_t>(r) * N;
      if (sum) floor = watch[r].observe(d, opt.floor_patience, sum, static_cast<std::size_t>(N), [&](double* s) { add_row(s, nz, N); });
      if (rel < opt.tol) {
        res.converged[r] = 1, res.settled[r] = k + 1;
        write_row(nz, N, res.z, r);
      } else if (floor) {
        res.at_floor[r] = 1;
        for (int j = 0; j < N; ++j) res.z(r, j) = sum[j] / watch[r].since;
      }
      if (rel < opt.tol || floor) {
        --n_active;
        if (!opt.compact) held[r] = 1, keep.push_back(a);
      } else {
        keep.push_back(a);
      }
    }
    res.max_residual.back() = worst;
    if (static_cast<int>(keep.size()) != A) {  // compact the active set, in order
      Batch<T> z2(static_cast<int>(keep.size()), N), p2(z2.rows, N), in2(z2.rows, N), f2(z2.rows, N);
      std::vector<int> idx2;
      for (int a2 = 0; a2 < static_cast<int>(keep.size()); ++a2) {
        const int a = keep[a2];
        copy_row(fz, a, f2, a2);
        copy_row(z, a, p2, a2);
        copy_row(in, a, in2, a2);
        idx2.push_back(idx[a]);
      }
      fz = std::move(f2);
      z = std::move(p2);
      in = std::move(in2);
      idx = std::move(idx2);
      prev = Batch<T>(z.rows, N);
    }
    std::swap(prev, z);
    std::swap(z, fz);
  }
  for (int a = 0; a < static_cast<int>(idx.size()); ++a)
    if (!held[idx[a]]) write_row(z.row(a), N, res.z, idx[a]);
}

// The released models' loop: one residual over the whole batch, then the final call.
template <class T>
void solve_released(const StepFn<T>& f, const Batch<T>& inj, const Batch<T>& z0, const SolverOptions& opt, SolveResult& res) {
  const int B = z0.rows, N = z0.n;
  Batch<T> z = z0, prev(B, N), fz(B, N);
  const T tau = static_cast<T>(opt.damping);
  bool met = false, floor = false;
  // floor_patience: the batch's relative residual watched as one series, its window the whole iterate
  FloorWatch watch;
  std::vector<double> window(opt.floor_patience > 0 ? static_cast<std::size_t>(B) * N : 0, 0.0);
  int k = 0;
  for (; k < opt.max_iter && !met && !floor; ++k) {
    f(z, inj, k == 0 ? nullptr : &prev, fz, StepContext{k, nullptr, false, opt.first_sample});
    ++res.steps;
    trace_step(res, opt.trace, B, N);
    double dd = 0, zz = 0, worst = 0;
    for (int r = 0; r < B; ++r) {  // in row-major order over the whole iterate, as one sum
      const T* fr = fz.row(r);
      const T* zr = z.row(r);
      double rr = 0;
      for (int j = 0; j < N; ++j) {
        const double d = static_cast<double>(fr[j]) - static_cast<double>(zr[j]);
        dd += d * d, rr += d * d;
        zz += static_cast<double>(zr[j]) * static_cast<double>(zr[j]);
      }
      res.residual[r] = std::sqrt(rr);
      worst = worse(worst, res.residual[r]);
      if (opt.trace) {
        res.residual_trace(k, r) = res.residual[r];
        write_row(fr, N, res.state_trace, k * B + r);
      }
    }
    res.max_residual.back() = worst;
    const double rel = std::sqrt(dd) / (1e-6 + std::sqrt(zz));
    met = rel < opt.tol;
    prev = z;
    for (int r = 0; r < B; ++r) {
      T* zr = z.row(r);
      const T* fr = fz.row(r);
      for (int j = 0; j < N; ++j) zr[j] = (T(1) - tau) * zr[j] + tau * fr[j];
    }
    if (!window.empty() && !met)
      floor = watch.observe(rel, opt.floor_patience, window.data(), window.size(), [&](double* s) {
        for (int r = 0; r < B; ++r) add_row(s + static_cast<std::size_t>(r) * N, z.row(r), N);
      });
  }
  if (floor)  // the final call at the mean of the iterates at the floor
    for (int r = 0; r < B; ++r)
      for (int j = 0; j < N; ++j) z.row(r)[j] = static_cast<T>(window[static_cast<std::size_t>(r) * N + j] / watch.since);
  f(z, inj, k == 0 ? nullptr : &prev, fz, StepContext{k, nullptr, true, opt.first_sample});
  for (int r = 0; r < B; ++r) {
    write_row(fz.row(r), N, res.z, r);
    res.iterations[r] = k;
    res.converged[r] = met;
    res.at_floor[r] = floor;
    if (met) res.settled[r] = k;
  }
}

}  // namespace

template <class T>
SolveResult solve_fixed_point(const StepFn<T>& f, const Batch<T>& inj, const Batch<T>& z0, const SolverOptions& opt) {
  if (opt.max_iter < 1) throw Error("solver: max_iter must be at least 1");
  if (!(opt.damping > 0 && opt.damping <= 1)) throw Error("solver: damping must be in (0, 1]");
  if (inj.rows != z0.rows || inj.n != z0.n) throw Error("solver: inputs and initial state differ in shape");
  SolveResult res;
  const int B = z0.rows;
  res.z.resize(B, z0.n);
  res.iterations.assign(B, 0);
  res.converged.assign(B, 0);
  res.settled.assign(B, 0);
  res.at_floor.assign(B, 0);
  res.residual.assign(B, std::numeric_limits<double>::infinity());
  res.z.setConstant(std::numeric_limits<double>::quiet_NaN());  // never uninitialised, whatever a step returns
  if (opt.rule == StopRule::Relative) solve_per_sample(f, inj, z0, opt, res);
  else if (opt.rule == StopRule::Released) solve_released(f, inj, z0, opt, res);
  else solve_together(f, inj, z0, opt, res);
  res.finite.assign(B, 1);
  for (int r = 0; r < B; ++r) {
    res.finite[r] = res.z.row(r).allFinite() && !std::isnan(res.residual[r]) && res.residual[r] != std::numeric_limits<double>::infinity();
    if (!res.finite[r]) res.converged[r] = 0;
  }
  return res;
}

int non_finite_samples(const SolveResult& r) { return static_cast<int>(std::count(r.finite.begin(), r.finite.end(), 0)); }

std::string non_finite_text(const SolveResult& r) {
  const int n = non_finite_samples(r);
  if (n == 0) return {};
  const auto first = std::find(r.finite.begin(), r.finite.end(), 0) - r.finite.begin();
  return std::to_string(n) + " of " + std::to_string(r.finite.size()) + " samples diverged to NaN or inf (sample " + std::to_string(first) + " first)";
}

template SolveResult solve_fixed_point<float>(const StepFn<float>&, const Batch<float>&, const Batch<float>&, const SolverOptions&);
template SolveResult solve_fixed_point<double>(const StepFn<double>&, const Batch<double>&, const Batch<double>&, const SolverOptions&);

}  // namespace aoc
