// The tensor kernels of the graph IR's ops: plain loops over row-major doubles, each op's semantics
// exactly as docs/ir.md defines them. The op records (compiler/ops/) call them; the interpreter runs
// the records. Every shape check fails with one line that starts with `where` (the op at fault).
#pragma once
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "compiler/ir.hpp"
#include "sim/error.hpp"

namespace aoc::ir::kernels {

using Dims = std::vector<std::int64_t>;

inline std::int64_t numel(const Dims& s) {
  std::int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

[[noreturn]] inline void fail(const std::string& where, const std::string& msg) { throw Error(where + ": " + msg); }

// c + a b with one rounding: one rule for every sum of products below, whatever the compiler would
// contract in a given loop shape (the fused selective-scan step relies on computing exactly what
// Einsum and Scan compute), and on every instruction set (an instruction where the target has FMA,
// the C library's exact fma where it has not: the same bits, slower).
inline double fmadd(double a, double b, double c) { return std::fma(a, b, c); }

// acc[l] = fmadd over n in order of (C[n], h_l[n], acc[l]) for 8 lanes of states h_l = rows + l N (a
// selective-scan readout: one chain per lane, the Einsum's order).
void readout8(const double* rows, std::int64_t N, const double* C, double* acc);

// The reference's products (compiler/products.cpp): y[r out + o] = the dot product of x's row r
// (x: rows x in) and W's row o (W: out x in, row-major), each element in one fixed order: eight
// lanes (lane l: the terms j = l mod 8, by fmadd in order of j), then ((l0+l4)+(l2+l6))+((l1+l5)+(l3+l7)).
// The same bits for any batch, thread count or instruction set (sim/isa.hpp).
void dot_rows(const double* x, std::int64_t rows, const double* W, std::int64_t out, std::int64_t in, double* y, int threads);
double dot8(const double* a, const double* b, std::int64_t n);  // one dot product in that order

Tensor make(Dims shape, double fill = 0.0);
Dims strides_of(const Dims& s);  // row-major
int norm_axis(std::int64_t axis, size_t rank, const std::string& where);  // [-rank, rank) made non-negative

double sigmoid(double x);
double silu(double x);
double softplus(double x);

// Elementwise loops of at least this many elements run on the OpenMP threads of the run (the
// interpreter sets their count to InterpretOptions::threads); each element's value is its own.
constexpr std::int64_t kParallelGrain = 16384;

// f(i) for i in [0, n): on the run's threads when `work` (elements touched) reaches the grain, else a
// plain loop (an OpenMP construct with a false if-clause still sets up a team: microseconds an op,
// which a token's small tensors notice).
template <class F>
void for_each_index(std::int64_t n, std::int64_t work, F f) {
  if (work >= kParallelGrain) {
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < n; ++i) f(i);
  } else {
    for (std::int64_t i = 0; i < n; ++i) f(i);
  }
}

template <class F>
Tensor unary(const Tensor& x, F f) {
  Tensor y = make(x.shape);
  const std::int64_t n = static_cast<std::int64_t>(x.data.size());
  for_each_index(n, n, [&](std::int64_t i) { y.data[i] = f(x.data[i]); });
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
    for_each_index(n, n, [&](std::int64_t k) { y.data[k] = f(a.data[k], b.data[k]); });
    return y;
  }
  if (r == 0 || n == 0) {  // scalars, or nothing
    if (n) y.data[0] = f(a.data[0], b.data[0]);
    return y;
  }
  // rows of the last axis (each operand's stride along it is 1 or 0), the outer axes row-major
  const std::int64_t inner = out[r - 1], ia = sa[r - 1], ib = sb[r - 1];
  const std::int64_t rows = inner == 0 ? 0 : n / inner;
  for_each_index(rows, n, [&](std::int64_t row) {
    std::int64_t oa = 0, ob = 0;
    for (std::int64_t i = static_cast<std::int64_t>(r) - 2, rest = row; i >= 0; --i) {  // the row's index along each outer axis
      const std::int64_t at = rest % out[i];
      rest /= out[i];
      oa += at * sa[i], ob += at * sb[i];
    }
    double* yk = y.data.data() + row * inner;
    for (std::int64_t e = 0; e < inner; ++e) yk[e] = f(a.data[oa + e * ia], b.data[ob + e * ib]);
  });
  return y;
}

Tensor linear(const Tensor& x, const Tensor& W, const Tensor* b, int threads, const std::string& where);
// Conv2d's patches (im2col): x[..., H, W, C] and a kernel W[Cout, kh, kw, C] -> [..., Ho, Wo, kh*kw*C]
// with Ho = (H - kh) / stride + 1 (valid padding), the patch of output (i, j) in (p, q, c) order:
// W's row-major order after its first axis, so that the convolution is each patch's product with W
// read as the matrix [Cout, kh*kw*C] (Linear's product, on the optics one vector per position).
Tensor im2col(const Tensor& x, const Tensor& W, std::int64_t stride, const std::string& where);
// y[..., i, j, o] = b[o] + sum_{p,q,c} W[o, p, q, c] x[..., i*stride + p, j*stride + q, c]: im2col's
// patches through Linear's product (the same sums as the optical reference's).
Tensor conv2d(const Tensor& x, const Tensor& W, const Tensor* b, std::int64_t stride, int threads, const std::string& where);
// x[..., H, W, C] -> [..., H / size, W / size, C] (floor): the mean (max: the largest) of each
// size x size window, stride size.
Tensor pool2d(const Tensor& x, std::int64_t size, bool max, const std::string& where);
// Nearest neighbour: x[..., H, W, C] -> [..., H*scale, W*scale, C], y[..., i, j, c] = x[..., i/scale, j/scale, c].
Tensor upsample2d(const Tensor& x, std::int64_t scale, const std::string& where);
Tensor matmul(const Tensor& a, const Tensor& b, int threads, const std::string& where);
Tensor rmsnorm(const Tensor& x, const Tensor& g, double eps, const std::string& where);
Tensor softmax(const Tensor& x, const std::string& where);  // over the last dim, max-subtracted
// x[B, L, ..., C], w[C, K] (, b[C]): causal along axis 1, per channel (the last axis), the same taps
// at every position of the axes between L and C.
Tensor conv1d_causal(const Tensor& x, const Tensor& w, const Tensor* b, const std::string& where);
Tensor embedding(const Tensor& ids, const Tensor& table, const std::string& where);
std::vector<Tensor> split(const Tensor& x, const Dims& sizes, std::int64_t axis_attr, size_t n_out, const std::string& where);
Tensor concat(const std::vector<const Tensor*>& xs, std::int64_t axis_attr, const std::string& where);
Tensor reshape(const Tensor& x, const Dims& target, const std::string& where);
// An einsum spec without spaces, split into its operand terms and its output (the implicit form's
// output: the letters that occur once, in alphabetical order). The one reader of a spec: the
// verifier, the kernel and the interpreter's pattern matching go through it.
struct EinsumSpec {
  std::string text;
  std::vector<std::string> terms;
  std::string out;
  bool arrow = false;  // the explicit form, "...->out"
};
EinsumSpec parse_einsum(const std::string& spec_attr);
Tensor einsum(const std::string& spec_attr, const std::vector<const Tensor*>& xs, int threads, const std::string& where);
// q, k, v [B, L, D]: `heads` heads of D/heads channels, rotate-half RoPE on q and k with theta,
// causal softmax attention with scale 1/sqrt(d_head).
Tensor causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, std::int64_t heads, std::optional<double> theta,
                        const std::string& where);
Tensor scan(const Tensor& a, const Tensor& x, const Tensor* h0, int threads, const std::string& where);
Tensor delay(const Tensor& x, const std::string& where);  // y[:, t] = x[:, t-1], zeros at t = 0

// Sequential mode: one token ([B, 1, ...]) of the ops that carry state along axis 1, with the op
// instance's state (empty before the first token); the state is replaced only when `commit`.
Tensor conv1d_causal_step(const Tensor& x, const Tensor& w, const Tensor* b, std::vector<Tensor>& state, bool commit,
                          const std::string& where);
Tensor delay_step(const Tensor& x, std::vector<Tensor>& state, bool commit, const std::string& where);
Tensor scan_step(const Tensor& a, const Tensor& x, const Tensor* h0, std::vector<Tensor>& state, bool commit, int threads,
                 const std::string& where);
Tensor causal_attention_step(const Tensor& q, const Tensor& k, const Tensor& v, std::int64_t heads, std::optional<double> theta,
                             std::vector<Tensor>& state, bool commit, const std::string& where);
Tensor token_slice(const Tensor& x, std::int64_t t);  // x's slice t along axis 1: [B, 1, ...]

}  // namespace aoc::ir::kernels
