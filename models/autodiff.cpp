#include "models/autodiff.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <utility>

#include "sim/error.hpp"

namespace aoc::ad {

namespace {

[[noreturn]] void fail(const char* op, const std::string& what) {
  throw Error(std::string("ad::") + op + ": " + what);
}

using Row = Eigen::Matrix<double, 1, Eigen::Dynamic>;

// Stable logistic function: exp(-|x|) never overflows.
template <class A>
Mat sigmoid_of(const A& x) {
  // Eigen's vectorised exp may return a subnormal instead of 0 far below the range: flush it, so
  // that sigmoid and SiLU saturate exactly
  const auto e0 = (-x.abs()).exp().eval();
  const auto e = (e0 < std::numeric_limits<double>::min()).select(0.0, e0).eval();
  const auto inv = (1.0 + e).inverse().eval();
  return (x >= 0).select(inv, e * inv).matrix();
}

}  // namespace

std::string shape_of(const Mat& m) {
  std::string s(1, '[');  // appended, not "[" + ...: GCC 12 warns falsely (-Wrestrict) on the latter
  s += std::to_string(m.rows());
  s += ", ";
  s += std::to_string(m.cols());
  s += ']';
  return s;
}

void Param::zero_grad() { grad = Mat::Zero(value.rows(), value.cols()); }

Tape::Tape(bool record) : record_(record) {}

const Tape::Node& Tape::node(Var v, const char* op) const {
  if (v.id < 0 || v.id >= static_cast<int>(nodes_.size()))
    fail(op, "Var " + std::to_string(v.id) + " is not a node of this tape (" + std::to_string(nodes_.size()) + " nodes)");
  return nodes_[v.id];
}

Var Tape::push(Mat value, std::initializer_list<Var> parents, Back back) {
  Node n;
  n.value = std::move(value);
  if (record_) {
    for (Var p : parents) n.needs_grad = n.needs_grad || nodes_[p.id].needs_grad;
    if (n.needs_grad) n.back = std::move(back);
  }
  nodes_.push_back(std::move(n));
  return Var{static_cast<int>(nodes_.size()) - 1};
}

Mat* Tape::grad_buf(Var v) {
  if (!nodes_[v.id].needs_grad) return nullptr;
  Mat& g = grads_[v.id];
  if (g.size() == 0) g = Mat::Zero(nodes_[v.id].value.rows(), nodes_[v.id].value.cols());
  return &g;
}

template <class E>
void Tape::acc(Var v, const E& e) {
  if (!nodes_[v.id].needs_grad) return;
  Mat& g = grads_[v.id];
  if (g.size() == 0)
    g = e;
  else
    g.array() += e.array();
}

bool Tape::broadcast_row(const char* op, const Mat& a, const Mat& b) const {
  if (b.rows() == a.rows() && b.cols() == a.cols()) return false;
  if (b.rows() == 1 && b.cols() == a.cols()) return true;
  fail(op, "a is " + shape_of(a) + ", b is " + shape_of(b) + ": b must have a's shape or be a row [1, " +
               std::to_string(a.cols()) + "]");
}

void Tape::check_blocks(const char* op, const Mat& x, int L) const {
  if (L <= 0 || x.rows() % L != 0)
    fail(op, "x is " + shape_of(x) + ", L = " + std::to_string(L) + ": L must be positive and divide the rows");
}

// ---------------------------------------------------------------------------------------------------
// leaves

Var Tape::leaf(Param& p) {
  if (record_ && (p.grad.rows() != p.value.rows() || p.grad.cols() != p.value.cols())) p.zero_grad();
  Node n;
  n.value = p.value;
  if (record_) {
    n.param = &p;
    n.needs_grad = true;
  }
  nodes_.push_back(std::move(n));
  return Var{static_cast<int>(nodes_.size()) - 1};
}

Var Tape::constant(const Mat& m) {
  Node n;
  n.value = m;
  nodes_.push_back(std::move(n));
  return Var{static_cast<int>(nodes_.size()) - 1};
}

const Mat& Tape::value(Var v) const { return node(v, "value").value; }
Mat Tape::detach_value(Var v) const { return node(v, "detach_value").value; }

// ---------------------------------------------------------------------------------------------------
// products

Var Tape::matmul(Var a, Var b) {
  const Mat& A = node(a, "matmul").value;
  const Mat& B = node(b, "matmul").value;
  if (A.cols() != B.rows()) fail("matmul", "a is " + shape_of(A) + ", b is " + shape_of(B) + ": inner sizes differ");
  Mat out(A.rows(), B.cols());
  out.noalias() = A * B;
  return push(std::move(out), {a, b}, [a, b](Tape& t, const Mat& g) {
    const Mat& A = t.nodes_[a.id].value;
    const Mat& B = t.nodes_[b.id].value;
    if (Mat* ga = t.grad_buf(a)) ga->noalias() += g * B.transpose();
    if (Mat* gb = t.grad_buf(b)) gb->noalias() += A.transpose() * g;
  });
}

Var Tape::linear(Var x, Var W) {
  const Mat& X = node(x, "linear").value;
  const Mat& Wm = node(W, "linear").value;
  if (X.cols() != Wm.cols())
    fail("linear", "x is " + shape_of(X) + ", W is " + shape_of(Wm) + ": W must be [out, " + std::to_string(X.cols()) + "]");
  Mat out(X.rows(), Wm.rows());
  out.noalias() = X * Wm.transpose();
  return push(std::move(out), {x, W}, [x, W](Tape& t, const Mat& g) {
    const Mat& X = t.nodes_[x.id].value;
    const Mat& Wm = t.nodes_[W.id].value;
    if (Mat* gx = t.grad_buf(x)) gx->noalias() += g * Wm;
    if (Mat* gw = t.grad_buf(W)) gw->noalias() += g.transpose() * X;
  });
}

// ---------------------------------------------------------------------------------------------------
// elementwise

Var Tape::add(Var a, Var b) {
  const Mat& A = node(a, "add").value;
  const Mat& B = node(b, "add").value;
  const bool row = broadcast_row("add", A, B);
  Mat out = row ? Mat(A.rowwise() + B.row(0)) : Mat(A + B);
  return push(std::move(out), {a, b}, [a, b, row](Tape& t, const Mat& g) {
    t.acc(a, g);
    if (row)
      t.acc(b, g.colwise().sum());
    else
      t.acc(b, g);
  });
}

Var Tape::sub(Var a, Var b) {
  const Mat& A = node(a, "sub").value;
  const Mat& B = node(b, "sub").value;
  const bool row = broadcast_row("sub", A, B);
  Mat out = row ? Mat(A.rowwise() - B.row(0)) : Mat(A - B);
  return push(std::move(out), {a, b}, [a, b, row](Tape& t, const Mat& g) {
    t.acc(a, g);
    if (row)
      t.acc(b, -g.colwise().sum());
    else
      t.acc(b, -g);
  });
}

Var Tape::mul(Var a, Var b) {
  const Mat& A = node(a, "mul").value;
  const Mat& B = node(b, "mul").value;
  const bool row = broadcast_row("mul", A, B);
  Mat out = row ? Mat(A.array().rowwise() * B.row(0).array()) : Mat(A.array() * B.array());
  return push(std::move(out), {a, b}, [a, b, row](Tape& t, const Mat& g) {
    const Mat& A = t.nodes_[a.id].value;
    const Mat& B = t.nodes_[b.id].value;
    if (row) {
      t.acc(a, g.array().rowwise() * B.row(0).array());
      t.acc(b, (g.array() * A.array()).colwise().sum());
    } else {
      t.acc(a, g.array() * B.array());
      t.acc(b, g.array() * A.array());
    }
  });
}

Var Tape::scale(Var a, double s) {
  Mat out = node(a, "scale").value * s;
  return push(std::move(out), {a}, [a, s](Tape& t, const Mat& g) { t.acc(a, g * s); });
}

Var Tape::add_scalar(Var a, double s) {
  Mat out = (node(a, "add_scalar").value.array() + s).matrix();
  return push(std::move(out), {a}, [a](Tape& t, const Mat& g) { t.acc(a, g); });
}

Var Tape::neg(Var a) {
  Mat out = -node(a, "neg").value;
  return push(std::move(out), {a}, [a](Tape& t, const Mat& g) { t.acc(a, -g); });
}

Var Tape::square(Var a) {
  Mat out = node(a, "square").value.array().square().matrix();
  return push(std::move(out), {a}, [a](Tape& t, const Mat& g) {
    t.acc(a, 2.0 * g.array() * t.nodes_[a.id].value.array());
  });
}

Var Tape::relu(Var a) {
  Mat out = node(a, "relu").value.array().max(0.0).matrix();
  return push(std::move(out), {a}, [a](Tape& t, const Mat& g) {
    t.acc(a, (t.nodes_[a.id].value.array() > 0.0).select(g.array(), 0.0));
  });
}

Var Tape::tanh(Var a) {
  Mat out = node(a, "tanh").value.array().tanh().matrix();
  const int self = static_cast<int>(nodes_.size());
  return push(std::move(out), {a}, [a, self](Tape& t, const Mat& g) {
    const Mat& y = t.nodes_[self].value;
    t.acc(a, g.array() * (1.0 - y.array().square()));
  });
}

Var Tape::sigmoid(Var a) {
  Mat out = sigmoid_of(node(a, "sigmoid").value.array());
  const int self = static_cast<int>(nodes_.size());
  return push(std::move(out), {a}, [a, self](Tape& t, const Mat& g) {
    const Mat& s = t.nodes_[self].value;
    t.acc(a, g.array() * s.array() * (1.0 - s.array()));
  });
}

Var Tape::silu(Var a) {
  const Mat& X = node(a, "silu").value;
  Mat out = (X.array() * sigmoid_of(X.array()).array()).matrix();
  return push(std::move(out), {a}, [a](Tape& t, const Mat& g) {
    const Mat& X = t.nodes_[a.id].value;
    const Mat s = sigmoid_of(X.array());
    t.acc(a, g.array() * s.array() * (1.0 + X.array() * (1.0 - s.array())));
  });
}

Var Tape::softplus(Var a) {
  const Mat& X = node(a, "softplus").value;
  Mat out = (X.array().max(0.0) + (-X.array().abs()).exp().log1p()).matrix();
  return push(std::move(out), {a}, [a](Tape& t, const Mat& g) {
    t.acc(a, g.array() * sigmoid_of(t.nodes_[a.id].value.array()).array());
  });
}

Var Tape::exp(Var a) {
  Mat out = node(a, "exp").value.array().exp().matrix();
  const int self = static_cast<int>(nodes_.size());
  return push(std::move(out), {a}, [a, self](Tape& t, const Mat& g) {
    t.acc(a, g.array() * t.nodes_[self].value.array());
  });
}

// ---------------------------------------------------------------------------------------------------
// normalisation, slicing, gathering

Var Tape::rmsnorm(Var x, Var gain, double eps) {
  const Mat& X = node(x, "rmsnorm").value;
  const Mat& G = node(gain, "rmsnorm").value;
  if (G.rows() != 1 || G.cols() != X.cols())
    fail("rmsnorm", "x is " + shape_of(X) + ", g is " + shape_of(G) + ": g must be a row [1, " + std::to_string(X.cols()) + "]");
  if (X.cols() == 0) fail("rmsnorm", "x is " + shape_of(X) + ": no columns");
  const Eigen::VectorXd r = ((X.array().square().rowwise().sum() / static_cast<double>(X.cols())) + eps).rsqrt();
  Mat n = X.array().colwise() * r.array();
  Mat out = n.array().rowwise() * G.row(0).array();
  return push(std::move(out), {x, gain}, [x, gain, r, n = std::move(n)](Tape& t, const Mat& gy) {
    const Mat& G = t.nodes_[gain.id].value;
    t.acc(gain, (gy.array() * n.array()).colwise().sum());
    if (t.needs(x)) {
      const Mat gn = gy.array().rowwise() * G.row(0).array();
      const Eigen::VectorXd dot = (gn.array() * n.array()).rowwise().sum() / static_cast<double>(n.cols());
      t.acc(x, (gn.array() - n.array().colwise() * dot.array()).colwise() * r.array());
    }
  });
}

Var Tape::slice_cols(Var x, int c0, int n) {
  const Mat& X = node(x, "slice_cols").value;
  if (c0 < 0 || n < 0 || c0 + n > X.cols())
    fail("slice_cols", "x is " + shape_of(X) + ": columns [" + std::to_string(c0) + ", " + std::to_string(c0 + n) +
                           ") are out of range");
  Mat out = X.middleCols(c0, n);
  return push(std::move(out), {x}, [x, c0, n](Tape& t, const Mat& g) {
    if (Mat* gx = t.grad_buf(x)) gx->middleCols(c0, n) += g;
  });
}

Var Tape::concat_cols(const std::vector<Var>& xs) {
  if (xs.empty()) fail("concat_cols", "no inputs");
  const Eigen::Index rows = node(xs[0], "concat_cols").value.rows();
  Eigen::Index cols = 0;
  for (Var v : xs) {
    const Mat& X = node(v, "concat_cols").value;
    if (X.rows() != rows)
      fail("concat_cols", "input 0 is " + shape_of(nodes_[xs[0].id].value) + ", an input is " + shape_of(X) + ": rows differ");
    cols += X.cols();
  }
  Mat out(rows, cols);
  Eigen::Index c = 0;
  for (Var v : xs) {
    const Mat& X = nodes_[v.id].value;
    out.middleCols(c, X.cols()) = X;
    c += X.cols();
  }
  Node n;
  n.value = std::move(out);
  if (record_) {
    for (Var v : xs) n.needs_grad = n.needs_grad || nodes_[v.id].needs_grad;
    if (n.needs_grad)
      n.back = [xs](Tape& t, const Mat& g) {
        Eigen::Index c = 0;
        for (Var v : xs) {
          const Eigen::Index w = t.nodes_[v.id].value.cols();
          if (Mat* gv = t.grad_buf(v)) *gv += g.middleCols(c, w);
          c += w;
        }
      };
  }
  nodes_.push_back(std::move(n));
  return Var{static_cast<int>(nodes_.size()) - 1};
}

Var Tape::embedding(Var table, const std::vector<int>& ids) {
  const Mat& T = node(table, "embedding").value;
  Mat out(static_cast<Eigen::Index>(ids.size()), T.cols());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= T.rows())
      fail("embedding", "table is " + shape_of(T) + ": id " + std::to_string(ids[i]) + " at position " + std::to_string(i) +
                            " is out of range");
    out.row(static_cast<Eigen::Index>(i)) = T.row(ids[i]);
  }
  return push(std::move(out), {table}, [table, ids](Tape& t, const Mat& g) {
    if (Mat* gt = t.grad_buf(table))
      for (std::size_t i = 0; i < ids.size(); ++i) gt->row(ids[i]) += g.row(static_cast<Eigen::Index>(i));
  });
}

// ---------------------------------------------------------------------------------------------------
// sequence ops: blocks of L rows

Var Tape::shift_rows(Var x, int L) {
  const Mat& X = node(x, "shift_rows").value;
  check_blocks("shift_rows", X, L);
  const Eigen::Index B = X.rows() / L;
  Mat out = Mat::Zero(X.rows(), X.cols());
  for (Eigen::Index b = 0; b < B; ++b) out.middleRows(b * L + 1, L - 1) = X.middleRows(b * L, L - 1);
  return push(std::move(out), {x}, [x, L, B](Tape& t, const Mat& g) {
    if (Mat* gx = t.grad_buf(x))
      for (Eigen::Index b = 0; b < B; ++b) gx->middleRows(b * L, L - 1) += g.middleRows(b * L + 1, L - 1);
  });
}

Var Tape::ssd(Var delta, Var a, Var x, Var b, Var c, int L) {
  const Mat &D = node(delta, "ssd").value, &A = node(a, "ssd").value, &X = node(x, "ssd").value;
  const Mat &Bm = node(b, "ssd").value, &Cm = node(c, "ssd").value;
  const Eigen::Index R = X.rows(), H = D.cols(), N = Bm.cols();
  if (H < 1 || A.rows() != R || A.cols() != H || D.rows() != R || X.cols() % H != 0 || Bm.rows() != R || Cm.rows() != R || Cm.cols() != N)
    fail("ssd", "delta " + shape_of(D) + ", a " + shape_of(A) + ", x " + shape_of(X) + ", B " + shape_of(Bm) + ", C " + shape_of(Cm) +
                    ": delta and a must be [rows, H], x [rows, H*P], B and C [rows, N]");
  check_blocks("ssd", X, L);
  const Eigen::Index P = X.cols() / H, S = H * P * N;
  const bool keep = record_ && (needs(delta) || needs(a) || needs(x) || needs(b) || needs(c));
  auto states = std::make_shared<Mat>(keep ? R : 0, keep ? S : 0);
  Mat y(R, H * P);
  std::vector<double> run(static_cast<std::size_t>(S));  // the state of the current row when not kept
  for (Eigen::Index r = 0; r < R; ++r) {
    const bool first = r % L == 0;
    double* hs = keep ? states->row(r).data() : run.data();
    const double* prev = keep ? (first ? nullptr : states->row(r - 1).data()) : (first ? nullptr : run.data());
    for (Eigen::Index h = 0; h < H; ++h) {
      const double ah = A(r, h), dh = D(r, h);
      for (Eigen::Index q = 0; q < P; ++q) {
        const double dx = dh * X(r, h * P + q);
        double* st = hs + (h * P + q) * N;
        const double* pv = prev ? prev + (h * P + q) * N : nullptr;
        double acc = 0;
        for (Eigen::Index n = 0; n < N; ++n) {
          st[n] = (pv ? ah * pv[n] : 0.0) + dx * Bm(r, n);
          acc += Cm(r, n) * st[n];
        }
        y(r, h * P + q) = acc;
      }
    }
  }
  return push(std::move(y), {delta, a, x, b, c}, [delta, a, x, b, c, L, H, P, N, S, states](Tape& t, const Mat& g) {
    const Mat &D = t.nodes_[delta.id].value, &A = t.nodes_[a.id].value, &X = t.nodes_[x.id].value;
    const Mat &Bm = t.nodes_[b.id].value, &Cm = t.nodes_[c.id].value;
    const Mat& St = *states;
    Mat *gd = t.grad_buf(delta), *ga = t.grad_buf(a), *gx = t.grad_buf(x), *gb = t.grad_buf(b), *gc = t.grad_buf(c);
    std::vector<double> dh(static_cast<std::size_t>(S));  // d loss / d h_t, carried back through the block
    for (Eigen::Index r = St.rows() - 1; r >= 0; --r) {
      const bool last = r % L == L - 1, first = r % L == 0;
      const double* hs = St.row(r).data();
      const double* prev = first ? nullptr : St.row(r - 1).data();
      for (Eigen::Index h = 0; h < H; ++h) {
        const double a_next = last ? 0.0 : A(r + 1, h), dl = D(r, h);
        double g_a = 0, g_d = 0;
        for (Eigen::Index q = 0; q < P; ++q) {
          const Eigen::Index k = h * P + q;
          const double gy = g(r, k), xv = X(r, k);
          double* d = dh.data() + k * N;
          const double* st = hs + k * N;
          double g_x = 0;
          for (Eigen::Index n = 0; n < N; ++n) {
            d[n] = gy * Cm(r, n) + a_next * d[n];  // y_t reads h_t; h_{t+1} reads it through a_{t+1}
            if (gc) (*gc)(r, n) += gy * st[n];
            if (prev) g_a += d[n] * prev[k * N + n];
            const double dbx = d[n] * Bm(r, n);
            g_x += dbx;
            g_d += dbx * xv;
            if (gb) (*gb)(r, n) += d[n] * dl * xv;
          }
          if (gx) (*gx)(r, k) += g_x * dl;
        }
        if (ga) (*ga)(r, h) += g_a;
        if (gd) (*gd)(r, h) += g_d;
      }
    }
  });
}

Var Tape::conv1d_causal(Var x, Var w, int L) {
  const Mat& X = node(x, "conv1d_causal").value;
  const Mat& W = node(w, "conv1d_causal").value;
  if (W.rows() < 1 || W.cols() < 1 || X.cols() % W.rows() != 0)
    fail("conv1d_causal", "x is " + shape_of(X) + ", w is " + shape_of(W) + ": w must be [C, K], K >= 1, with C dividing " +
                              std::to_string(X.cols()) + " columns");
  check_blocks("conv1d_causal", X, L);
  const Eigen::Index B = X.rows() / L, K = W.cols(), reps = X.cols() / W.rows();
  const Mat Wt = W.transpose().replicate(1, reps);  // [K, cols]: tap k as a contiguous row, per column
  Mat out = Mat::Zero(X.rows(), X.cols());
  for (Eigen::Index b = 0; b < B; ++b)
    for (Eigen::Index k = 0; k < K; ++k) {
      const Eigen::Index s = K - 1 - k;  // tap k reads s rows back
      if (s >= L) continue;
      out.middleRows(b * L + s, L - s).array() += X.middleRows(b * L, L - s).array().rowwise() * Wt.row(k).array();
    }
  const Eigen::Index C = W.rows();
  return push(std::move(out), {x, w}, [x, w, L, B, K, C, reps](Tape& t, const Mat& g) {
    const Mat& X = t.nodes_[x.id].value;
    const Mat Wt = t.nodes_[w.id].value.transpose().replicate(1, reps);
    Mat* gx = t.grad_buf(x);
    Mat gwt;
    if (t.needs(w)) gwt = Mat::Zero(K, X.cols());
    for (Eigen::Index b = 0; b < B; ++b)
      for (Eigen::Index k = 0; k < K; ++k) {
        const Eigen::Index s = K - 1 - k;
        if (s >= L) continue;
        const auto gs = g.middleRows(b * L + s, L - s);
        if (gx) gx->middleRows(b * L, L - s).array() += gs.array().rowwise() * Wt.row(k).array();
        if (gwt.size()) gwt.row(k) += (gs.array() * X.middleRows(b * L, L - s).array()).colwise().sum().matrix();
      }
    if (!gwt.size()) return;
    Mat folded = Mat::Zero(K, C);  // the shared filter's gradient: the sum over positions, in column order
    for (Eigen::Index r = 0; r < reps; ++r) folded += gwt.middleCols(r * C, C);
    t.acc(w, folded.transpose());
  });
}

namespace {

// A block of one frame's im2col: row r holds the patch of output position first + r = i*out_w + j,
// in (p, q, c) order. Each (i, j, p) is kw*channels contiguous inputs.
void im2col(const double* frame, const Tape::Conv2dShape& s, Eigen::Index first, Mat& rows) {
  const int ow = s.out_w(), run = s.kw * s.channels;
  for (Eigen::Index r = 0; r < rows.rows(); ++r) {
    const int i = static_cast<int>((first + r) / ow), j = static_cast<int>((first + r) % ow);
    double* dst = rows.row(r).data();
    for (int p = 0; p < s.kh; ++p)
      std::copy_n(frame + (static_cast<std::ptrdiff_t>(i * s.stride + p) * s.width + j * s.stride) * s.channels, run, dst + p * run);
  }
}

// The adjoint of im2col: adds each patch's gradient back onto the frame's pixels.
void col2im_add(const Mat& drows, const Tape::Conv2dShape& s, Eigen::Index first, double* frame) {
  const int ow = s.out_w(), run = s.kw * s.channels;
  for (Eigen::Index r = 0; r < drows.rows(); ++r) {
    const int i = static_cast<int>((first + r) / ow), j = static_cast<int>((first + r) % ow);
    const double* src = drows.row(r).data();
    for (int p = 0; p < s.kh; ++p) {
      double* dst = frame + (static_cast<std::ptrdiff_t>(i * s.stride + p) * s.width + j * s.stride) * s.channels;
      for (int k = 0; k < run; ++k) dst[k] += src[p * run + k];
    }
  }
}

// Output positions per block of patches: a block of im2col rows stays in the L2 cache (a whole
// frame's patches of a 21x21 kernel over 50x50 are 3 MB and made the products memory-bound).
Eigen::Index patch_block(Eigen::Index K) { return std::max<Eigen::Index>(8, (128 * 1024 / 8) / std::max<Eigen::Index>(1, K)); }

}  // namespace

Var Tape::conv2d(Var x, Var w, const Conv2dShape& s) {
  const Mat& X = node(x, "conv2d").value;
  const Mat& W = node(w, "conv2d").value;
  const std::string shapes = "x is " + shape_of(X) + ", W is " + shape_of(W) + " for frames " + std::to_string(s.height) + "x" +
                             std::to_string(s.width) + "x" + std::to_string(s.channels) + ", kernel " + std::to_string(s.kh) + "x" +
                             std::to_string(s.kw) + ", stride " + std::to_string(s.stride);
  if (s.height < 1 || s.width < 1 || s.channels < 1 || s.kh < 1 || s.kw < 1 || s.stride < 1 || s.kh > s.height || s.kw > s.width)
    fail("conv2d", shapes + ": the kernel must fit the frame, every size >= 1");
  const Eigen::Index K = static_cast<Eigen::Index>(s.kh) * s.kw * s.channels;
  if (X.cols() != static_cast<Eigen::Index>(s.height) * s.width * s.channels || W.cols() != K || W.rows() < 1)
    fail("conv2d", shapes + ": x needs height*width*channels columns and W kh*kw*channels");
  const Eigen::Index P = static_cast<Eigen::Index>(s.out_h()) * s.out_w(), Co = W.rows(), block = patch_block(K);
  Mat out(X.rows(), P * Co);
  Mat patches(std::min(block, P), K);
  for (Eigen::Index n = 0; n < X.rows(); ++n)
    for (Eigen::Index a = 0; a < P; a += block) {
      const Eigen::Index m = std::min(block, P - a);
      if (patches.rows() != m) patches.resize(m, K);
      im2col(X.row(n).data(), s, a, patches);
      Eigen::Map<Mat>(out.row(n).data() + a * Co, m, Co).noalias() = patches * W.transpose();  // a row-major row is [P, Co]
    }
  return push(std::move(out), {x, w}, [x, w, s, P, K, Co, block](Tape& t, const Mat& g) {
    const Mat& X = t.nodes_[x.id].value;
    const Mat& W = t.nodes_[w.id].value;
    Mat* gx = t.grad_buf(x);
    Mat gw;
    if (t.needs(w)) gw = Mat::Zero(Co, K);
    Mat patches(std::min(block, P), K), dpatches;
    for (Eigen::Index n = 0; n < X.rows(); ++n)
      for (Eigen::Index a = 0; a < P; a += block) {
        const Eigen::Index m = std::min(block, P - a);
        const Eigen::Map<const Mat> gn(g.row(n).data() + a * Co, m, Co);
        if (gw.size()) {
          if (patches.rows() != m) patches.resize(m, K);
          im2col(X.row(n).data(), s, a, patches);
          gw.noalias() += gn.transpose() * patches;
        }
        if (gx) {
          dpatches.noalias() = gn * W;
          col2im_add(dpatches, s, a, gx->row(n).data());
        }
      }
    if (gw.size()) t.acc(w, gw);
  });
}

Var Tape::add_channels(Var x, Var b) {
  const Mat& X = node(x, "add_channels").value;
  const Mat& Bv = node(b, "add_channels").value;
  if (Bv.rows() != 1 || Bv.cols() < 1 || X.cols() % Bv.cols() != 0)
    fail("add_channels", "x is " + shape_of(X) + ", b is " + shape_of(Bv) + ": b must be [1, C] with C dividing x's columns");
  const Eigen::Index reps = X.cols() / Bv.cols(), C = Bv.cols();
  Mat out = X.rowwise() + Bv.replicate(1, reps).row(0);
  return push(std::move(out), {x, b}, [x, b, reps, C](Tape& t, const Mat& g) {
    if (t.needs(x)) t.acc(x, g);
    if (!t.needs(b)) return;
    const Mat cols = g.colwise().sum();
    Mat gb = Mat::Zero(1, C);
    for (Eigen::Index r = 0; r < reps; ++r) gb += cols.middleCols(r * C, C);
    t.acc(b, gb);
  });
}

namespace {

void check_grid(const char* op, const Mat& X, const Tape::Grid& g, int size) {
  if (g.height < 1 || g.width < 1 || g.channels < 1 || size < 1 || X.cols() != static_cast<Eigen::Index>(g.height) * g.width * g.channels)
    fail(op, "x is " + shape_of(X) + " for frames " + std::to_string(g.height) + "x" + std::to_string(g.width) + "x" + std::to_string(g.channels) +
                 ", size " + std::to_string(size) + ": x needs height*width*channels columns, every size >= 1");
}

}  // namespace

Var Tape::max_pool2d(Var x, const Grid& s, int size) {
  const Mat& X = node(x, "max_pool2d").value;
  check_grid("max_pool2d", X, s, size);
  const int oh = s.height / size, ow = s.width / size, C = s.channels;
  if (oh < 1 || ow < 1) fail("max_pool2d", "a window of " + std::to_string(size) + " does not fit a " + std::to_string(s.height) + "x" + std::to_string(s.width) + " frame");
  Mat out(X.rows(), static_cast<Eigen::Index>(oh) * ow * C);
  std::vector<Eigen::Index> from(static_cast<std::size_t>(out.size()));  // the input column each result came from
  for (Eigen::Index n = 0; n < X.rows(); ++n)
    for (int i = 0; i < oh; ++i)
      for (int j = 0; j < ow; ++j)
        for (int c = 0; c < C; ++c) {
          Eigen::Index best = (static_cast<Eigen::Index>(i * size) * s.width + j * size) * C + c;
          for (int p = 0; p < size; ++p)
            for (int q = 0; q < size; ++q) {
              const Eigen::Index k = (static_cast<Eigen::Index>(i * size + p) * s.width + j * size + q) * C + c;
              if (X(n, k) > X(n, best)) best = k;
            }
          const Eigen::Index o = (static_cast<Eigen::Index>(i) * ow + j) * C + c;
          out(n, o) = X(n, best);
          from[static_cast<std::size_t>(n * out.cols() + o)] = best;
        }
  return push(std::move(out), {x}, [x, from = std::move(from)](Tape& t, const Mat& g) {
    Mat* gx = t.grad_buf(x);
    if (!gx) return;
    for (Eigen::Index n = 0; n < g.rows(); ++n)
      for (Eigen::Index o = 0; o < g.cols(); ++o) (*gx)(n, from[static_cast<std::size_t>(n * g.cols() + o)]) += g(n, o);
  });
}

Var Tape::upsample2d(Var x, const Grid& s, int size) {
  const Mat& X = node(x, "upsample2d").value;
  check_grid("upsample2d", X, s, size);
  const int oh = s.height * size, ow = s.width * size, C = s.channels;
  const auto source = [s, size, C, ow](Eigen::Index o) {  // the input column of result column o
    const Eigen::Index c = o % C, pos = o / C, i = pos / ow, j = pos % ow;
    return ((i / size) * s.width + j / size) * C + c;
  };
  Mat out(X.rows(), static_cast<Eigen::Index>(oh) * ow * C);
  for (Eigen::Index o = 0; o < out.cols(); ++o) out.col(o) = X.col(source(o));
  return push(std::move(out), {x}, [x, source](Tape& t, const Mat& g) {
    Mat* gx = t.grad_buf(x);
    if (!gx) return;
    for (Eigen::Index o = 0; o < g.cols(); ++o) gx->col(source(o)) += g.col(o);
  });
}

Var Tape::row_sum(Var x) {
  const Mat& X = node(x, "row_sum").value;
  Mat out = X.rowwise().sum();
  const Eigen::Index m = X.cols();
  return push(std::move(out), {x}, [x, m](Tape& t, const Mat& g) { t.acc(x, g.col(0).replicate(1, m)); });
}

Var Tape::mul_col(Var x, Var c) {
  const Mat& X = node(x, "mul_col").value;
  const Mat& C = node(c, "mul_col").value;
  if (C.cols() != 1 || C.rows() != X.rows())
    fail("mul_col", "x is " + shape_of(X) + ", c is " + shape_of(C) + ": c must be a column [" + std::to_string(X.rows()) + ", 1]");
  Mat out = X.array().colwise() * C.col(0).array();
  return push(std::move(out), {x, c}, [x, c](Tape& t, const Mat& g) {
    const Mat& X = t.nodes_[x.id].value;
    const Mat& C = t.nodes_[c.id].value;
    t.acc(x, g.array().colwise() * C.col(0).array());
    t.acc(c, (g.array() * X.array()).rowwise().sum());
  });
}

// ---------------------------------------------------------------------------------------------------
// reductions and losses

Var Tape::sum(Var x) {
  const Mat& X = node(x, "sum").value;
  Mat out(1, 1);
  out(0, 0) = X.sum();
  const Eigen::Index r = X.rows(), c = X.cols();
  return push(std::move(out), {x}, [x, r, c](Tape& t, const Mat& g) { t.acc(x, Mat::Constant(r, c, g(0, 0))); });
}

Var Tape::mean(Var x) {
  const Mat& X = node(x, "mean").value;
  if (X.size() == 0) fail("mean", "x is " + shape_of(X) + ": empty");
  Mat out(1, 1);
  out(0, 0) = X.mean();
  const Eigen::Index r = X.rows(), c = X.cols();
  return push(std::move(out), {x}, [x, r, c](Tape& t, const Mat& g) {
    t.acc(x, Mat::Constant(r, c, g(0, 0) / static_cast<double>(r * c)));
  });
}

Var Tape::cross_entropy(Var logits, const std::vector<int>& targets) {
  const Mat& Z = node(logits, "cross_entropy").value;
  if (static_cast<Eigen::Index>(targets.size()) != Z.rows())
    fail("cross_entropy", "logits are " + shape_of(Z) + ", " + std::to_string(targets.size()) + " targets: one target per row");
  Eigen::VectorXd lse(Z.rows());
  double total = 0.0;
  int count = 0;
  for (Eigen::Index i = 0; i < Z.rows(); ++i) {
    const int y = targets[static_cast<std::size_t>(i)];
    if (y < 0) continue;
    if (y >= Z.cols())
      fail("cross_entropy", "logits are " + shape_of(Z) + ": target " + std::to_string(y) + " at row " + std::to_string(i) +
                                " is out of range");
    const double m = Z.row(i).maxCoeff();
    lse(i) = m + std::log((Z.row(i).array() - m).exp().sum());
    total += lse(i) - Z(i, y);
    ++count;
  }
  Mat out(1, 1);
  out(0, 0) = count ? total / count : 0.0;
  return push(std::move(out), {logits}, [logits, targets, lse, count](Tape& t, const Mat& g) {
    Mat* gz = t.grad_buf(logits);
    if (!gz || count == 0) return;
    const Mat& Z = t.nodes_[logits.id].value;
    const double s = g(0, 0) / count;
    for (Eigen::Index i = 0; i < Z.rows(); ++i) {
      const int y = targets[static_cast<std::size_t>(i)];
      if (y < 0) continue;
      gz->row(i).array() += s * (Z.row(i).array() - lse(i)).exp();
      (*gz)(i, y) -= s;
    }
  });
}

Var Tape::poisson_nll(Var rate, const Mat& counts, const std::vector<char>& use) {
  const Mat& R = node(rate, "poisson_nll").value;
  if (counts.rows() != R.rows() || counts.cols() != R.cols() || static_cast<Eigen::Index>(use.size()) != R.rows())
    fail("poisson_nll", "rate is " + shape_of(R) + ", counts " + shape_of(counts) + ", " + std::to_string(use.size()) +
                            " row flags: counts must match the rate, one flag per row");
  constexpr double kFloor = 1e-8;
  double total = 0;
  Eigen::Index rows = 0;
  for (Eigen::Index i = 0; i < R.rows(); ++i) {
    if (!use[static_cast<std::size_t>(i)]) continue;
    ++rows;
    for (Eigen::Index j = 0; j < R.cols(); ++j) total += R(i, j) - counts(i, j) * std::log(std::max(R(i, j), kFloor));
  }
  const double n = static_cast<double>(rows * R.cols());
  Mat out(1, 1);
  out(0, 0) = n > 0 ? total / n : 0.0;
  return push(std::move(out), {rate}, [rate, counts, use, n](Tape& t, const Mat& g) {
    Mat* gr = t.grad_buf(rate);
    if (!gr || n == 0) return;
    const Mat& R = t.nodes_[rate.id].value;
    const double s = g(0, 0) / n;
    for (Eigen::Index i = 0; i < R.rows(); ++i) {
      if (!use[static_cast<std::size_t>(i)]) continue;
      for (Eigen::Index j = 0; j < R.cols(); ++j)
        (*gr)(i, j) += s * (1.0 - (R(i, j) > kFloor ? counts(i, j) / R(i, j) : 0.0));
    }
  });
}

Var Tape::gp_kl(Var mean, Var logvar, const Mat& K_inv, double logdet_K, int L) {
  const Mat& M = node(mean, "gp_kl").value;
  const Mat& V = node(logvar, "gp_kl").value;
  if (V.rows() != M.rows() || V.cols() != M.cols() || K_inv.rows() != L || K_inv.cols() != L)
    fail("gp_kl", "mean is " + shape_of(M) + ", logvar " + shape_of(V) + ", K_inv " + shape_of(K_inv) + ": mean and logvar alike, K_inv [L, L] with L = " +
                      std::to_string(L));
  check_blocks("gp_kl", M, L);
  const Eigen::Index B = M.rows() / L;
  const Eigen::VectorXd diag = K_inv.diagonal();
  double total = 0;
  for (Eigen::Index b = 0; b < B; ++b) {
    const auto m = M.middleRows(b * L, L);  // [L, D]: a column per latent dimension
    const auto v = V.middleRows(b * L, L);
    total += (diag.transpose() * v.array().exp().matrix()).sum() + (m.transpose() * K_inv * m).trace() - v.sum();
  }
  Mat out(1, 1);
  out(0, 0) = 0.5 * (total + static_cast<double>(B * M.cols()) * (logdet_K - L));
  return push(std::move(out), {mean, logvar}, [mean, logvar, K_inv, L, B](Tape& t, const Mat& g) {
    const double s = g(0, 0);
    if (Mat* gm = t.grad_buf(mean))
      for (Eigen::Index b = 0; b < B; ++b) gm->middleRows(b * L, L).noalias() += s * (K_inv * t.nodes_[mean.id].value.middleRows(b * L, L));
    if (Mat* gv = t.grad_buf(logvar)) {
      const Mat& V = t.nodes_[logvar.id].value;
      for (Eigen::Index b = 0; b < B; ++b)
        gv->middleRows(b * L, L).array() += 0.5 * s * ((V.middleRows(b * L, L).array().exp().colwise() * K_inv.diagonal().array()) - 1.0);
    }
  });
}

// ---------------------------------------------------------------------------------------------------

void Tape::backward(Var scalar) {
  const Node& top = node(scalar, "backward");
  if (!record_) fail("backward", "the tape does not record (Tape(false))");
  if (top.value.rows() != 1 || top.value.cols() != 1)
    fail("backward", "the output is " + shape_of(top.value) + ": it must be a scalar [1, 1]");
  grads_.assign(nodes_.size(), Mat());
  if (!top.needs_grad) return;
  grads_[scalar.id] = Mat::Ones(1, 1);
  for (int i = scalar.id; i >= 0; --i) {
    if (grads_[i].size() == 0) continue;
    Node& n = nodes_[i];
    const Mat g = std::move(grads_[i]);
    grads_[i] = Mat();
    if (n.back) n.back(*this, g);
    if (n.param) n.param->grad += g;
  }
  grads_.clear();
}

double grad_check(const std::function<Var(Tape&)>& f, const std::vector<Param*>& params, double h) {
  auto eval = [&]() {
    Tape t(false);
    const Var y = f(t);
    const Mat& v = t.value(y);
    if (v.size() != 1) throw Error("ad::grad_check: f must build a scalar [1, 1], got " + shape_of(v));
    return v(0, 0);
  };
  for (Param* p : params) p->zero_grad();
  {
    Tape t(true);
    t.backward(f(t));
  }
  double worst = 0.0;
  for (Param* p : params) {
    for (Eigen::Index k = 0; k < p->value.size(); ++k) {
      double& x = p->value.data()[k];
      const double x0 = x;
      x = x0 + h;
      const double fp = eval();
      x = x0 - h;
      const double fm = eval();
      x = x0;
      const double fd = (fp - fm) / (2.0 * h);
      const double ad = p->grad.data()[k];
      const double rel = std::abs(fd - ad) / std::max(1e-8, std::abs(fd) + std::abs(ad));
      if (!(rel <= worst)) worst = std::isnan(rel) ? std::numeric_limits<double>::infinity() : rel;
    }
  }
  return worst;
}

}  // namespace aoc::ad
