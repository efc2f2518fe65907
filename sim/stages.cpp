#include "sim/stages.hpp"

#include <algorithm>
#include <cmath>

#include "sim/error.hpp"

namespace aoc {

double coeff_at(const std::vector<double>& v, int j, double if_empty) {
  if (v.empty()) return if_empty;
  return v.size() == 1 ? v[0] : v[static_cast<size_t>(j)];
}

void check_loop_shapes(const CoreConfig& cfg, long rows, long cols, bool finite, double max_abs) {
  if (rows != cols) throw Error("weights: the matrix must be square, got " + std::to_string(rows) + "x" + std::to_string(cols));
  if (!finite) throw Error("weights: contains NaN or infinity");
  if (!(max_abs > 0)) throw Error("weights: the matrix is all zeros");
  for (const auto* v : {&cfg.alpha, &cfg.beta})
    if (v->size() > 1 && static_cast<long>(v->size()) != cols)
      throw Error(std::string(v == &cfg.alpha ? "alpha" : "beta") + ": expected 1 or " + std::to_string(cols) +
                  " values, got " + std::to_string(v->size()));
  if (cfg.gamma && !std::isfinite(*cfg.gamma)) throw Error("gamma: not a finite number");
  if (!(cfg.step_fraction > 0 && cfg.step_fraction <= 1)) throw Error("step fraction: must be in (0, 1]");
  if (cfg.alpha_schedule.iterations < 1) throw Error("alpha schedule: iterations must be at least 1");
}

double AlphaSchedule::at(int k) const {
  switch (kind) {
    case Kind::Constant: return start;
    case Kind::Linear: return k >= iterations ? end : start + (end - start) * k / iterations;
    case Kind::Exponential: return end + (start - end) * std::exp(-static_cast<double>(k) / iterations);
  }
  return start;
}

CoreConfig CoreConfig::twin_defaults(const Hardware& hw) {
  CoreConfig c;
  c.switches = hw.defaults.switches;
  c.gain = hw.defaults.normalise_matrix ? GainMode::ScaleOverN : GainMode::MaxAbs;
  c.scale = hw.defaults.scale;
  c.alpha = {hw.defaults.alpha};
  return c;
}

CoreConfig CoreConfig::twin_all_off(const Hardware& hw) {
  CoreConfig c = twin_defaults(hw);
  c.switches = Switches{false, false, false, false, false, false};
  return c;
}

CoreConfig CoreConfig::ideal(double alpha, double beta) {
  CoreConfig c;
  c.switches = Switches{false, false, false, false, false, false};
  c.gain = GainMode::Explicit;
  c.beta = {beta};
  c.alpha = {alpha};
  c.nonlinearity = Nonlinearity::Tanh;
  c.led = LedModel::Linear;
  c.closed_loop = false;
  c.input_clip = false;
  return c;
}

std::vector<std::pair<std::string, const MatrixXdR*>> StepStages::named() const {
  return {{"after_tanh", &after_tanh},
          {"after_led_pos", &after_led_pos},
          {"after_led_neg", &after_led_neg},
          {"after_fanin_pos", &after_fanin_pos},
          {"after_fanin_neg", &after_fanin_neg},
          {"W_pos_distorted_norm", &W_pos_distorted_norm},
          {"W_neg_distorted_norm", &W_neg_distorted_norm},
          {"after_vmm_chain_pos", &after_vmm_chain_pos},
          {"after_vmm_chain_neg", &after_vmm_chain_neg},
          {"after_closed_loop", &after_closed_loop},
          {"step_output", &step_output}};
}

double electronics_nonlinearity(const Hardware& hw, const CoreConfig& cfg, int channel, double z) {
  switch (cfg.nonlinearity) {
    case Nonlinearity::Tanh: return std::tanh(z);
    case Nonlinearity::Ising: return cfg.ising_level * (is_binary_channel(cfg, channel) ? (z > 0) - (z < 0) : z);
    case Nonlinearity::Twin: break;
  }
  return twin_sigmoid(hw.tanh, z);
}

double twin_sigmoid(const std::array<double, 6>& k, double z) {
  const double u = k[0] * z + k[1];
  return k[3] * u / std::pow(1.0 + std::pow(std::abs(u), k[2]), 1.0 / k[2]) + k[4] + k[5] * z;
}

double cubic(const std::array<double, 4>& p, double t) { return ((p[0] * t + p[1]) * t + p[2]) * t + p[3]; }

double LedResponse::slope() const { return 0.25 * (cubic(pos, 1) - cubic(pos, -1) + cubic(neg, 1) - cubic(neg, -1)); }

double LedResponse::nonlinearity() const {
  double worst = 0;
  for (const auto* p : {&pos, &neg}) {
    const double hi = cubic(*p, 1), lo = cubic(*p, -1);
    for (int i = 0; i <= 200; ++i) {
      const double t = -1 + i / 100.0;
      worst = std::max(worst, std::fabs(cubic(*p, t) - 0.5 * (hi + lo) - 0.5 * (hi - lo) * t));
    }
  }
  return worst / slope();
}

LedResponse led_response(const Hardware& hw, LedModel led) {
  LedResponse r;
  if (led == LedModel::Linear) return r;
  if (led == LedModel::Twin) {
    r.pos = hw.led_pos, r.neg = hw.led_neg;
    return r;
  }
  // The driver: its range onto the electronics' swing, through the inverse of the mean response.
  const CoreConfig own = CoreConfig::twin_defaults(hw);
  const double hi = electronics_nonlinearity(hw, own, 0, 1.0), lo = electronics_nonlinearity(hw, own, 0, -1.0);
  const double level = 0.5 * (hi - lo), centre = 0.5 * (hi + lo);
  const auto mean = [&](double u) { return 0.5 * (cubic(hw.led_pos, u) + cubic(hw.led_neg, u)); };
  const auto mean_slope = [&](double u) {
    const auto d = [](const std::array<double, 4>& p, double x) { return (3 * p[0] * x + 2 * p[1]) * x + p[2]; };
    return 0.5 * (d(hw.led_pos, u) + d(hw.led_neg, u));
  };
  const double m_lo = mean(centre - level), m_hi = mean(centre + level);
  if (!(m_hi > m_lo)) throw Error(hw.path + ": the LEDs' mean response does not rise over the electronics' swing: no driver can linearise it");
  constexpr int kPoints = 129;
  Eigen::MatrixXd A(kPoints, 4);
  Eigen::VectorXd yp(kPoints), yn(kPoints);
  for (int i = 0; i < kPoints; ++i) {
    const double t = -1 + 2.0 * i / (kPoints - 1);
    const double want = 0.5 * (m_lo + m_hi) + 0.5 * (m_hi - m_lo) * t;
    double u = centre + level * t;  // Newton on mean(u) = want, from the straight line
    for (int k = 0; k < 50; ++k) {
      const double g = mean_slope(u);
      if (!(g > 0)) throw Error(hw.path + ": the LEDs' mean response is not monotonic over the electronics' swing: no driver can linearise it");
      const double step = (mean(u) - want) / g;
      u -= step;
      if (std::fabs(step) < 1e-15) break;
    }
    A.row(i) << t * t * t, t * t, t, 1;
    yp(i) = cubic(hw.led_pos, u), yn(i) = cubic(hw.led_neg, u);
  }
  const auto qr = A.colPivHouseholderQr();
  const Eigen::Vector4d cp = qr.solve(yp), cn = qr.solve(yn);
  for (int k = 0; k < 4; ++k) r.pos[static_cast<std::size_t>(k)] = cp(k), r.neg[static_cast<std::size_t>(k)] = cn(k);
  r.clamp = true;
  return r;
}

namespace {

// The twin's "mean fallback": a calibration vector is used per channel only when the matrix has
// exactly as many channels as the machine; otherwise every channel gets its mean.
Eigen::VectorXd per_channel(const std::vector<double>& v, int N, int n) {
  Eigen::Map<const Eigen::VectorXd> m(v.data(), static_cast<Eigen::Index>(v.size()));
  if (N == n) return m;
  return Eigen::VectorXd::Constant(N, m.mean());
}

Eigen::VectorXd quad_column(const std::vector<Quad>& q, int col, int N, int n) {
  std::vector<double> v(q.size());
  for (size_t i = 0; i < q.size(); ++i) v[i] = q[i][static_cast<size_t>(col)];
  return per_channel(v, N, n);
}

Eigen::VectorXd coeff_vector(const std::vector<double>& v, int N, double if_empty) {
  Eigen::VectorXd out(N);
  for (int j = 0; j < N; ++j) out(j) = coeff_at(v, j, if_empty);
  return out;
}

// 3-tap photodetector crosstalk: y'[j] = y[j] + E[j+1]*r[j+1] + L[j-1]*r[j-1], with the source term
// r = y - darkness when the darkness switch is on and the calibration applies per channel (with the
// mean fallback the twin uses r = y: a quirk we follow).
MatrixXdR pd_crosstalk(const MatrixXdR& y, const Eigen::VectorXd& earlier, const Eigen::VectorXd& later,
                       const Eigen::VectorXd* darkness) {
  MatrixXdR out = y;
  const Eigen::Index N = y.cols();
  for (Eigen::Index b = 0; b < y.rows(); ++b) {  // row by row: the matrices are row-major
    const double* yr = y.row(b).data();
    double* o = out.row(b).data();
    auto r = [&](Eigen::Index j) { return darkness ? yr[j] - (*darkness)(j) : yr[j]; };
    for (Eigen::Index j = 0; j < N; ++j) {
      if (j + 1 < N) o[j] += earlier(j + 1) * r(j + 1);
      if (j > 0) o[j] += later(j - 1) * r(j - 1);
    }
  }
  return out;
}

// The 16-variable machine's polarising-beam-splitter leak: a quadratic of the undistorted
// normalised weights, columns 1..N-1 filled left-right flipped and scaled by sqrt(2).
MatrixXdR pbs16_pattern(const MatrixXdR& w_norm, const std::vector<Quad>& coeffs, int n) {
  const Eigen::Index N = w_norm.cols();
  MatrixXdR mod(w_norm.rows(), N - 1);
  Quad mean{0, 0, 0};
  for (const auto& q : coeffs)
    for (int k = 0; k < 3; ++k) mean[k] += q[k] / static_cast<double>(coeffs.size());
  for (Eigen::Index c = 0; c + 1 < N; ++c) {
    const Quad& q = (N == n) ? coeffs[static_cast<size_t>(c)] : mean;
    for (Eigen::Index i = 0; i < w_norm.rows(); ++i) {
      const double w = w_norm(i, c + 1);
      mod(i, c) = q[0] * w * w + q[1] * w + q[2];
    }
  }
  MatrixXdR pattern = MatrixXdR::Zero(w_norm.rows(), N);
  for (Eigen::Index m = 0; m + 1 < N; ++m) pattern.col(1 + m) = mod.col(N - 2 - m) * std::sqrt(2.0);
  return pattern;
}

}  // namespace

SlmTransmissions slm_transmissions(const Hardware& hw, const CoreConfig& cfg, const MatrixXdR& W, const SlmPattern* slm) {
  const int N = static_cast<int>(W.cols());
  const int n = hw.channels;
  SlmTransmissions t;
  t.max_abs = W.cwiseAbs().maxCoeff();
  check_loop_shapes(cfg, W.rows(), N, W.allFinite(), t.max_abs);
  // 4. signed split, normalisation by max|W|, per-column SLM distortion (q0 leaks everywhere)
  t.pos = W.cwiseMax(0.0) / t.max_abs;
  t.neg = (-W).cwiseMax(0.0) / t.max_abs;
  if (drives_leak_densely(hw, cfg)) t.undistorted_pos = t.pos, t.undistorted_neg = t.neg;  // the leak pattern's input
  if (cfg.switches.weight_distortion) {
    for (int side = 0; side < 2; ++side) {
      const auto& q = side == 0 ? hw.slm_pos : hw.slm_neg;
      MatrixXdR& d = side == 0 ? t.pos : t.neg;
      const Eigen::VectorXd q2 = quad_column(q, 0, N, n), q1 = quad_column(q, 1, N, n), q0 = quad_column(q, 2, N, n);
      for (Eigen::Index i = 0; i < d.rows(); ++i)  // row by row: the matrices are row-major
        d.row(i) = (q2.transpose().array() * d.row(i).array().square() + q1.transpose().array() * d.row(i).array() + q0.transpose().array()).matrix();
    }
  }
  if (slm) {
    if (slm->pos.rows() != N || slm->pos.cols() != N || slm->neg.rows() != N || slm->neg.cols() != N)
      throw Error("SLM pattern: expected two " + std::to_string(N) + "x" + std::to_string(N) + " matrices");
    t.pos = t.pos.cwiseProduct(slm->pos);
    t.neg = t.neg.cwiseProduct(slm->neg);
  }
  return t;
}

MatrixXdR optical_chain(const Hardware& hw, const CoreConfig& cfg, const MatrixXdR& W, const MatrixXdR& led_pos,
                        const MatrixXdR& led_neg, StepStages* stages, const SlmPattern* slm) {
  const SlmTransmissions t = slm_transmissions(hw, cfg, W, slm);
  if (stages) stages->W_pos_distorted_norm = t.pos, stages->W_neg_distorted_norm = t.neg;
  return optical_chain(hw, cfg, t, led_pos, led_neg, stages);
}

MatrixXdR optical_chain(const Hardware& hw, const CoreConfig& cfg, const SlmTransmissions& t, const MatrixXdR& led_pos,
                        const MatrixXdR& led_neg, StepStages* stages) {
  const int N = static_cast<int>(t.pos.cols());
  if (led_pos.cols() != N || led_neg.cols() != N || led_pos.rows() != led_neg.rows())
    throw Error("optical chain: LED drives must be B x " + std::to_string(N));
  StepStages local;
  StepStages& s = stages ? *stages : local;

  // 3. optical fan-in profile
  s.after_fanin_pos = led_pos * fan_in(hw, cfg, N, true).asDiagonal();
  s.after_fanin_neg = led_neg * fan_in(hw, cfg, N, false).asDiagonal();
  // 4. what the SLM transmits: slm_transmissions
  // 5. optical vector-matrix products
  return detector_chain(hw, cfg, t, s.after_fanin_pos * t.pos, s.after_fanin_neg * t.neg, s);
}

Eigen::VectorXd fan_in(const Hardware& hw, const CoreConfig& cfg, int N, bool pos) {
  if (!cfg.switches.input_efficiencies) return Eigen::VectorXd::Ones(N);
  return per_channel(pos ? hw.fan_in_pos : hw.fan_in_neg, N, hw.channels);
}

bool drives_leak_densely(const Hardware& hw, const CoreConfig& cfg) {
  return cfg.switches.pbs_crosstalk && hw.pbs_model != PbsModel::PerChannel;
}

MatrixXdR detector_chain(const Hardware& hw, const CoreConfig& cfg, const SlmTransmissions& t, MatrixXdR yp, MatrixXdR yn,
                         StepStages& s) {
  const int N = static_cast<int>(t.pos.cols());
  const int n = hw.channels;
  const double m = t.max_abs;
  const Switches& sw = cfg.switches;
  if (yp.cols() != N || yn.cols() != N || yp.rows() != yn.rows() || s.after_fanin_pos.rows() != yp.rows() ||
      s.after_fanin_neg.rows() != yp.rows() || s.after_fanin_pos.cols() != N || s.after_fanin_neg.cols() != N)
    throw Error("detector chain: light and drives must be B x " + std::to_string(N));
  // 6. output (TIA) gains
  const Eigen::VectorXd eta_p = per_channel(hw.gain_pos, N, n), eta_n = per_channel(hw.gain_neg, N, n);
  if (sw.output_efficiencies) {
    yp *= eta_p.asDiagonal();
    yn *= eta_n.asDiagonal();
  }
  // 7-8. crosstalk, in the machine's own order
  auto apply_pd = [&] {
    if (!sw.pd_crosstalk) return;
    const bool dark = sw.slm_darkness && N == n;
    const Eigen::VectorXd dp = quad_column(hw.slm_pos, 2, N, n), dn = quad_column(hw.slm_neg, 2, N, n);
    yp = pd_crosstalk(yp, per_channel(hw.pd_earlier_pos, N, n), per_channel(hw.pd_later_pos, N, n), dark ? &dp : nullptr);
    yn = pd_crosstalk(yn, per_channel(hw.pd_earlier_neg, N, n), per_channel(hw.pd_later_neg, N, n), dark ? &dn : nullptr);
  };
  auto apply_pbs = [&] {
    if (!sw.pbs_crosstalk) return;
    if (hw.pbs_model == PbsModel::PerChannel) {
      // Leak of the source light of channel j into output j; the TIA gain is applied whatever the
      // output-efficiency switch says (twin behaviour).
      const Eigen::VectorXd kp = per_channel(hw.pbs_neg_to_pos, N, n), kn = per_channel(hw.pbs_pos_to_neg, N, n);
      yp += s.after_fanin_pos * (eta_p.cwiseProduct(kp)).asDiagonal();
      yn += s.after_fanin_neg * (eta_n.cwiseProduct(kn)).asDiagonal();
    } else {
      yn += s.after_fanin_pos * pbs16_pattern(t.undistorted_pos, hw.pbs_leak_neg, n) / hw.pbs_leak_norm_neg;
      yp -= s.after_fanin_neg * pbs16_pattern(t.undistorted_neg, hw.pbs_leak_pos, n) / hw.pbs_leak_norm_pos;
    }
  };
  if (hw.crosstalk_order == CrosstalkOrder::PbsThenPd) {
    apply_pbs();
    apply_pd();
  } else {
    apply_pd();
    apply_pbs();
  }
  // 9. power conservation and gain
  Eigen::VectorXd gain(N), s_cl(N);
  for (int j = 0; j < N; ++j) {
    const double sj = coeff_at(cfg.beta, j, cfg.scale);
    switch (cfg.gain) {
      case GainMode::ScaleOverN: gain(j) = sj / N; s_cl(j) = sj; break;
      case GainMode::MaxAbs: gain(j) = m; s_cl(j) = m; break;
      case GainMode::Explicit: gain(j) = sj * m; s_cl(j) = sj; break;
    }
  }
  s.after_vmm_chain_pos = yp * gain.asDiagonal();
  s.after_vmm_chain_neg = yn * gain.asDiagonal();
  // 10. balanced detection
  MatrixXdR g = s.after_vmm_chain_pos - s.after_vmm_chain_neg;
  // 11. closed-loop correction
  if (cfg.closed_loop && hw.closed_loop) {
    const ClosedLoop& cl = *hw.closed_loop;
    const Eigen::VectorXd dc = per_channel(cl.dc_offset, N, n), lin = per_channel(cl.linear_offset, N, n),
                          k = per_channel(cl.scaling, N, n);
    const Eigen::VectorXd off = cl.solution_to_adc_ratio * (dc + s_cl.cwiseProduct(lin));
    g.rowwise() += off.transpose();
    g *= k.asDiagonal();
  }
  s.after_closed_loop = g;
  s.detector_gain = gain;
  if (sw.output_efficiencies) s.detector_gain = s.detector_gain.cwiseProduct(0.5 * (eta_p + eta_n));
  if (cfg.closed_loop && hw.closed_loop) s.detector_gain = s.detector_gain.cwiseProduct(per_channel(hw.closed_loop->scaling, N, n));
  return g;
}

StepStages twin_step_stages(const Hardware& hw, const CoreConfig& cfg, const MatrixXdR& W,
                            const Eigen::VectorXd& bias, const MatrixXdR& z, const MatrixXdR& x,
                            const MatrixXdR* z_prev) {
  const int N = static_cast<int>(W.cols());
  if (bias.size() != N) throw Error("bias: expected " + std::to_string(N) + " values, got " + std::to_string(bias.size()));
  if (z.cols() != N || x.cols() != N || x.rows() != z.rows() || (z_prev && (z_prev->rows() != z.rows() || z_prev->cols() != N)))
    throw Error("step: z, x (and z_prev) must all be B x " + std::to_string(N));
  StepStages s;
  // 1. electronics nonlinearity
  s.after_tanh = z;
  for (Eigen::Index r = 0; r < z.rows(); ++r)
    for (int j = 0; j < N; ++j) s.after_tanh(r, j) = electronics_nonlinearity(hw, cfg, j, z(r, j));
  // 2. microLED drive of the two optical paths
  const LedResponse led = led_response(hw, cfg.led);
  const auto held = [&](double t) { return led.clamp ? std::clamp(t, -1.0, 1.0) : t; };
  s.after_led_pos = s.after_tanh.unaryExpr([&](double t) { return cubic(led.pos, held(t)); });
  s.after_led_neg = s.after_tanh.unaryExpr([&](double t) { return cubic(led.neg, held(t)); });
  // 3-11. the optical and analog chain
  MatrixXdR g = optical_chain(hw, cfg, W, s.after_led_pos, s.after_led_neg, &s);
  // 12. leak / feedback
  if (!cfg.alpha.empty()) g += z * coeff_vector(cfg.alpha, N, 0).asDiagonal();
  // 13. input injection with the joint clip of x + b
  MatrixXdR inj = x.rowwise() + bias.transpose();
  if (cfg.input_clip) inj = inj.cwiseMax(hw.clip_lo).cwiseMin(hw.clip_hi);
  g += inj;
  // 14. momentum
  if (cfg.gamma) {
    if (z_prev) g += *cfg.gamma * (z - *z_prev);
    else g += *cfg.gamma * z;
  }
  // 15. the optimiser's walls
  if (cfg.wall) g = g.cwiseMax(-*cfg.wall).cwiseMin(*cfg.wall);
  s.step_output = g;
  return s;
}

}  // namespace aoc
