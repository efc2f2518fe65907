#include "compiler/kernels.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <numeric>
#include <set>
#include <sstream>

#include "sim/isa.hpp"
#include "sim/json_reader.hpp"

namespace aoc::ir::kernels {

// The products' copies, one per instruction set (compiler/products.cpp), and the dispatch to them.
#define AOC_DECLARE(ns)                                                                                   \
  namespace ns {                                                                                          \
  void readout8(const double*, std::int64_t, const double*, double*);                                   \
  void dot_rows(const double*, std::int64_t, const double*, std::int64_t, std::int64_t, double*, int);  \
  double dot8(const double*, const double*, std::int64_t);                                              \
  }
AOC_ISA_FOR_EACH(AOC_DECLARE)
#undef AOC_DECLARE

void readout8(const double* rows, std::int64_t N, const double* C, double* acc) { AOC_ISA_DISPATCH(readout8(rows, N, C, acc)) }
void dot_rows(const double* x, std::int64_t rows, const double* W, std::int64_t out, std::int64_t in, double* y, int threads) {
  AOC_ISA_DISPATCH(dot_rows(x, rows, W, out, in, y, threads))
}
double dot8(const double* a, const double* b, std::int64_t n) { AOC_ISA_DISPATCH(dot8(a, b, n)) }

Tensor make(Dims shape, double fill) {
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

double sigmoid(double x) {
  if (x >= 0) return 1.0 / (1.0 + std::exp(-x));
  const double e = std::exp(x);
  return e / (1.0 + e);
}
double silu(double x) { return x * sigmoid(x); }
double softplus(double x) { return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)); }

// ---- the ops ----

namespace {

// y[r, o] = the product of x's row r (x [..., in]) and row o of W's data read as [out, in], plus b[o]:
// Linear's product, and Conv2d's on its patches.
Tensor rows_product(const Tensor& x, const Tensor& W, std::int64_t out, const Tensor* b, int threads) {
  const std::int64_t in = x.shape.back();
  Dims ys = x.shape;
  ys.back() = out;
  Tensor y = make(ys);
  const std::int64_t rows = in == 0 ? numel(ys) / std::max<std::int64_t>(out, 1) : numel(x.shape) / in;
  dot_rows(x.data.data(), rows, W.data.data(), out, in, y.data.data(), threads);
  if (b)
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t o = 0; o < out; ++o) y.data[r * out + o] += b->data[o];
  return y;
}

// The spatial axes of x[..., H, W, C]: the count of [H, W, C] blocks, and H, W, C.
struct Spatial {
  std::int64_t outer, H, W, C;
};
Spatial spatial(const Tensor& x, const std::string& role, const std::string& where) {
  if (x.shape.size() < 3) fail(where, role + " must be [..., H, W, C], got " + shape_text(x.shape));
  const std::size_t r = x.shape.size();
  const Spatial s{0, x.shape[r - 3], x.shape[r - 2], x.shape[r - 1]};
  const std::int64_t block = s.H * s.W * s.C;
  return {block == 0 ? 0 : numel(x.shape) / block, s.H, s.W, s.C};
}

}  // namespace

Tensor linear(const Tensor& x, const Tensor& W, const Tensor* b, int threads, const std::string& where) {
  if (x.shape.empty()) fail(where, "x must have at least one dimension, got a scalar");
  if (W.shape.size() != 2) fail(where, "W must be [out, in], got " + shape_text(W.shape));
  const std::int64_t in = x.shape.back(), out = W.shape[0];
  if (W.shape[1] != in) fail(where, "x " + shape_text(x.shape) + " and W " + shape_text(W.shape) + ": in dims differ");
  if (b && b->shape != Dims{out}) fail(where, "b must be [" + std::to_string(out) + "], got " + shape_text(b->shape));
  return rows_product(x, W, out, b, threads);
}

Tensor im2col(const Tensor& x, const Tensor& W, std::int64_t stride, const std::string& where) {
  const Spatial s = spatial(x, "x", where);
  if (W.shape.size() != 4) fail(where, "W must be [Cout, kh, kw, Cin], got " + shape_text(W.shape));
  const std::int64_t kh = W.shape[1], kw = W.shape[2];
  if (W.shape[3] != s.C)
    fail(where, "W " + shape_text(W.shape) + " has " + std::to_string(W.shape[3]) + " input channels, x " + shape_text(x.shape) + " has " +
                    std::to_string(s.C));
  if (stride < 1) fail(where, "stride must be >= 1, got " + std::to_string(stride));
  if (kh < 1 || kw < 1 || kh > s.H || kw > s.W)
    fail(where, "the kernel " + std::to_string(kh) + " x " + std::to_string(kw) + " does not fit the input's " + std::to_string(s.H) + " x " +
                    std::to_string(s.W) + " (valid padding)");
  const std::int64_t Ho = (s.H - kh) / stride + 1, Wo = (s.W - kw) / stride + 1, K = kh * kw * s.C;
  Dims ys(x.shape.begin(), x.shape.end() - 3);
  ys.insert(ys.end(), {Ho, Wo, K});
  Tensor y = make(ys);
  const std::int64_t rows = s.outer * Ho * Wo;
  for_each_index(rows, rows * K, [&](std::int64_t row) {
    const std::int64_t n = row / (Ho * Wo), i = row / Wo % Ho, j = row % Wo;
    double* patch = y.data.data() + row * K;
    for (std::int64_t p = 0; p < kh; ++p) {  // row p of the window: kw * C contiguous values of x
      const double* from = x.data.data() + ((n * s.H + i * stride + p) * s.W + j * stride) * s.C;
      std::copy_n(from, kw * s.C, patch + p * kw * s.C);
    }
  });
  return y;
}

Tensor conv2d(const Tensor& x, const Tensor& W, const Tensor* b, std::int64_t stride, int threads, const std::string& where) {
  Tensor patches = im2col(x, W, stride, where);
  const std::int64_t out = W.shape[0];
  if (b && b->shape != Dims{out}) fail(where, "b must be [" + std::to_string(out) + "], got " + shape_text(b->shape));
  return rows_product(patches, W, out, b, threads);
}

Tensor pool2d(const Tensor& x, std::int64_t size, bool max, const std::string& where) {
  const Spatial s = spatial(x, "x", where);
  if (size < 1) fail(where, "size must be >= 1, got " + std::to_string(size));
  if (size > s.H || size > s.W)
    fail(where, "the window " + std::to_string(size) + " x " + std::to_string(size) + " does not fit the input's " + std::to_string(s.H) +
                    " x " + std::to_string(s.W));
  const std::int64_t Ho = s.H / size, Wo = s.W / size;
  Dims ys(x.shape.begin(), x.shape.end() - 3);
  ys.insert(ys.end(), {Ho, Wo, s.C});
  Tensor y = make(ys);
  const std::int64_t cells = s.outer * Ho * Wo, area = size * size;
  for_each_index(cells, cells * area * s.C, [&](std::int64_t cell) {
    const std::int64_t n = cell / (Ho * Wo), i = cell / Wo % Ho, j = cell % Wo;
    double* out = y.data.data() + cell * s.C;
    for (std::int64_t c = 0; c < s.C; ++c) {
      double acc = max ? -std::numeric_limits<double>::infinity() : 0.0;
      for (std::int64_t p = 0; p < size; ++p)
        for (std::int64_t q = 0; q < size; ++q) {
          const double v = x.data[static_cast<std::size_t>(((n * s.H + i * size + p) * s.W + j * size + q) * s.C + c)];
          acc = max ? (v > acc || std::isnan(v) ? v : acc) : acc + v;  // a NaN in the window is the max
        }
      out[c] = max ? acc : acc / static_cast<double>(area);
    }
  });
  return y;
}

Tensor upsample2d(const Tensor& x, std::int64_t scale, const std::string& where) {
  const Spatial s = spatial(x, "x", where);
  if (scale < 1) fail(where, "scale must be >= 1, got " + std::to_string(scale));
  const std::int64_t Ho = s.H * scale, Wo = s.W * scale;
  Dims ys(x.shape.begin(), x.shape.end() - 3);
  ys.insert(ys.end(), {Ho, Wo, s.C});
  if (checked_elements(ys) < 0) fail(where, "the result " + shape_text(ys) + " has more than 2^50 elements");
  Tensor y = make(ys);
  const std::int64_t cells = s.outer * Ho * Wo;
  for_each_index(cells, cells * s.C, [&](std::int64_t cell) {
    const std::int64_t n = cell / (Ho * Wo), i = cell / Wo % Ho, j = cell % Wo;
    std::copy_n(x.data.data() + ((n * s.H + i / scale) * s.W + j / scale) * s.C, s.C, y.data.data() + cell * s.C);
  });
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
  std::vector<double> bt(static_cast<size_t>(k * n));  // b's columns as rows: the products' layout
  for (std::int64_t i = 0; i < k; ++i)
    for (std::int64_t j = 0; j < n; ++j) bt[static_cast<size_t>(j * k + i)] = b.data[static_cast<size_t>(i * n + j)];
  dot_rows(a.data.data(), rows, bt.data(), n, k, y.data.data(), threads);
  return y;
}

Tensor rmsnorm(const Tensor& x, const Tensor& g, double eps, const std::string& where) {
  if (x.shape.empty()) fail(where, "x must have at least one dimension, got a scalar");
  const std::int64_t D = x.shape.back();
  if (g.shape != Dims{D}) fail(where, "g must be [" + std::to_string(D) + "] (x's last dim), got " + shape_text(g.shape));
  Tensor y = make(x.shape);
  if (D == 0) return y;
  const std::int64_t rows = numel(x.shape) / D;
  for_each_index(rows, rows * D, [&](std::int64_t r) {
    double ss = 0;
    for (std::int64_t i = 0; i < D; ++i) ss += x.data[r * D + i] * x.data[r * D + i];
    const double scale = 1.0 / std::sqrt(ss / static_cast<double>(D) + eps);
    for (std::int64_t i = 0; i < D; ++i) y.data[r * D + i] = x.data[r * D + i] * scale * g.data[i];
  });
  return y;
}

Tensor softmax(const Tensor& x, const std::string& where) {
  if (x.shape.empty()) fail(where, "x must have at least one dimension, got a scalar");
  const std::int64_t D = x.shape.back();
  Tensor y = make(x.shape);
  if (D == 0) return y;
  for (std::int64_t r = 0; r < numel(x.shape) / D; ++r) {
    const double* xr = x.data.data() + r * D;
    double* yr = y.data.data() + r * D;
    const double top = *std::max_element(xr, xr + D);
    double sum = 0;
    for (std::int64_t i = 0; i < D; ++i) sum += (yr[i] = std::exp(xr[i] - top));
    for (std::int64_t i = 0; i < D; ++i) yr[i] /= sum;
  }
  return y;
}

// Conv1dCausal's operands checked; returns K.
std::int64_t conv1d_taps(const Tensor& x, const Tensor& w, const Tensor* b, const std::string& where) {
  if (x.shape.size() < 3) fail(where, "x must be [B, L, ..., C], got " + shape_text(x.shape));
  const std::int64_t C = x.shape.back();
  if (w.shape.size() != 2 || w.shape[0] != C)
    fail(where, "w must be [" + std::to_string(C) + ", K] (C from x " + shape_text(x.shape) + "), got " + shape_text(w.shape));
  if (b && b->shape != Dims{C}) fail(where, "b must be [" + std::to_string(C) + "], got " + shape_text(b->shape));
  return w.shape[1];
}

// Elements of one token of x[B, L, ...] (the positions between L and C times C).
std::int64_t token_elements(const Tensor& x) {
  std::int64_t n = 1;
  for (std::size_t i = 2; i < x.shape.size(); ++i) n *= x.shape[i];
  return n;
}

Tensor conv1d_causal(const Tensor& x, const Tensor& w, const Tensor* b, const std::string& where) {
  const std::int64_t K = conv1d_taps(x, w, b, where);
  const std::int64_t B = x.shape[0], L = x.shape[1], C = x.shape.back(), N = token_elements(x);
  Tensor y = make(x.shape);
  for (std::int64_t bi = 0; bi < B; ++bi)
    for (std::int64_t t = 0; t < L; ++t)
      for (std::int64_t e = 0; e < N; ++e) {  // element e of the token: channel e % C
        const std::int64_t c = e % C;
        double s = 0;
        for (std::int64_t k = 0; k < K; ++k) {
          const std::int64_t src = t - K + 1 + k;
          if (src >= 0) s = fmadd(w.data[c * K + k], x.data[(bi * L + src) * N + e], s);
        }
        y.data[(bi * L + t) * N + e] = s + (b ? b->data[c] : 0.0);
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

EinsumSpec parse_einsum(const std::string& spec_attr) {
  EinsumSpec s;
  for (char ch : spec_attr)
    if (ch != ' ') s.text += ch;
  const std::size_t a = s.text.find("->");
  s.arrow = a != std::string::npos;
  const std::string lhs = s.text.substr(0, a);
  for (std::size_t start = 0;;) {
    const std::size_t comma = lhs.find(',', start);
    s.terms.push_back(lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (s.arrow) {
    s.out = s.text.substr(a + 2);
  } else {
    std::map<char, int> n;
    for (const auto& t : s.terms)
      for (char ch : t) ++n[ch];
    for (auto [ch, k] : n)
      if (k == 1) s.out += ch;
  }
  return s;
}

Tensor einsum(const std::string& spec_attr, const std::vector<const Tensor*>& xs, int threads, const std::string& where) {
  const EinsumSpec parsed = parse_einsum(spec_attr);
  const std::vector<std::string>& ops = parsed.terms;
  if (ops.size() != xs.size())
    fail(where, "spec '" + spec_attr + "' has " + std::to_string(ops.size()) + " operands, the op " + std::to_string(xs.size()));
  std::map<char, std::int64_t> size;
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
    }
  }
  const std::string& out = parsed.out;
  if (parsed.arrow) {
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

// A stateful op's new state, moved in (`state = {a, b}` would copy: an initializer list's elements
// are const).
template <class... T>
void set_state(std::vector<Tensor>& state, T&&... parts) {
  state.clear();
  (state.push_back(std::forward<T>(parts)), ...);
}

// state = {the op's last K-1 inputs, [B, K-1, C]}: zeros before the first token.
Tensor conv1d_causal_step(const Tensor& x, const Tensor& w, const Tensor* b, std::vector<Tensor>& state, bool commit,
                          const std::string& where) {
  if (x.shape.size() < 3 || x.shape[1] != 1) fail(where, "x must be one token [B, 1, ..., C] in sequential mode, got " + shape_text(x.shape));
  const std::int64_t K = conv1d_taps(x, w, b, where);
  if (K < 1) return conv1d_causal(x, w, b, where);  // no taps, nothing to remember
  const std::int64_t B = x.shape[0], C = x.shape.back(), N = token_elements(x);
  Dims window = x.shape;  // the state: [B, K - 1, ...]
  window[1] = K - 1;
  const Tensor* past = state.empty() ? nullptr : &state[0];
  if (past && past->shape != window)
    fail(where, "x " + shape_text(x.shape) + " differs from the last token's state " + shape_text(past->shape));
  // the kernel's last position over the window [the last K - 1 tokens (zeros before token 0), x]
  Tensor y = make(x.shape);
  for_each_index(B * N, B * N * K, [&](std::int64_t be) {
    const std::int64_t bi = be / N, e = be % N, c = e % C;
    double s = 0;
    for (std::int64_t k = 0; k < K; ++k) {
      const double xv = k == K - 1 ? x.data[bi * N + e] : past ? past->data[(bi * (K - 1) + k) * N + e] : 0.0;
      s = fmadd(w.data[c * K + k], xv, s);
    }
    y.data[bi * N + e] = s + (b ? b->data[c] : 0.0);
  });
  if (commit) {  // the window's last K - 1 tokens
    Tensor next = make(window);
    for (std::int64_t bi = 0; bi < B; ++bi)
      for (std::int64_t k = 0; k + 1 < K; ++k)
        for (std::int64_t e = 0; e < N; ++e)
          next.data[(bi * (K - 1) + k) * N + e] = k + 2 == K ? x.data[bi * N + e] : past ? past->data[(bi * (K - 1) + k + 1) * N + e] : 0.0;
    set_state(state, std::move(next));
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
    set_state(state, std::move(h));
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
  if (commit) set_state(state, std::move(keys), std::move(values));
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

}  // namespace aoc::ir::kernels
