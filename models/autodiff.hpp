// A small reverse-mode automatic differentiation over row-major Eigen matrices: a tape of the ops the
// implicit state-space models use (products, elementwise maps with row broadcasting, RMSNorm, column
// slices, embeddings, the per-sequence delay, Mamba2's selective scan and causal convolution, masked
// cross-entropy).
//
// Every value is a 2-D double matrix. Sequences are laid out as rows b*L + t of a [B*L, D] matrix;
// the sequence ops act within each block of L rows. A Tape records each op's value and how to send a
// gradient back to its inputs; backward() runs the tape in reverse once and adds the gradient of a
// scalar into the Param::grad of every leaf it depends on. Results are deterministic: no reduction is
// split across threads by this code (matmul/linear are Eigen products, see models/README.md).
// Shape errors throw aoc::Error with one line that names the op and the shapes.
#pragma once
#include <Eigen/Dense>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace aoc::ad {

using Mat = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// A trainable tensor. grad has value's shape once a tape has used it (Tape::leaf sizes an empty or
// mis-shaped grad to zeros); backward adds into it, zero_grad() zeroes it.
struct Param {
  std::string name;
  Mat value, grad;
  void zero_grad();
};

// A handle to a node of one tape.
struct Var {
  int id = -1;
};

// "[rows, cols]", for error messages.
std::string shape_of(const Mat& m);

class Tape {
 public:
  // record=false: values only, no backward closures and no gradients (the no-grad solve).
  explicit Tape(bool record = true);

  bool recording() const { return record_; }

  Var leaf(Param& p);            // the value is copied; backward adds the gradient into p.grad
  Var constant(const Mat& m);    // no gradient
  const Mat& value(Var v) const;
  Mat detach_value(Var v) const;  // a copy
  int rows(Var v) const { return static_cast<int>(value(v).rows()); }
  int cols(Var v) const { return static_cast<int>(value(v).cols()); }

  // products
  Var matmul(Var a, Var b);  // a[n,k] b[k,m] -> [n,m]
  Var linear(Var x, Var W);  // x[n,in] W[out,in]^T -> [n,out] (torch convention)

  // elementwise; b may have a's shape or be a row [1, m] broadcast over a's rows
  Var add(Var a, Var b);
  Var sub(Var a, Var b);
  Var mul(Var a, Var b);
  Var scale(Var a, double s);
  Var add_scalar(Var a, double s);
  Var tanh(Var a);
  Var sigmoid(Var a);   // stable for any |a|
  Var silu(Var a);      // a * sigmoid(a)
  Var softplus(Var a);  // log(1 + exp(a)), stable: max(a, 0) + log1p(exp(-|a|))
  Var exp(Var a);
  Var neg(Var a);
  Var square(Var a);  // (added) a * a
  Var relu(Var a);    // max(a, 0); the gradient at 0 is 0

  // per row: x / sqrt(mean(x^2) + eps) * g, g a row [1, m]
  Var rmsnorm(Var x, Var g, double eps = 1e-5);
  Var slice_cols(Var x, int c0, int n);  // columns [c0, c0 + n)
  Var concat_cols(const std::vector<Var>& xs);
  Var embedding(Var table, const std::vector<int>& ids);  // out.row(i) = table.row(ids[i])

  // sequences are laid out as rows b*L + t ([B*L, D]); these act within each block of L rows:
  Var shift_rows(Var x, int L);      // out[b*L+t] = x[b*L+t-1], a zero row at t = 0
  // out[t, j] = sum_{k<K} w[j % C, k] x[t-K+1+k, j]; w [C, K] with C dividing x's columns (channels
  // last: one filter per channel, shared over the positions before it)
  Var conv1d_causal(Var x, Var w, int L);

  // Mamba2's selective scan, fused: with H heads of P channels and N states per channel,
  //   h_t[h,p,n] = a_t[h] h_{t-1}[h,p,n] + delta_t[h] x_t[h,p] B_t[n]   (h_{-1} = 0 in each block)
  //   y_t[h,p]   = sum_n C_t[n] h_t[h,p,n]
  // delta, a [BL, H]; x [BL, H*P]; B, C [BL, N] -> y [BL, H*P]. The states stay inside the op (kept
  // for backward only when the tape records): no [BL, H*P*N] value on the tape.
  Var ssd(Var delta, Var a, Var x, Var B, Var C, int L);

  // Frames as rows: each row of x is one frame [height, width, channels], channels last. conv2d is
  // the valid cross-correlation of each frame with W [out, kh*kw*channels] (a filter's (p, q, c) in
  // row-major order, the order of an im2col patch): row n of the result is [out_h, out_w, out],
  // channels last, out[i, j, o] = sum_{p,q,c} W[o, (p*kw + q)*channels + c] x[i*stride + p, j*stride + q, c].
  // The patches of one frame at a time: memory stays one frame's im2col whatever the batch.
  struct Conv2dShape {
    int height = 0, width = 0, channels = 1, kh = 1, kw = 1, stride = 1;
    int out_h() const { return (height - kh) / stride + 1; }
    int out_w() const { return (width - kw) / stride + 1; }
  };
  Var conv2d(Var x, Var W, const Conv2dShape& s);
  // b [1, C] with C dividing x's columns: column j gets b[j % C] (a per-channel bias over positions).
  Var add_channels(Var x, Var b);
  // Frames [height, width, channels] as rows, as conv2d's. max_pool2d: the largest of each size x
  // size window at stride size -> [height / size, width / size, channels] (floor; the gradient goes
  // to the first largest). upsample2d: nearest neighbour -> [height * size, width * size, channels].
  struct Grid {
    int height = 0, width = 0, channels = 1;
  };
  Var max_pool2d(Var x, const Grid& g, int size);
  Var upsample2d(Var x, const Grid& g, int size);

  Var row_sum(Var x);         // [n, m] -> [n, 1]
  Var mul_col(Var x, Var c);  // x[n,m] ⊙ c[n,1] broadcast over columns

  // losses, scalars [1,1]
  Var sum(Var x);
  Var mean(Var x);
  // mean over the rows whose target is >= 0 of -log softmax(row)[target]; targets < 0 are masked
  // and not counted (0 when every row is masked)
  Var cross_entropy(Var logits, const std::vector<int>& targets);
  // Poisson negative log-likelihood of counts y under expected counts r: the mean over the rows with
  // use[row] != 0 and every column of r - y log r (log y! left out: it does not depend on r); r is
  // floored at 1e-8 inside the log.
  Var poisson_nll(Var rate, const Mat& counts, const std::vector<char>& use);
  // The KL divergence of diagonal Gaussians q (mean m, log-variance v; [B*L, D], sequences of L rows)
  // from a zero-mean Gaussian-process prior N(0, K) over each sequence, independently per column:
  // the sum over blocks and columns of 0.5 [sum_t Kinv_tt e^v_t + m^T Kinv m - L + logdet_K - sum_t v_t],
  // Kinv = K^-1 [L, L] and logdet_K = log |K| given (the prior is fixed: computed once by the caller).
  Var gp_kl(Var mean, Var logvar, const Mat& K_inv, double logdet_K, int L);

  // d scalar = 1; adds into the leaves' Param::grad. The tape must record and `scalar` be [1,1].
  void backward(Var scalar);
  std::size_t size() const { return nodes_.size(); }

 private:
  using Back = std::function<void(Tape&, const Mat& g)>;
  struct Node {
    Mat value;
    Back back;               // empty for leaves, constants and when not recording
    Param* param = nullptr;  // set for leaves
    bool needs_grad = false;
  };

  const Node& node(Var v, const char* op) const;
  Var push(Mat value, std::initializer_list<Var> parents, Back back);
  bool needs(Var v) const { return nodes_[v.id].needs_grad; }
  // The gradient buffer of v, zero-filled on first use; nullptr when v needs no gradient.
  Mat* grad_buf(Var v);
  template <class E>
  void acc(Var v, const E& e);
  // b is a's shape (false) or a row broadcast over a's rows (true); otherwise throws.
  bool broadcast_row(const char* op, const Mat& a, const Mat& b) const;
  void check_blocks(const char* op, const Mat& x, int L) const;

  bool record_;
  std::vector<Node> nodes_;
  std::vector<Mat> grads_;  // used during backward only
};

// Max relative error |g_fd - g_ad| / max(1e-8, |g_fd| + |g_ad|) over every element of every param.
// f builds a scalar on a fresh tape; central differences with step h. Leaves each p.grad holding the
// analytic gradient and each p.value as it was.
double grad_check(const std::function<Var(Tape&)>& f, const std::vector<Param*>& params, double h = 1e-6);

}  // namespace aoc::ad
