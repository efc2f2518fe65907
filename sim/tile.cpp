#include "sim/tile.hpp"

#include <array>

#include <atomic>

#include <algorithm>
#include <cmath>
#include <climits>
#include <limits>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "sim/error.hpp"
#include "sim/json_reader.hpp"
#include "sim/noise.hpp"
#include "sim/simd.hpp"

namespace aoc {

FactoredChain factor_optical_chain(const Hardware& hw, const CoreConfig& cfg, const MatrixXdR& W_core, int in0, int K, int out0, int M,
                                   const SlmPattern* slm) {
  // The chain is affine, so probing gives it exactly; one implementation of the twin's maths
  // (sim/stages.cpp) serves the readable path and the fast one. The light on the detectors is the
  // drives (after fan-in) times the SLM's transmissions; the detector chain after it is probed with
  // unit light and unit drives: each detector hears its own and its two neighbours' channels, so
  // three combs of every third channel per input give every coefficient in one batch of probes.
  const Eigen::Index C = W_core.cols();
  if (in0 < 0 || K < 1 || in0 + K > C || out0 < 0 || M < 1 || out0 + M > C)
    throw Error("optical chain: a tile of " + std::to_string(K) + " x " + std::to_string(M) + " at (" + std::to_string(in0) + ", " +
                std::to_string(out0) + ") does not fit a core of " + std::to_string(C) + " channels");
  const SlmTransmissions t = slm_transmissions(hw, cfg, W_core, slm);
  const Eigen::VectorXd fp = fan_in(hw, cfg, static_cast<int>(C), true), fn = fan_in(hw, cfg, static_cast<int>(C), false);
  const bool dense = drives_leak_densely(hw, cfg);
  FactoredChain f;
  const int lo = std::max(0, out0 - 1), hi = static_cast<int>(std::min<Eigen::Index>(C, out0 + M + 1));
  f.h0 = out0 - lo;
  f.T.resize(2 * K, hi - lo);  // light columns: channels lo .. hi - 1, the tile's detectors and their neighbours in the core
  for (int i = 0; i < K; ++i) {
    const int led = in0 + i;
    for (int ch = lo; ch < hi; ++ch) {
      f.T(i, ch - lo) = fp(led) * t.pos(led, ch);
      f.T(K + i, ch - lo) = fn(led) * t.neg(led, ch);
    }
  }
  constexpr int kProbes = 13;  // zero; light+ combs; light- combs; drive+ combs; drive- combs
  MatrixXdR yp = MatrixXdR::Zero(kProbes, C), yn = MatrixXdR::Zero(kProbes, C);
  StepStages st;
  st.after_fanin_pos = MatrixXdR::Zero(kProbes, C);
  st.after_fanin_neg = MatrixXdR::Zero(kProbes, C);
  for (Eigen::Index ch = std::max<Eigen::Index>(0, out0 - 1); ch < std::min<Eigen::Index>(C, out0 + M + 1); ++ch) {
    const Eigen::Index s = ch % 3;
    yp(1 + s, ch) = 1, yn(4 + s, ch) = 1;
    if (!dense && ch >= in0 && ch < in0 + K) st.after_fanin_pos(7 + s, ch) = 1, st.after_fanin_neg(10 + s, ch) = 1;
  }
  const MatrixXdR g = detector_chain(hw, cfg, t, yp, yn, st);
  f.c = g.row(0).segment(out0, M).transpose();
  f.band = MatrixXdR::Zero(12, M);
  for (int j = 0; j < M; ++j) {
    const int q = out0 + j;
    for (int d = -1; d <= 1; ++d) {
      const int ch = q + d;
      if (ch < 0 || ch >= C) continue;
      const int s = ch % 3;
      f.band(1 + d, j) = g(1 + s, q) - f.c(j);
      f.band(4 + d, j) = g(4 + s, q) - f.c(j);
      if (!dense && ch >= in0 && ch < in0 + K) {
        f.band(7 + d, j) = (g(7 + s, q) - f.c(j)) * fp(ch);
        f.band(10 + d, j) = (g(10 + s, q) - f.c(j)) * fn(ch);
      }
    }
  }
  f.detector_gain = st.detector_gain.segment(out0, M);
  if (dense) {  // every drive leaks to every detector: probe each, in batches of 256 LEDs
    f.Q = MatrixXdR::Zero(2 * K, M);
    constexpr int kBatch = 256;
    for (int a = 0; a < K; a += kBatch) {
      const int n = std::min(kBatch, K - a);
      StepStages sd;
      sd.after_fanin_pos = MatrixXdR::Zero(2 * n, C);
      sd.after_fanin_neg = MatrixXdR::Zero(2 * n, C);
      for (int i = 0; i < n; ++i) sd.after_fanin_pos(i, in0 + a + i) = 1, sd.after_fanin_neg(n + i, in0 + a + i) = 1;
      const MatrixXdR gd = detector_chain(hw, cfg, t, MatrixXdR::Zero(2 * n, C), MatrixXdR::Zero(2 * n, C), sd);
      for (int i = 0; i < n; ++i) {
        const int led = in0 + a + i;
        f.Q.row(a + i) = (gd.row(i).segment(out0, M) - f.c.transpose()) * fp(led);
        f.Q.row(K + a + i) = (gd.row(n + i).segment(out0, M) - f.c.transpose()) * fn(led);
      }
    }
  }
  f.light_per_bias = f.T.colwise().sum().segment(f.h0, M).transpose();
  f.q0 = out0 - in0;
  return f;
}

FactoredChain factor_optical_chain(const Hardware& hw, const CoreConfig& cfg, const MatrixXdR& W, const SlmPattern* slm) {
  const int n = static_cast<int>(W.cols());
  return factor_optical_chain(hw, cfg, W, 0, n, 0, n, slm);
}

MatrixXdR FactoredChain::folded() const {
  const Eigen::Index K2 = T.rows(), K = K2 / 2, M = c.size();
  MatrixXdR F = Q.size() ? Q : MatrixXdR::Zero(K2, M);
  for (Eigen::Index i = 0; i < K2; ++i)
    for (Eigen::Index j = 0; j < M; ++j)
      for (int d = -1; d <= 1; ++d) {
        const Eigen::Index col = j + h0 + d;
        if (col >= 0 && col < T.cols()) F(i, j) += band(i < K ? 1 + d : 4 + d, j) * T(i, col);
        const Eigen::Index led = i < K ? i : i - K;  // the drives' banded leak
        if (Q.size() == 0 && led == j + d + q0) F(i, j) += band(i < K ? 7 + d : 10 + d, j);
      }
  return F;
}

namespace {

// The ideal chain: out = t W through transmissions |W| / max|W| on the path of each sign.
FactoredChain ideal_chain(const Eigen::Ref<const MatrixXdR>& W, const SlmPattern* slm) {
  const Eigen::Index K = W.rows(), M = W.cols();
  const double m = W.cwiseAbs().maxCoeff();
  FactoredChain f;
  MatrixXdR tp = W.cwiseMax(0.0) / m, tn = (-W).cwiseMax(0.0) / m;  // transmissions
  if (slm) tp = tp.cwiseProduct(slm->pos), tn = tn.cwiseProduct(slm->neg);
  f.T.resize(2 * K, M);
  f.T.topRows(K) = tp;
  f.T.bottomRows(K) = tn;
  f.band = MatrixXdR::Zero(12, M);
  f.band.row(1).setConstant(m);
  f.band.row(4).setConstant(-m);
  f.c = Eigen::VectorXd::Zero(M);
  f.light_per_bias = f.T.colwise().sum().transpose();
  f.detector_gain = Eigen::VectorXd::Constant(M, m);
  return f;
}

// A 2K x M map stored as (2 ldi) x ldo: LED+ rows at 0.., LED- rows at ldi.., zero padded.
template <class T>
AlignedVector<T> pack_rows(const MatrixXdR& m, int K, int ldi, int ldo) {
  AlignedVector<T> out(static_cast<size_t>(2 * ldi) * ldo, T(0));
  for (int i = 0; i < K; ++i)
    for (Eigen::Index j = 0; j < m.cols(); ++j) {
      out[static_cast<size_t>(i) * ldo + j] = static_cast<T>(m(i, j));
      out[static_cast<size_t>(ldi + i) * ldo + j] = static_cast<T>(m(K + i, j));
    }
  return out;
}

// The light map T (2K x nl) in panels of kColumnGrain light columns, each panel of each path one
// contiguous block of ldi rows (the last panel as wide as its columns, in whole 64-byte rows), so
// that a thread's share of a large module streams from memory in order.
template <class T>
AlignedVector<T> pack_panels(const MatrixXdR& m, int K, int ldi, int ldl) {
  constexpr int P = OpticalTile<T>::kColumnGrain;
  AlignedVector<T> out(static_cast<size_t>(2 * ldi) * ldl, T(0));
  for (int path = 0; path < 2; ++path)
    for (Eigen::Index j = 0; j < m.cols(); ++j) {
      const int q = static_cast<int>(j) / P, width = std::min(P, ldl - q * P);
      T* panel = out.data() + static_cast<size_t>(path) * ldi * ldl + static_cast<size_t>(q) * P * ldi;
      for (int i = 0; i < K; ++i) panel[static_cast<size_t>(i) * width + (j - q * P)] = static_cast<T>(m(path * K + i, j));
    }
  return out;
}

template <class T>
AlignedVector<T> pad(const Eigen::VectorXd& v, int ld) {
  AlignedVector<T> out(ld, T(0));
  for (Eigen::Index j = 0; j < v.size(); ++j) out[j] = static_cast<T>(v(j));
  return out;
}

// A source's key for one tile: the source in the low 4 bits, the tile above them.
noise::Source keyed(noise::Source s, std::uint32_t stream) {
  return static_cast<noise::Source>(static_cast<std::uint32_t>(s) | stream << 4);
}

constexpr int kBlockTicks = 64;  // iterations per block of time-correlated noise (evaluated once per row)
constexpr int kFlickerFirstOctave = 6;  // 1/f knots from 2^6 = kBlockTicks iterations apart
constexpr int kSlowOctave = 12;  // 1/f octaves from 2^12 iterations apart: shared spans

// One knot interval of a linearly interpolated knot process, amplitude amp, from knots k0 to k1
// (per detector) `span` iterations apart, at fraction w0 of the way: its value there and its slope
// per iteration, added to base and slope.
void add_interval(const float* k0, const float* k1, double amp, double w0, double span, double* base, double* slope, int M) {
  for (int j = 0; j < M; ++j) {
    base[j] += amp * (k0[j] + w0 * (k1[j] - k0[j]));
    slope[j] += amp * (k1[j] - k0[j]) / span;
  }
}

// A knot of every detector of a tile is the stream (source, octave, knot index) from the tile's
// first detector on: keyed by the detector, not the tile, so detectors keep their noise however
// they are tiled.
noise::Stream knot_stream(noise::Source src, int octave, std::int64_t m) {
  return {src, static_cast<std::uint32_t>(octave), static_cast<std::uint32_t>(m)};
}

// Streams of the knots either side of t0 of the 1/f octaves [k_from, k_to): 2 per octave.
int octave_knots(int k_from, int k_to, std::int64_t t0, noise::Stream* st) {
  int n = 0;
  for (int k = k_from; k < k_to; ++k)
    for (int e = 0; e < 2; ++e) st[n++] = knot_stream(noise::Source::Flicker, k, (t0 >> k) + e);
  return n;
}

// The octaves' value at t0 and slope, from their knots as octave_knots lists them.
// (Octave k's knots at kn + (k - k_from) stride, its right knot `half` after its left.)
void add_octaves(const float* kn, std::size_t half, std::size_t stride, int k_from, int k_to, std::int64_t t0, double amp, double* base,
                 double* slope, int M) {
  for (int k = k_from; k < k_to; ++k, kn += stride) {
    const double span = std::ldexp(1.0, k);
    add_interval(kn, kn + half, amp, static_cast<double>(t0 - ((t0 >> k) << k)) / span, span, base, slope, M);
  }
}

}  // namespace

template <class T>
OpticalTile<T>::OpticalTile(const Hardware& hw, const CoreConfig& chain, Optics optics)
    : hw_(hw), chain_(chain), optics_(optics), led_(led_response(hw, chain.led)) {
  // Ideal optics behind a driver: ideal LEDs at the driver's operating point (the same light, so
  // the same shot noise), linear at its slope; the product is divided by the slope again (program).
  if (optics == Optics::Ideal && chain.led == LedModel::Driver) {
    const double slope = led_.slope();
    led_.pos = led_.neg = {0, 0, slope, 0};
  }
}

template <class T>
void OpticalTile<T>::set_noise(const TileNoise& n) {
  if (K_ > 0) throw Error("noise: set it before programming the weights");
  if (n.stream >= (1u << 28)) throw Error("noise: tile stream " + std::to_string(n.stream) + " is out of range");
  if (!(n.loop_period_us > 0) || n.slot_ticks < 1) throw Error("noise: the loop period and slot length must be positive");
  if (!(n.verify_tolerance >= 0) || !std::isfinite(n.verify_tolerance) || n.verify_rounds < 0 || n.verify_rounds > 64)
    throw Error("write-verify: the tolerance must be a finite number >= 0 and the rounds 0 to 64");
  if (n.zero_reads < 0 || n.zero_reads > (1 << 20)) throw Error("auto-zero: the reads must be 0 to 2^20");
  if (n.after_programming_us && !(*n.after_programming_us >= 0 && *n.after_programming_us <= 1e15))
    throw Error("after-programming: the time must be 0 to 1e15 us");
  if (n.zero_every_us) {
    // each read an ADC sample at the machine's readout rate (a loop period where it has no timing)
    const double read_us = hw_.timing ? 1 / hw_.timing->readout_rate_mhz : n.loop_period_us;
    const double us = *n.zero_every_us, reads_us = n.zero_reads * read_us;
    if (!(us > 0 && us <= 1e15)) throw Error("zero-every: the interval must be above 0 and at most 1e15 us");
    if (!n.after_programming_us) throw Error("zero-every: the zeros sit on the clock from the programming's moment, so it needs after-programming");
    if (n.zero_reads <= 0) throw Error("zero-every: needs the auto-zero's reads (zero reads above 0)");
    if (us <= reads_us)
      throw Error("zero-every: " + jsonr::g4(us) + " us is no longer than one zero's " + std::to_string(n.zero_reads) + " reads (" + jsonr::g4(reads_us) +
                  " us at the readout rate): the zeros would take the whole clock");
  }
  noise_ = n;
  start_ticks_ = n.after_programming_us ? std::llround(*n.after_programming_us / n.loop_period_us) : 0;
  zero_ticks_ = n.zero_every_us ? std::max<std::int64_t>(1, std::llround(*n.zero_every_us / n.loop_period_us)) : 0;
  noisy_ = true;
}

template <class T>
void OpticalTile<T>::set_light_map(LightMap m) {
  if (!std::is_same_v<T, float> && m == LightMap::F16) throw Error("tile: a half-precision light map needs float products (f32)");
  if (K_ > 0) throw Error("tile: choose the light map's precision before programming the weights");
  light_map_ = m;
}

template <class T>
void OpticalTile<T>::program(const Eigen::Ref<const MatrixXdR>& W, int in0, int out0, int channels, const Eigen::VectorXd* gain) {
  const int K = static_cast<int>(W.rows()), M = static_cast<int>(W.cols());
  if (K < 1 || M < 1) throw Error("tile: empty weight block");
  if (!W.allFinite()) throw Error("weights: contains NaN or infinity");
  if (gain && (gain->size() != M || !(gain->array() > 0).all() || !gain->allFinite()))
    throw Error("tile: expected " + std::to_string(M) + " detector gains > 0");
  const bool calibrated = optics_ == Optics::Calibrated;
  const int C = calibrated ? (channels > 0 ? channels : hw_.channels) : K;
  if (calibrated && (in0 < 0 || out0 < 0 || in0 + K > C || out0 + M > C))
    throw Error("tile: a tile of " + std::to_string(M) + " x " + std::to_string(K) + " (outputs x inputs) at detector " + std::to_string(out0) +
                ", LED channel " + std::to_string(in0) + " does not fit the " + std::to_string(C) + " channels of " + hw_.name +
                " (compile with tiles of the machine's size)");
  // Programming-time noise: one relative error per SLM pixel and path, drawn anew at each programming
  // and keyed by the pixel's place in the core. Calibrated optics passes the whole core through the
  // chain, but only the tile's LED rows are lit: the other rows' pixels are left exact.
  SlmPattern pattern;
  const bool fixed_pattern = noisy_ && noise_.spec.slm_fixed_pattern_sigma > 0;
  if (fixed_pattern) {
    const double sd = noise_.spec.slm_fixed_pattern_sigma;
    const auto prog = static_cast<std::uint32_t>(programmings_);
    const noise::Source src = keyed(noise::Source::SlmPattern, noise_.stream);
    const std::uint64_t pseed = noise_.program_seed.value_or(noise_.seed);
    const int S = calibrated ? C : M, r0 = calibrated ? in0 : 0, i0 = calibrated ? 0 : in0, j0 = calibrated ? 0 : out0;
    pattern.pos = MatrixXdR::Ones(calibrated ? C : K, S);
    pattern.neg = MatrixXdR::Ones(calibrated ? C : K, S);
    // Pixel (i, j)'s errors are normal(seed, src, 2 prog (+1 for the LED- path), i, j), drawn a row
    // at a time over the columns the tile's detectors read (its own and their neighbours: the chain
    // takes nothing else from the other columns, whose pixels stay exact).
    const int c0 = calibrated ? std::max(0, out0 - 1) : 0, c1 = calibrated ? std::min(C, out0 + M + 1) : S;
    std::vector<double> ep(static_cast<size_t>(c1 - c0)), en(ep.size()), redraw(ep.size());
    const double tol = noise_.verify_tolerance;
    for (int i = r0; i < r0 + K; ++i) {
      const auto pi = static_cast<std::uint32_t>(i0 + i);
      noise::normals(pseed, src, 2 * prog, pi, static_cast<std::uint32_t>(j0 + c0), c1 - c0, ep.data());
      noise::normals(pseed, src, 2 * prog + 1, pi, static_cast<std::uint32_t>(j0 + c0), c1 - c0, en.data());
      // Write-verify: write k of a pixel draws normal(seed, src, path, row + k 2^24, column).
      for (int k = 1; tol > 0 && k <= noise_.verify_rounds; ++k)
        for (int path = 0; path < 2; ++path) {
          std::vector<double>& e = path == 0 ? ep : en;
          if (std::none_of(e.begin(), e.end(), [&](double v) { return std::abs(sd * v) > tol; })) continue;
          noise::normals(pseed, src, 2 * prog + static_cast<std::uint32_t>(path), pi + (static_cast<std::uint32_t>(k) << 24),
                         static_cast<std::uint32_t>(j0 + c0), c1 - c0, redraw.data());
          for (std::size_t x = 0; x < e.size(); ++x)
            if (std::abs(sd * e[x]) > tol) e[x] = redraw[x], ++rewrites_;
        }
      for (int j = c0; j < c1; ++j) {
        pattern.pos(i, j) = 1 + sd * ep[static_cast<size_t>(j - c0)];
        pattern.neg(i, j) = 1 + sd * en[static_cast<size_t>(j - c0)];
      }
    }
  }
  ++programmings_;
  static std::atomic<std::uint64_t> programmings_in_process{0};
  programming_id_ = ++programmings_in_process;
  const auto factor = [&](const SlmPattern* slm) {
    FactoredChain f;
    if (W.cwiseAbs().maxCoeff() == 0) {  // a dark block: nothing reaches the detectors but the chain's offset
      f.T = MatrixXdR::Zero(2 * K, M), f.band = MatrixXdR::Zero(12, M);
      f.c = f.light_per_bias = f.detector_gain = Eigen::VectorXd::Zero(M);
    } else if (calibrated) {
      MatrixXdR core = MatrixXdR::Zero(C, C);
      core.block(in0, out0, K, M) = W;
      f = factor_optical_chain(hw_, chain_, core, in0, K, out0, M, slm);
    } else {
      f = ideal_chain(W, slm);
      if (chain_.led == LedModel::Driver) f.band /= led_.slope(), f.detector_gain /= led_.slope();
    }
    if (gain) {  // the trim sits in each detector's gain stage: everything its output takes, scaled
      f.band *= gain->asDiagonal();
      if (f.Q.size()) f.Q *= gain->asDiagonal();
      f.c = f.c.cwiseProduct(*gain), f.detector_gain = f.detector_gain.cwiseProduct(*gain);
    }
    return f;
  };
  const FactoredChain f = factor(fixed_pattern ? &pattern : nullptr);
  // What the outputs read with every value at 0 on the chain as intended (the offset the compiler
  // moved into the bias): the auto-zero below holds the outputs to it.
  Eigen::VectorXd zero_offset;
  const NoiseSpec& ns = noise_.spec;
  const bool slow = noise_.after_programming_us && (ns.drift_sigma > 0 || ns.flicker_sigma > 0);  // zeroed at its moment
  if (noisy_ && noise_.zero_reads > 0 && (fixed_pattern || slow || ns.photons_per_sample > 0 || ns.thermal_sigma > 0 || ns.rin_sigma > 0)) {
    const FactoredChain intended = fixed_pattern ? factor(nullptr) : f;
    const MatrixXdR F = intended.folded();
    zero_offset = intended.c + led_.pos[3] * F.topRows(K).colwise().sum().transpose() + led_.neg[3] * F.bottomRows(K).colwise().sum().transpose();
  }
  K_ = K, M_ = M, ldi_ = padded<T>(K), ldo_ = padded<T>(M), nl_ = static_cast<int>(f.T.cols()), ldl_ = padded<T>(nl_), h0_ = f.h0, q0_ = f.q0;
  T_ = pack_panels<T>(f.T, K, ldi_, ldl_);
  half_map_ = std::is_same_v<T, float> &&
              (light_map_ == LightMap::F16 || (light_map_ == LightMap::Auto && T_.size() * sizeof(float) > kHalfMapAbove));
  AlignedVector<kern::Half>().swap(H_);
  if (half_map_) {
    H_.resize(T_.size());
    for (size_t i = 0; i < T_.size(); ++i) {
      const auto h = static_cast<_Float16>(T_[i]);
      std::memcpy(&H_[i], &h, sizeof h);
    }
    AlignedVector<T>().swap(T_);
  }
  band_.assign(static_cast<size_t>(12) * ldo_, T(0));
  for (int b = 0; b < 12; ++b)
    for (int j = 0; j < M; ++j) band_[static_cast<size_t>(b) * ldo_ + j] = static_cast<T>(f.band(b, j));
  Q_ = f.Q.size() ? pack_rows<T>(f.Q, K, ldi_, ldo_) : AlignedVector<T>{};
  c_ = pad<T>(f.c, ldo_);
  light_bias_ = pad<T>(f.light_per_bias, ldo_);
  detector_gain_ = pad<T>(f.detector_gain, ldo_);
  {
    std::lock_guard<std::mutex> lock(slow_mutex_);
    slow_.clear(), zeros_.clear();
    memo_block_.clear(), memo_inside_.clear(), memo_linear_.clear(), knot_at_.clear(), knots_.clear();  // sized by prepare_reads
    ahead_slot_.clear(), ahead_iteration_.clear(), ahead_.clear();
  }
  if (zero_offset.size()) auto_zero(zero_offset);
}

// The operator's auto-zero after a programming: every LED at value 0 (a driver's common light still
// on), zero_reads reads of every detector averaged, and each output's bias moved by what the average
// departs from the intended offset. It takes out what the SLM's fixed pattern does to the light
// that carries no signal (the LEDs' common light through every pixel's transmission and dark floor:
// an offset per output that ideal optics, with neither, never sees), to the reads' white noise /
// sqrt(zero_reads). The reads leave out the drift and 1/f noise: a programming has no place on the
// run's clock here, so the auto-zero neither takes out nor adds the slow noise of its moment (an
// operator's would take out some drift: this is the conservative side). Read r of the p-th
// programming is slot INT_MIN + r at iteration -p: white noise of keys no run draws.
template <class T>
void OpticalTile<T>::auto_zero(const Eigen::VectorXd& intended) {
  const int n = noise_.zero_reads, rows = std::min(n, 256);
  struct Restore {  // the run's levels back however the reads end
    NoiseSpec& spec;
    const NoiseSpec run;
    ~Restore() { spec = run; }
  } restore{noise_.spec, noise_.spec};
  struct Zeroing {
    bool& on;
    ~Zeroing() { on = false; }
  } zeroing{zeroing_};
  if (noise_.after_programming_us) zeroing_ = true;  // the slow noise of the programming's moment, taken out with the rest
  else noise_.spec.drift_sigma = noise_.spec.flicker_sigma = 0;
  AlignedVector<T> t(static_cast<size_t>(rows) * ldi_, T(0)), out(static_cast<size_t>(rows) * ldo_), scratch(scratch_size(rows));
  Eigen::VectorXd sum = Eigen::VectorXd::Zero(M_), squares = Eigen::VectorXd::Zero(M_);
  StepContext ctx;
  ctx.iteration = -programmings_;
  for (int r0 = 0; r0 < n; r0 += rows) {
    const int m = std::min(rows, n - r0);
    ctx.first_sample = std::numeric_limits<int>::min() + r0;
    read(t.data(), m, ctx, 0, kern::Epilogue<T>{}, out.data(), scratch.data());
    for (int r = 0; r < m; ++r)
      for (int j = 0; j < M_; ++j) {
        const double v = static_cast<double>(out[static_cast<size_t>(r) * ldo_ + j]);
        sum(j) += v, squares(j) += v * v;
      }
  }
  if (zero_ticks_ > 0) {
    // What this zero took out beyond the chain (the reads less one without noise: the slow noise of
    // its moment and the reads' white error), and the white error a zero has: the later zeros
    // replace both (zero_change).
    noisy_ = false;
    read(t.data(), 1, ctx, 0, kern::Epilogue<T>{}, out.data(), scratch.data());
    noisy_ = true;
    zero0_.assign(M_, 0.0), zero_sd_.assign(M_, 0.0);
    for (int j = 0; j < M_; ++j) {
      const double mean = sum(j) / n, var = n > 1 ? std::max(0.0, (squares(j) - n * mean * mean) / (n - 1)) : 0.0;
      zero0_[j] = mean - static_cast<double>(out[static_cast<size_t>(j)]);
      zero_sd_[j] = std::sqrt(var / n);
    }
  }
  for (int j = 0; j < M_; ++j) c_[static_cast<size_t>(j)] -= static_cast<T>(sum(j) / n - intended(j));
}

template <class T>
std::size_t OpticalTile<T>::scratch_size(int rows) const {
  // L (rows x 2 ld_in), the light on the two paths (2 rows x ld_light), detect's 4 x (ld_out + 2),
  // then the white noise's normals (2 rows x max(ld_in, ld_out) floats) and their streams (2 rows),
  // each rounded up to whole T
  static_assert(sizeof(noise::Stream) % sizeof(float) == 0);
  const std::size_t floats = 2 * static_cast<std::size_t>(rows) * (std::max(ldi_, ldo_) + sizeof(noise::Stream) / sizeof(float));
  return static_cast<std::size_t>(rows) * (2 * ldi_ + 2 * ldl_) + 4 * static_cast<std::size_t>(padded<T>(ldo_ + 2)) +
         (floats * sizeof(float) + sizeof(T) - 1) / sizeof(T) + 16;
}

template <class T>
void OpticalTile<T>::drives(const T* t, int rows, T* L) const {
  const int ldl = 2 * ldi_;
  if (led_.linear()) {
    for (int r = 0; r < rows; ++r) {
      const T* tr = t + static_cast<size_t>(r) * ldi_;
      T* lp = L + static_cast<size_t>(r) * ldl;
      std::memcpy(lp, tr, sizeof(T) * ldi_);
      std::memcpy(lp + ldi_, tr, sizeof(T) * ldi_);
    }
    return;
  }
  const T p3 = T(led_.pos[0]), p2 = T(led_.pos[1]), p1 = T(led_.pos[2]), p0 = T(led_.pos[3]);
  const T n3 = T(led_.neg[0]), n2 = T(led_.neg[1]), n1 = T(led_.neg[2]), n0 = T(led_.neg[3]);
  const auto each = [&](auto held) {
    for (int r = 0; r < rows; ++r) {
      const T* tr = t + static_cast<size_t>(r) * ldi_;
      T* lp = L + static_cast<size_t>(r) * ldl;
      T* ln = lp + ldi_;
      for (int j = 0; j < ldi_; ++j) {
        const T x = held(tr[j]);
        lp[j] = ((p3 * x + p2) * x + p1) * x + p0;
        ln[j] = ((n3 * x + n2) * x + n1) * x + n0;
      }
    }
  };
  if (led_.clamp) each([](T x) { return std::clamp(x, T(-1), T(1)); });  // the driver's rails
  else each([](T x) { return x; });
}

// A read's scratch: the drives L (rows x 2 ld_in), then Work: the light on the two paths (2 rows x
// ld_light), detect's 4 x (ld_out + 2), the white noise's normals (2 rows x max(ld_in, ld_out)
// floats) and their streams (2 rows).
template <class T>
typename OpticalTile<T>::Work OpticalTile<T>::work(T* scratch, int rows) const {
  Work w;
  w.light = scratch + static_cast<size_t>(rows) * 2 * ldi_;
  w.g = w.light + static_cast<size_t>(rows) * 2 * ldl_;
  w.eps = reinterpret_cast<float*>(w.g + 4 * static_cast<size_t>(padded<T>(ldo_ + 2)));
  w.ld = std::max(ldi_, ldo_);
  w.streams = reinterpret_cast<noise::Stream*>(w.eps + 2 * static_cast<size_t>(rows) * w.ld);
  return w;
}

// Each row's white noise is its slot's at this iteration: LED intensity noise (one per LED, streams
// 0 .. rows - 1) and the detectors' (one per detector, streams rows .. 2 rows - 1).
template <class T>
void OpticalTile<T>::key_streams(int rows, const StepContext& ctx, int row0, noise::Stream* st) const {
  for (int r = 0; r < rows; ++r) {
    st[r] = white_stream(noise::Source::Rin, ctx.sample(row0 + r), ctx.iteration);
    st[rows + r] = white_stream(noise::Source::Shot, ctx.sample(row0 + r), ctx.iteration);
  }
}

// The stream of a slot's white noise of one source at one iteration (its elements: the channels).
template <class T>
noise::Stream OpticalTile<T>::white_stream(noise::Source s, int slot, int iteration) const {
  return {keyed(s, noise_.stream), static_cast<std::uint32_t>(slot), static_cast<std::uint32_t>(iteration)};
}

template <class T>
void OpticalTile<T>::read(const T* t, int rows, const StepContext& ctx, int row0, kern::Epilogue<T> e, T* out, T* scratch) const {
  if (K_ == 0) throw Error("tile: read before programming");
  T* L = scratch;
  const Work w = work(scratch, rows);
  drives(t, rows, L);
  const NoiseSpec& ns = noise_.spec;
  const bool rin = noisy_ && ns.rin_sigma > 0, white = noisy_ && (ns.photons_per_sample > 0 || ns.thermal_sigma > 0);
  if (noisy_) key_streams(rows, ctx, row0, w.streams);
  // the rows' white noise: LED rows at rin_eps, detector rows at white_eps, both ld apart
  const float *rin_eps = w.eps, *white_eps = w.eps + static_cast<size_t>(rows) * w.ld;
  int ld = w.ld;
  if (!white_ahead(rows, ctx, row0, rin, white, rin_eps, white_eps, ld)) {  // else few rows, drawn ahead in bulk
    if (rin && white && K_ == M_) {  // both sets of rows drawn together (short rows keep the vectors full)
      noise::normals_f32(noise_.seed, w.streams, 2 * rows, 0, K_, w.eps, w.ld);
    } else {
      if (rin) noise::normals_f32(noise_.seed, w.streams, rows, 0, K_, w.eps, w.ld);
      if (white) noise::normals_f32(noise_.seed, w.streams + rows, rows, 0, M_, w.eps + static_cast<size_t>(rows) * w.ld, w.ld);
    }
  }
  if (rin) add_rin(L, rows, rin_eps, ld);
  light(L, rows, 0, light_panels(), w.light);
  sense_columns(L, w.light, rows, ctx, row0, e, 0, M_, out, w, white_eps, ld);
}

// The white noise of rows [row0, row0 + rows) at this iteration from the rows' draws ahead (drawing
// the next kAheadIterations where a row's are not this iteration's): the LED rows at rin, the
// detector rows at white, ld apart. False (nothing set) where the reads were not prepared for it.
template <class T>
bool OpticalTile<T>::white_ahead(int rows, const StepContext& ctx, int row0, bool rin, bool white, const float*& rin_eps,
                                 const float*& white_eps, int& ld) const {
  if (!(rin || white) || ctx.iteration < 0 || static_cast<size_t>(row0 + rows) > ahead_slot_.size()) return false;
  constexpr int A = kAheadIterations;
  const int it0 = ctx.iteration - ctx.iteration % A, q = ctx.iteration - it0;
  const int per_row = A * (K_ + M_);
  for (int r = 0; r < rows; ++r) {
    const size_t row = static_cast<size_t>(row0 + r);
    const int slot = ctx.sample(row0 + r);
    if (ahead_slot_[row] == slot && ahead_iteration_[row] == it0) continue;
    float* a = ahead_.data() + row * per_row;
    noise::Stream st[A];
    for (int s = 0; s < 2; ++s) {
      if (!(s == 0 ? rin : white)) continue;
      for (int i = 0; i < A; ++i) st[i] = white_stream(s == 0 ? noise::Source::Rin : noise::Source::Shot, slot, it0 + i);
      const int n = s == 0 ? K_ : M_;
      noise::normals_f32(noise_.seed, st, A, 0, n, a + (s == 0 ? 0 : static_cast<size_t>(A) * K_), n);
    }
    ahead_slot_[row] = slot, ahead_iteration_[row] = it0;
  }
  const float* first = ahead_.data() + static_cast<size_t>(row0) * per_row;
  rin_eps = first + static_cast<size_t>(q) * K_;
  white_eps = first + static_cast<size_t>(A) * K_ + static_cast<size_t>(q) * M_;
  ld = per_row;
  return true;
}

template <class T>
void OpticalTile<T>::emit(const T* t, int rows, const StepContext& ctx, int row0, T* L, T* scratch) const {
  if (K_ == 0) throw Error("tile: read before programming");
  drives(t, rows, L);
  if (!noisy_ || !(noise_.spec.rin_sigma > 0)) return;
  const Work w = work(scratch, rows);
  key_streams(rows, ctx, row0, w.streams);
  noise::normals_f32(noise_.seed, w.streams, rows, 0, K_, w.eps, w.ld);
  add_rin(L, rows, w.eps, w.ld);
}

// Panels [p0, p1) of the light on each path's detectors (and their neighbours): one product per
// path and panel, into light (rows x ld_light per path, the LED+ path's rows first).
template <class T>
void OpticalTile<T>::light(const T* L, int rows, int p0, int p1, T* light) const {
  if (K_ == 0) throw Error("tile: read before programming");
  constexpr int P = kColumnGrain;
  for (int path = 0; path < 2; ++path)
    for (int q = p0; q < p1; ++q) {
      const int width = std::min(P, ldl_ - q * P);
      const size_t at = static_cast<size_t>(path) * ldi_ * ldl_ + static_cast<size_t>(q) * P * ldi_;
      auto product = [&](const auto* panel) {
        kern::product(L + path * ldi_, 2 * ldi_, ldi_, panel, width, 0, width, rows, light + static_cast<size_t>(path) * rows * ldl_ + q * P, ldl_);
      };
      if constexpr (std::is_same_v<T, float>) {
        if (half_map_) {
          product(H_.data() + at);
          continue;
        }
      }
      product(T_.data() + at);
    }
}

template <class T>
void OpticalTile<T>::sense(const T* L, const T* light, int rows, const StepContext& ctx, int row0, const kern::Epilogue<T>& e, int j0,
                           int j1, T* out, T* scratch) const {
  if (K_ == 0) throw Error("tile: read before programming");
  if (j0 < 0 || j0 >= j1 || j1 > M_ || j0 % kColumnGrain || (j1 < M_ && j1 % kColumnGrain))
    throw Error("tile: columns " + std::to_string(j0) + " .. " + std::to_string(j1) + " are not a range of whole chunks of the tile's " +
                std::to_string(M_) + " outputs");
  const Work w = work(scratch, rows);
  const NoiseSpec& ns = noise_.spec;
  if (noisy_) key_streams(rows, ctx, row0, w.streams);
  if (noisy_ && (ns.photons_per_sample > 0 || ns.thermal_sigma > 0))
    noise::normals_f32(noise_.seed, w.streams + rows, rows, static_cast<std::uint32_t>(j0), j1 - j0,
                       w.eps + static_cast<size_t>(rows) * w.ld + j0, w.ld);
  sense_columns(L, light, rows, ctx, row0, e, j0, j1, out, w, w.eps + static_cast<size_t>(rows) * w.ld, w.ld);
}

// Outputs [j0, j1) from the light: the detector chain, then the noise after the optics.
template <class T>
void OpticalTile<T>::sense_columns(const T* L, const T* light, int rows, const StepContext& ctx, int row0, const kern::Epilogue<T>& e,
                                   int j0, int j1, T* out, const Work& w, const float* white, int ld) const {
  detect(L, light, rows, e, j0, j1, out, w.g);
  if (noisy_) add_output_noise(light, rows, ctx, row0, w.streams, e.kappa, j0, j1, out, white, ld);
}

// The detector chain on each row's light: out_j = c_j + the band of light and drives around
// detector j (or the drives' dense leak), then the loop's epilogue, for j in [j0, j1). Each row's
// light and drives are first laid out by detector with a zero on either side (g: 4 rows of
// ld_out + 2), so that the band is one loop over the detectors that the compiler vectorises.
template <class T>
void OpticalTile<T>::detect(const T* L, const T* light, int rows, const kern::Epilogue<T>& e, int j0, int j1, T* out, T* g) const {
  using V = typename kern::simd::Vec<T>::type;
  constexpr int W = kern::simd::kVecLanes<T>;
  // whole 64-byte vectors (the products' unit): the coefficients are zero beyond M, so are those outputs
  const int je = std::min(ldo_, padded<T>(j1));
  const bool dense = !Q_.empty();
  if (dense) kern::product(L, 2 * ldi_, 2 * ldi_, Q_.data(), ldo_, j0, je, rows, out, ldo_);
  const size_t lg = static_cast<size_t>(ldo_) + 2;
  T* by_detector[4] = {g + 1, g + 1 + lg, g + 1 + 2 * lg, g + 1 + 3 * lg};  // LED+ light, LED- light, LED+ drive, LED- drive
  T *gp = by_detector[0], *gn = by_detector[1], *dp = by_detector[2], *dn = by_detector[3];
  for (T* x : by_detector) std::fill(x + j0 - 1, x + je + 1, T(0));
  const int c0 = std::max(-h0_, j0 - 1), c1 = std::min({M_ + 1, nl_ - h0_, j1 + 1});  // the detectors whose light the map holds
  const int i0 = std::max({-1, -q0_, j0 - 1}), i1 = std::min({M_ + 1, K_ - q0_, j1 + 1});  // the detectors whose LED is in the tile
  kern::Epilogue<T> ec = e;
  ec.c = c_.data();
  using kern::simd::load;
  for (int r = 0; r < rows; ++r) {
    const T* lp = light + static_cast<size_t>(r) * ldl_ + h0_;  // lp[j]: detector j's light
    const T* ln = lp + static_cast<size_t>(rows) * ldl_;
    std::copy(lp + c0, lp + c1, gp + c0);
    std::copy(ln + c0, ln + c1, gn + c0);
    if (!dense) {
      const T* Lp = L + static_cast<size_t>(r) * 2 * ldi_ + q0_;  // Lp[j]: the LED+ drive on detector j's channel
      const T* Ln = Lp + ldi_;
      if (i0 < i1) {  // else no detector of these columns sits on a channel of the tile's LEDs
        std::copy(Lp + i0, Lp + i1, dp + i0);
        std::copy(Ln + i0, Ln + i1, dn + i0);
      }
    }
    T* o = out + static_cast<size_t>(r) * ldo_;
    for (int j = j0; j < je; j += W) {
      V v = dense ? load(o + j) : V{};
      for (int x = 0; x < (dense ? 2 : 4); ++x)  // FactoredChain::band's rows 3x .. 3x + 2: d = -1, 0, 1
        for (int d = -1; d <= 1; ++d) v += load(band_.data() + static_cast<size_t>(3 * x + 1 + d) * ldo_ + j) * load(by_detector[x] + j + d);
      kern::simd::finish<T>(v, ec, static_cast<size_t>(r) * ldo_, j, o);
    }
  }
}

// LED relative intensity noise: each LED's light (bias + drive) fluctuates by rin * eps; the same
// LED feeds both optical paths, so one draw per (slot, iteration, LED).
template <class T>
void OpticalTile<T>::add_rin(T* L, int rows, const float* eps, int ld) const {
  const T rin = static_cast<T>(noise_.spec.rin_sigma), bias = static_cast<T>(noise_.spec.led_bias);
  for (int r = 0; r < rows; ++r) {
    T* lp = L + static_cast<size_t>(r) * 2 * ldi_;
    T* ln = lp + ldi_;
    const float* er = eps + static_cast<size_t>(r) * ld;
    for (int i = 0; i < K_; ++i) {
      const T a = rin * static_cast<T>(er[i]);
      lp[i] += (bias + lp[i]) * a;
      ln[i] += (bias + ln[i]) * a;
    }
  }
}

// Noise that arrives after the optics, per detector: shot noise (from the photons it receives),
// receiver noise, drift and 1/f. It enters the update like the signal (times kappa), so a finite
// bandwidth filters it the same way. One pass over each row's outputs, a column chunk at a time
// (each chunk its own memo of the time-correlated noise).
template <class T>
void OpticalTile<T>::add_output_noise(const T* light, int rows, const StepContext& ctx, int row0, const noise::Stream* streams, T kappa,
                                      int j0, int j1, T* out, const float* eps, int ld) const {
  const NoiseSpec& ns = noise_.spec;
  const bool shot = ns.photons_per_sample > 0, thermal = ns.thermal_sigma > 0;
  const bool correlated = ns.drift_sigma > 0 || ns.flicker_sigma > 0;
  // Shot, receiver and electronics noise are independent Gaussians on the same detector in the same
  // read: their sum is one Gaussian of the summed variance, so one draw (eps) serves all three.
  // Photons on a detector = photons_per_sample x light / the reference light (the tile's LEDs at
  // their bias through full transmission, unit fan-in); the receiver's electrons are counted in the
  // same light units, so both go through the detector's gain.
  const T var_thermal = static_cast<T>(ns.thermal_sigma * ns.thermal_sigma), sigma = kappa * std::sqrt(var_thermal);
  const T bias = static_cast<T>(ns.led_bias), per_light = shot ? static_cast<T>(ns.led_bias * K_ / ns.photons_per_sample) : T(0);
  const T receiver = static_cast<T>(ns.receiver_electrons) * per_light, var_receiver = receiver * receiver;
  const T* gain = detector_gain_.data();
  const T* light_bias = light_bias_.data();
  thread_local std::vector<double> fresh;  // a block's evaluation, in double
  thread_local std::vector<float> own;     // a row's when its memo was not prepared
  if (correlated) fresh.resize(2 * M_), own.resize(2 * M_);
  const int chunks_per_row = chunks();
  const std::size_t memo_rows = memo_block_.size() / std::max(1, chunks_per_row);
  for (int r = 0; r < rows; ++r) {
    T* o = out + static_cast<size_t>(r) * ldo_;
    const T* lp = light + static_cast<size_t>(r) * ldl_ + h0_;
    const T* ln = lp + static_cast<size_t>(rows) * ldl_;
    const float* er = eps + static_cast<size_t>(r) * ld;
    const std::int64_t tick =
        zeroing_ ? 0 : static_cast<std::int64_t>(static_cast<std::int32_t>(streams[r].a)) * noise_.slot_ticks + ctx.iteration + start_ticks_;
    const std::int64_t b = tick >= 0 ? tick / kBlockTicks : (tick - kBlockTicks + 1) / kBlockTicks;
    const size_t row = static_cast<size_t>(row0) + r;
    const float s = static_cast<float>(tick - b * kBlockTicks);
    // The last zero before this row's slot started (the programming's: nothing to change)
    const std::vector<double>* zero = nullptr;
    if (zero_ticks_ > 0 && !zeroing_ && !zero0_.empty()) {
      const std::int64_t start = static_cast<std::int64_t>(static_cast<std::int32_t>(streams[r].a)) * noise_.slot_ticks + start_ticks_;
      if (start >= zero_ticks_) zero = &zero_change(start / zero_ticks_);
    }
    for (int c = j0 / kColumnGrain; c * kColumnGrain < j1; ++c) {
      const int a0 = std::max(j0, c * kColumnGrain), a1 = std::min(j1, c * kColumnGrain + kColumnGrain);
      if (shot) {
        for (int j = a0; j < a1; ++j) {
          const T detected = std::max(T(0), lp[j] + ln[j] + bias * light_bias[j]);
          o[j] += kappa * std::sqrt(gain[j] * gain[j] * (detected * per_light + var_receiver) + var_thermal) * static_cast<T>(er[j]);
        }
      } else if (thermal) {
        for (int j = a0; j < a1; ++j) o[j] += sigma * static_cast<T>(er[j]);
      }
      if (zero)
        for (int j = a0; j < a1; ++j) o[j] += kappa * static_cast<T>((*zero)[j]);
      if (!correlated) continue;
      // the block's value and slope per detector, kept in float (half the bytes a large batch's
      // reads stream from its memo; the noise is ~1e-3 of the signal, so float's 6e-8 is moot)
      float* kept;
      bool inside;
      const bool memo = row < memo_rows;
      const size_t m = row * chunks_per_row + c;
      if (memo) {
        kept = memo_linear_.data() + row * 2 * M_, inside = memo_inside_[m];
      } else {
        kept = own.data();
      }
      if (!memo || memo_block_[m] != b) {
        inside = correlated_linear(b, a0, a1, memo ? m : SIZE_MAX, fresh.data(), fresh.data() + M_);
        for (int j = a0; j < a1; ++j) kept[j] = static_cast<float>(fresh[j]), kept[M_ + j] = static_cast<float>(fresh[M_ + j]);
        if (memo) memo_inside_[m] = inside, memo_block_[m] = b;
      }
      const float* base = kept;
      const float* slope = kept + M_;
      for (int j = a0; j < a1; ++j) o[j] += kappa * static_cast<T>(base[j] + slope[j] * s);
      if (inside) add_drift_at(tick, kappa, a0, a1, o);
    }
  }
}

// Drift and 1/f noise of the tile's detectors over the iterations [64 b, 64 b + 64) of the clock,
// as a value at 64 b and a slope per iteration (the 1/f octaves are linear across a block; drift
// too unless one of its knots falls inside the block: then the return is true, the drift is left
// out and add_drift_at adds it tick by tick). Both are sums of linearly interpolated knots: drift
// at one spacing, its correlation time; 1/f noise over octaves of spacings from
// kFlickerFirstOctave (2^6 = 64 loop periods, 1.3 us at 20 ns) up to the drift's time, with equal
// variance per octave, which is a 1/f spectrum between those frequencies (above them the
// receiver's white noise is the floor). Knots of an octave sit on multiples of its spacing, so
// across a block each octave is linear; the octaves from kSlowOctave up are linear across a whole
// span of 2^kSlowOctave iterations, so their sum is evaluated once per span and shared
// (slow_span). Every value is a pure function of the block: no history, no thread dependence.
template <class T>
bool OpticalTile<T>::correlated_linear(std::int64_t b, int j0, int j1, std::size_t cell, double* base, double* slope) const {
  static_assert(kKnotSeries == kSlowOctave - kFlickerFirstOctave + 1, "a series per fast octave, and the drift");
  constexpr std::size_t P = kColumnGrain;
  const NoiseSpec& ns = noise_.spec;
  const std::int64_t t0 = b * kBlockTicks;
  const int n = j1 - j0;
  std::fill(base + j0, base + j1, 0.0);
  std::fill(slope + j0, slope + j1, 0.0);
  const int top = flicker_top(), fast_top = std::min(top, kSlowOctave);
  const double a = flicker_amplitude(top), d = ns.drift_sigma, drift_ticks = drift_period();
  const auto m0 = static_cast<std::int64_t>(std::floor(static_cast<double>(t0) / drift_ticks));
  const auto m1 = static_cast<std::int64_t>(std::floor(static_cast<double>(t0 + kBlockTicks - 1) / drift_ticks));
  const bool linear_drift = d > 0 && m0 == m1;  // else a knot inside the block (a drift time under 64 iterations, or a boundary)
  // The knots either side of t0 of each fast octave (series k - kFlickerFirstOctave) and of the
  // drift (the last series): the row chunk's kept ones where it has them, the rest in one bulk draw.
  thread_local std::vector<float> scratch;
  std::int64_t none[kKnotSeries];
  float* kept;
  std::int64_t* at;
  if (cell < knot_at_.size() / kKnotSeries) {
    kept = knots_.data() + cell * kKnotSeries * 2 * P, at = knot_at_.data() + cell * kKnotSeries;
  } else {
    scratch.resize(kKnotSeries * 2 * P), kept = scratch.data(), at = none;
    std::fill_n(none, kKnotSeries, INT64_MIN);
  }
  noise::Stream st[2 * kKnotSeries];
  float* to[2 * kKnotSeries];
  int draws = 0;
  auto need = [&](int series, noise::Source src, int octave, std::int64_t m) {
    float* pair = kept + series * 2 * P;
    if (at[series] == m) return;
    if (at[series] == m - 1) {  // the next interval: its left knot is the kept right one
      std::copy_n(pair + P, n, pair);
    } else {
      st[draws] = knot_stream(src, octave, m), to[draws++] = pair;
    }
    st[draws] = knot_stream(src, octave, m + 1), to[draws++] = pair + P;
    at[series] = m;
  };
  if (a > 0)
    for (int k = kFlickerFirstOctave; k < fast_top; ++k) need(k - kFlickerFirstOctave, noise::Source::Flicker, k, t0 >> k);
  if (linear_drift) need(kKnotSeries - 1, noise::Source::Drift, 0, m0);
  if (draws > 0) {
    thread_local std::vector<float> drawn;
    drawn.resize(static_cast<size_t>(draws) * n);
    noise::normals_f32(noise_.seed, st, draws, noise_.channel0 + static_cast<std::uint32_t>(j0), n, drawn.data(), n);
    for (int q = 0; q < draws; ++q) std::copy_n(drawn.data() + static_cast<size_t>(q) * n, n, to[q]);
  }
  if (a > 0) {
    add_octaves(kept, P, 2 * P, kFlickerFirstOctave, fast_top, t0, a, base + j0, slope + j0, n);
    if (top > kSlowOctave) {  // the slow octaves, linear across their shared span
      const std::int64_t s = t0 >> kSlowOctave;
      const std::vector<double>& slow = slow_span(s);
      const double x = static_cast<double>(t0 - (s << kSlowOctave));
      for (int j = j0; j < j1; ++j) {
        base[j] += slow[j] + slow[M_ + j] * x;
        slope[j] += slow[M_ + j];
      }
    }
  }
  if (linear_drift) {  // drift has its rms at its knots (2/3 of the variance between them, on average)
    const float* k0 = kept + (kKnotSeries - 1) * 2 * P;
    add_interval(k0, k0 + P, d, static_cast<double>(t0) / drift_ticks - static_cast<double>(m0), drift_ticks, base + j0, slope + j0, n);
  }
  return d > 0 && !linear_drift;
}

// The drift at one tick, for blocks with a drift knot inside.
template <class T>
void OpticalTile<T>::add_drift_at(std::int64_t tick, T kappa, int j0, int j1, T* o) const {
  const int n = j1 - j0;
  thread_local std::vector<float> kn;
  kn.resize(2 * static_cast<size_t>(n));
  const double x = static_cast<double>(tick) / drift_period(), d = noise_.spec.drift_sigma;
  const auto m = static_cast<std::int64_t>(std::floor(x));
  const double w = x - static_cast<double>(m);
  const noise::Stream st[2] = {knot_stream(noise::Source::Drift, 0, m), knot_stream(noise::Source::Drift, 0, m + 1)};
  noise::normals_f32_recent(noise_.seed, st, 2, noise_.channel0 + static_cast<std::uint32_t>(j0), n, kn.data(), n);
  const float *k0 = kn.data() - j0, *k1 = k0 + n;
  for (int j = j0; j < j1; ++j) o[j] += kappa * static_cast<T>(static_cast<float>(d * ((1 - w) * k0[j] + w * k1[j])));
}

// The values of a pure function of (programming, key), cached: rows next to each other ask for the
// same ones, so each thread keeps the last it asked for, direct mapped (many, as a program's reads
// go through its tiles in turn), keyed by the programming (unique in the process, so no tile can
// see another's); the tile keeps them all under its mutex, dropped past 4096 (bounded memory: they
// are recomputed identically). Each call site's Compute is its own type, so its own thread cache.
namespace {
using Values = std::shared_ptr<const std::vector<double>>;
template <class Compute>
const std::vector<double>& cached(std::uint64_t programming, std::int64_t key, std::mutex& mutex,
                                  std::unordered_map<std::int64_t, Values>& all, Compute&& compute) {
  struct Kept {
    std::uint64_t programming = 0;
    std::int64_t key = 0;
    Values values;
  };
  thread_local std::array<Kept, 256> kept;
  Kept& k = kept[(static_cast<std::uint64_t>(key) * 0x9E3779B97F4A7C15ull + programming * 0xC2B2AE3D27D4EB4Full) >> 56];
  if (k.values && k.programming == programming && k.key == key) return *k.values;
  Values found;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (auto i = all.find(key); i != all.end()) found = i->second;
  }
  if (!found) {
    Values v = compute();
    std::lock_guard<std::mutex> lock(mutex);
    if (all.size() > 4096) all.clear();
    found = all.emplace(key, std::move(v)).first->second;
  }
  k.programming = programming, k.key = key, k.values = std::move(found);
  return *k.values;
}
}  // namespace

// The octaves of 1/f noise from kSlowOctave up, over the span [2^kSlowOctave s, 2^kSlowOctave (s + 1)):
// their value at its start and slope per iteration, M each. Many rows and blocks share a span, each
// row (its own slots) in its own span, so spans are cached.
template <class T>
const std::vector<double>& OpticalTile<T>::slow_span(std::int64_t s) const {
  return cached(programming_id_, s, slow_mutex_, slow_, [&] {
    const int top = flicker_top();
    const double a = flicker_amplitude(top);
    const std::int64_t t0 = s << kSlowOctave;
    auto v = std::make_shared<std::vector<double>>(2 * M_, 0.0);
    std::vector<noise::Stream> st(2 * static_cast<size_t>(top - kSlowOctave));
    std::vector<float> kn(st.size() * M_);
    noise::normals_f32_recent(noise_.seed, st.data(), octave_knots(kSlowOctave, top, t0, st.data()), noise_.channel0, M_, kn.data(), M_);
    add_octaves(kn.data(), M_, 2 * static_cast<size_t>(M_), kSlowOctave, top, t0, a, v->data(), v->data() + M_, M_);
    return Values(std::move(v));
  });
}

// The drift and 1/f noise of every detector at one tick (tick >= 0), as a read at it adds them.
template <class T>
void OpticalTile<T>::slow_at(std::int64_t tick, double* v) const {
  std::fill(v, v + M_, 0.0);
  if (!(noise_.spec.drift_sigma > 0 || noise_.spec.flicker_sigma > 0)) return;
  const std::int64_t b = tick / kBlockTicks;
  const double s = static_cast<double>(tick - b * kBlockTicks);
  std::vector<double> base(M_), slope(M_);
  std::vector<T> drift(M_, T(0));
  for (int a0 = 0; a0 < M_; a0 += kColumnGrain) {
    const int a1 = std::min(M_, a0 + kColumnGrain);
    if (correlated_linear(b, a0, a1, SIZE_MAX, base.data(), slope.data())) add_drift_at(tick, T(1), a0, a1, drift.data());
    for (int j = a0; j < a1; ++j) v[j] = base[j] + slope[j] * s + static_cast<double>(drift[j]);
  }
}

// Zero k (k >= 1, at tick k zero_ticks_) against the programming's: the bias it sets takes out the
// slow noise of its moment and its own reads' white error instead of the programming zero's, so a
// read after it adds zero0_ - slow(k zero_ticks_) - its white error. A pure function of k, cached as
// slow_span is.
template <class T>
const std::vector<double>& OpticalTile<T>::zero_change(std::int64_t k) const {
  return cached(programming_id_, k, slow_mutex_, zeros_, [&] {
    auto v = std::make_shared<std::vector<double>>(M_);
    std::vector<double> white(M_);
    slow_at(k * zero_ticks_, v->data());
    noise::normals(noise_.seed, keyed(noise::Source::Zero, noise_.stream), static_cast<std::uint32_t>(programmings_),
                   static_cast<std::uint32_t>(k), 0, M_, white.data());
    for (int j = 0; j < M_; ++j) (*v)[j] = zero0_[j] - (*v)[j] - zero_sd_[j] * white[j];
    return Values(std::move(v));
  });
}

template <class T>
double OpticalTile<T>::drift_period() const {
  return std::max(1.0, noise_.spec.drift_time_us / noise_.loop_period_us);
}

// One past the slowest 1/f octave: spacings up to the drift's time.
template <class T>
int OpticalTile<T>::flicker_top() const {
  return std::clamp(static_cast<int>(std::ceil(std::log2(drift_period()))), kFlickerFirstOctave + 1, 30);
}

// Linear interpolation of unit knots has mean variance 2/3 over an interval, so the octaves of 1/f
// noise, at every phase at once, are scaled to give it its rms over time.
template <class T>
double OpticalTile<T>::flicker_amplitude(int top) const {
  return noise_.spec.flicker_sigma * std::sqrt(1.5 / (top - kFlickerFirstOctave));
}

template <class T>
void OpticalTile<T>::prepare_reads(int rows) const {
  std::lock_guard<std::mutex> lock(slow_mutex_);
  const std::size_t cells = static_cast<std::size_t>(rows) * chunks();
  if (noisy_ && rows <= kAheadRows && static_cast<size_t>(rows) > ahead_slot_.size()) {
    ahead_slot_.resize(rows, INT64_MIN), ahead_iteration_.resize(rows, INT64_MIN);
    ahead_.resize(static_cast<size_t>(rows) * kAheadIterations * (K_ + M_));
  }
  if (cells <= memo_block_.size()) return;
  memo_block_.resize(cells, INT64_MIN);
  memo_inside_.resize(cells, 0);
  memo_linear_.resize(static_cast<size_t>(rows) * 2 * M_);
  const std::size_t knot_cells = std::min(cells, kKnotCells);
  knot_at_.resize(knot_cells * kKnotSeries, INT64_MIN);
  knots_.resize(knot_cells * kKnotSeries * 2 * kColumnGrain);
}

template class OpticalTile<float>;
template class OpticalTile<double>;

}  // namespace aoc
