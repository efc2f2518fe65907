#include "sim/core.hpp"

#include <cmath>
#include <cstring>

#include "sim/error.hpp"
#include "sim/fastmath.hpp"
#include <type_traits>

namespace aoc {

FoldedChain fold_optical_chain(const Hardware& hw, const CoreConfig& cfg, const MatrixXdR& W) {
  // The chain is affine in the LED drives, so probing it with zero and unit drives gives it exactly:
  // c = chain(0, 0), rows of F = chain(e_i, 0) - c and chain(0, e_i) - c. One implementation of the
  // twin's maths (sim/stages.cpp) serves both the readable path and the fast one.
  const Eigen::Index N = W.cols();
  const MatrixXdR zero = MatrixXdR::Zero(N, N), eye = MatrixXdR::Identity(N, N);
  FoldedChain f;
  const MatrixXdR c0 = optical_chain(hw, cfg, W, MatrixXdR::Zero(1, N), MatrixXdR::Zero(1, N));
  f.c = c0.row(0).transpose();
  f.F.resize(2 * N, N);
  f.F.topRows(N) = optical_chain(hw, cfg, W, eye, zero).rowwise() - c0.row(0);
  f.F.bottomRows(N) = optical_chain(hw, cfg, W, zero, eye).rowwise() - c0.row(0);
  return f;
}

namespace {

// GCC vector extensions, as wide as the target's registers. Rows are padded to 64 bytes whatever
// the width, so every instantiation sees whole vectors.
#if defined(__AVX512F__)
constexpr int kVecBytes = 64, kMR = 4, kNV = 4;  // register tile: rows x vectors (16 accumulators of 32)
#elif defined(__AVX__)
constexpr int kVecBytes = 32, kMR = 4, kNV = 2;  // 8 accumulators of 16
#else
constexpr int kVecBytes = 16, kMR = 4, kNV = 2;
#endif
template <class T> struct Vec;
template <> struct Vec<float> { typedef float type __attribute__((vector_size(kVecBytes))); };
template <> struct Vec<double> { typedef double type __attribute__((vector_size(kVecBytes))); };
template <class T>
constexpr int kVecLanes = kVecBytes / static_cast<int>(sizeof(T));
static_assert(64 % kVecBytes == 0, "row padding must hold whole vectors");
constexpr int kTileRows = 64;  // rows per thread task: L (64 x 2N) stays in L1/L2

template <class T>
inline typename Vec<T>::type load(const T* p) {
  typename Vec<T>::type v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <class T>
inline void store(T* p, typename Vec<T>::type v) { std::memcpy(p, &v, sizeof v); }

// out[i, j] = sum_k L[i, k] F[k, j] + epilogue, for MR rows and NV vectors of columns starting at j0.
// Every output element is one FMA chain over k in order, whichever instantiation computes it.
template <class T, int MR, int NV>
inline void gemm_tile(const T* L, int ldl, const T* F, int ld, int K, int j0, const T* c, const T* alpha,
                      T gamma, bool has_gamma, const T* z, const T* inj, const T* zprev, T* out) {
  using V = typename Vec<T>::type;
  constexpr int W = kVecLanes<T>;
  V acc[MR][NV];
  for (int i = 0; i < MR; ++i)
    for (int v = 0; v < NV; ++v) acc[i][v] = V{} ;
  for (int k = 0; k < K; ++k) {
    V b[NV];
    for (int v = 0; v < NV; ++v) b[v] = load(F + static_cast<size_t>(k) * ld + j0 + v * W);
    for (int i = 0; i < MR; ++i) {
      const T a = L[static_cast<size_t>(i) * ldl + k];
      for (int v = 0; v < NV; ++v) acc[i][v] += a * b[v];
    }
  }
  for (int i = 0; i < MR; ++i) {
    const size_t r = static_cast<size_t>(i) * ld;
    for (int v = 0; v < NV; ++v) {
      const int j = j0 + v * W;
      const V zv = load(z + r + j);
      V g = acc[i][v] + load(c + j);
      g += load(alpha + j) * zv;
      g += load(inj + r + j);
      if (has_gamma) g += gamma * (zv - (zprev ? load(zprev + r + j) : V{}));
      store(out + r + j, g);
    }
  }
}

template <class T, int MR>
inline void gemm_rows(const T* L, int ldl, const T* F, int ld, int K, const T* c, const T* alpha, T gamma,
                      bool has_gamma, const T* z, const T* inj, const T* zprev, T* out) {
  constexpr int W = kVecLanes<T>;
  const int nvec = ld / W;
  int v0 = 0;
  for (; v0 + kNV <= nvec; v0 += kNV)
    gemm_tile<T, MR, kNV>(L, ldl, F, ld, K, v0 * W, c, alpha, gamma, has_gamma, z, inj, zprev, out);
  switch (nvec - v0) {
    case 0: break;
    case 1: gemm_tile<T, MR, 1>(L, ldl, F, ld, K, v0 * W, c, alpha, gamma, has_gamma, z, inj, zprev, out); break;
    case 2: gemm_tile<T, MR, 2>(L, ldl, F, ld, K, v0 * W, c, alpha, gamma, has_gamma, z, inj, zprev, out); break;
    case 3: gemm_tile<T, MR, 3>(L, ldl, F, ld, K, v0 * W, c, alpha, gamma, has_gamma, z, inj, zprev, out); break;
  }
}

}  // namespace

template <class T>
OpticalCore<T>::OpticalCore(const Hardware& hw, CoreConfig cfg) : hw_(hw), cfg_(std::move(cfg)) {}

template <class T>
void OpticalCore<T>::load_weights(const MatrixXdR& W, const Eigen::VectorXd& bias) {
  check_loop_shapes(cfg_, W.rows(), W.cols(), W.allFinite(), W.allFinite() ? W.cwiseAbs().maxCoeff() : 0.0);
  if (bias.size() != W.cols()) throw Error("bias: expected " + std::to_string(W.cols()) + " values, got " + std::to_string(bias.size()));
  if (!bias.allFinite()) throw Error("bias: contains NaN or infinity");
  n_ = static_cast<int>(W.cols());
  ld_ = padded<T>(n_);
  const FoldedChain f = fold_optical_chain(hw_, cfg_, W);
  F_.assign(static_cast<size_t>(2 * ld_) * ld_, T(0));
  c_.assign(ld_, T(0));
  alpha_.assign(ld_, T(0));
  bias_.assign(ld_, T(0));
  for (int j = 0; j < n_; ++j) {
    for (int i = 0; i < n_; ++i) {
      F_[static_cast<size_t>(i) * ld_ + j] = static_cast<T>(f.F(i, j));
      F_[static_cast<size_t>(ld_ + i) * ld_ + j] = static_cast<T>(f.F(n_ + i, j));
    }
    c_[j] = static_cast<T>(f.c(j));
    alpha_[j] = static_cast<T>(coeff_at(cfg_.alpha, j, 0.0));
    bias_[j] = static_cast<T>(bias(j));
  }
  has_gamma_ = cfg_.gamma.has_value();
  gamma_ = static_cast<T>(cfg_.gamma.value_or(0.0));
}

template <class T>
Batch<T> OpticalCore<T>::injection(const Batch<T>& x) const {
  if (x.n != n_) throw Error("inputs: expected " + std::to_string(n_) + " channels, got " + std::to_string(x.n));
  Batch<T> inj(x.rows, x.n);
  const T lo = static_cast<T>(hw_.clip_lo), hi = static_cast<T>(hw_.clip_hi);
  for (int r = 0; r < x.rows; ++r)
    for (int j = 0; j < n_; ++j) {
      const T v = x.row(r)[j] + bias_[j];
      inj.row(r)[j] = cfg_.input_clip ? std::min(std::max(v, lo), hi) : v;
    }
  return inj;
}

namespace {

// t = sigma(z) over len elements (a multiple of 16, 64-byte aligned). The twin's sigmoid needs
// |u|^c and (1+|u|^c)^(-1/c); std::pow does not vectorise, so both go through log and exp.
void nonlinearity(const Hardware& hw_, const CoreConfig& cfg_, const float* z, float* t, int len) {
  using fastmath::f32x16;
  constexpr int U = 4;  // independent packets in flight: the polynomial chains are latency-bound
  const int packets = len / 16;
  if (cfg_.nonlinearity == Nonlinearity::Tanh) {
    Eigen::Map<const Eigen::ArrayXf, Eigen::AlignedMax> zt(z, len);
    Eigen::Map<Eigen::ArrayXf, Eigen::AlignedMax>(t, len) = zt.tanh();
    return;
  }
  const auto& k = hw_.tanh;
  const float a = float(k[0]), b = float(k[1]), c = float(k[2]), d = float(k[3]), f = float(k[4]), g = float(k[5]);
  const float inv_c = float(-1.0 / k[2]);
  auto block = [&](int p0, auto u_count) {
    constexpr int n = decltype(u_count)::value;
    f32x16 zz[n], u[n], q[n];
    for (int i = 0; i < n; ++i) {
      std::memcpy(&zz[i], z + 16 * (p0 + i), 64);
      u[i] = a * zz[i] + b;
      q[i] = c * fastmath::log_nonneg(u[i] < 0 ? -u[i] : u[i]);
    }
    for (int i = 0; i < n; ++i) q[i] = inv_c * fastmath::log_nonneg(1.0f + fastmath::exp(q[i]));
    for (int i = 0; i < n; ++i) {
      const f32x16 r = d * u[i] * fastmath::exp(q[i]) + f + g * zz[i];
      std::memcpy(t + 16 * (p0 + i), &r, 64);
    }
  };
  int p = 0;
  for (; p + U <= packets; p += U) block(p, std::integral_constant<int, U>{});
  for (; p < packets; ++p) block(p, std::integral_constant<int, 1>{});
}

void nonlinearity(const Hardware& hw_, const CoreConfig& cfg_, const double* z, double* t, int len) {
  Eigen::Map<const Eigen::ArrayXd, Eigen::AlignedMax> zt(z, len);
  Eigen::Map<Eigen::ArrayXd, Eigen::AlignedMax> out(t, len);
  if (cfg_.nonlinearity == Nonlinearity::Tanh) {
    out = zt.tanh();
    return;
  }
  const auto& k = hw_.tanh;
  out = k[3] * (k[0] * zt + k[1]) * ((-1.0 / k[2]) * (1.0 + (k[2] * (k[0] * zt + k[1]).abs().log()).exp()).log()).exp() + k[4] + k[5] * zt;
}

}  // namespace

template <class T>
void OpticalCore<T>::step_tile(const T* z, const T* inj, const T* zprev, T* out, int rows, T* scratch) const {
  const size_t len = static_cast<size_t>(rows) * ld_;
  // 1. electronics nonlinearity
  nonlinearity(hw_, cfg_, z, scratch, static_cast<int>(len));
  // 2. LED drives into L = [LED+(t) | LED-(t)], one row of 2*ld per state row
  T* L = scratch + len;
  const int ldl = 2 * ld_;
  if (cfg_.led == LedModel::Twin) {
    const T p3 = T(hw_.led_pos[0]), p2 = T(hw_.led_pos[1]), p1 = T(hw_.led_pos[2]), p0 = T(hw_.led_pos[3]);
    const T n3 = T(hw_.led_neg[0]), n2 = T(hw_.led_neg[1]), n1 = T(hw_.led_neg[2]), n0 = T(hw_.led_neg[3]);
    for (int r = 0; r < rows; ++r) {
      const T* tr = scratch + static_cast<size_t>(r) * ld_;
      T* lp = L + static_cast<size_t>(r) * ldl;
      T* ln = lp + ld_;
      for (int j = 0; j < ld_; ++j) {
        const T x = tr[j];
        lp[j] = ((p3 * x + p2) * x + p1) * x + p0;
        ln[j] = ((n3 * x + n2) * x + n1) * x + n0;
      }
    }
  } else {
    for (int r = 0; r < rows; ++r) {
      const T* tr = scratch + static_cast<size_t>(r) * ld_;
      T* lp = L + static_cast<size_t>(r) * ldl;
      std::memcpy(lp, tr, sizeof(T) * ld_);
      std::memcpy(lp + ld_, tr, sizeof(T) * ld_);
    }
  }
  // 3-14. one fused matrix product with the folded chain, plus alpha*z, injection and momentum
  const int K = ldl;
  int r = 0;
  for (; r + kMR <= rows; r += kMR) {
    const size_t o = static_cast<size_t>(r) * ld_;
    gemm_rows<T, kMR>(L + static_cast<size_t>(r) * ldl, ldl, F_.data(), ld_, K, c_.data(), alpha_.data(), gamma_,
                      has_gamma_, z + o, inj + o, zprev ? zprev + o : nullptr, out + o);
  }
  for (; r < rows; ++r) {
    const size_t o = static_cast<size_t>(r) * ld_;
    gemm_rows<T, 1>(L + static_cast<size_t>(r) * ldl, ldl, F_.data(), ld_, K, c_.data(), alpha_.data(), gamma_,
                    has_gamma_, z + o, inj + o, zprev ? zprev + o : nullptr, out + o);
  }
}

template <class T>
void OpticalCore<T>::step(const Batch<T>& z, const Batch<T>& inj, const Batch<T>* z_prev, Batch<T>& out) const {
  if (z.n != n_ || inj.n != n_ || inj.rows != z.rows || (z_prev && (z_prev->n != n_ || z_prev->rows != z.rows)))
    throw Error("step: batch shapes do not match the core");
  if (out.rows != z.rows || out.n != n_) out = Batch<T>(z.rows, n_);
  const int tiles = (z.rows + kTileRows - 1) / kTileRows;
  const size_t scratch_len = static_cast<size_t>(kTileRows) * ld_ * 3;
  auto run_tile = [&](int tile) {
    thread_local AlignedVector<T> scratch;  // reused across steps: no allocation in the loop
    if (scratch.size() < scratch_len) scratch.resize(scratch_len);
    const int r0 = tile * kTileRows;
    const int rows = std::min(kTileRows, z.rows - r0);
    step_tile(z.row(r0), inj.row(r0), z_prev ? z_prev->row(r0) : nullptr, out.row(r0), rows, scratch.data());
  };
  if (tiles == 1) {
    run_tile(0);
    return;
  }
#pragma omp parallel for schedule(static)
  for (int tile = 0; tile < tiles; ++tile) run_tile(tile);
}

template class OpticalCore<float>;
template class OpticalCore<double>;

}  // namespace aoc
