#include "models/optim.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "sim/error.hpp"

namespace aoc::ad {

void AdamW::step(const std::vector<Param*>& params, double lr) {
  for (const Param* p : params)
    if (p->grad.rows() != p->value.rows() || p->grad.cols() != p->value.cols())
      throw Error("AdamW::step: param '" + p->name + "' has value " + shape_of(p->value) + " but grad " + shape_of(p->grad));
  ++steps_;
  for (Param* p : params) {
    Moments& s = state_[p];
    if (s.m.rows() != p->value.rows() || s.m.cols() != p->value.cols()) {
      s.m = Mat::Zero(p->value.rows(), p->value.cols());
      s.v = Mat::Zero(p->value.rows(), p->value.cols());
      s.t = 0;
    }
    ++s.t;
    const double c1 = 1.0 - std::pow(beta1, static_cast<double>(s.t));
    const double c2 = 1.0 - std::pow(beta2, static_cast<double>(s.t));
    if (weight_decay != 0.0) p->value *= 1.0 - lr * weight_decay;
    s.m = beta1 * s.m + (1.0 - beta1) * p->grad;
    s.v = beta2 * s.v + (1.0 - beta2) * p->grad.cwiseAbs2();
    p->value.array() -= lr * (s.m.array() / c1) / ((s.v.array() / c2).sqrt() + eps);
  }
}

double clip_grad_norm(const std::vector<Param*>& params, double max_norm) {
  double sq = 0.0;
  for (const Param* p : params) sq += p->grad.squaredNorm();
  const double norm = std::sqrt(sq);
  if (norm > max_norm && norm > 0.0) {
    const double s = max_norm / norm;
    for (Param* p : params) p->grad *= s;
  }
  return norm;
}

double warmup_cosine(long long step, long long total, double warmup_fraction, double peak, double floor_fraction) {
  const long long W = std::llround(std::clamp(warmup_fraction, 0.0, 1.0) * static_cast<double>(total));
  if (step < W) return peak * static_cast<double>(step + 1) / static_cast<double>(W);
  const double span = static_cast<double>(std::max<long long>(1, total - W));
  const double progress = std::clamp(static_cast<double>(step - W) / span, 0.0, 1.0);
  const double lo = floor_fraction * peak;
  return lo + (peak - lo) * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
}

}  // namespace aoc::ad
