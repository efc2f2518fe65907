// Training helpers over ad::Param: AdamW, gradient-norm clipping and a warm-up + cosine schedule.
#pragma once
#include <unordered_map>
#include <vector>

#include "models/autodiff.hpp"

namespace aoc::ad {

// Adam with decoupled weight decay (Loshchilov & Hutter; torch.optim.AdamW): per step t, for each param
//   p <- p * (1 - lr * weight_decay)
//   m <- beta1 m + (1 - beta1) g,  v <- beta2 v + (1 - beta2) g^2
//   p <- p - lr * (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + eps)
// The moments are kept per Param (by address); t counts the steps each param has taken.
struct AdamW {
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8, weight_decay = 0.0;
  void step(const std::vector<Param*>& params, double lr);
  long long steps() const { return steps_; }  // calls to step()

  // The moments of each param (in the order of `params`) and the step counts: what a training
  // checkpoint stores; restore() puts them back, so the next step() is the one an unbroken run takes.
  struct Saved {
    std::vector<Mat> m, v;
    std::vector<long long> t;
    long long steps = 0;
  };
  Saved save(const std::vector<Param*>& params) const;
  void restore(const std::vector<Param*>& params, const Saved& s);

 private:
  struct Moments {
    Mat m, v;
    long long t = 0;
  };
  std::unordered_map<const Param*, Moments> state_;
  long long steps_ = 0;
};

// The global L2 norm of all the grads; when it exceeds max_norm every grad is scaled by
// max_norm / norm (so the norm becomes max_norm). Returns the norm before clipping.
double clip_grad_norm(const std::vector<Param*>& params, double max_norm);

// The learning rate at `step` of `total`: a linear warm-up over the first W = round(warmup_fraction *
// total) steps (peak * (step + 1) / W), then a cosine from peak at step W down to floor_fraction * peak
// at step total (and after).
double warmup_cosine(long long step, long long total, double warmup_fraction, double peak, double floor_fraction = 0.1);

}  // namespace aoc::ad
