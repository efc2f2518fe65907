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

AdamW::Saved AdamW::save(const std::vector<Param*>& params) const {
  Saved s;
  s.steps = steps_;
  for (const Param* p : params) {
    const auto it = state_.find(p);
    const bool has = it != state_.end() && it->second.m.size() == p->value.size();
    s.m.push_back(has ? it->second.m : Mat::Zero(p->value.rows(), p->value.cols()));
    s.v.push_back(has ? it->second.v : Mat::Zero(p->value.rows(), p->value.cols()));
    s.t.push_back(has ? it->second.t : 0);
  }
  return s;
}

void AdamW::restore(const std::vector<Param*>& params, const Saved& s) {
  if (s.m.size() != params.size() || s.v.size() != params.size() || s.t.size() != params.size())
    throw Error("AdamW::restore: moments of " + std::to_string(s.m.size()) + " params, the model has " + std::to_string(params.size()));
  state_.clear();
  for (std::size_t i = 0; i < params.size(); ++i) {
    const Param* p = params[i];
    if (s.m[i].rows() != p->value.rows() || s.m[i].cols() != p->value.cols() || s.v[i].rows() != p->value.rows() ||
        s.v[i].cols() != p->value.cols())
      throw Error("AdamW::restore: moments of '" + p->name + "' are " + shape_of(s.m[i]) + ", the param " + shape_of(p->value));
    state_[p] = {s.m[i], s.v[i], s.t[i]};
  }
  steps_ = s.steps;
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
