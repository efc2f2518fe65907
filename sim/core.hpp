// The fast simulator of one optical core. Everything that depends only on the weights and the
// configuration (max|W|, SLM distortion, fan-in, TIA gains, crosstalk, gain, closed-loop
// correction) is folded once per weight load into one matrix F (2N x N) and one offset c (N), so
// an iteration is: t = sigma(z); L = [LED+(t) | LED-(t)]; z' = L F + c + alpha*z + inj (+ momentum).
// The hot loop is OpticalCore::step (core.cpp): one fused pass per tile of rows, threaded over tiles.
#pragma once
#include <Eigen/Dense>
#include <cstdint>

#include "sim/batch.hpp"
#include "sim/config.hpp"
#include "sim/hardware.hpp"
#include "sim/solver.hpp"
#include "sim/stages.hpp"

#include <mutex>
#include <unordered_map>

namespace aoc {

// F and c of the optical chain for these weights (double; the core casts to its precision), and
// the map to the light each detector receives, for shot noise.
struct FoldedChain {
  MatrixXdR F;        // 2N x N: rows 0..N-1 take LED+ drives, rows N..2N-1 LED- drives
  Eigen::VectorXd c;  // N
  MatrixXdR F_light;  // 2N x N: detected light per unit of LED drive (fan-in x SLM transmission)
  Eigen::VectorXd light_per_bias;  // N: detected light per unit of LED bias on every LED
  Eigen::VectorXd detector_gain;   // N: state volts per unit of detected light
};
FoldedChain fold_optical_chain(const Hardware& hw, const CoreConfig& cfg, const MatrixXdR& W,
                               const SlmPattern* slm = nullptr);

// A noisy run: the hardware file's noise levels, a seed, and the clock the drift runs on.
struct NoiseRun {
  NoiseSpec spec;
  std::uint64_t seed = 0;
  double loop_period_us = 0.02;    // one iteration
  double sample_spacing_us = 10;   // time between the starts of consecutive samples' solves
  int flicker_length = 64;         // iterations covered by one 1/f sequence (then it repeats)
};

template <class T>
class OpticalCore {
 public:
  OpticalCore(const Hardware& hw, CoreConfig cfg);

  // Switches noise on; call before load_weights (the SLM's fixed pattern is drawn when weights
  // are programmed, once per programming).
  void set_noise(const NoiseRun& noise);

  // Programs the weights (AOC convention, N x N) and the bias (N). Recomputes F and c.
  void load_weights(const MatrixXdR& W, const Eigen::VectorXd& bias);

  int n() const { return n_; }
  const CoreConfig& config() const { return cfg_; }

  // The input injection clip(x + b), computed once per input and reused every iteration.
  Batch<T> injection(const Batch<T>& x) const;

  // One iteration of every row: out = f(z). z_prev is read only when the config has a gamma
  // (nullptr: zeros). Threads over tiles of rows; each row's result does not depend on the others.
  void step(const Batch<T>& z, const Batch<T>& inj, const Batch<T>* z_prev, Batch<T>& out,
            const StepContext& ctx = {}) const;
  StepFn<T> step_fn() const;  // step as the solver takes it

 private:
  void step_tile(const T* z, const T* inj, const T* z_prev, T* out, int rows, T* scratch, const T* alpha,
                 const StepContext& ctx, int tile_row0) const;
  void add_rin(T* L, int rows, const StepContext& ctx, int row0) const;
  void add_output_noise(const T* L, T* out, int rows, const StepContext& ctx, int row0, T* scratch) const;
  void prepare_flicker(int rows, const StepContext& ctx) const;

  Hardware hw_;
  CoreConfig cfg_;
  int n_ = 0, ld_ = 0;
  AlignedVector<T> F_;         // (2*ld) x ld, zero padded
  AlignedVector<T> c_, alpha_, bias_;  // ld each
  T gamma_ = 0;
  bool has_gamma_ = false;

  bool noisy_ = false;
  NoiseRun noise_;
  int programmings_ = 0;
  AlignedVector<T> F_light_, light_bias_, detector_gain_;  // shot noise
  mutable std::mutex flicker_mutex_;
  mutable std::unordered_map<int, std::vector<float>> flicker_;  // sample -> N x flicker_length
};

extern template class OpticalCore<float>;
extern template class OpticalCore<double>;

}  // namespace aoc
