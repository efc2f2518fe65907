// One optical module programmed with one block of weights: the one model of the optics that every
// path uses (the loop core, compiled programs, hardware-aware training, sweeps). docs/physics.md,
// "The tile model".
//
// Programming (once per weight load, what the energy model counts as a reload): the SLM's fixed
// pattern is drawn, and the optical chain is folded into one affine map of the LED drives, F and c:
//   calibrated  the machine as measured (sim/stages.cpp: fan-in, SLM distortion and darkness, TIA
//               gains, photodetector and beam-splitter crosstalk, gain), with the tile at its place
//               in the module's core and the module's other channels dark;
//   ideal       out = t W exactly (transmissions |W| / max|W| on the two paths).
// Each read (one loop iteration): LED drives L = [LED+(t) | LED-(t)] (the fitted cubics, or linear),
// LED relative intensity noise, out = L F + c (+ the loop's epilogue), then the noise that arrives
// after the optics: shot noise from the photons each detector receives, receiver noise, and the
// time-correlated drift and 1/f noise.
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

// F and c of a tile's optical chain (double; the tile casts to its precision), and the map to the
// light each detector receives, for shot noise. K LED channels in, M detectors out.
struct FoldedChain {
  MatrixXdR F;        // 2K x M: rows 0..K-1 take LED+ drives, rows K..2K-1 LED- drives
  Eigen::VectorXd c;  // M
  MatrixXdR F_light;  // 2K x M: detected light per unit of LED drive (fan-in x SLM transmission)
  Eigen::VectorXd light_per_bias;  // M: detected light per unit of LED bias on the tile's LEDs
  Eigen::VectorXd detector_gain;   // M: output units per unit of detected light
};

// The calibrated chain of a core programmed with W_core (C x C, AOC convention W(LED, detector)),
// probed on LED channels in0..in0+K-1 and read on detectors out0..out0+M-1.
FoldedChain fold_optical_chain(const Hardware& hw, const CoreConfig& cfg, const MatrixXdR& W_core, int in0, int K, int out0,
                               int M, const SlmPattern* slm = nullptr);
// The same for the whole core.
FoldedChain fold_optical_chain(const Hardware& hw, const CoreConfig& cfg, const MatrixXdR& W, const SlmPattern* slm = nullptr);

// A tile's noise: the levels (a level 0 switches a source off), the seed, and where the tile sits
// in the machine and on its clock.
struct TileNoise {
  NoiseSpec spec;
  std::uint64_t seed = 0;
  std::uint32_t stream = 0;       // which tile: keys its white noise and SLM pattern (< 2^28)
  std::uint32_t channel0 = 0;     // its first detector in the machine: keys its drift and 1/f noise
  double loop_period_us = 0.02;   // one iteration on the clock
  std::int64_t slot_ticks = 512;  // iterations from the start of one solve slot to the next
};

template <class T>
class OpticalTile {
 public:
  // chain: the chain's settings (LED model, gain, switches) for calibrated optics; ideal optics
  // uses only its LED model. hw must outlive the tile.
  OpticalTile(const Hardware& hw, const CoreConfig& chain, Optics optics);

  void set_noise(const TileNoise& n);  // before program(): the pattern is drawn when programming
  const TileNoise* noise() const { return noisy_ ? &noise_ : nullptr; }

  // Programs W (K x M, AOC convention: LED channel i drives detector j by W(i, j)) at LED channel
  // in0 and detector out0 of the module's core. Calibrated optics folds the chain of a core of
  // `channels` (0: the machine's; the loop core uses its own size, as the twin does), which must
  // hold the block.
  void program(const MatrixXdR& W, int in0 = 0, int out0 = 0, int channels = 0);
  int programmings() const { return programmings_; }

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
  // L F + c and e's loop terms, then the output noise times e.kappa. Row r is slot
  // ctx.sample(row0 + r) at iteration ctx.iteration. Threads may call it at once.
  void read(const T* t, int rows, const StepContext& ctx, int row0, kern::Epilogue<T> e, T* out, T* scratch) const;

 private:
  void drives(const T* t, int rows, T* L) const;
  void add_rin(T* L, int rows, const float* eps, int ld) const;
  void add_output_noise(const T* L, int rows, const StepContext& ctx, int row0, const noise::Stream* streams, T kappa, T* out, T* light,
                        const float* eps, int ld) const;
  bool correlated_linear(std::int64_t block, double* base, double* slope) const;
  void add_drift_at(std::int64_t tick, T kappa, T* o) const;
  std::shared_ptr<const std::vector<double>> slow_span(std::int64_t span) const;
  double drift_period() const;
  int flicker_top() const;
  double flicker_amplitude(int top) const;

  const Hardware& hw_;
  CoreConfig chain_;
  Optics optics_;
  int K_ = 0, M_ = 0, ldi_ = 0, ldo_ = 0;
  AlignedVector<T> F_, c_;                               // (2 ld_in) x ld_out, ld_out
  AlignedVector<T> F_light_, light_bias_, detector_gain_;  // shot noise
  bool noisy_ = false;
  TileNoise noise_;
  int programmings_ = 0;
  // Time-correlated noise. Each row of the reads (row0 + r) remembers the block of 64 iterations
  // its drift and 1/f noise were last evaluated for, as a value and a slope per detector, so a
  // row evaluates them once per block (prepare_reads sizes this; rows beyond it evaluate every
  // read). The slow 1/f octaves' spans are shared by all rows, cached.
  mutable std::vector<std::int64_t> memo_block_;
  mutable std::vector<char> memo_inside_;    // the block has a drift knot inside
  mutable std::vector<double> memo_linear_;  // per row: base (M), slope (M)
  mutable std::mutex slow_mutex_;
  mutable std::unordered_map<std::int64_t, std::shared_ptr<const std::vector<double>>> slow_;
};

extern template class OpticalTile<float>;
extern template class OpticalTile<double>;

}  // namespace aoc
