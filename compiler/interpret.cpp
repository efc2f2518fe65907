#include "compiler/interpret.hpp"

#include <algorithm>
#include <cstdint>
#if defined(__AVX2__)
#include <immintrin.h>
#endif
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>
#include <set>
#include <sstream>

#include "sim/error.hpp"
#include "sim/json_reader.hpp"

namespace aoc::ir {

namespace {

using Dims = std::vector<std::int64_t>;
using Env = std::map<std::string, Tensor>;

std::int64_t numel(const Dims& s) {
  std::int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

[[noreturn]] void fail(const std::string& where, const std::string& msg) { throw Error(where + ": " + msg); }

// c + a b with one rounding where the target has FMA, two everywhere where it has not: one rule for
// every sum of products below, whatever the compiler would contract in a given loop shape (the
// fused selective-scan step relies on computing exactly what Einsum and Scan compute).
inline double fmadd(double a, double b, double c) {
#if defined(__FMA__)
  return std::fma(a, b, c);
#else
  return a * b + c;
#endif
}

// acc[l] = fmadd over n in order of (C[n], h_l[n], acc[l]) for 8 lanes of states h_l = rows + l N (a
// selective-scan readout: one chain per lane, the Einsum's order). With AVX2 and FMA, 4 lanes a
// vector through in-register 4 x 4 transposes of the rows (the chains' values are the same);
// otherwise lane by lane.
void readout8(const double* rows, std::int64_t N, const double* C, double* acc) {
  std::int64_t n = 0;
#if defined(__AVX2__) && defined(__FMA__)
  __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();  // lanes 0..3, 4..7
  auto step4 = [&](const double* r, __m256d a) {  // 4 lanes' rows r, r + N, .. at n .. n + 3
    const __m256d r0 = _mm256_loadu_pd(r + n), r1 = _mm256_loadu_pd(r + N + n), r2 = _mm256_loadu_pd(r + 2 * N + n),
                  r3 = _mm256_loadu_pd(r + 3 * N + n);
    const __m256d t0 = _mm256_unpacklo_pd(r0, r1), t1 = _mm256_unpackhi_pd(r0, r1), t2 = _mm256_unpacklo_pd(r2, r3),
                  t3 = _mm256_unpackhi_pd(r2, r3);
    const __m256d c0 = _mm256_permute2f128_pd(t0, t2, 0x20), c1 = _mm256_permute2f128_pd(t1, t3, 0x20),
                  c2 = _mm256_permute2f128_pd(t0, t2, 0x31), c3 = _mm256_permute2f128_pd(t1, t3, 0x31);
    a = _mm256_fmadd_pd(_mm256_set1_pd(C[n]), c0, a);
    a = _mm256_fmadd_pd(_mm256_set1_pd(C[n + 1]), c1, a);
    a = _mm256_fmadd_pd(_mm256_set1_pd(C[n + 2]), c2, a);
    return _mm256_fmadd_pd(_mm256_set1_pd(C[n + 3]), c3, a);
  };
  for (; n + 4 <= N; n += 4) lo = step4(rows, lo), hi = step4(rows + 4 * N, hi);
  _mm256_storeu_pd(acc, lo), _mm256_storeu_pd(acc + 4, hi);
#else
  std::fill_n(acc, 8, 0.0);
#endif
  for (; n < N; ++n)
    for (int l = 0; l < 8; ++l) acc[l] = fmadd(C[n], rows[l * N + n], acc[l]);
}

Tensor make(Dims shape, double fill = 0.0) {
  Tensor t;
  t.data.assign(static_cast<size_t>(numel(shape)), fill);
  t.shape = std::move(shape);
  return t;
}

// Row-major strides of a shape.
Dims strides_of(const Dims& s) {
  Dims st(s.size(), 1);
  for (int i = static_cast<int>(s.size()) - 2; i >= 0; --i) st[i] = st[i + 1] * s[i + 1];
  return st;
}

// An axis attribute in [-rank, rank) made non-negative.
int norm_axis(std::int64_t axis, size_t rank, const std::string& where) {
  const auto r = static_cast<std::int64_t>(rank);
  if (axis < -r || axis >= r) fail(where, "axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(r));
  return static_cast<int>(axis < 0 ? axis + r : axis);
}

// ---- attributes ----

std::optional<double> attr_num(const Op& op, const std::string& key, const std::string& where) {
  auto it = op.attrs.find(key);
  if (it == op.attrs.end()) return std::nullopt;
  if (auto d = std::get_if<double>(&it->second)) return *d;
  if (auto i = std::get_if<std::int64_t>(&it->second)) return static_cast<double>(*i);
  fail(where, "attribute '" + key + "' must be a number");
}

std::optional<std::int64_t> attr_int(const Op& op, const std::string& key, const std::string& where) {
  auto it = op.attrs.find(key);
  if (it == op.attrs.end()) return std::nullopt;
  if (auto i = std::get_if<std::int64_t>(&it->second)) return *i;
  if (auto d = std::get_if<double>(&it->second))
    if (std::isfinite(*d) && *d == std::floor(*d) && std::abs(*d) < 9.0e15) return static_cast<std::int64_t>(*d);
  fail(where, "attribute '" + key + "' must be an integer");
}

std::optional<std::string> attr_str(const Op& op, const std::string& key, const std::string& where) {
  auto it = op.attrs.find(key);
  if (it == op.attrs.end()) return std::nullopt;
  if (auto s = std::get_if<std::string>(&it->second)) return *s;
  fail(where, "attribute '" + key + "' must be a string");
}

std::optional<Dims> attr_ints(const Op& op, const std::string& key, const std::string& where) {
  auto it = op.attrs.find(key);
  if (it == op.attrs.end()) return std::nullopt;
  if (auto v = std::get_if<std::vector<std::int64_t>>(&it->second)) return *v;
  if (auto i = std::get_if<std::int64_t>(&it->second)) return Dims{*i};
  fail(where, "attribute '" + key + "' must be a list of integers");
}

template <class T>
T required(const std::optional<T>& v, const std::string& key, const std::string& where) {
  if (!v) fail(where, "missing attribute '" + key + "'");
  return *v;
}

// ---- elementwise ----

double sigmoid(double x) {
  if (x >= 0) return 1.0 / (1.0 + std::exp(-x));
  const double e = std::exp(x);
  return e / (1.0 + e);
}
double silu(double x) { return x * sigmoid(x); }
double softplus(double x) { return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)); }

template <class F>
Tensor unary(const Tensor& x, F f) {
  Tensor y = make(x.shape);
  for (size_t i = 0; i < x.data.size(); ++i) y.data[i] = f(x.data[i]);
  return y;
}

// numpy broadcasting: align trailing dims; each pair equal or one of them 1.
template <class F>
Tensor broadcast(const Tensor& a, const Tensor& b, F f, const std::string& where) {
  const size_t r = std::max(a.shape.size(), b.shape.size());
  Dims out(r), sa(r, 0), sb(r, 0);
  const Dims sta = strides_of(a.shape), stb = strides_of(b.shape);
  for (size_t i = 0; i < r; ++i) {
    const std::int64_t ia = static_cast<std::int64_t>(i) - static_cast<std::int64_t>(r - a.shape.size());
    const std::int64_t ib = static_cast<std::int64_t>(i) - static_cast<std::int64_t>(r - b.shape.size());
    const std::int64_t da = ia >= 0 ? a.shape[ia] : 1, db = ib >= 0 ? b.shape[ib] : 1;
    if (da != db && da != 1 && db != 1)
      fail(where, "shapes " + shape_text(a.shape) + " and " + shape_text(b.shape) + " do not broadcast");
    out[i] = da == 1 ? db : da;
    if (ia >= 0 && da != 1) sa[i] = sta[ia];
    if (ib >= 0 && db != 1) sb[i] = stb[ib];
  }
  Tensor y = make(out);
  const std::int64_t n = numel(out);
  if (a.shape == b.shape) {  // element by element
    for (std::int64_t k = 0; k < n; ++k) y.data[k] = f(a.data[k], b.data[k]);
    return y;
  }
  if (r == 0 || n == 0) {  // scalars, or nothing
    if (n) y.data[0] = f(a.data[0], b.data[0]);
    return y;
  }
  // rows of the last axis (each operand's stride along it is 1 or 0), the outer axes row-major
  const std::int64_t inner = out[r - 1], ia = sa[r - 1], ib = sb[r - 1];
  std::vector<std::int64_t> idx(r - 1, 0);
  for (std::int64_t k0 = 0; k0 < n; k0 += inner) {
    std::int64_t oa = 0, ob = 0;
    for (size_t i = 0; i + 1 < r; ++i) oa += idx[i] * sa[i], ob += idx[i] * sb[i];
    double* yk = y.data.data() + k0;
    for (std::int64_t e = 0; e < inner; ++e) yk[e] = f(a.data[oa + e * ia], b.data[ob + e * ib]);
    for (int i = static_cast<int>(r) - 2; i >= 0; --i) {  // the next row
      if (++idx[i] < out[i]) break;
      idx[i] = 0;
    }
  }
  return y;
}

// ---- the ops ----

Tensor linear(const Tensor& x, const Tensor& W, const Tensor* b, int threads, const std::string& where) {
  if (x.shape.empty()) fail(where, "x must have at least one dimension, got a scalar");
  if (W.shape.size() != 2) fail(where, "W must be [out, in], got " + shape_text(W.shape));
  const std::int64_t in = x.shape.back(), out = W.shape[0];
  if (W.shape[1] != in) fail(where, "x " + shape_text(x.shape) + " and W " + shape_text(W.shape) + ": in dims differ");
  if (b && b->shape != Dims{out}) fail(where, "b must be [" + std::to_string(out) + "], got " + shape_text(b->shape));
  Dims ys = x.shape;
  ys.back() = out;
  Tensor y = make(ys);
  const std::int64_t rows = in == 0 ? numel(ys) / std::max<std::int64_t>(out, 1) : numel(x.shape) / in;
#pragma omp parallel for num_threads(threads) if (threads > 1) schedule(static)
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t o = 0; o < out; ++o) {
      double s = 0;
      for (std::int64_t i = 0; i < in; ++i) s += x.data[r * in + i] * W.data[o * in + i];
      y.data[r * out + o] = s + (b ? b->data[o] : 0.0);
    }
  return y;
}

Tensor matmul(const Tensor& a, const Tensor& b, int threads, const std::string& where) {
  if (a.shape.empty()) fail(where, "a must have at least one dimension, got a scalar");
  if (b.shape.size() != 2) fail(where, "b must be [k, n], got " + shape_text(b.shape));
  const std::int64_t k = a.shape.back(), n = b.shape[1];
  if (b.shape[0] != k) fail(where, "a " + shape_text(a.shape) + " and b " + shape_text(b.shape) + ": k dims differ");
  Dims ys = a.shape;
  ys.back() = n;
  Tensor y = make(ys);
  const std::int64_t rows = numel(ys) / std::max<std::int64_t>(n, 1);
#pragma omp parallel for num_threads(threads) if (threads > 1) schedule(static)
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (std::int64_t i = 0; i < k; ++i) s += a.data[r * k + i] * b.data[i * n + j];
      y.data[r * n + j] = s;
    }
  return y;
}

Tensor rmsnorm(const Tensor& x, const Tensor& g, double eps, const std::string& where) {
  if (x.shape.empty()) fail(where, "x must have at least one dimension, got a scalar");
  const std::int64_t D = x.shape.back();
  if (g.shape != Dims{D}) fail(where, "g must be [" + std::to_string(D) + "] (x's last dim), got " + shape_text(g.shape));
  Tensor y = make(x.shape);
  if (D == 0) return y;
  const std::int64_t rows = numel(x.shape) / D;
  for (std::int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (std::int64_t i = 0; i < D; ++i) ss += x.data[r * D + i] * x.data[r * D + i];
    const double scale = 1.0 / std::sqrt(ss / static_cast<double>(D) + eps);
    for (std::int64_t i = 0; i < D; ++i) y.data[r * D + i] = x.data[r * D + i] * scale * g.data[i];
  }
  return y;
}

// Conv1dCausal's operands checked; returns K.
std::int64_t conv1d_taps(const Tensor& x, const Tensor& w, const Tensor* b, const std::string& where) {
  if (x.shape.size() != 3) fail(where, "x must be [B, L, C], got " + shape_text(x.shape));
  const std::int64_t C = x.shape[2];
  if (w.shape.size() != 2 || w.shape[0] != C)
    fail(where, "w must be [" + std::to_string(C) + ", K] (C from x " + shape_text(x.shape) + "), got " + shape_text(w.shape));
  if (b && b->shape != Dims{C}) fail(where, "b must be [" + std::to_string(C) + "], got " + shape_text(b->shape));
  return w.shape[1];
}

Tensor conv1d_causal(const Tensor& x, const Tensor& w, const Tensor* b, const std::string& where) {
  const std::int64_t K = conv1d_taps(x, w, b, where);
  const std::int64_t B = x.shape[0], L = x.shape[1], C = x.shape[2];
  Tensor y = make(x.shape);
  for (std::int64_t bi = 0; bi < B; ++bi)
    for (std::int64_t t = 0; t < L; ++t)
      for (std::int64_t c = 0; c < C; ++c) {
        double s = 0;
        for (std::int64_t k = 0; k < K; ++k) {
          const std::int64_t src = t - K + 1 + k;
          if (src >= 0) s = fmadd(w.data[c * K + k], x.data[(bi * L + src) * C + c], s);
        }
        y.data[(bi * L + t) * C + c] = s + (b ? b->data[c] : 0.0);
      }
  return y;
}

Tensor embedding(const Tensor& ids, const Tensor& table, const std::string& where) {
  if (table.shape.size() != 2) fail(where, "table must be [V, D], got " + shape_text(table.shape));
  const std::int64_t V = table.shape[0], D = table.shape[1];
  Dims ys = ids.shape;
  ys.push_back(D);
  Tensor y = make(ys);
  for (size_t i = 0; i < ids.data.size(); ++i) {
    const double v = ids.data[i];
    if (!std::isfinite(v) || v != std::floor(v))
      fail(where, "id " + jsonr::num(v) + " at position " + std::to_string(i) + " is not an integer");
    if (v < 0 || v >= static_cast<double>(V))
      fail(where, "id " + jsonr::num(v) + " at position " + std::to_string(i) + " is outside [0, " + std::to_string(V) + ")");
    const auto id = static_cast<std::int64_t>(v);
    std::copy(table.data.begin() + id * D, table.data.begin() + (id + 1) * D, y.data.begin() + static_cast<std::int64_t>(i) * D);
  }
  return y;
}

std::vector<Tensor> split(const Tensor& x, const Dims& sizes, std::int64_t axis_attr, size_t n_out, const std::string& where) {
  if (x.shape.empty()) fail(where, "x must have at least one dimension, got a scalar");
  const int ax = norm_axis(axis_attr, x.shape.size(), where);
  if (sizes.size() != n_out)
    fail(where, std::to_string(sizes.size()) + " sizes but " + std::to_string(n_out) + " results");
  std::int64_t total = 0;
  for (auto s : sizes) {
    if (s < 0) fail(where, "negative size " + std::to_string(s));
    total += s;
  }
  if (total != x.shape[ax])
    fail(where, "sizes sum to " + std::to_string(total) + " but axis " + std::to_string(ax) + " of " + shape_text(x.shape) + " is " +
                    std::to_string(x.shape[ax]));
  std::int64_t outer = 1, inner = 1;
  for (int i = 0; i < ax; ++i) outer *= x.shape[i];
  for (size_t i = ax + 1; i < x.shape.size(); ++i) inner *= x.shape[i];
  std::vector<Tensor> ys;
  std::int64_t start = 0;
  for (auto s : sizes) {
    Dims sh = x.shape;
    sh[ax] = s;
    Tensor y = make(sh);
    for (std::int64_t o = 0; o < outer; ++o)
      for (std::int64_t j = 0; j < s * inner; ++j) y.data[o * s * inner + j] = x.data[(o * x.shape[ax] + start) * inner + j];
    start += s;
    ys.push_back(std::move(y));
  }
  return ys;
}

Tensor concat(const std::vector<const Tensor*>& xs, std::int64_t axis_attr, const std::string& where) {
  const Dims& s0 = xs[0]->shape;
  if (s0.empty()) fail(where, "operands must have at least one dimension, got a scalar");
  const int ax = norm_axis(axis_attr, s0.size(), where);
  Dims out = s0;
  out[ax] = 0;
  for (const Tensor* x : xs) {
    bool ok = x->shape.size() == s0.size();
    for (size_t i = 0; ok && i < s0.size(); ++i) ok = static_cast<int>(i) == ax || x->shape[i] == s0[i];
    if (!ok) fail(where, "operands " + shape_text(s0) + " and " + shape_text(x->shape) + " differ outside axis " + std::to_string(ax));
    out[ax] += x->shape[ax];
  }
  std::int64_t outer = 1, inner = 1;
  for (int i = 0; i < ax; ++i) outer *= s0[i];
  for (size_t i = ax + 1; i < s0.size(); ++i) inner *= s0[i];
  Tensor y = make(out);
  std::int64_t start = 0;
  for (const Tensor* x : xs) {
    const std::int64_t s = x->shape[ax];
    for (std::int64_t o = 0; o < outer; ++o)
      for (std::int64_t j = 0; j < s * inner; ++j) y.data[(o * out[ax] + start) * inner + j] = x->data[o * s * inner + j];
    start += s;
  }
  return y;
}

Tensor reshape(const Tensor& x, const Dims& target, const std::string& where) {
  Dims out(target.size());
  int infer = -1;
  std::int64_t known = 1;
  for (size_t i = 0; i < target.size(); ++i) {
    const std::int64_t t = target[i];
    if (t == -1) {
      if (infer >= 0) fail(where, "shape " + shape_text(target) + " has more than one -1");
      infer = static_cast<int>(i);
      continue;
    }
    if (t < -1) fail(where, "shape " + shape_text(target) + " has a negative size other than -1");
    if (t == 0) {
      if (i >= x.shape.size()) fail(where, "shape " + shape_text(target) + ": 0 at position " + std::to_string(i) + " but x " + shape_text(x.shape) + " has no such dim");
      out[i] = x.shape[i];
    } else {
      out[i] = t;
    }
    known *= out[i];
  }
  const std::int64_t n = numel(x.shape);
  if (infer >= 0) {
    if (known == 0 || n % known != 0) fail(where, "cannot reshape " + shape_text(x.shape) + " to " + shape_text(target));
    out[infer] = n / known;
  }
  if (numel(out) != n) fail(where, "cannot reshape " + shape_text(x.shape) + " (" + std::to_string(n) + " elements) to " + shape_text(out));
  Tensor y = x;
  y.shape = out;
  return y;
}

// einsum's inner loop: the terms of a run of n elements, each the product 1 x a x b ... (left to
// right) of every operand's element at off + e st, handed to f(e, q, last) in order as the product
// of all but the last operand's element, and that element (so that a sum adds each term with one
// fmadd); with the operand count known to the compiler for the common counts.
template <int N, class F>
void terms_of(const double* const* d, const std::int64_t* off, const std::int64_t* st, std::size_t n_ops, std::int64_t n, F&& f) {
  const std::size_t ops = N ? N : n_ops;
  for (std::int64_t e = 0; e < n; ++e) {
    double q = 1;
    for (std::size_t o = 0; o + 1 < ops; ++o) q *= d[o][off[o] + e * st[o]];
    f(e, q, d[ops - 1][off[ops - 1] + e * st[ops - 1]]);
  }
}

template <class F>
void einsum_terms(const double* const* d, const std::int64_t* off, const std::int64_t* st, std::size_t n_ops, std::int64_t n, F&& f) {
  switch (n_ops) {
    case 1: return terms_of<1>(d, off, st, n_ops, n, f);
    case 2: return terms_of<2>(d, off, st, n_ops, n, f);
    case 3: return terms_of<3>(d, off, st, n_ops, n, f);
    default: return terms_of<0>(d, off, st, n_ops, n, f);
  }
}

Tensor einsum(const std::string& spec_attr, const std::vector<const Tensor*>& xs, int threads, const std::string& where) {
  std::string spec;
  for (char c : spec_attr)
    if (c != ' ') spec += c;
  const auto arrow = spec.find("->");
  const std::string lhs = spec.substr(0, arrow);
  std::vector<std::string> ops;
  {
    std::string cur;
    for (char c : lhs) {
      if (c == ',') ops.push_back(cur), cur.clear();
      else cur += c;
    }
    ops.push_back(cur);
  }
  if (ops.size() != xs.size())
    fail(where, "spec '" + spec_attr + "' has " + std::to_string(ops.size()) + " operands, the op " + std::to_string(xs.size()));
  std::map<char, std::int64_t> size;
  std::map<char, int> count;
  for (size_t o = 0; o < ops.size(); ++o) {
    if (ops[o].size() != xs[o]->shape.size())
      fail(where, "spec '" + spec_attr + "': operand " + std::to_string(o) + " '" + ops[o] + "' does not match its shape " + shape_text(xs[o]->shape));
    for (size_t i = 0; i < ops[o].size(); ++i) {
      const char c = ops[o][i];
      if (c < 'a' || c > 'z') fail(where, "spec '" + spec_attr + "': '" + std::string(1, c) + "' is not a lowercase letter");
      const std::int64_t d = xs[o]->shape[i];
      auto [it, fresh] = size.emplace(c, d);
      if (!fresh && it->second != d)
        fail(where, "spec '" + spec_attr + "': '" + std::string(1, c) + "' is " + std::to_string(it->second) + " and " + std::to_string(d));
      ++count[c];
    }
  }
  std::string out;
  if (arrow == std::string::npos) {  // implicit form: the letters that occur once, in order
    for (auto [c, k] : count)
      if (k == 1) out += c;
  } else {
    out = spec.substr(arrow + 2);
    std::set<char> seen;
    for (char c : out) {
      if (!size.count(c)) fail(where, "spec '" + spec_attr + "': output letter '" + std::string(1, c) + "' is in no operand");
      if (!seen.insert(c).second) fail(where, "spec '" + spec_attr + "': output letter '" + std::string(1, c) + "' repeats");
    }
  }
  std::string summed;
  for (auto [c, d] : size)
    if (out.find(c) == std::string::npos) summed += c;
  // Per operand, the stride each letter contributes (a repeated letter contributes twice: a diagonal).
  std::vector<std::map<char, std::int64_t>> st(xs.size());
  for (size_t o = 0; o < xs.size(); ++o) {
    const Dims s = strides_of(xs[o]->shape);
    for (size_t i = 0; i < ops[o].size(); ++i) st[o][ops[o][i]] += s[i];
  }
  auto table = [&](const std::string& letters) {  // strides[o][position in letters]
    std::vector<Dims> t(xs.size(), Dims(letters.size(), 0));
    for (size_t o = 0; o < xs.size(); ++o)
      for (size_t i = 0; i < letters.size(); ++i) {
        auto it = st[o].find(letters[i]);
        if (it != st[o].end()) t[o][i] = it->second;
      }
    return t;
  };
  const std::vector<Dims> ost = table(out), sst = table(summed);
  Dims out_shape, sum_shape;
  for (char c : out) out_shape.push_back(size[c]);
  for (char c : summed) sum_shape.push_back(size[c]);
  const std::int64_t n_out = numel(out_shape), n_sum = numel(sum_shape);
  Tensor y = make(out_shape);
  const size_t n_ops = xs.size();
  // The output in rows of its last letter, rows split into contiguous parts for the threads; the
  // summed letters as an odometer whose last letter runs innermost. Per output element the sum goes
  // in the order of the summed index, row-major, as the definition reads, whatever the split.
  const int no = static_cast<int>(out.size()), ns = static_cast<int>(summed.size());
  const std::int64_t row_len = no ? out_shape[no - 1] : 1, rows = row_len ? n_out / row_len : 0;
  const std::int64_t inner = ns ? sum_shape[ns - 1] : 1;
  std::vector<const double*> data(n_ops);
  std::vector<std::int64_t> inner_stride(n_ops, 0), row_stride(n_ops, 0);
  for (size_t o = 0; o < n_ops; ++o) {
    data[o] = xs[o]->data.data();
    inner_stride[o] = ns ? sst[o][ns - 1] : 0;
    row_stride[o] = no ? ost[o][no - 1] : 0;
  }
  const std::int64_t parts = std::min<std::int64_t>(std::max(threads, 1), std::max<std::int64_t>(rows, 1));
#pragma omp parallel for num_threads(threads) if (threads > 1) schedule(static)
  for (std::int64_t part = 0; part < parts; ++part) {
    const std::int64_t q0 = rows * part / parts, q1 = rows * (part + 1) / parts;
    std::vector<std::int64_t> base(n_ops, 0), at(n_ops), off(n_ops), oidx(static_cast<size_t>(std::max(no - 1, 0)), 0),
        idx(static_cast<size_t>(std::max(ns, 1)), 0);
    std::int64_t rem = q0;
    for (int i = no - 2; i >= 0; --i) {
      oidx[i] = rem % out_shape[i];
      rem /= out_shape[i];
      for (size_t o = 0; o < n_ops; ++o) base[o] += oidx[i] * ost[o][i];
    }
    for (std::int64_t q = q0; q < q1; ++q) {
      double* yq = y.data.data() + q * row_len;
      if (ns == 0) {  // no sum: a product of one element per operand
        // a sum of one term, as the definition reads (so -0 becomes 0)
        einsum_terms(data.data(), base.data(), row_stride.data(), n_ops, row_len,
                     [&](std::int64_t e, double q, double last) { yq[e] = 0.0 + q * last; });
      } else {
        for (std::int64_t e = 0; e < row_len; ++e) {
          for (size_t o = 0; o < n_ops; ++o) at[o] = base[o] + e * row_stride[o];
          off = at;
          double acc = 0;
          for (std::int64_t s = 0; s < n_sum; s += inner) {
            einsum_terms(data.data(), off.data(), inner_stride.data(), n_ops, inner,
                         [&](std::int64_t, double q, double last) { acc = fmadd(q, last, acc); });
            for (int i = ns - 2; i >= 0; --i) {  // advance the outer summed letters
              for (size_t o = 0; o < n_ops; ++o) off[o] += sst[o][i];
              if (++idx[i] < sum_shape[i]) break;
              for (size_t o = 0; o < n_ops; ++o) off[o] -= sst[o][i] * sum_shape[i];
              idx[i] = 0;
            }
          }
          yq[e] = acc;
        }
      }
      for (int i = no - 2; i >= 0; --i) {  // the next row
        for (size_t o = 0; o < n_ops; ++o) base[o] += ost[o][i];
        if (++oidx[i] < out_shape[i]) break;
        for (size_t o = 0; o < n_ops; ++o) base[o] -= ost[o][i] * out_shape[i];
        oidx[i] = 0;
      }
    }
  }
  return y;
}

// The checks CausalAttention's q, k, v pass in both modes; returns the head dim d.
std::int64_t attention_head_dim(const Tensor& q, const Tensor& k, const Tensor& v, std::int64_t heads, std::optional<double> theta,
                                const std::string& where) {
  if (q.shape.size() != 3) fail(where, "q " + shape_text(q.shape) + " must have rank 3");
  if (k.shape != q.shape || v.shape != q.shape)
    fail(where, "q " + shape_text(q.shape) + ", k " + shape_text(k.shape) + ", v " + shape_text(v.shape) + " must have one shape");
  if (theta && !(*theta > 0)) fail(where, "rope_theta " + jsonr::num(*theta) + " must be > 0");
  const std::int64_t D = q.shape[2];
  if (heads < 1 || D % heads != 0) fail(where, "heads " + std::to_string(heads) + " does not divide D " + std::to_string(D));
  const std::int64_t d = D / heads;
  if (theta && d % 2 != 0) fail(where, "RoPE needs an even head dim, got " + std::to_string(d));
  return d;
}

// Rotate-half RoPE in place on x [B, L, D] (heads of d channels); row t along axis 1 is position
// pos0 + t.
void rope(Tensor& x, std::int64_t heads, double theta, std::int64_t pos0) {
  const std::int64_t B = x.shape[0], L = x.shape[1], D = x.shape[2], d = D / heads, half = d / 2;
  for (std::int64_t t = 0; t < L; ++t)
    for (std::int64_t i = 0; i < half; ++i) {
      const double ang = static_cast<double>(pos0 + t) * std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(d));
      const double c = std::cos(ang), sn = std::sin(ang);
      for (std::int64_t b = 0; b < B; ++b)
        for (std::int64_t h = 0; h < heads; ++h) {
          const std::int64_t base = (b * L + t) * D + h * d;
          const double x1 = x.data[base + i], x2 = x.data[base + half + i];
          x.data[base + i] = x1 * c - x2 * sn;
          x.data[base + half + i] = x2 * c + x1 * sn;
        }
    }
}

// Causal softmax attention of the (rotated) queries qr [B, Lq, D] over the keys kr and values v
// [B, Lk, D] of positions 0 .. Lk-1: query row t is position pos0 + t and reads keys 0 .. pos0 + t.
Tensor attend(const Tensor& qr, const Tensor& kr, const Tensor& v, std::int64_t heads, std::int64_t pos0) {
  const std::int64_t B = qr.shape[0], Lq = qr.shape[1], Lk = kr.shape[1], D = qr.shape[2], d = D / heads;
  Tensor y = make(qr.shape);
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  std::vector<double> s(static_cast<size_t>(Lk));
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < heads; ++h)
      for (std::int64_t t = 0; t < Lq; ++t) {
        const std::int64_t qb = (b * Lq + t) * D + h * d, last = pos0 + t;
        double mx = -std::numeric_limits<double>::infinity();
        for (std::int64_t j = 0; j <= last; ++j) {
          const std::int64_t kb = (b * Lk + j) * D + h * d;
          double acc = 0;
          for (std::int64_t c = 0; c < d; ++c) acc += qr.data[qb + c] * kr.data[kb + c];
          s[j] = acc * scale;
          mx = std::max(mx, s[j]);
        }
        double den = 0;
        for (std::int64_t j = 0; j <= last; ++j) den += (s[j] = std::exp(s[j] - mx));
        for (std::int64_t j = 0; j <= last; ++j) {
          const std::int64_t vb = (b * Lk + j) * D + h * d;
          const double p = s[j] / den;
          for (std::int64_t c = 0; c < d; ++c) y.data[qb + c] += p * v.data[vb + c];
        }
      }
  return y;
}

// q, k, v [B, L, D]: `heads` heads of d = D/heads channels (head h: channels h*d .. h*d+d-1);
// rotate-half RoPE on q and k when theta > 0; causal softmax attention, scale 1/sqrt(d).
Tensor causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, std::int64_t heads, std::optional<double> theta,
                        const std::string& where) {
  attention_head_dim(q, k, v, heads, theta, where);
  Tensor qr = q, kr = k;
  if (theta) {
    rope(qr, heads, *theta, 0);
    rope(kr, heads, *theta, 0);
  }
  return attend(qr, kr, v, heads, 0);
}

Tensor scan(const Tensor& a, const Tensor& x, const Tensor* h0, int threads, const std::string& where) {
  if (x.shape.size() < 2) fail(where, "x must be [B, L, ...], got " + shape_text(x.shape));
  const bool prefix = a.shape.size() >= 2 && a.shape.size() <= x.shape.size() &&
                      std::equal(a.shape.begin(), a.shape.end(), x.shape.begin());
  if (!prefix) fail(where, "a " + shape_text(a.shape) + " must be a prefix of x " + shape_text(x.shape) + " (at least [B, L])");
  const std::int64_t B = x.shape[0], L = x.shape[1];
  Dims hs = x.shape;
  hs.erase(hs.begin() + 1);
  const std::int64_t N = numel(hs) / std::max<std::int64_t>(B, 1);  // x's trailing elements
  const std::int64_t Na = numel(a.shape) / std::max<std::int64_t>(B * L, 1);
  if (h0 && h0->shape != hs) fail(where, "h0 must be " + shape_text(hs) + " (x without axis 1), got " + shape_text(h0->shape));
  const std::int64_t rep = Na == 0 ? 1 : N / Na;  // each a element covers rep consecutive x elements
  Tensor y = make(x.shape);
  // h_t = a_t h_{t-1} + x_t, elementwise, held in y itself (h_{-1}: h0 or zeros); the elements are
  // independent, so threads take contiguous parts of them.
  const std::int64_t parts = std::clamp<std::int64_t>(N / 4096, 1, std::max(threads, 1));
#pragma omp parallel for num_threads(threads) if (parts > 1) schedule(static)
  for (std::int64_t part = 0; part < parts; ++part) {
    const std::int64_t j0 = N * part / parts, j1 = N * (part + 1) / parts;
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t t = 0; t < L; ++t) {
        const double* at = a.data.data() + (b * L + t) * Na;
        const double* xt = x.data.data() + (b * L + t) * N;
        double* yt = y.data.data() + (b * L + t) * N;
        const double* prev = t > 0 ? yt - N : h0 ? h0->data.data() + b * N : nullptr;
        for (std::int64_t j = j0; j < j1;) {  // a's element i covers x's j = i rep .. i rep + rep - 1
          const std::int64_t i = j / rep, end = std::min(j1, (i + 1) * rep);
          if (prev)
            for (; j < end; ++j) yt[j] = fmadd(at[i], prev[j], xt[j]);
          else
            for (; j < end; ++j) yt[j] = fmadd(at[i], 0.0, xt[j]);
        }
      }
  }
  return y;
}

// y[:, t] = x[:, t-1], zeros at t = 0.
Tensor delay(const Tensor& x, const std::string& where) {
  if (x.shape.size() < 2) fail(where, "x must be [B, L, ...], got " + shape_text(x.shape));
  const std::int64_t B = x.shape[0], L = x.shape[1], N = L > 0 && B > 0 ? numel(x.shape) / (B * L) : 0;
  Tensor y = make(x.shape);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t t = 1; t < L; ++t)
      std::copy_n(x.data.begin() + (b * L + t - 1) * N, N, y.data.begin() + (b * L + t) * N);
  return y;
}

// ---- sequential mode: one token of the ops that carry state along axis 1 ----
//
// Each takes one token ([B, 1, ...]) and its op instance's state (empty before the first token),
// runs the simultaneous kernel above on the state and the token (so the maths is the kernel's), and
// replaces the state only when `commit` (a FixedPoint's iterations read the state, never update it).

// state = {the op's last K-1 inputs, [B, K-1, C]}: zeros before the first token.
Tensor conv1d_causal_step(const Tensor& x, const Tensor& w, const Tensor* b, std::vector<Tensor>& state, bool commit,
                          const std::string& where) {
  if (x.shape.size() != 3 || x.shape[1] != 1) fail(where, "x must be one token [B, 1, C] in sequential mode, got " + shape_text(x.shape));
  const std::int64_t K = conv1d_taps(x, w, b, where);
  if (K < 1) return conv1d_causal(x, w, b, where);  // no taps, nothing to remember
  const std::int64_t B = x.shape[0], C = x.shape[2];
  const Tensor* past = state.empty() ? nullptr : &state[0];
  if (past && past->shape != Dims{B, K - 1, C})
    fail(where, "x " + shape_text(x.shape) + " differs from the last token's state " + shape_text(past->shape));
  // the kernel's last position over the window [the last K - 1 tokens (zeros before token 0), x]
  Tensor y = make(x.shape);
  for (std::int64_t bi = 0; bi < B; ++bi)
    for (std::int64_t c = 0; c < C; ++c) {
      double s = 0;
      for (std::int64_t k = 0; k < K; ++k) {
        const double xv = k == K - 1 ? x.data[bi * C + c] : past ? past->data[(bi * (K - 1) + k) * C + c] : 0.0;
        s = fmadd(w.data[c * K + k], xv, s);
      }
      y.data[bi * C + c] = s + (b ? b->data[c] : 0.0);
    }
  if (commit) {  // the window's last K - 1 tokens
    Tensor next = make({B, K - 1, C});
    for (std::int64_t bi = 0; bi < B; ++bi)
      for (std::int64_t k = 0; k + 1 < K; ++k)
        for (std::int64_t c = 0; c < C; ++c)
          next.data[(bi * (K - 1) + k) * C + c] =
              k + 2 == K ? x.data[bi * C + c] : past ? past->data[(bi * (K - 1) + k + 1) * C + c] : 0.0;
    state = {std::move(next)};
  }
  return y;
}

// state = {x of the last token, [B, 1, ...]}: zeros before the first token.
Tensor delay_step(const Tensor& x, std::vector<Tensor>& state, bool commit, const std::string& where) {
  if (x.shape.size() < 2 || x.shape[1] != 1) fail(where, "x must be one token [B, 1, ...] in sequential mode, got " + shape_text(x.shape));
  Tensor y = state.empty() ? make(x.shape) : state[0];
  if (y.shape != x.shape) fail(where, "x " + shape_text(x.shape) + " differs from the last token's " + shape_text(y.shape));
  if (commit) state = {x};
  return y;
}

// state = {h of the last token, [B, ...]}: h0 (or zeros) before the first token.
Tensor scan_step(const Tensor& a, const Tensor& x, const Tensor* h0, std::vector<Tensor>& state, bool commit, int threads,
                 const std::string& where) {
  if (x.shape.size() < 2 || x.shape[1] != 1) fail(where, "x must be one token [B, 1, ...] in sequential mode, got " + shape_text(x.shape));
  Tensor y = scan(a, x, state.empty() ? h0 : &state[0], threads, where);
  if (commit) {
    Tensor h = y;
    h.shape.erase(h.shape.begin() + 1);
    state = {std::move(h)};
  }
  return y;
}

// state = {the RoPE-rotated keys, the values} of the earlier tokens, [B, t, D]; this token is
// position t.
Tensor causal_attention_step(const Tensor& q, const Tensor& k, const Tensor& v, std::int64_t heads, std::optional<double> theta,
                             std::vector<Tensor>& state, bool commit, const std::string& where) {
  attention_head_dim(q, k, v, heads, theta, where);
  if (q.shape[1] != 1) fail(where, "q, k, v must be one token [B, 1, D] in sequential mode, got " + shape_text(q.shape));
  const std::int64_t t = state.empty() ? 0 : state[0].shape[1];
  Tensor qr = q, kr = k;
  if (theta) {
    rope(qr, heads, *theta, t);
    rope(kr, heads, *theta, t);
  }
  Tensor keys = state.empty() ? std::move(kr) : concat({&state[0], &kr}, 1, where);
  Tensor values = state.empty() ? v : concat({&state[1], &v}, 1, where);
  Tensor y = attend(qr, keys, values, heads, t);
  if (commit) state = {std::move(keys), std::move(values)};
  return y;
}

// x's slice t along axis 1: [B, 1, ...].
Tensor token_slice(const Tensor& x, std::int64_t t) {
  Dims s = x.shape;
  const std::int64_t L = s[1];
  s[1] = 1;
  std::int64_t inner = 1;
  for (size_t i = 2; i < s.size(); ++i) inner *= s[i];
  Tensor y = make(s);
  for (std::int64_t b = 0; b < s[0]; ++b)
    std::copy(x.data.begin() + (b * L + t) * inner, x.data.begin() + (b * L + t + 1) * inner, y.data.begin() + b * inner);
  return y;
}

// ---- the walker ----

class Interp {
 public:
  Interp(const WeightStore& w, const InterpretOptions& opt) : w_(w), opt_(opt) {}
  std::vector<FixedPointStats> stats;
  long long fused_steps = 0;

  // Runs ops in order in env. head is "interpret:" at the top level, "<FixedPoint's where> body"
  // inside a body; stats are kept for top-level FixedPoints only. A body's selective-scan steps
  // (ssd_steps: results, the body's results) run fused.
  void run_ops(const std::vector<Op>& ops, Env& env, const std::string& head, bool top, const std::vector<std::string>* results = nullptr) {
    const std::vector<char>* fused = results && opt_.fuse ? &ssd_steps(ops, *results) : nullptr;
    for (size_t i = 0; i < ops.size(); ++i) {
      const Op& op = ops[i];
      const std::string where = where_of(ops, i, head);
      if (fused && (*fused)[i] && ssd_step(ops, i, env, head)) {
        i += 2;
        continue;
      }
      std::vector<const Tensor*> in;
      for (const auto& name : op.inputs) in.push_back(&lookup(env, name, where));
      const bool per_token_results = sequential() && per_token(op, in, where);
      std::vector<Tensor> out = eval(op, in, where, top);
      if (out.size() != op.outputs.size())
        fail(where, "makes " + std::to_string(out.size()) + " results but names " + std::to_string(op.outputs.size()));
      for (size_t k = 0; k < out.size(); ++k) {
        if (env.count(op.outputs[k])) fail(where, "value '" + op.outputs[k] + "' is already defined");
        if (per_token_results) {
          one_token_result(out[k], op.outputs[k], where);
          seq_.insert(op.outputs[k]);
        }
        env.emplace(op.outputs[k], std::move(out[k]));
      }
    }
  }

  static std::string where_of(const std::vector<Op>& ops, size_t i, const std::string& head) {
    const Op& op = ops[i];
    const std::string label = !op.name.empty() ? op.name : !op.outputs.empty() ? op.outputs[0] : std::string();
    return head + " op #" + std::to_string(i) + " " + op_info(op.kind).name + " '" + label + "'";
  }

  // ---- a selective-scan step, fused ----
  // Mamba2's recurrence as the importer writes it: Einsum blh,bln,blhp->blhpn (dt_h B_n x_hp), Scan
  // (h = a_h h_prev + that), Einsum bln,blhpn->blhp (y = C . h), where no other op reads the two
  // [B, L, H, P, N] intermediates. Run as one pass over the state, each element's arithmetic the
  // three ops' own (the same values, tests/test_interpret.cpp), without writing the intermediates:
  // one token at a time through a large implicit model they are most of the digital work's memory
  // traffic. Which ops of a body start one, computed once per body.
  const std::vector<char>& ssd_steps(const std::vector<Op>& ops, const std::vector<std::string>& results) {
    auto [it, fresh] = ssd_.try_emplace(&ops);
    if (!fresh) return it->second;
    std::vector<char>& at = it->second;
    at.assign(ops.size(), 0);
    auto canonical = [](const Op& op) {  // the spec with its letters renamed in order of appearance
      std::string spec, out;
      for (char c : attr_str(op, "spec", "").value_or("")) if (c != ' ') spec += c;
      std::map<char, char> name;
      for (char c : spec) out += c >= 'a' && c <= 'z' ? name.try_emplace(c, static_cast<char>('a' + name.size())).first->second : c;
      return out;
    };
    auto read_elsewhere = [&](const std::string& v, size_t reader) {
      if (std::find(results.begin(), results.end(), v) != results.end()) return true;
      for (size_t k = 0; k < ops.size(); ++k)
        if (k != reader && std::find(ops[k].inputs.begin(), ops[k].inputs.end(), v) != ops[k].inputs.end()) return true;
      return false;
    };
    for (size_t i = 0; i + 2 < ops.size(); ++i) {
      const Op &in = ops[i], &sc = ops[i + 1], &out = ops[i + 2];
      if (in.kind != OpKind::Einsum || sc.kind != OpKind::Scan || out.kind != OpKind::Einsum) continue;
      if (in.inputs.size() != 3 || in.outputs.size() != 1 || sc.inputs.size() < 2 || sc.inputs.size() > 3 || sc.outputs.size() != 1 ||
          out.inputs.size() != 2 || out.outputs.size() != 1)
        continue;
      if (sc.inputs[1] != in.outputs[0] || out.inputs[1] != sc.outputs[0]) continue;
      if (canonical(in) != "abc,abd,abce->abced" || canonical(out) != "abc,abdec->abde") continue;
      if (read_elsewhere(in.outputs[0], i + 1) || read_elsewhere(sc.outputs[0], i + 2)) continue;
      at[i] = 1;
    }
    return at;
  }

  // The step at ops[i .. i + 2]; false (nothing done) where the operands' shapes are not the step's,
  // so that the three ops run (and report) as written.
  bool ssd_step(const std::vector<Op>& ops, size_t i, Env& env, const std::string& head) {
    const Op &in_op = ops[i], &scan_op = ops[i + 1], &out_op = ops[i + 2];
    const std::string where = where_of(ops, i + 2, head), in_where = where_of(ops, i, head), scan_where = where_of(ops, i + 1, head);
    const Tensor &dt = lookup(env, in_op.inputs[0], in_where), &Bm = lookup(env, in_op.inputs[1], in_where), &x = lookup(env, in_op.inputs[2], in_where);
    const Tensor &a = lookup(env, scan_op.inputs[0], scan_where), &C = lookup(env, out_op.inputs[0], where);
    const Tensor* h0 = scan_op.inputs.size() > 2 ? &lookup(env, scan_op.inputs[2], scan_where) : nullptr;
    if (x.shape.size() != 4 || Bm.shape.size() != 3) return false;
    const std::int64_t B = x.shape[0], L = x.shape[1], H = x.shape[2], P = x.shape[3], N = Bm.shape[2];
    if (dt.shape != Dims{B, L, H} || a.shape != Dims{B, L, H} || Bm.shape != Dims{B, L, N} || C.shape != Dims{B, L, N}) return false;
    if (h0 && h0->shape != Dims{B, H, P, N}) return false;
    std::vector<Tensor>* state = nullptr;
    const Tensor* prev = h0;
    if (sequential()) {
      if (L != 1) return false;
      state = &states_[scan_where];
      if (!state->empty()) {
        if ((*state)[0].shape != Dims{B, H, P, N}) return false;
        prev = &(*state)[0];
      }
    }
    if (env.count(out_op.outputs[0])) fail(where, "value '" + out_op.outputs[0] + "' is already defined");
    Tensor y = make({B, L, H, P});
    const bool commit = state && commit_;
    Tensor h_last = commit ? make({B, H, P, N}) : Tensor{};
    constexpr std::int64_t kLanes = 8;  // states p .. p + 7 together: their readout sums interleave
    const std::int64_t jobs = B * H;
#pragma omp parallel for num_threads(opt_.threads) if (opt_.threads > 1 && jobs > 1) schedule(static)
    for (std::int64_t job = 0; job < jobs; ++job) {
      const std::int64_t b = job / H, hh = job % H;
      // rows[l N + n]: the state of p0 + l at n, each lane's states contiguous in n like the states
      // it reads, so that the update vectorises (readout8 transposes them for the readout)
      thread_local std::vector<double> rows;
      rows.resize(static_cast<size_t>(kLanes * N));
      for (std::int64_t p0 = 0; p0 < P; p0 += kLanes) {
        const std::int64_t lanes = std::min(kLanes, P - p0);
        for (std::int64_t t = 0; t < L; ++t) {
          const std::int64_t bt = b * L + t;
          const double a_h = a.data[static_cast<size_t>(bt * H + hh)], dt_h = dt.data[static_cast<size_t>(bt * H + hh)];
          const double* Bn = Bm.data.data() + bt * N;
          const double* Cn = C.data.data() + bt * N;
          for (std::int64_t l = 0; l < lanes; ++l) {
            const double xv = x.data[static_cast<size_t>((bt * H + hh) * P + p0 + l)];
            double* r = rows.data() + l * N;
            const double* from = t > 0 ? r : prev ? prev->data.data() + ((b * H + hh) * P + p0 + l) * N : nullptr;
            if (!from) std::fill_n(r, N, 0.0), from = r;
            for (std::int64_t n = 0; n < N; ++n) {
              const double dbx = 0.0 + (dt_h * Bn[n]) * xv;  // Einsum: 1 x dt x B x x, then the sum of one term
              r[n] = fmadd(a_h, from[n], dbx);               // Scan
            }
          }
          static_assert(kLanes == 8, "readout8 reads out 8 lanes");
          double acc[kLanes];
          readout8(rows.data(), N, Cn, acc);  // Einsum: the sum over n in order, 1 x C x h per term
          for (std::int64_t l = 0; l < lanes; ++l) y.data[static_cast<size_t>((bt * H + hh) * P + p0 + l)] = acc[l];
        }
        if (commit)
          for (std::int64_t l = 0; l < lanes; ++l)
            std::copy_n(rows.data() + l * N, N, h_last.data.begin() + ((b * H + hh) * P + p0 + l) * N);
      }
    }
    if (commit) *state = {std::move(h_last)};
    bool carries = false;
    for (const Op* op : {&in_op, &scan_op, &out_op})
      for (const std::string& v : op->inputs) carries = carries || seq_.count(v) > 0;
    if (sequential() && carries) {
      one_token_result(y, out_op.outputs[0], where);
      seq_.insert(out_op.outputs[0]);
    }
    env.emplace(out_op.outputs[0], std::move(y));
    ++fused_steps;
    return true;
  }

  const Tensor& lookup(const Env& env, const std::string& name, const std::string& where) const {
    if (auto it = env.find(name); it != env.end()) return it->second;
    if (auto it = w_.find(name); it != w_.end()) return it->second;
    fail(where, "unknown value '" + name + "'");
  }

  // Sequential mode: marks a value whose axis 1 is the sequence axis (a graph input of rank >= 2);
  // values computed from such values are marked as they are defined.
  void mark_sequence(const std::string& name) { seq_.insert(name); }
  bool carries_sequence(const std::string& name) const { return seq_.count(name) > 0; }
  void set_token(int t, int tokens) { ctx_.token = t, ctx_.tokens = tokens; }

 private:
  const WeightStore& w_;
  const InterpretOptions& opt_;
  OpContext ctx_;  // what the hooks are told about the op they compute

  // ---- sequential mode state (unused in simultaneous mode) ----
  // The state of each stateful op instance, keyed by its position (`where`: the region path and
  // the op's index, unique per instance even where FixedPoints share a body); empty before the
  // first token.
  std::map<std::string, std::vector<Tensor>> states_;
  bool commit_ = true;        // whether this evaluation updates the states (false in FixedPoint iterations)
  std::set<std::string> seq_;  // values whose axis 1 is the sequence axis
  std::map<const std::vector<Op>*, std::vector<char>> ssd_;  // per body: where its fused steps start

  bool sequential() const { return opt_.mode == Mode::Sequential; }

  // Refuses an op that would make a token's result depend on other tokens, which one token at a
  // time cannot compute: one that acts along axis 1 of an operand carrying the sequence. Checked
  // cheaply from attributes and ranks; what moves axis 1 otherwise (a Reshape to [B, L*D]) is caught
  // on its result by one_token_result. Returns whether the op's results carry the sequence.
  bool per_token(const Op& op, const std::vector<const Tensor*>& in, const std::string& where) const {
    std::vector<size_t> seq;
    for (size_t i = 0; i < op.inputs.size(); ++i)
      if (seq_.count(op.inputs[i])) seq.push_back(i);
    if (seq.empty()) return false;
    auto refuse = [&](const std::string& what) { fail(where, what + "; sequential mode needs per-token ops"); };
    switch (op.kind) {
      case OpKind::Split:
      case OpKind::Concat: {
        const std::int64_t axis = attr_int(op, "axis", where).value_or(-1);
        for (size_t i : seq)
          if (in[i]->shape.size() >= 2 && norm_axis(axis, in[i]->shape.size(), where) == 1)
            refuse(std::string(op.kind == OpKind::Split ? "splits" : "concatenates") + " along axis 1, the sequence axis of '" +
                   op.inputs[i] + "'");
        break;
      }
      case OpKind::Linear:
      case OpKind::MatMul:
      case OpKind::RMSNorm:
      case OpKind::GatedRMSNorm:  // they act along x's last axis, which is the sequence axis at rank 2
        if (seq.front() == 0 && in[0]->shape.size() == 2) refuse("acts along the last axis of '" + op.inputs[0] + "', its sequence axis");
        break;
      case OpKind::Einsum: {  // the letter on axis 1 of a sequence operand must stay on axis 1
        std::string spec;
        for (char c : attr_str(op, "spec", where).value_or("")) if (c != ' ') spec += c;
        const size_t arrow = spec.find("->");
        std::vector<std::string> terms;
        std::stringstream ss(spec.substr(0, arrow));
        for (std::string term; std::getline(ss, term, ',');) terms.push_back(term);
        std::string out;
        if (arrow != std::string::npos) {
          out = spec.substr(arrow + 2);
        } else {  // the implicit form: the letters that occur once, in order
          std::map<char, int> count;
          for (const auto& term : terms) for (char c : term) ++count[c];
          for (auto [c, n] : count) if (n == 1) out += c;
        }
        for (size_t i : seq)
          if (i < terms.size() && terms[i].size() >= 2 && (out.size() < 2 || out[1] != terms[i][1]))
            refuse("spec '" + spec + "' " + (out.find(terms[i][1]) == std::string::npos ? "sums" : "moves") + " letter '" +
                   std::string(1, terms[i][1]) + "', the sequence axis of '" + op.inputs[i] + "'");
        break;
      }
      default: break;
    }
    return true;
  }

  // A result computed from the sequence is one token, [B, 1, ...]; any other shape means the op
  // moved or merged axis 1.
  static void one_token_result(const Tensor& t, const std::string& name, const std::string& where) {
    if (t.shape.size() < 2 || t.shape[1] != 1)
      fail(where, "result '" + name + "' is " + shape_text(t.shape) + " at one token, not [B, 1, ...]: the op moves the sequence axis; " +
                      "sequential mode needs per-token ops");
  }

  static void arity(const std::vector<const Tensor*>& in, size_t lo, size_t hi, const std::string& where) {
    if (in.size() < lo || in.size() > hi) {
      std::string want = lo == hi ? std::to_string(lo) : hi == SIZE_MAX ? "at least " + std::to_string(lo) : std::to_string(lo) + " to " + std::to_string(hi);
      fail(where, "takes " + want + " operands, got " + std::to_string(in.size()));
    }
  }

  std::vector<Tensor> eval(const Op& op, const std::vector<const Tensor*>& in, const std::string& where, bool top) {
    const int th = opt_.threads;
    auto one = [](Tensor t) { std::vector<Tensor> v; v.push_back(std::move(t)); return v; };
    if (op.kind != OpKind::Split && op.kind != OpKind::FixedPoint && op.outputs.size() != 1)
      fail(where, "must have 1 result, names " + std::to_string(op.outputs.size()));
    switch (op.kind) {
      case OpKind::Linear:
        arity(in, 2, 3, where);
        if (opt_.hooks && in.size() == 2 && attr_str(op, kPlaceAttr, where) == "optical")
          return one(opt_.hooks->optical(op, *in[0], *in[1], ctx_));
        return one(linear(*in[0], *in[1], in.size() > 2 ? in[2] : nullptr, th, where));
      case OpKind::MatMul:
        arity(in, 2, 2, where);
        if (opt_.hooks && attr_str(op, kPlaceAttr, where) == "optical") return one(opt_.hooks->optical(op, *in[0], *in[1], ctx_));
        return one(matmul(*in[0], *in[1], th, where));
      case OpKind::Add:
        arity(in, 2, 2, where);
        return one(broadcast(*in[0], *in[1], [](double a, double b) { return a + b; }, where));
      case OpKind::Sub:
        arity(in, 2, 2, where);
        return one(broadcast(*in[0], *in[1], [](double a, double b) { return a - b; }, where));
      case OpKind::Mul:
        arity(in, 2, 2, where);
        return one(broadcast(*in[0], *in[1], [](double a, double b) { return a * b; }, where));
      case OpKind::Tanh: arity(in, 1, 1, where); return one(unary(*in[0], [](double x) { return std::tanh(x); }));
      case OpKind::Sigmoid: arity(in, 1, 1, where); return one(unary(*in[0], sigmoid));
      case OpKind::SiLU: arity(in, 1, 1, where); return one(unary(*in[0], silu));
      case OpKind::Softplus: arity(in, 1, 1, where); return one(unary(*in[0], softplus));
      case OpKind::Exp: arity(in, 1, 1, where); return one(unary(*in[0], [](double x) { return std::exp(x); }));
      case OpKind::Neg: arity(in, 1, 1, where); return one(unary(*in[0], [](double x) { return -x; }));
      case OpKind::Clip: {
        arity(in, 1, 1, where);
        const double lo = attr_num(op, "min", where).value_or(-std::numeric_limits<double>::infinity());
        const double hi = attr_num(op, "max", where).value_or(std::numeric_limits<double>::infinity());
        if (!(lo <= hi)) fail(where, "min " + jsonr::num(lo) + " is above max " + jsonr::num(hi));
        return one(unary(*in[0], [=](double x) { return std::min(std::max(x, lo), hi); }));
      }
      case OpKind::RMSNorm:
        arity(in, 2, 2, where);
        return one(rmsnorm(*in[0], *in[1], attr_num(op, "eps", where).value_or(1e-5), where));
      case OpKind::GatedRMSNorm: {
        arity(in, 3, 3, where);
        if (in[0]->shape != in[1]->shape)
          fail(where, "x " + shape_text(in[0]->shape) + " and gate " + shape_text(in[1]->shape) + " differ in shape");
        Tensor u = make(in[0]->shape);
        for (size_t i = 0; i < u.data.size(); ++i) u.data[i] = in[0]->data[i] * silu(in[1]->data[i]);
        return one(rmsnorm(u, *in[2], attr_num(op, "eps", where).value_or(1e-5), where));
      }
      case OpKind::Conv1dCausal:
        arity(in, 2, 3, where);
        if (sequential()) return one(conv1d_causal_step(*in[0], *in[1], in.size() > 2 ? in[2] : nullptr, states_[where], commit_, where));
        return one(conv1d_causal(*in[0], *in[1], in.size() > 2 ? in[2] : nullptr, where));
      case OpKind::Embedding:
        arity(in, 2, 2, where);
        return one(embedding(*in[0], *in[1], where));
      case OpKind::Split:
        arity(in, 1, 1, where);
        return split(*in[0], required(attr_ints(op, "sizes", where), "sizes", where), attr_int(op, "axis", where).value_or(-1),
                     op.outputs.size(), where);
      case OpKind::Concat:
        arity(in, 1, SIZE_MAX, where);
        return one(concat(in, attr_int(op, "axis", where).value_or(-1), where));
      case OpKind::Reshape:
        arity(in, 1, 1, where);
        return one(reshape(*in[0], required(attr_ints(op, "shape", where), "shape", where), where));
      case OpKind::Einsum:
        arity(in, 1, SIZE_MAX, where);
        return one(einsum(required(attr_str(op, "spec", where), "spec", where), in, th, where));
      case OpKind::Scan:
        arity(in, 2, 3, where);
        if (sequential()) return one(scan_step(*in[0], *in[1], in.size() > 2 ? in[2] : nullptr, states_[where], commit_, th, where));
        return one(scan(*in[0], *in[1], in.size() > 2 ? in[2] : nullptr, th, where));
      case OpKind::Delay:
        arity(in, 1, 1, where);
        if (sequential()) return one(delay_step(*in[0], states_[where], commit_, where));
        return one(delay(*in[0], where));
      case OpKind::CausalAttention: {
        arity(in, 3, 3, where);
        const std::int64_t heads = required(attr_int(op, "heads", where), "heads", where);
        if (sequential())
          return one(causal_attention_step(*in[0], *in[1], *in[2], heads, attr_num(op, "rope_theta", where), states_[where], commit_, where));
        return one(causal_attention(*in[0], *in[1], *in[2], heads, attr_num(op, "rope_theta", where), where));
      }
      case OpKind::Convert:
        arity(in, 1, 1, where);
        return one(opt_.hooks ? opt_.hooks->convert(op, *in[0], ctx_) : *in[0]);  // without hooks an ideal converter
      case OpKind::FixedPoint:
        if (op.outputs.size() != 1) fail(where, "must have 1 result, names " + std::to_string(op.outputs.size()));
        arity(in, 1, SIZE_MAX, where);
        return one(fixed_point(op, in, where, top));
    }
    fail(where, "unknown op kind");
  }

  // Mirrors sim/solver.cpp's three stop rules on the iterate's leading axis (the samples), and runs
  // the released models' rule (one residual over the whole batch). The body runs on the whole batch
  // every step; under the per-sample rules a sample that has stopped keeps its value (its results do
  // not depend on the others as long as the body treats samples independently, as models do).
  Tensor fixed_point(const Op& op, const std::vector<const Tensor*>& in, const std::string& where, bool top) {
    if (!op.body) fail(where, "has no body");
    const Region& body = *op.body;
    if (body.args.size() != in.size() + 1)
      fail(where, "body takes " + std::to_string(body.args.size()) + " args, expected " + std::to_string(in.size() + 1) +
                      " (the iterate, then each operand)");
    if (body.results.size() != 1) fail(where, "body must have 1 result, has " + std::to_string(body.results.size()));
    const double tol = attr_num(op, "tol", where).value_or(1e-3);
    const std::int64_t max_iter = attr_int(op, "max_iter", where).value_or(40);
    const double damping = attr_num(op, "damping", where).value_or(1.0);
    const std::string rule = attr_str(op, "rule", where).value_or("relative");
    const std::string like = required(attr_str(op, "like", where), "like", where);
    if (max_iter < 1 || max_iter > std::numeric_limits<int>::max()) fail(where, "max_iter must be at least 1, got " + std::to_string(max_iter));
    if (!(damping > 0 && damping <= 1)) fail(where, "damping must be in (0, 1], got " + jsonr::num(damping));
    if (!(tol >= 0)) fail(where, "tol must be non-negative, got " + jsonr::num(tol));
    if (rule != "relative" && rule != "fixed" && rule != "twin" && rule != "released")
      fail(where, "rule '" + rule + "' is not relative, fixed, twin or released");
    const auto li = std::find(op.inputs.begin(), op.inputs.end(), like);
    if (li == op.inputs.end()) fail(where, "like '" + like + "' is not one of the op's operands");
    const Dims zshape = in[li - op.inputs.begin()]->shape;
    const std::int64_t S = zshape.empty() ? 1 : zshape[0];
    const std::int64_t N = S == 0 ? 0 : numel(zshape) / S;
    const std::string body_head = where + " body";
    if (sequential()) {  // the body's args carry the sequence when the values bound to them do
      if (seq_.count(like)) seq_.insert(body.args[0]);
      for (size_t i = 0; i < in.size(); ++i)
        if (seq_.count(op.inputs[i])) seq_.insert(body.args[i + 1]);
    }

    const int outer_iteration = ctx_.iteration;
    int step = 0;
    auto f = [&](const Tensor& z) {
      ctx_.iteration = step++;
      Env scope;
      scope[body.args[0]] = z;
      for (size_t i = 0; i < in.size(); ++i) scope[body.args[i + 1]] = *in[i];
      run_ops(body.ops, scope, body_head, false, &body.results);
      Tensor fz = lookup(scope, body.results[0], body_head);
      if (fz.shape != z.shape) fail(where, "body result has shape " + shape_text(fz.shape) + ", the iterate " + shape_text(z.shape));
      if (top && !sequential() && opt_.progress) opt_.progress(step, max_iter);
      return fz;
    };
    auto dist = [&](const Tensor& a, const Tensor& b, std::int64_t s) {
      double acc = 0;
      for (std::int64_t j = 0; j < N; ++j) {
        const double d = a.data[s * N + j] - b.data[s * N + j];
        acc += d * d;
      }
      return std::sqrt(acc);
    };
    auto norm = [&](const Tensor& a, std::int64_t s) {
      double acc = 0;
      for (std::int64_t j = 0; j < N; ++j) acc += a.data[s * N + j] * a.data[s * N + j];
      return std::sqrt(acc);
    };
    auto copy_sample = [&](const Tensor& from, Tensor& to, std::int64_t s) {
      std::copy(from.data.begin() + s * N, from.data.begin() + (s + 1) * N, to.data.begin() + s * N);
    };

    FixedPointStats st;
    st.op = op.name.empty() ? op.outputs[0] : op.name;
    st.iterations.assign(static_cast<size_t>(S), 0);
    st.converged.assign(static_cast<size_t>(S), 0);
    Tensor z = make(zshape), result = make(zshape);
    const bool commit = commit_;
    commit_ = false;  // sequential mode: the iterations read the committed states and leave them

    bool final_call = false;  // the rule's result is already f(z) of a committing evaluation
    if (rule == "released") {
      // The released implicit models' solve (microsoft/implicit_languagemodels, implicit_llm/
      // implicit.py, _sequential_step): at most max_iter damped steps z <- (1 - d) z + d f(z),
      // stopping when ||f(z) - z|| / (||z|| + 1e-6), one number over every sample, is below tol;
      // the result is f(z) of one more evaluation, which commits the states.
      std::int64_t steps = 0;
      bool met = false;
      for (std::int64_t k = 0; k < max_iter && !met; ++k) {
        const Tensor fz = f(z);
        double dd = 0, zz = 0;
        for (std::size_t i = 0; i < z.data.size(); ++i) {
          const double d = fz.data[i] - z.data[i];
          dd += d * d;
          zz += z.data[i] * z.data[i];
        }
        met = std::sqrt(dd) / (1e-6 + std::sqrt(zz)) < tol;
        for (std::size_t i = 0; i < z.data.size(); ++i) z.data[i] = (1.0 - damping) * z.data[i] + damping * fz.data[i];
        steps = k + 1;
      }
      for (std::int64_t s = 0; s < S; ++s) st.iterations[s] = static_cast<int>(steps), st.converged[s] = met;
      commit_ = commit;
      result = f(z);
      final_call = true;
    } else if (rule == "relative") {
      std::vector<std::uint8_t> active(static_cast<size_t>(S), 1);
      std::int64_t n_active = S;
      for (std::int64_t k = 0; k < max_iter && n_active > 0; ++k) {
        const Tensor fz = f(z);
        for (std::int64_t s = 0; s < S; ++s) {
          if (!active[s]) continue;
          const double d = dist(fz, z, s);
          const double rel = d / (norm(fz, s) + 1e-9);
          for (std::int64_t j = 0; j < N; ++j) {
            double& zj = z.data[s * N + j];
            zj = damping != 1.0 ? (1.0 - damping) * zj + damping * fz.data[s * N + j] : fz.data[s * N + j];
          }
          st.iterations[s] = static_cast<int>(k + 1);
          if (rel < tol) {
            st.converged[s] = 1;
            active[s] = 0;
            --n_active;
          }
        }
      }
      result = z;
    } else {  // fixed and twin: every sample steps together, undamped (as the solver does)
      const bool twin = rule == "twin";
      std::vector<double> best(static_cast<size_t>(S), std::numeric_limits<double>::infinity());
      for (std::int64_t k = 0; k < max_iter; ++k) {
        Tensor fz = f(z);
        double worst = 0;
        for (std::int64_t s = 0; s < S; ++s) {
          const double d = dist(fz, z, s);
          worst = std::max(worst, d);
          if (!twin || d < best[s]) {
            best[s] = d;
            st.iterations[s] = static_cast<int>(k + 1);
            copy_sample(fz, result, s);
          }
        }
        z = std::move(fz);
        if (twin && worst < tol) break;
      }
      for (std::int64_t s = 0; s < S; ++s) st.converged[s] = best[s] < tol;
    }
    // Sequential mode: one more evaluation at the result updates the states of the body's stateful
    // ops (when the enclosing evaluation commits), as the reference's final call does; the op's
    // result stays the iterate the rule returned.
    commit_ = commit;
    if (sequential() && !final_call) f(result);
    ctx_.iteration = outer_iteration;
    if (top) stats.push_back(std::move(st));
    return result;
  }
};

// Checks a given tensor against its declaration, binding the declaration's symbols.
void bind_symbols(const std::string& what, const Value& decl, const Tensor& t, std::map<std::string, std::int64_t>& syms) {
  const std::string where = "interpret: " + what + " '" + decl.name + "'";
  if (static_cast<std::int64_t>(t.data.size()) != numel(t.shape))
    fail(where, "has shape " + shape_text(t.shape) + " but " + std::to_string(t.data.size()) + " numbers");
  const Shape& s = decl.type.shape;
  if (t.shape.size() != s.size())
    fail(where, "declared " + to_string(decl.type) + ", got shape " + shape_text(t.shape));
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i].is_fixed()) {
      if (t.shape[i] != s[i].size)
        fail(where, "declared " + to_string(decl.type) + ", got shape " + shape_text(t.shape) + " (dim " + std::to_string(i) + ")");
    } else {
      auto [it, fresh] = syms.emplace(s[i].sym, t.shape[i]);
      if (!fresh && it->second != t.shape[i])
        fail(where, "declared " + to_string(decl.type) + ", got shape " + shape_text(t.shape) + ": " + s[i].sym + " is already " +
                        std::to_string(it->second));
    }
  }
}

// Sequential mode (docs/ir.md, "Sequential mode"): the graph once per token t on the [B, 1, ...]
// slices of the inputs of rank >= 2 (the others whole), run keeping the stateful ops' states from
// token to token; each output is its per-token results concatenated along axis 1.
InterpretResult run_sequential(const Graph& g, const Env& inputs, Interp& run, bool trace,
                               const std::function<void(long long, long long)>& progress) {
  std::int64_t L = -1;
  std::string first;
  for (const auto& [name, x] : inputs) {
    if (x.shape.size() < 2) continue;
    if (L >= 0 && x.shape[1] != L)
      throw Error("interpret: sequential mode: input '" + name + "' has " + std::to_string(x.shape[1]) +
                  " tokens along axis 1, input '" + first + "' has " + std::to_string(L));
    if (L < 0) L = x.shape[1], first = name;
    run.mark_sequence(name);
  }
  if (L < 0) throw Error("interpret: sequential mode needs an input with a sequence axis (rank >= 2, axis 1); graph '" + g.name + "' has none");
  if (L == 0) throw Error("interpret: sequential mode needs at least one token, input '" + first + "' has none along axis 1");

  std::map<std::string, std::vector<Tensor>> parts;  // per returned value, its result at each token
  std::vector<FixedPointStats> fps;
  for (std::int64_t t = 0; t < L; ++t) {
    Env env;
    for (const auto& [name, x] : inputs) env[name] = x.shape.size() >= 2 ? token_slice(x, t) : x;
    run.stats.clear();
    run.set_token(static_cast<int>(t), static_cast<int>(L));
    run.run_ops(g.ops, env, "interpret:", true);
    for (const auto& name : g.outputs) {
      const std::string where = "interpret: output '" + name + "'";
      const Tensor& y = run.lookup(env, name, where);
      if (!run.carries_sequence(name))
        throw Error(where + " has no sequence axis (it depends on no input of rank >= 2); sequential mode returns per-token outputs");
      if (!trace) parts[name].push_back(y);
    }
    if (trace)
      for (auto& [name, x] : env) parts[name].push_back(std::move(x));
    if (progress) progress(t + 1, L);
    // the top-level FixedPoints run in the same order at every token; their stats go sample-major
    if (t == 0)
      for (const auto& st : run.stats) {
        const size_t n = st.iterations.size() * static_cast<size_t>(L);
        fps.push_back({st.op, std::vector<int>(n, 0), std::vector<std::uint8_t>(n, 0)});
      }
    if (run.stats.size() != fps.size()) throw Error("interpret: sequential mode: token " + std::to_string(t) + " ran another set of FixedPoints");
    for (size_t k = 0; k < fps.size(); ++k)
      for (size_t b = 0; b < run.stats[k].iterations.size(); ++b) {
        const size_t at = b * static_cast<size_t>(L) + static_cast<size_t>(t);
        fps[k].iterations[at] = run.stats[k].iterations[b];
        fps[k].converged[at] = run.stats[k].converged[b];
      }
  }

  InterpretResult res;
  for (const auto& [name, xs] : parts) {
    if (!run.carries_sequence(name)) {  // traced, computed without the sequence: the same at every token
      res.values[name] = xs.back();
      continue;
    }
    std::vector<const Tensor*> ptrs;
    for (const Tensor& x : xs) ptrs.push_back(&x);
    res.values[name] = concat(ptrs, 1, "interpret: output '" + name + "'");
  }
  res.fixed_points = std::move(fps);
  res.fused_steps = run.fused_steps;
  return res;
}

}  // namespace

InterpretResult interpret(const Graph& g, const WeightStore& w, const std::map<std::string, Tensor>& inputs,
                          const InterpretOptions& options) {
  if (options.threads < 1) throw Error("interpret: threads must be at least 1, got " + std::to_string(options.threads));
  std::map<std::string, std::int64_t> syms;
  Env env;
  std::set<std::string> declared;
  for (const Value& v : g.inputs) {
    auto it = inputs.find(v.name);
    if (it == inputs.end()) throw Error("interpret: input '" + v.name + "' is not given");
    bind_symbols("input", v, it->second, syms);
    env[v.name] = it->second;
    declared.insert(v.name);
  }
  for (const auto& [name, t] : inputs)
    if (!declared.count(name)) throw Error("interpret: '" + name + "' is not an input of graph '" + g.name + "'");
  for (const Value& v : g.weights) {
    auto it = w.find(v.name);
    if (it == w.end()) throw Error("interpret: weight '" + v.name + "' is missing from the weights");
    bind_symbols("weight", v, it->second, syms);
  }

  Interp run(w, options);
  if (options.mode == Mode::Sequential) return run_sequential(g, env, run, options.trace, options.progress);
  run.run_ops(g.ops, env, "interpret:", true);

  InterpretResult res;
  for (const auto& name : g.outputs) res.values[name] = run.lookup(env, name, "interpret: output '" + name + "'");
  if (options.trace)
    for (auto& [name, t] : env) res.values[name] = t;
  res.fixed_points = std::move(run.stats);
  res.fused_steps = run.fused_steps;
  return res;
}

}  // namespace aoc::ir
