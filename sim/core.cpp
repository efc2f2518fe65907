#include "sim/core.hpp"

#include <cmath>
#include <cstring>

#include "sim/error.hpp"
#include "sim/fastmath.hpp"
#include "sim/noise.hpp"
#include <type_traits>

namespace aoc {

FoldedChain fold_optical_chain(const Hardware& hw, const CoreConfig& cfg, const MatrixXdR& W, const SlmPattern* slm) {
  // The chain is affine in the LED drives, so probing it with zero and unit drives gives it exactly:
  // c = chain(0, 0), rows of F = chain(e_i, 0) - c and chain(0, e_i) - c. One implementation of the
  // twin's maths (sim/stages.cpp) serves both the readable path and the fast one.
  const Eigen::Index N = W.cols();
  const MatrixXdR zero = MatrixXdR::Zero(N, N), eye = MatrixXdR::Identity(N, N);
  FoldedChain f;
  StepStages pos, neg;  // the probes' stages: fan-in, SLM transmissions and gains of each path
  const MatrixXdR c0 = optical_chain(hw, cfg, W, MatrixXdR::Zero(1, N), MatrixXdR::Zero(1, N), nullptr, slm);
  f.c = c0.row(0).transpose();
  f.F.resize(2 * N, N);
  f.F.topRows(N) = optical_chain(hw, cfg, W, eye, zero, &pos, slm).rowwise() - c0.row(0);
  f.F.bottomRows(N) = optical_chain(hw, cfg, W, zero, eye, &neg, slm).rowwise() - c0.row(0);
  // Light on channel j's detectors per unit drive of LED i: fan-in (a unit probe's after_fanin is
  // its diagonal) times the SLM transmission of each path.
  f.F_light.resize(2 * N, N);
  f.F_light.topRows(N) = pos.after_fanin_pos.diagonal().asDiagonal() * pos.W_pos_distorted_norm;
  f.F_light.bottomRows(N) = neg.after_fanin_neg.diagonal().asDiagonal() * neg.W_neg_distorted_norm;
  f.light_per_bias = f.F_light.colwise().sum().transpose();
  f.detector_gain = pos.detector_gain;
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

// What the matrix product's epilogue adds to each output: out = kappa*(acc + c + alpha z + inj
// + gamma (z - z_prev)) + (1 - kappa) z. Without an epilogue (plain) the product is stored as is.
template <class T>
struct Epilogue {
  const T *c = nullptr, *alpha = nullptr, *z = nullptr, *inj = nullptr, *zprev = nullptr;
  T gamma = 0, kappa = 1;
  bool has_gamma = false, plain = false;
};

// out[i, j] = sum_k L[i, k] F[k, j] (+ epilogue), for MR rows and NV vectors of columns from j0.
// Every output element is one FMA chain over k in order, whichever instantiation computes it.
template <class T, int MR, int NV>
inline void gemm_tile(const T* L, int ldl, const T* F, int ld, int K, int j0, const Epilogue<T>& e, size_t row0, T* out) {
  using V = typename Vec<T>::type;
  constexpr int W = kVecLanes<T>;
  V acc[MR][NV];
  for (int i = 0; i < MR; ++i)
    for (int v = 0; v < NV; ++v) acc[i][v] = V{};
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
      if (e.plain) {
        store(out + r + j, acc[i][v]);
        continue;
      }
      const size_t at = row0 + r + j;
      const V zv = load(e.z + at);
      V g = acc[i][v] + load(e.c + j);
      g += load(e.alpha + j) * zv;
      g += load(e.inj + at);
      if (e.has_gamma) g += e.gamma * (zv - (e.zprev ? load(e.zprev + at) : V{}));
      if (e.kappa != T(1)) g = e.kappa * g + (T(1) - e.kappa) * zv;
      store(out + r + j, g);
    }
  }
}

template <class T, int MR>
inline void gemm_rows(const T* L, int ldl, const T* F, int ld, int K, const Epilogue<T>& e, size_t row0, T* out) {
  constexpr int W = kVecLanes<T>;
  const int nvec = ld / W;
  int v0 = 0;
  for (; v0 + kNV <= nvec; v0 += kNV) gemm_tile<T, MR, kNV>(L, ldl, F, ld, K, v0 * W, e, row0, out);
  switch (nvec - v0) {
    case 0: break;
    case 1: gemm_tile<T, MR, 1>(L, ldl, F, ld, K, v0 * W, e, row0, out); break;
    case 2: gemm_tile<T, MR, 2>(L, ldl, F, ld, K, v0 * W, e, row0, out); break;
    case 3: gemm_tile<T, MR, 3>(L, ldl, F, ld, K, v0 * W, e, row0, out); break;
  }
}

// rows x ld outputs of L (rows x 2ld) times F (2ld x ld), row blocks of kMR then single rows.
template <class T>
void gemm(const T* L, const T* F, int ld, int rows, const Epilogue<T>& e, T* out) {
  const int ldl = 2 * ld;
  int r = 0;
  for (; r + kMR <= rows; r += kMR) {
    const size_t o = static_cast<size_t>(r) * ld;
    gemm_rows<T, kMR>(L + static_cast<size_t>(r) * ldl, ldl, F, ld, ldl, e, o, out + o);
  }
  for (; r < rows; ++r) {
    const size_t o = static_cast<size_t>(r) * ld;
    gemm_rows<T, 1>(L + static_cast<size_t>(r) * ldl, ldl, F, ld, ldl, e, o, out + o);
  }
}

}  // namespace

namespace {

// A 2N x N map stored as (2*ld) x ld: LED+ rows at 0.., LED- rows at ld.., columns zero-padded.
template <class T>
AlignedVector<T> pack_rows(const MatrixXdR& m, int ld) {
  const Eigen::Index n = m.cols();
  AlignedVector<T> out(static_cast<size_t>(2 * ld) * ld, T(0));
  for (Eigen::Index i = 0; i < n; ++i)
    for (Eigen::Index j = 0; j < n; ++j) {
      out[static_cast<size_t>(i) * ld + j] = static_cast<T>(m(i, j));
      out[static_cast<size_t>(ld + i) * ld + j] = static_cast<T>(m(n + i, j));
    }
  return out;
}

template <class T>
AlignedVector<T> pad(const Eigen::VectorXd& v, int ld) {
  AlignedVector<T> out(ld, T(0));
  for (Eigen::Index j = 0; j < v.size(); ++j) out[j] = static_cast<T>(v(j));
  return out;
}

}  // namespace

template <class T>
OpticalCore<T>::OpticalCore(const Hardware& hw, CoreConfig cfg) : hw_(hw), cfg_(std::move(cfg)) {}

template <class T>
void OpticalCore<T>::set_noise(const NoiseRun& noise) {
  if (n_ > 0) throw Error("noise: set it before programming the weights");
  if (noise.flicker_length < 2) throw Error("noise: the 1/f sequence needs at least 2 iterations");
  noise_ = noise;
  noisy_ = true;
}

template <class T>
void OpticalCore<T>::load_weights(const MatrixXdR& W, const Eigen::VectorXd& bias) {
  check_loop_shapes(cfg_, W.rows(), W.cols(), W.allFinite(), W.allFinite() ? W.cwiseAbs().maxCoeff() : 0.0);
  if (bias.size() != W.cols()) throw Error("bias: expected " + std::to_string(W.cols()) + " values, got " + std::to_string(bias.size()));
  if (!bias.allFinite()) throw Error("bias: contains NaN or infinity");
  n_ = static_cast<int>(W.cols());
  ld_ = padded<T>(n_);
  // SLM fixed-pattern error: one draw per transmission per programming
  SlmPattern pattern;
  const bool fixed_pattern = noisy_ && noise_.spec.slm_fixed_pattern_sigma > 0;
  if (fixed_pattern) {
    const double sd = noise_.spec.slm_fixed_pattern_sigma;
    const auto prog = static_cast<std::uint32_t>(programmings_);
    pattern.pos.resize(n_, n_);
    pattern.neg.resize(n_, n_);
    for (int i = 0; i < n_; ++i)
      for (int j = 0; j < n_; ++j) {
        pattern.pos(i, j) = 1 + sd * noise::normal(noise_.seed, noise::Source::SlmPattern, 2 * prog, i, j);
        pattern.neg(i, j) = 1 + sd * noise::normal(noise_.seed, noise::Source::SlmPattern, 2 * prog + 1, i, j);
      }
  }
  ++programmings_;
  const FoldedChain f = fold_optical_chain(hw_, cfg_, W, fixed_pattern ? &pattern : nullptr);
  F_ = pack_rows<T>(f.F, ld_);
  F_light_ = pack_rows<T>(f.F_light, ld_);
  c_ = pad<T>(f.c, ld_);
  light_bias_ = pad<T>(f.light_per_bias, ld_);
  detector_gain_ = pad<T>(f.detector_gain, ld_);
  alpha_.assign(ld_, T(0));
  bias_ = pad<T>(bias, ld_);
  for (int j = 0; j < n_; ++j) alpha_[j] = static_cast<T>(coeff_at(cfg_.alpha, j, 0.0));
  {
    std::lock_guard<std::mutex> lock(flicker_mutex_);
    flicker_.clear();
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
void OpticalCore<T>::step_tile(const T* z, const T* inj, const T* zprev, T* out, int rows, T* scratch,
                               const T* alpha, const StepContext& ctx, int tile_row0) const {
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
  if (noisy_ && noise_.spec.rin_sigma > 0) add_rin(L, rows, ctx, tile_row0);
  Epilogue<T> e;
  e.c = c_.data();
  e.alpha = alpha;
  e.z = z;
  e.inj = inj;
  e.zprev = zprev;
  e.gamma = gamma_;
  e.has_gamma = has_gamma_;
  e.kappa = static_cast<T>(cfg_.step_fraction);
  gemm(L, F_.data(), ld_, rows, e, out);
  if (noisy_) add_output_noise(L, out, rows, ctx, tile_row0, scratch);
}

// LED relative intensity noise: each LED's light (bias + drive) fluctuates by rin * eps; the same
// LED feeds both optical paths, so one draw per (sample, iteration, LED).
template <class T>
void OpticalCore<T>::add_rin(T* L, int rows, const StepContext& ctx, int row0) const {
  const double rin = noise_.spec.rin_sigma, bias = noise_.spec.led_bias;
  std::vector<double> eps(n_);
  for (int r = 0; r < rows; ++r) {
    const auto sample = static_cast<std::uint32_t>(ctx.sample(row0 + r));
    noise::normals(noise_.seed, noise::Source::Rin, sample, ctx.iteration, n_, eps.data());
    T* lp = L + static_cast<size_t>(r) * 2 * ld_;
    T* ln = lp + ld_;
    for (int i = 0; i < n_; ++i) {
      const double e = rin * eps[i];
      lp[i] += static_cast<T>((bias + lp[i]) * e);
      ln[i] += static_cast<T>((bias + ln[i]) * e);
    }
  }
}

// Noise that arrives after the optics, per output channel: detector shot noise (from the light
// each detector receives), receiver thermal noise, slow drift and 1/f noise. It enters the update
// like the signal, so a finite bandwidth filters it the same way.
template <class T>
void OpticalCore<T>::add_output_noise(const T* L, T* out, int rows, const StepContext& ctx, int row0,
                                      T* scratch) const {
  const NoiseSpec& ns = noise_.spec;
  const double kappa = cfg_.step_fraction;
  T* light = scratch + static_cast<size_t>(kTileRows) * ld_ * 3;
  const bool shot = ns.photons_per_sample > 0;
  if (shot) {
    Epilogue<T> plain;
    plain.plain = true;
    gemm(L, F_light_.data(), ld_, rows, plain, light);
  }
  // photons on a detector = photons_per_sample * light / reference light (every LED at its bias
  // through full transmission, unit fan-in: n * bias)
  const double ref = ns.led_bias * n_;
  std::vector<double> shot_eps(shot ? n_ : 0), thermal_eps(ns.thermal_sigma > 0 ? n_ : 0), drift(n_, 0.0);
  // the drift's knots change every drift_time_us, far slower than samples follow each other: keep them
  std::vector<double> knot0(n_), knot1(n_);
  double knot_m = -1;
  for (int r = 0; r < rows; ++r) {
    const int sample = ctx.sample(row0 + r);
    const auto s32 = static_cast<std::uint32_t>(sample);
    if (shot) noise::normals(noise_.seed, noise::Source::Shot, s32, ctx.iteration, n_, shot_eps.data());
    if (!thermal_eps.empty()) noise::normals(noise_.seed, noise::Source::Thermal, s32, ctx.iteration, n_, thermal_eps.data());
    const double t = (sample * noise_.sample_spacing_us + ctx.iteration * noise_.loop_period_us) / ns.drift_time_us;
    if (ns.drift_sigma > 0) {
      const double m = std::floor(t), w = t - m;
      if (m != knot_m) {
        const auto mi = static_cast<std::uint32_t>(static_cast<std::int64_t>(m));
        for (int j = 0; j < n_; ++j) knot0[j] = noise::drift_knot(noise_.seed, j, mi), knot1[j] = noise::drift_knot(noise_.seed, j, mi + 1);
        knot_m = m;
      }
      for (int j = 0; j < n_; ++j) drift[j] = ns.drift_sigma * ((1 - w) * knot0[j] + w * knot1[j]);
    }
    // read without the lock: prepare_flicker filled the map before the tiles started
    const std::vector<float>* fl = ns.flicker_sigma > 0 ? &flicker_.at(sample) : nullptr;
    T* o = out + static_cast<size_t>(r) * ld_;
    const T* lr = light + static_cast<size_t>(r) * ld_;
    for (int j = 0; j < n_; ++j) {
      double v = drift[j];
      if (shot) {
        const double detected = std::max(0.0, static_cast<double>(lr[j]) + ns.led_bias * light_bias_[j]);
        v += detector_gain_[j] * std::sqrt(detected * ref / ns.photons_per_sample) * shot_eps[j];
      }
      if (!thermal_eps.empty()) v += ns.thermal_sigma * thermal_eps[j];
      if (fl) v += (*fl)[static_cast<size_t>(j) * noise_.flicker_length + ctx.iteration % noise_.flicker_length];
      o[j] += static_cast<T>(kappa * v);
    }
  }
}

// 1/f sequences are whole-solve objects: made once per sample (FFT), then read per iteration.
template <class T>
void OpticalCore<T>::prepare_flicker(int rows, const StepContext& ctx) const {
  std::lock_guard<std::mutex> lock(flicker_mutex_);
  for (int r = 0; r < rows; ++r) {
    const int sample = ctx.sample(r);
    if (flicker_.count(sample)) continue;
    std::vector<float> seq(static_cast<size_t>(n_) * noise_.flicker_length);
    for (int j = 0; j < n_; ++j) {
      const auto x = noise::flicker(noise_.seed, static_cast<std::uint32_t>(sample), j, noise_.flicker_length, noise_.spec.flicker_sigma);
      std::copy(x.begin(), x.end(), seq.begin() + static_cast<std::ptrdiff_t>(j) * noise_.flicker_length);
    }
    flicker_.emplace(sample, std::move(seq));
  }
}

template <class T>
void OpticalCore<T>::step(const Batch<T>& z, const Batch<T>& inj, const Batch<T>* z_prev, Batch<T>& out,
                          const StepContext& ctx) const {
  if (z.n != n_ || inj.n != n_ || inj.rows != z.rows || (z_prev && (z_prev->n != n_ || z_prev->rows != z.rows)))
    throw Error("step: batch shapes do not match the core");
  if (out.rows != z.rows || out.n != n_) out = Batch<T>(z.rows, n_);
  // annealing: this iteration's alpha for every channel
  AlignedVector<T> scheduled;
  const T* alpha = alpha_.data();
  if (cfg_.alpha_schedule.kind != AlphaSchedule::Kind::Constant) {
    scheduled.assign(ld_, T(0));
    const T a = static_cast<T>(cfg_.alpha_schedule.at(ctx.iteration));
    std::fill(scheduled.begin(), scheduled.begin() + n_, a);
    alpha = scheduled.data();
  }
  if (noisy_ && noise_.spec.flicker_sigma > 0) prepare_flicker(z.rows, ctx);
  const int tiles = (z.rows + kTileRows - 1) / kTileRows;
  const size_t scratch_len = static_cast<size_t>(kTileRows) * ld_ * 4;
  auto run_tile = [&](int tile) {
    thread_local AlignedVector<T> scratch;  // reused across steps: no allocation in the loop
    if (scratch.size() < scratch_len) scratch.resize(scratch_len);
    const int r0 = tile * kTileRows;
    const int rows = std::min(kTileRows, z.rows - r0);
    step_tile(z.row(r0), inj.row(r0), z_prev ? z_prev->row(r0) : nullptr, out.row(r0), rows, scratch.data(), alpha,
              ctx, r0);
  };
  if (tiles == 1) {
    run_tile(0);
    return;
  }
#pragma omp parallel for schedule(static)
  for (int tile = 0; tile < tiles; ++tile) run_tile(tile);
}

template <class T>
StepFn<T> OpticalCore<T>::step_fn() const {
  return [this](const Batch<T>& z, const Batch<T>& inj, const Batch<T>* prev, Batch<T>& out, const StepContext& ctx) {
    step(z, inj, prev, out, ctx);
  };
}

template class OpticalCore<float>;
template class OpticalCore<double>;

}  // namespace aoc
