// One optical module programmed with one block of weights: the one model of the optics that every
// path uses (the loop core, compiled programs, hardware-aware training, sweeps). docs/physics.md,
// "The tile model".
//
// Programming (once per weight load, what the energy model counts as a reload): the SLM's fixed
// pattern is drawn, and the optical chain is factored at the detectors (FactoredChain): the light
// each path's detectors receive per LED drive, T, and the detector chain as a band of three
// coefficients per detector:
//   calibrated  the machine as measured (sim/stages.cpp: fan-in, SLM distortion and darkness, TIA
//               gains, photodetector and beam-splitter crosstalk, gain), with the tile at its place
//               in the module's core and the module's other channels dark;
//   ideal       out = t W exactly (transmissions |W| / max|W| on the two paths).
// Each read (one loop iteration): LED drives L = [LED+(t) | LED-(t)] (the fitted cubics, or linear),
// LED relative intensity noise, the light on each path's detectors L+ T+ and L- T- (one product per
// path, K x M each: what the noiseless read costs too), out = c + the band over that light and the
// drives (+ the loop's epilogue), then the noise that arrives after the optics: shot noise from the
// photons each detector receives (the same light), receiver noise, and the time-correlated drift
// and 1/f noise.
//
// Noise is grouped as the physics is: programming-time (SLM pattern, per programming), per read
// (RIN, shot, receiver: fresh every iteration, keyed by (seed, source, tile, slot, iteration,
// channel)) and time-correlated (drift, 1/f: functions of the machine's clock, keyed by the
// detector, so continuous over iterations, tokens and solves). Every draw is counter-based, so a
// row's result depends on nothing but its slot and iteration: not on threads or batch splits.
#pragma once
#include <Eigen/Dense>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include "sim/batch.hpp"
#include "sim/config.hpp"
#include "sim/hardware.hpp"
#include "sim/kernels.hpp"
#include "sim/noise.hpp"
#include "sim/physics_spec.hpp"
#include "sim/stages.hpp"

namespace aoc {

enum class Optics { Calibrated, Ideal };

// A tile's optical chain factored at its detectors (double; the tile casts to its precision). K
// LED channels in, M detectors out. The light on each path's detectors is the drives times T;
// each detector's output is c plus a band of three: its own and its two neighbours' light on
// either path (TIA gains, photodetector crosstalk, gain, closed loop), and the beam splitters'
// leak of the drives on the same channels, or, where they leak densely (the 16-variable
// machine's pattern), every drive through Q.
struct FactoredChain {
  MatrixXdR T;     // 2K x (M + the neighbours in the core): rows 0..K-1 take LED+ drives, K..2K-1
                   // LED- drives; column h0 + j is detector j (columns from detector -1 where it exists)
  int h0 = 0;
  MatrixXdR band;  // 12 x M: for d = -1, 0, 1, rows 1 + d and 4 + d weigh the light of detector
                   // j + d on the LED+ and LED- paths, rows 7 + d and 10 + d the LED+ and LED-
                   // drives of the LED on channel out0 + j + d (when in the tile)
  MatrixXdR Q;     // 2K x M where the drives leak densely, else empty
  Eigen::VectorXd c;               // M
  Eigen::VectorXd light_per_bias;  // M: detected light per unit of LED bias on the tile's LEDs
  Eigen::VectorXd detector_gain;   // M: output units per unit of detected light
  int q0 = 0;                      // out0 - in0
  // The chain as one 2K x M matrix F, out = [LED+ | LED-] F + c (what probing the whole chain
  // with unit drives gives).
  MatrixXdR folded() const;
};

// The calibrated chain of a core programmed with W_core (C x C, AOC convention W(LED, detector)),
// probed on LED channels in0..in0+K-1 and read on detectors out0..out0+M-1.
FactoredChain factor_optical_chain(const Hardware& hw, const CoreConfig& cfg, const MatrixXdR& W_core, int in0, int K, int out0,
                                   int M, const SlmPattern* slm = nullptr);
// The same for the whole core.
FactoredChain factor_optical_chain(const Hardware& hw, const CoreConfig& cfg, const MatrixXdR& W, const SlmPattern* slm = nullptr);

// A tile's noise: the levels (a level 0 switches a source off), the seed, and where the tile sits
// in the machine and on its clock.
struct TileNoise {
  NoiseSpec spec;
  std::uint64_t seed = 0;
  // Keys the SLM's programming errors (the chip as written) apart from the read noise: one program
  // seed and several seeds evaluate one programmed chip under fresh read noise. None: `seed`.
  std::optional<std::uint64_t> program_seed;
  // Write-verify after each programming: a pixel whose transmission is off by more than
  // verify_tolerance (relative) is written again, up to verify_rounds times, each write a new draw
  // of the pattern (the reads resolving each pixel finer than the tolerance). 0: none.
  double verify_tolerance = 0;
  int verify_rounds = 0;
  // Auto-zero after each programming (OpticalTile::auto_zero): reads averaged with every value at
  // 0, each output's bias set by them (kZeroReads). 0: none.
  int zero_reads = kZeroReads;
  std::uint32_t stream = 0;       // which tile: keys its white noise and SLM pattern (< 2^28)
  std::uint32_t channel0 = 0;     // its first detector in the machine: keys its drift and 1/f noise
  double loop_period_us = 0.02;   // one iteration on the clock
  std::int64_t slot_ticks = 512;  // iterations from the start of one solve slot to the next
  // The programming's moment on the clock. None: it has none (the auto-zero leaves the slow noise
  // out, the run's clock starts at 0). Given: the tile is programmed and auto-zeroed at clock 0, the
  // zero reads taking the drift and 1/f noise of that moment out with the rest, and the run starts
  // this many microseconds later: the slow noise then drifts away from its zero as t grows.
  std::optional<double> after_programming_us;
  // The auto-zero taken again every this many microseconds of the clock (needs after_programming_us
  // and zero_reads): zero k, at k times it, sets the bias as the programming's did, taking out the
  // slow noise of its moment to its reads' white noise. A solve uses the last zero before its slot
  // starts. None: only the programming's zero, the slow noise drifting away from it for the whole run.
  std::optional<double> zero_every_us;
};

template <class T>
class OpticalTile {
 public:
  // chain: the chain's settings (LED model, gain, switches) for calibrated optics; ideal optics
  // uses only its LED model. hw must outlive the tile.
  OpticalTile(const Hardware& hw, const CoreConfig& chain, Optics optics);

  void set_noise(const TileNoise& n);  // before program(): the pattern is drawn when programming
  const TileNoise* noise() const { return noisy_ ? &noise_ : nullptr; }
  // Before program(): how the light map is kept. F32: in T. F16 (float tiles only): in IEEE half
  // precision (11 significant bits, rounded to nearest), accumulated in float: half the bytes a
  // read streams. Auto: F16 for float tiles whose map in float exceeds kHalfMapAbove bytes (modules
  // of about 360 channels and more: a read streams the map from memory, so its bytes are the
  // read's time), F32 otherwise (the map stays in cache; double tiles keep double).
  static constexpr std::size_t kHalfMapAbove = std::size_t(1) << 20;
  void set_light_map(LightMap m);
  // Whether an LED driver (LedModel::Driver) holds its values at the rails of its range, [-1, 1], as
  // its DAC does: on by default; off where the run's converters are ideal (no clipping anywhere).
  void set_drive_rails(bool on) { led_.clamp = on && chain_.led == LedModel::Driver; }
  bool half_light_map() const { return half_map_; }  // after program(): what it keeps

  // Programs W (K x M, AOC convention: LED channel i drives detector j by W(i, j)) at LED channel
  // in0 and detector out0 of the module's core. Calibrated optics folds the chain of a core of
  // `channels` (0: the machine's; the loop core uses its own size, as the twin does), which must
  // hold the block. gain (M, optional): each detector's gain trim (sim/programming.hpp), which
  // scales its output and the shot and receiver noise with it, not the electronics' after it.
  void program(const Eigen::Ref<const MatrixXdR>& W, int in0 = 0, int out0 = 0, int channels = 0, const Eigen::VectorXd* gain = nullptr);
  int programmings() const { return programmings_; }
  long long rewrites() const { return rewrites_; }  // pixels written again by write-verify, over every programming

  int inputs() const { return K_; }
  int outputs() const { return M_; }
  int ld_in() const { return ldi_; }    // row stride of what a read takes
  int ld_out() const { return ldo_; }   // row stride of what it writes
  const T* offset() const { return c_.data(); }  // c, ld_out values

  // Elements of scratch a read of `rows` rows needs (64-byte aligned).
  std::size_t scratch_size(int rows) const;
  // Makes room for reads of rows 0 .. rows - 1 to remember their time-correlated noise between
  // iterations (a read's rows beyond it recompute it every read: the same values, slower). Not
  // while reads run.
  void prepare_reads(int rows) const;

  // One read of `rows` rows: t (rows x ld_in) is what the LEDs emit; out (rows x ld_out) gets
  // the chain's output and e's loop terms, then the output noise times e.kappa. Row r is slot
  // ctx.sample(row0 + r) at iteration ctx.iteration. Threads may call it at once.
  void read(const T* t, int rows, const StepContext& ctx, int row0, kern::Epilogue<T> e, T* out, T* scratch) const;

  // The same read in three steps, so that threads can share one large tile (a token at a time
  // through a module): emit, once per read, the LED drives and their intensity noise into L
  // (rows x drive_ld()); light, over any split of the light map's panels, each path's light into
  // `light` (light_size(rows)); then sense, over any split of the outputs into column ranges
  // [j0, j1) that start on multiples of kColumnGrain, the detector chain and its noise into those
  // columns of out. Every value is read()'s, whatever the splits.
  static constexpr int kColumnGrain = 64;
  int drive_ld() const { return 2 * ldi_; }
  int light_panels() const { return (nl_ + kColumnGrain - 1) / kColumnGrain; }
  std::size_t light_size(int rows) const { return static_cast<std::size_t>(rows) * 2 * ldl_; }
  void emit(const T* t, int rows, const StepContext& ctx, int row0, T* L, T* scratch) const;
  void light(const T* L, int rows, int p0, int p1, T* light) const;
  void sense(const T* L, const T* light, int rows, const StepContext& ctx, int row0, const kern::Epilogue<T>& e, int j0, int j1, T* out,
             T* scratch) const;

 private:
  struct Work {  // a read's scratch after its drives
    T *light, *g;
    float* eps;  // RIN rows, then the detectors' rows, ld floats each
    int ld;
    noise::Stream* streams;  // the same two sets of rows
  };
  Work work(T* scratch, int rows) const;
  void key_streams(int rows, const StepContext& ctx, int row0, noise::Stream* st) const;
  noise::Stream white_stream(noise::Source s, int slot, int iteration) const;
  void drives(const T* t, int rows, T* L) const;
  void auto_zero(const Eigen::VectorXd& intended);
  void add_rin(T* L, int rows, const float* eps, int ld) const;
  bool white_ahead(int rows, const StepContext& ctx, int row0, bool rin, bool white, const float*& rin_eps, const float*& white_eps,
                   int& ld) const;
  void sense_columns(const T* L, const T* light, int rows, const StepContext& ctx, int row0, const kern::Epilogue<T>& e, int j0, int j1,
                     T* out, const Work& w, const float* white, int ld) const;
  void detect(const T* L, const T* light, int rows, const kern::Epilogue<T>& e, int j0, int j1, T* out, T* g) const;
  void add_output_noise(const T* light, int rows, const StepContext& ctx, int row0, const noise::Stream* streams, T kappa, int j0, int j1,
                        T* out, const float* eps, int ld) const;
  int chunks() const { return (M_ + kColumnGrain - 1) / kColumnGrain; }
  bool correlated_linear(std::int64_t block, int j0, int j1, std::size_t cell, double* base, double* slope) const;
  void add_drift_at(std::int64_t tick, T kappa, int j0, int j1, T* o) const;
  const std::vector<double>& slow_span(std::int64_t span) const;  // valid until this thread's next call
  void slow_at(std::int64_t tick, double* v) const;               // the drift and 1/f noise at one tick, M values
  const std::vector<double>& zero_change(std::int64_t k) const;   // zero k's change of the bias, M; valid as slow_span's
  double drift_period() const;
  int flicker_top() const;
  double flicker_amplitude(int top) const;

  const Hardware& hw_;
  CoreConfig chain_;
  Optics optics_;
  LedResponse led_;  // the drives' cubics (ideal optics under a driver: linear at its slope)
  int K_ = 0, M_ = 0, ldi_ = 0, ldo_ = 0, nl_ = 0, ldl_ = 0, h0_ = 0, q0_ = 0;  // nl_: light columns
  AlignedVector<T> T_;                // FactoredChain::T in panels of kColumnGrain light columns (pack_panels)
  AlignedVector<kern::Half> H_;       // the same in half precision instead (set_light_map)
  LightMap light_map_ = LightMap::F32;
  bool half_map_ = false;
  AlignedVector<T> band_, Q_, c_;     // 12 x ld_out; (2 ld_in) x ld_out or empty; ld_out
  AlignedVector<T> light_bias_, detector_gain_;  // shot noise
  bool noisy_ = false;
  TileNoise noise_;
  int programmings_ = 0;
  bool zeroing_ = false;           // auto_zero's reads: the slow noise at the programming's moment
  std::int64_t start_ticks_ = 0;   // the run's first iteration on the clock (after_programming_us)
  std::int64_t zero_ticks_ = 0;    // the auto-zero again every this many iterations (zero_every_us; 0: never)
  std::vector<double> zero0_;      // M: what the programming's zero took out beyond the chain (its slow and white noise)
  std::vector<double> zero_sd_;    // M: the white noise of one zero (its reads' rms / sqrt(reads))
  long long rewrites_ = 0;
  std::uint64_t programming_id_ = 0;  // unique to this programming in the process
  // Time-correlated noise. Each row of the reads (row0 + r) remembers, per kColumnGrain columns, the
  // block of 64 iterations its drift and 1/f noise were last evaluated for, as a value and a slope
  // per detector, so a row evaluates them once per block (prepare_reads sizes this; rows beyond it
  // evaluate every read). The slow 1/f octaves' spans are shared by all rows, cached.
  mutable std::vector<std::int64_t> memo_block_;  // per row and column chunk
  mutable std::vector<char> memo_inside_;    // the block has a drift knot inside
  mutable std::vector<float> memo_linear_;  // per row: base (M), slope (M)
  // The knots a row's column chunk last evaluated them from, per series (the fast 1/f octaves, then
  // the drift): the index m of the interval and its knots m and m + 1 (kColumnGrain values each).
  // The next block needs the same interval or the next one, so it draws only the knots it lacks
  // (the same values: each knot is its stream's). For the first kKnotCells row chunks.
  static constexpr int kKnotSeries = 7;
  static constexpr std::size_t kKnotCells = 4096;
  mutable std::vector<std::int64_t> knot_at_;
  mutable std::vector<float> knots_;
  // White noise drawn ahead: for reads of few rows (prepare_reads with at most kAheadRows), each row
  // draws its LED and detector noise kAheadIterations at a time, in bulk, the same values as one
  // iteration at a time (the same streams and elements): [RIN: iterations x K][white: iterations x M].
  static constexpr int kAheadRows = 4, kAheadIterations = 8;
  mutable std::vector<std::int64_t> ahead_slot_, ahead_iteration_;  // per row: what ahead_ holds
  mutable std::vector<float> ahead_;
  mutable std::mutex slow_mutex_;
  mutable std::unordered_map<std::int64_t, std::shared_ptr<const std::vector<double>>> slow_;
  mutable std::unordered_map<std::int64_t, std::shared_ptr<const std::vector<double>>> zeros_;  // zero_change, by k
};

extern template class OpticalTile<float>;
extern template class OpticalTile<double>;

}  // namespace aoc
