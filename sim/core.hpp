// The fast simulator of one optical core. Everything that depends only on the weights and the
// configuration (max|W|, SLM distortion, fan-in, TIA gains, crosstalk, gain, closed-loop
// correction) is folded once per weight load into one matrix F (2N x N) and one offset c (N), so
// an iteration is: t = sigma(z); L = [LED+(t) | LED-(t)]; z' = L F + c + alpha*z + inj (+ momentum).
// The hot loop is OpticalCore::step (core.cpp): one fused pass per tile of rows, threaded over tiles.
#pragma once
#include <Eigen/Dense>

#include "sim/batch.hpp"
#include "sim/config.hpp"
#include "sim/hardware.hpp"
#include "sim/stages.hpp"

namespace aoc {

// F and c of the optical chain for these weights (double; the core casts to its precision).
struct FoldedChain {
  MatrixXdR F;        // 2N x N: rows 0..N-1 take LED+ drives, rows N..2N-1 LED- drives
  Eigen::VectorXd c;  // N
};
FoldedChain fold_optical_chain(const Hardware& hw, const CoreConfig& cfg, const MatrixXdR& W);

template <class T>
class OpticalCore {
 public:
  OpticalCore(const Hardware& hw, CoreConfig cfg);

  // Programs the weights (AOC convention, N x N) and the bias (N). Recomputes F and c.
  void load_weights(const MatrixXdR& W, const Eigen::VectorXd& bias);

  int n() const { return n_; }
  const CoreConfig& config() const { return cfg_; }

  // The input injection clip(x + b), computed once per input and reused every iteration.
  Batch<T> injection(const Batch<T>& x) const;

  // One iteration of every row: out = f(z). z_prev is read only when the config has a gamma
  // (nullptr: zeros). Threads over tiles of rows; each row's result does not depend on the others.
  void step(const Batch<T>& z, const Batch<T>& inj, const Batch<T>* z_prev, Batch<T>& out) const;

 private:
  void step_tile(const T* z, const T* inj, const T* z_prev, T* out, int rows, T* scratch) const;

  Hardware hw_;
  CoreConfig cfg_;
  int n_ = 0, ld_ = 0;
  AlignedVector<T> F_;         // (2*ld) x ld, zero padded
  AlignedVector<T> c_, alpha_, bias_;  // ld each
  T gamma_ = 0;
  bool has_gamma_ = false;
};

extern template class OpticalCore<float>;
extern template class OpticalCore<double>;

}  // namespace aoc
