#include "sim/programming.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "sim/error.hpp"
#include "sim/stages.hpp"

namespace aoc {

CoreConfig program_chain(const Hardware& hw) {
  CoreConfig c = CoreConfig::twin_defaults(hw);
  c.led = LedModel::Driver;
  c.closed_loop = true;
  c.gain = GainMode::Explicit;
  c.beta = {1.0 / led_response(hw, c.led).slope()};  // a unit of value through a unit weight: a unit out
  return c;
}

DriveCalibration drive_calibration(const Hardware& hw, const CoreConfig& cfg) {
  DriveCalibration c;
  if (cfg.nonlinearity == Nonlinearity::Ising) throw Error("drive calibration: give the machine's own nonlinearity, whose swing the comparator has");
  if (cfg.nonlinearity == Nonlinearity::Tanh && cfg.led == LedModel::Linear) return c;  // the ideal loop: t = sign(z) exactly
  const LedResponse led = led_response(hw, cfg.led);
  if (cfg.led == LedModel::Driver) {
    // The driver's range is its unit of value. Its values spread over that range, most of them near
    // 0: linearised there (the light at value 0 is the offset; taken at +-1 instead, the paths' even
    // terms left an offset error that the digital state memory summed over the tokens)
    c.level = 1;
    c.pos_swing = led.pos[2], c.neg_swing = led.neg[2];
    c.pos_common = led.pos[3], c.neg_common = led.neg[3];
  } else {
    // the electronics driven to the walls: their swing, and what the LEDs make of it
    c.level = 0.5 * (electronics_nonlinearity(hw, cfg, 0, 1.0) - electronics_nonlinearity(hw, cfg, 0, -1.0));
    // a comparator's values are +-level only: the secant through them
    const double pos_hi = cubic(led.pos, c.level), pos_lo = cubic(led.pos, -c.level);
    const double neg_hi = cubic(led.neg, c.level), neg_lo = cubic(led.neg, -c.level);
    c.pos_swing = 0.5 * (pos_hi - pos_lo), c.neg_swing = 0.5 * (neg_hi - neg_lo);
    c.pos_common = 0.5 * (pos_hi + pos_lo), c.neg_common = 0.5 * (neg_hi + neg_lo);
  }
  if (!(c.slope() > 0)) throw Error(hw.path + ": the LEDs' response to the comparator's swing is not positive: the machine cannot run the sampler");
  return c;
}

namespace {

// The program-and-verify loop for one goal from a first guess W0 (K x M): prog.W, offset, dark,
// rounds; Weff the last measured product.
ChainProgramming correct(const Hardware& hw, const CoreConfig& cfg, const MatrixXdR& target, const DriveCalibration& cal,
                         const ChainPlace& at, int C, int max_rounds, const MatrixXdR& W0, MatrixXdR& Weff) {
  const int K = static_cast<int>(target.rows()), M = static_cast<int>(target.cols());
  ChainProgramming prog;
  prog.W = W0;
  const double scale = target.cwiseAbs().maxCoeff();
  CoreConfig unit = cfg;
  unit.gain = GainMode::Explicit;
  unit.beta = {1.0 / cal.slope()};  // the gain at which the product comes out at the scale of target
  // The machine's product of drives swing * v + common through the programmed W: v' Weff + offset.
  // Weff's row i is what drive i's value changes; the offset is what every drive adds whatever its
  // value (the LEDs' common mode) plus the chain's constant.
  MatrixXdR core = MatrixXdR::Zero(C, C);
  const auto measure = [&](const MatrixXdR& W, MatrixXdR& E, Eigen::VectorXd& offset) {
    core.block(at.in0, at.out0, K, M) = W;
    const FactoredChain ch = factor_optical_chain(hw, unit, core, at.in0, K, at.out0, M);
    const MatrixXdR F = ch.folded();  // 2K x M: [LED+ | LED-] F + c
    E = cal.pos_swing * F.topRows(K) + cal.neg_swing * F.bottomRows(K);
    offset = (cal.pos_common * F.topRows(K) + cal.neg_common * F.bottomRows(K)).colwise().sum().transpose() + ch.c;
    ++prog.rounds;
  };
  MatrixXdR Weff_probe;
  Eigen::VectorXd offset_probe;
  measure(prog.W, Weff, prog.offset);
  // Which weights the chain passes: every weight moved by a tenth of the block's scale away from
  // zero (on the path of its sign); a weight whose product moves by under a tenth of that is dark
  // (an unlit LED, a dead pixel). The detectors hear their neighbours, so the probe moves every
  // third column at once (three reads): a weight's measured gain is its own, not its neighbours'
  // moves leaking in (which, of either sign, made some gains look small and their steps overshoot).
  const double delta = 0.1 * scale;
  const MatrixXdR probe = target.unaryExpr([&](double w) { return w < 0 ? -delta : delta; });
  MatrixXdR gain(K, M);
  for (int phase = 0; phase < std::min(3, M); ++phase) {
    MatrixXdR moved = prog.W;
    for (int j = phase; j < M; j += 3) moved.col(j) += probe.col(j);
    measure(moved, Weff_probe, offset_probe);
    for (int j = phase; j < M; j += 3) gain.col(j) = (Weff_probe.col(j) - Weff.col(j)).cwiseQuotient(probe.col(j));
  }
  // dark against what the block typically passes (its median gain), so that a gain common to every
  // weight (a closed loop's scaling, a dim module) darkens none
  std::vector<double> gains(gain.data(), gain.data() + gain.size());
  std::nth_element(gains.begin(), gains.begin() + static_cast<std::ptrdiff_t>(gains.size() / 2), gains.end());
  const double floor_gain = 0.1 * std::max(gains[gains.size() / 2], 1e-300);
  const auto dark = (gain.array() < floor_gain).eval();
  prog.dark = static_cast<int>((dark && target.array() != 0).count());
  // Each round moves W by what is left of target - Weff over each weight's measured gain (a Newton
  // step on the chain's diagonal: most of the error goes at once where the distortion is mild); a
  // round that leaves more error than before is undone and the step halved (and doubled again, up
  // to 1, after a round that helped), so a chain that does not invert this way (the 16-variable
  // machine's dense beam-splitter leak) keeps the best W found, at worst the first guess.
  const MatrixXdR inverse_gain = dark.select(0.0, gain.array().cwiseMax(floor_gain).inverse()).matrix();
  const auto error = [&](const MatrixXdR& E) { return dark.select(0.0, (E - target).array()).matrix().norm(); };
  double best = error(Weff), step = 1;
  MatrixXdR W_try, Weff_try;
  Eigen::VectorXd offset_try;
  const double enough = 1e-12 * target.norm();
  for (int k = 0; k < max_rounds && best > enough; ++k) {
    W_try = prog.W;
    W_try.array() += step * (target - Weff).array() * inverse_gain.array();
    measure(W_try, Weff_try, offset_try);
    if (const double e = error(Weff_try); e < best) {
      best = e, prog.W.swap(W_try), Weff.swap(Weff_try), prog.offset.swap(offset_try);
      step = std::min(1.0, 2 * step);
    } else {
      step *= 0.5;
    }
  }
  return prog;
}

}  // namespace

ChainProgramming program_for_chain(const Hardware& hw, const CoreConfig& cfg, const MatrixXdR& target, const DriveCalibration& cal,
                                   const ChainPlace& at, int max_rounds, double trim_range) {
  const int K = static_cast<int>(target.rows()), M = static_cast<int>(target.cols());
  if (K < 1 || M < 1) throw Error("programming: empty weight block");
  if (!target.allFinite()) throw Error("programming: the weights contain NaN or infinity");
  if (!(trim_range >= 1)) throw Error("programming: the detectors' trim range must be >= 1");
  const int C = at.channels > 0 ? at.channels : std::max(at.in0 + K, at.out0 + M);
  if (at.in0 < 0 || at.out0 < 0 || at.in0 + K > C || at.out0 + M > C)
    throw Error("programming: a block of " + std::to_string(K) + " x " + std::to_string(M) + " at (" + std::to_string(at.in0) + ", " +
                std::to_string(at.out0) + ") does not fit a core of " + std::to_string(C) + " channels");
  const double scale = target.cwiseAbs().maxCoeff();
  if (scale == 0) {  // a dark block: nothing to correct (its offset is the chain's, read as such)
    ChainProgramming prog;
    prog.W = target, prog.offset = Eigen::VectorXd::Zero(M), prog.gain = Eigen::VectorXd::Ones(M);
    return prog;
  }
  MatrixXdR Weff;
  ChainProgramming prog = correct(hw, cfg, target, cal, at, C, max_rounds, target, Weff);
  prog.gain = Eigen::VectorXd::Ones(M);
  // Each column's trim: what it lacks of the block's largest column, within the range. The trimmed
  // block starts from the first one's columns scaled by it (the chain is close to linear in a
  // column).
  const Eigen::VectorXd columns = prog.W.cwiseAbs().colwise().maxCoeff().transpose();
  const double top = columns.maxCoeff();
  Eigen::VectorXd trim = Eigen::VectorXd::Ones(M);
  for (int j = 0; j < M; ++j)
    if (columns(j) > 0) trim(j) = std::min(trim_range, top / columns(j));
  if (trim.maxCoeff() > 1 + 1e-9) {
    const int first = prog.rounds;
    prog = correct(hw, cfg, target * trim.asDiagonal(), cal, at, C, max_rounds, prog.W * trim.asDiagonal(), Weff);
    prog.rounds += first;
    prog.gain = trim.cwiseInverse();
    prog.offset = prog.offset.cwiseProduct(prog.gain);
    Weff = Weff * prog.gain.asDiagonal();
  }
  const MatrixXdR left = Weff - target;
  prog.residual = left.cwiseAbs().maxCoeff() / scale;
  prog.rms_residual = std::sqrt(left.squaredNorm() / static_cast<double>(left.size())) / scale;
  return prog;
}

}  // namespace aoc
