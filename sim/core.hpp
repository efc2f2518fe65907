// The fixed-point loop of one optical core: the electronics' nonlinearity t = sigma(z), then one read
// of the core's optical tile (sim/tile.hpp: LED drives, the light on each path, the detector band,
// the machine's noise) with the loop's terms: z' = c + band(light, L) + alpha*z + inj (+ momentum).
// The hot loop is OpticalCore::step (core.cpp): one fused pass per block of rows, threaded over blocks.
#pragma once
#include <Eigen/Dense>
#include <cstdint>

#include "sim/batch.hpp"
#include "sim/config.hpp"
#include "sim/hardware.hpp"
#include "sim/solver.hpp"
#include "sim/stages.hpp"
#include "sim/tile.hpp"

#include <memory>
#include <optional>

namespace aoc {

// A noisy run of the loop: the hardware file's noise levels, a seed, and the clock: iterations last
// the loop period, consecutive samples start sample_spacing_us apart (one solve slot each).
struct NoiseRun {
  NoiseSpec spec;
  std::uint64_t seed = 0;
  std::optional<std::uint64_t> program_seed;  // the SLM's programming errors (TileNoise::program_seed); none: seed
  int zero_reads = kZeroReads;     // the auto-zero after each programming (TileNoise::zero_reads; 0: none)
  std::optional<double> after_programming_us;  // the run this long after the programming (TileNoise::after_programming_us)
  std::optional<double> zero_every_us;         // the auto-zero again this often (TileNoise::zero_every_us)
  double loop_period_us = 0.02;    // one iteration
  double sample_spacing_us = 10;   // time between the starts of consecutive samples' solves
};

template <class T>
class OpticalCore {
 public:
  OpticalCore(const Hardware& hw, CoreConfig cfg);

  // Switches noise on; call before load_weights (the SLM's fixed pattern is drawn when weights
  // are programmed, once per programming).
  void set_noise(const NoiseRun& noise);

  // Programs the weights (AOC convention, N x N) and the bias (N), read where they lie (a Ref: a
  // NumPy buffer mapped by the Python module is not copied first). Recomputes F and c.
  void load_weights(const Eigen::Ref<const MatrixXdR>& W, const Eigen::VectorXd& bias);

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
  void step_rows(const T* z, const T* inj, const T* z_prev, T* out, int rows, T* scratch, const T* alpha, const StepContext& ctx,
                 int row0) const;

  Hardware hw_;
  CoreConfig cfg_;
  int n_ = 0, ld_ = 0;
  std::unique_ptr<OpticalTile<T>> tile_;  // reads hw_
  AlignedVector<T> alpha_, bias_, binary_;  // ld each (binary_: 1 on a binary channel under Nonlinearity::Ising)
  T gamma_ = 0;
  bool has_gamma_ = false;
};

extern template class OpticalCore<float>;
extern template class OpticalCore<double>;

}  // namespace aoc
