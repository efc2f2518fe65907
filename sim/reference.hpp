// The digital CPU reference: the ideal loop z' = alpha*z + beta*tanh(z) W + x + b in double,
// written plainly with Eigen. It is what the simulator's ideal mode must reproduce and what
// compiled programs are checked against.
#pragma once
#include <Eigen/Dense>

#include "sim/batch.hpp"
#include "sim/solver.hpp"
#include "sim/stages.hpp"

namespace aoc {

class ReferenceLoop {
 public:
  // W in AOC convention (z' uses tanh(z) @ W), N x N; bias N; alpha, beta: one value or N values.
  ReferenceLoop(const MatrixXdR& W, const Eigen::VectorXd& bias, std::vector<double> alpha, std::vector<double> beta);

  int n() const { return static_cast<int>(W_.cols()); }
  // x + b, no clip: the ideal loop has no converter limits.
  Batch<double> injection(const Batch<double>& x) const;
  void step(const Batch<double>& z, const Batch<double>& inj, Batch<double>& out) const;
  StepFn<double> step_fn() const;

 private:
  MatrixXdR W_;  // beta folded in: column j scaled by beta_j
  Eigen::VectorXd bias_, alpha_;
};

}  // namespace aoc
