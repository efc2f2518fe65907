// Programming a block of weights onto the machine as measured: the one function that the compiler's
// compensate pass (each tile of a program) and the optimiser (its coupling matrix) call.
//
// The SLM does not hold the product the machine computes: the calibrated chain (fan-in, SLM
// distortion and darkness, detector gains, photodetector and beam-splitter crosstalk; sim/tile.hpp's
// FactoredChain) turns a programmed W into an effective product Weff(W) plus an offset. An operator
// corrects it as a program-and-verify loop: program W, measure the chain's product with probe
// drives, move W by what is left of target - Weff, until it stops improving. Each round is one
// programming and one measurement of the chain (`rounds`; the energy and time of a reload each).
// What cannot be corrected is reported: the residual, and the weights the chain passes at under a
// tenth of the block's median gain (dark SLM pixels, unlit LEDs), which are left as they are
// (raising them would only raise max |W|, which every other transmission is divided by).
//
// Detector trims: the chain passes some detectors' columns at a fraction of others' (the TIA gains'
// spread, the fan-in's and the SLM's), so the block programmed for it has columns far below its
// largest. Every transmission is a fraction of the block's largest, so those columns use a few of
// the SLM's codes and send little light: coarse, and noisy against the shot and receiver noise. An
// operator trims each detector's gain stage (the electronics' per-channel gain after the TIA) down
// by what its column lacks, up to a bound, and programs the column that much brighter: the same
// product, each column on the whole code range and with more light. The trim comes after the
// receiver, so the shot and receiver noise go down with it; the electronics after it do not.
#pragma once
#include <Eigen/Dense>

#include "sim/config.hpp"
#include "sim/hardware.hpp"
#include "sim/tile.hpp"

namespace aoc {

// The chain a compiled program's tiles run (docs/physics.md, "The tile model"): the loop's machine,
// its fitted LEDs and closed-loop correction, with the LEDs behind a driver (LedModel::Driver) and
// the gain set so that a unit value through a unit weight gives a unit out: out = x W when every
// non-ideality is off.
CoreConfig program_chain(const Hardware& hw);

// How the drives come out of the electronics and LEDs at the operating point: the value's swing
// (level) and each path's LED's response to it, linearised: half the difference of its drives at
// +-level (what a sign changes) and half their sum (the light a drive adds whatever its sign, the
// common mode). Linear LEDs: level 1, slope 1, no common mode. Behind a driver (values anywhere in
// [-1, 1], most near 0): the light at value 0 and the slope there.
struct DriveCalibration {
  double level = 1;
  double pos_swing = 1, neg_swing = 1, pos_common = 0, neg_common = 0;
  double slope() const { return 0.5 * (pos_swing + neg_swing); }
};
// cfg: the machine's loop configuration (its own nonlinearity, whose swing a comparator has).
DriveCalibration drive_calibration(const Hardware& hw, const CoreConfig& cfg);

// Where a block sits in its module's core: LED channels in0.., detectors out0.. of a core of
// `channels` (0: the smallest core that holds the block there); the core's other channels dark.
struct ChainPlace {
  int in0 = 0, out0 = 0, channels = 0;
};

struct ChainProgramming {
  MatrixXdR W;             // K x M: what the SLM is programmed with (AOC convention W(LED, detector))
  Eigen::VectorXd offset;  // M: what the chain adds to each output whatever the drives (into the bias)
  double residual = 0;     // max |Weff - target| / max |target| after the rounds, over every weight
  double rms_residual = 0; // rms (Weff - target) / max |target|
  int dark = 0;            // weights the chain passes at under a tenth of the block's median gain, left as they are
  int rounds = 0;          // chain measurements made (program-and-verify reads)
  Eigen::VectorXd gain;    // M: each detector's gain trim, in (0, 1] (1: as the machine's); the
                           // product through the chain times it is the target
};

// How far a detector's gain stage can be turned down: four binary steps of a programmable gain
// amplifier (x1 .. x1/16, 24 dB), which covers the deepest trim a shipped model's tile asks for on
// aoc-48 (15.5, a5-implicit). 1: no trims.
constexpr double kDetectorTrimRange = 16;

// The SLM block whose product through cfg's calibrated chain, driven at cal's operating point
// (drives swing * value + common), is closest to `target` (K x M), at most `max_rounds` corrections
// (fewer once the product is the target to 1e-12). trim_range > 1: the detectors' gains trimmed as
// above (a first programming finds each column's need, a second programs the trimmed block from it;
// both count their reads).
// Deterministic: the same block, place and machine give the same result on any thread.
ChainProgramming program_for_chain(const Hardware& hw, const CoreConfig& cfg, const MatrixXdR& target, const DriveCalibration& cal,
                                   const ChainPlace& at = {}, int max_rounds = 40, double trim_range = 1);

}  // namespace aoc
