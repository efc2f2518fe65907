#include "sim/reference.hpp"

#include "sim/error.hpp"

namespace aoc {

ReferenceLoop::ReferenceLoop(const MatrixXdR& W, const Eigen::VectorXd& bias, std::vector<double> alpha,
                             std::vector<double> beta)
    : W_(W), bias_(bias) {
  const Eigen::Index N = W.cols();
  if (W.rows() != N) throw Error("reference: the matrix must be square");
  if (bias.size() != N) throw Error("reference: bias length differs from the matrix size");
  for (const auto* v : {&alpha, &beta})
    if (v->size() > 1 && static_cast<Eigen::Index>(v->size()) != N) throw Error("reference: alpha/beta need 1 or N values");
  alpha_.resize(N);
  for (Eigen::Index j = 0; j < N; ++j) {
    alpha_(j) = coeff_at(alpha, static_cast<int>(j), 0.0);
    W_.col(j) *= coeff_at(beta, static_cast<int>(j), 1.0);
  }
}

Batch<double> ReferenceLoop::injection(const Batch<double>& x) const {
  if (x.n != n()) throw Error("reference: inputs have the wrong number of channels");
  Batch<double> inj(x.rows, x.n);
  for (int r = 0; r < x.rows; ++r)
    for (int j = 0; j < x.n; ++j) inj.row(r)[j] = x.row(r)[j] + bias_(j);
  return inj;
}

void ReferenceLoop::step(const Batch<double>& z, const Batch<double>& inj, Batch<double>& out) const {
  const int N = n();
  if (out.rows != z.rows || out.n != N) out = Batch<double>(z.rows, N);
  using Map = Eigen::Map<const MatrixXdR, 0, Eigen::OuterStride<>>;
  using MapOut = Eigen::Map<MatrixXdR, 0, Eigen::OuterStride<>>;
  Map Z(z.data.data(), z.rows, N, Eigen::OuterStride<>(z.ld));
  Map X(inj.data.data(), z.rows, N, Eigen::OuterStride<>(inj.ld));
  MapOut O(out.data.data(), z.rows, N, Eigen::OuterStride<>(out.ld));
  O.noalias() = Z.array().tanh().matrix() * W_;
  O += Z * alpha_.asDiagonal();
  O += X;
}

StepFn<double> ReferenceLoop::step_fn() const {
  return [this](const Batch<double>& z, const Batch<double>& inj, const Batch<double>*, Batch<double>& out,
                const StepContext&) {
    step(z, inj, out);
  };
}

}  // namespace aoc
