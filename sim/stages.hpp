// One optical iteration written out stage by stage, in double, in the order the twin computes it
// (docs/twin.md). This is the readable specification: the fast core (sim/core.hpp) folds the same
// maths into one matrix product and is tested against it; verify-dt compares these stages with
// the twin's golden intermediate values.
#pragma once
#include <Eigen/Dense>
#include <string>
#include <utility>
#include <vector>

#include "sim/config.hpp"
#include "sim/hardware.hpp"

namespace aoc {

using MatrixXdR = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

struct StepStages {
  MatrixXdR after_tanh, after_led_pos, after_led_neg, after_fanin_pos, after_fanin_neg;
  MatrixXdR W_pos_distorted_norm, W_neg_distorted_norm;  // N x N, what the SLM transmits
  MatrixXdR after_vmm_chain_pos, after_vmm_chain_neg;    // after gains, crosstalk and s/N
  MatrixXdR after_closed_loop;                           // balanced and corrected, before alpha*z
  MatrixXdR step_output;                                 // z_{t+1}
  // State volts per unit of detected light on channel j (TIA gain, s/N, closed-loop scaling):
  // what turns detector noise into state noise.
  Eigen::VectorXd detector_gain;

  // Each stage under the twin's name for it (the keys of its golden files' stages_one_step).
  std::vector<std::pair<std::string, const MatrixXdR*>> named() const;
};

// W is in AOC convention (out = a @ W, W(i_in, j_out)), square N x N; z, x: B x N; bias: N.
// z_prev is used only when cfg.gamma is set (nullptr means zeros, as on the twin's first call).
StepStages twin_step_stages(const Hardware& hw, const CoreConfig& cfg, const MatrixXdR& W,
                            const Eigen::VectorXd& bias, const MatrixXdR& z, const MatrixXdR& x,
                            const MatrixXdR* z_prev = nullptr);

// Steps 3-11 of the iteration, from the two microLED drives (B x N each) to the corrected balanced
// photocurrent g (B x N), before alpha*z, injection and momentum. Linear plus a constant in the
// drives, which is what lets the tile take it apart once per programming (sim/tile.hpp). Fills the
// stages if given.
// A programmed SLM's multiplicative error on each transmission (fixed-pattern noise), N x N per path.
struct SlmPattern {
  MatrixXdR pos, neg;
};

MatrixXdR optical_chain(const Hardware& hw, const CoreConfig& cfg, const MatrixXdR& W, const MatrixXdR& led_pos,
                        const MatrixXdR& led_neg, StepStages* stages = nullptr, const SlmPattern* slm = nullptr);

// Step 4 on its own, what depends on the weights only: what the SLM of a core programmed with W
// transmits on each path (N x N: the signed split normalised by max|W|, the SLM's distortion and
// its pattern), so that many batches of drives can go through one programming (the tile's fold).
struct SlmTransmissions {
  MatrixXdR pos, neg;                          // W_pos_distorted_norm, W_neg_distorted_norm
  MatrixXdR undistorted_pos, undistorted_neg;  // max(+-W, 0) / max|W|, where drives_leak_densely
  double max_abs = 0;
};
SlmTransmissions slm_transmissions(const Hardware& hw, const CoreConfig& cfg, const MatrixXdR& W, const SlmPattern* slm = nullptr);
// Steps 3 and 5-11 on given transmissions (stages' W_*_distorted_norm are left as they are).
MatrixXdR optical_chain(const Hardware& hw, const CoreConfig& cfg, const SlmTransmissions& t, const MatrixXdR& led_pos,
                        const MatrixXdR& led_neg, StepStages* stages = nullptr);
// Step 3's fan-in profile of the LEDs of one path (ones when the switch is off), N channels.
Eigen::VectorXd fan_in(const Hardware& hw, const CoreConfig& cfg, int N, bool pos);
// Steps 6-11 on their own: from the light on the two paths' detectors (yp, yn: B x N) and the
// drives after fan-in (s.after_fanin_pos and _neg, which the beam splitters leak) to the corrected
// balanced photocurrent. Affine in the three. Each detector's output depends on its own and its two
// neighbours' light (TIA gains, 3-tap crosstalk), and on the drives of the same channels, unless
// drives_leak_densely (the 16-variable machine's beam-splitter leak pattern couples every drive
// to every detector).
MatrixXdR detector_chain(const Hardware& hw, const CoreConfig& cfg, const SlmTransmissions& t, MatrixXdR yp, MatrixXdR yn,
                         StepStages& s);
bool drives_leak_densely(const Hardware& hw, const CoreConfig& cfg);

// Elementwise pieces shared with the fast core.
double twin_sigmoid(const std::array<double, 6>& c, double z);
// The loop's nonlinearity on one channel's state, as the configuration chooses it (the one scalar
// definition; OpticalCore's vector loops give the same values).
double electronics_nonlinearity(const Hardware& hw, const CoreConfig& cfg, int channel, double z);
inline bool is_binary_channel(const CoreConfig& cfg, int channel) {
  return cfg.binary.empty() || (channel < static_cast<int>(cfg.binary.size()) && cfg.binary[static_cast<size_t>(channel)] != 0);
}
double cubic(const std::array<double, 4>& p, double t);

// The light each path's LED gives for a value t, as cubics (highest power first) on t, and whether
// t is held to [-1, 1] first (a driver's rails). Twin: the hardware's fitted cubics. Linear: t itself.
// Driver: the fitted cubics behind a driver that maps t in [-1, 1] onto the electronics' swing (their
// output at z = +-1) through the inverse of the two LEDs' mean response, so that the mean light is
// m(0) + slope t; each path keeps what its LED differs from the mean by. The predistorted responses
// are fitted as cubics in t by least squares over 129 points (within 1e-4 of the swing of the exact
// inverse on the 48-variable machine's LEDs). What one drive cannot make linear on both paths (the
// two paths' responses differ: on aoc-48 0.4 % of the swing, even in t) is left, and no weight
// correction removes it: nonlinearity() says how much.
struct LedResponse {
  std::array<double, 4> pos{0, 0, 1, 0}, neg{0, 0, 1, 0};
  bool clamp = false;
  bool linear() const { return !clamp && pos == neg && pos == std::array<double, 4>{0, 0, 1, 0}; }
  // Half the difference of the mean light at t = +-1: what a unit of value changes.
  double slope() const;
  // The largest departure of either path's light from its straight line through t = +-1, over
  // t in [-1, 1], relative to slope().
  double nonlinearity() const;
};
LedResponse led_response(const Hardware& hw, LedModel led);

}  // namespace aoc
