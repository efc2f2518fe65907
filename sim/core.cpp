#include "sim/core.hpp"

#include <cmath>
#include <cstring>
#include <type_traits>

#include "sim/error.hpp"
#include "sim/fastmath.hpp"
#include "sim/stages.hpp"

namespace aoc {

namespace {
constexpr int kTileRows = 64;  // rows per thread task: L (64 x 2N) stays in L1/L2
}  // namespace

template <class T>
OpticalCore<T>::OpticalCore(const Hardware& hw, CoreConfig cfg)
    : hw_(hw), cfg_(std::move(cfg)), tile_(std::make_unique<OpticalTile<T>>(hw_, cfg_, Optics::Calibrated)) {}

template <class T>
void OpticalCore<T>::set_noise(const NoiseRun& noise) {
  if (n_ > 0) throw Error("noise: set it before programming the weights");
  TileNoise t;
  t.spec = noise.spec;
  t.seed = noise.seed;
  t.program_seed = noise.program_seed;
  t.zero_reads = noise.zero_reads;
  t.after_programming_us = noise.after_programming_us;
  t.zero_every_us = noise.zero_every_us;
  t.loop_period_us = noise.loop_period_us;
  t.slot_ticks = std::max<std::int64_t>(1, std::llround(noise.sample_spacing_us / noise.loop_period_us));
  tile_->set_noise(t);
}

template <class T>
void OpticalCore<T>::load_weights(const Eigen::Ref<const MatrixXdR>& W, const Eigen::VectorXd& bias) {
  check_loop_shapes(cfg_, W.rows(), W.cols(), W.allFinite(), W.allFinite() ? W.cwiseAbs().maxCoeff() : 0.0);
  if (bias.size() != W.cols()) throw Error("bias: expected " + std::to_string(W.cols()) + " values, got " + std::to_string(bias.size()));
  if (!bias.allFinite()) throw Error("bias: contains NaN or infinity");
  n_ = static_cast<int>(W.cols());
  ld_ = padded<T>(n_);
  tile_->program(W, 0, 0, n_);
  alpha_.assign(ld_, T(0));
  bias_.assign(ld_, T(0));
  for (int j = 0; j < n_; ++j) alpha_[j] = static_cast<T>(coeff_at(cfg_.alpha, j, 0.0)), bias_[j] = static_cast<T>(bias(j));
  binary_.assign(ld_, T(0));
  for (int j = 0; j < n_; ++j) binary_[j] = is_binary_channel(cfg_, j) ? T(1) : T(0);
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
// |u|^c and (1+|u|^c)^(-1/c); std::pow does not vectorise, so both go through log and exp. Its
// chains of polynomials are latency-bound, so up to U vectors go through each step together.
void nonlinearity(const Hardware& hw_, const CoreConfig& cfg_, const float* z, float* t, int len) {
  // the machine's widest float vector (wider than it, GCC splits the comparisons lane by lane)
#if defined(__AVX512F__)
  using V = fastmath::f32x16;
#else
  using V = fastmath::f32x8;
#endif
  using I = fastmath::IntOf<V>::type;
  constexpr int W = sizeof(V) / sizeof(float);
  constexpr int U = 4;
  if (cfg_.nonlinearity == Nonlinearity::Tanh) {
    Eigen::Map<const Eigen::ArrayXf, Eigen::AlignedMax> zt(z, len);
    Eigen::Map<Eigen::ArrayXf, Eigen::AlignedMax>(t, len) = zt.tanh();
    return;
  }
  const auto& k = hw_.tanh;
  const float a = float(k[0]), b = float(k[1]), c = float(k[2]), d = float(k[3]), f = float(k[4]), g = float(k[5]);
  const float inv_c = float(-1.0 / k[2]);
  auto block = [&](int v0, auto count) {
    constexpr int n = decltype(count)::value;
    V zz[n], u[n], q[n];
#pragma GCC unroll 8
    for (int i = 0; i < n; ++i) {
      std::memcpy(&zz[i], z + W * (v0 + i), sizeof(V));
      u[i] = a * zz[i] + b;
      q[i] = c * fastmath::log_nonneg((V)((I)u[i] & 0x7fffffff));  // |u|
    }
#pragma GCC unroll 8
    for (int i = 0; i < n; ++i) q[i] = inv_c * fastmath::log_nonneg(1.0f + fastmath::exp(q[i]));
#pragma GCC unroll 8
    for (int i = 0; i < n; ++i) {
      const V r = d * u[i] * fastmath::exp(q[i]) + f + g * zz[i];
      std::memcpy(t + W * (v0 + i), &r, sizeof(V));
    }
  };
  static_assert(16 % W == 0, "len is a multiple of 16");
  const int vectors = len / W;
  int v = 0;
  for (; v + U <= vectors; v += U) block(v, std::integral_constant<int, U>{});
  for (; v + 2 <= vectors; v += 2) block(v, std::integral_constant<int, 2>{});
  for (; v < vectors; ++v) block(v, std::integral_constant<int, 1>{});
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

// rows of the loop: the nonlinearity into scratch, then one read of the tile whose epilogue adds
// the leak, injection and momentum.
template <class T>
void OpticalCore<T>::step_rows(const T* z, const T* inj, const T* zprev, T* out, int rows, T* scratch, const T* alpha,
                               const StepContext& ctx, int row0) const {
  if (cfg_.nonlinearity == Nonlinearity::Ising) {
    // the comparator: its level times sign(z) on a binary channel, times z on a continuous one
    const T level = static_cast<T>(cfg_.ising_level);
    for (int r = 0; r < rows; ++r)
      for (int j = 0; j < ld_; ++j) {
        const T v = z[static_cast<size_t>(r) * ld_ + j];
        scratch[static_cast<size_t>(r) * ld_ + j] = level * (binary_[j] != T(0) ? static_cast<T>((v > T(0)) - (v < T(0))) : v);
      }
  } else {
    nonlinearity(hw_, cfg_, z, scratch, rows * ld_);
  }
  kern::Epilogue<T> e;
  e.alpha = alpha;
  e.z = z;
  e.inj = inj;
  e.zprev = zprev;
  e.gamma = gamma_;
  e.has_gamma = has_gamma_;
  e.kappa = static_cast<T>(cfg_.step_fraction);
  tile_->read(scratch, rows, ctx, row0, e, out, scratch + static_cast<size_t>(kTileRows) * ld_);
  if (cfg_.wall) {
    const T w = static_cast<T>(*cfg_.wall);
    for (int i = 0; i < rows * ld_; ++i) out[i] = std::min(std::max(out[i], -w), w);
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
  const int tiles = (z.rows + kTileRows - 1) / kTileRows;
  tile_->prepare_reads(z.rows);
  const size_t scratch_len = static_cast<size_t>(kTileRows) * ld_ + tile_->scratch_size(kTileRows);
  auto run_tile = [&](int tile) {
    thread_local AlignedVector<T> scratch;  // reused across steps: no allocation in the loop
    if (scratch.size() < scratch_len) scratch.resize(scratch_len);
    const int r0 = tile * kTileRows;
    const int rows = std::min(kTileRows, z.rows - r0);
    step_rows(z.row(r0), inj.row(r0), z_prev ? z_prev->row(r0) : nullptr, out.row(r0), rows, scratch.data(), alpha, ctx, r0);
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
