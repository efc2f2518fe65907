// How one optical iteration is configured: the twin's switches plus the loop coefficients.
// Hardware facts live in Hardware; this is what a user or a compiled program chooses per run.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "sim/hardware.hpp"

namespace aoc {

// The electronics' fitted sigmoid, an exact tanh, or the optimiser's comparator (Ising): sign(z) on
// a binary variable's channel (CoreConfig::binary), the state itself on a continuous one.
enum class Nonlinearity { Twin, Tanh, Ising };
// How a value becomes the light of its LED (led_response, sim/stages.hpp). Twin: the fitted microLED
// cubics on the electronics' output (the loop, where nothing stands between the two); Linear: drive =
// signal; Driver: a compiled tile's LED driver, which takes the value as a fraction of its drive range
// (OpticalPlan::drive_range), sets the range to the electronics' swing and predistorts it so that
// the two paths' mean light is linear in the value: the same LEDs as the loop's, at the same
// operating point, corrected as an operator corrects a DAC-driven LED.
enum class LedModel { Twin, Linear, Driver };
// How the photocurrent is scaled back to a state: the twin's normalise_matrix=True (s/N with s =
// beta or scale), its normalise_matrix=False (max|W|), or an exact gain beta (effective W' = beta*W).
enum class GainMode { ScaleOverN, MaxAbs, Explicit };
// How an optical tile keeps its light map: in its precision, in half precision, or by its size
// (OpticalTile::set_light_map).
enum class LightMap { F32, F16, Auto };

// Annealing of alpha over a solve (the twin has none). Linear: start -> end over `iterations`,
// then end. Exponential: end + (start - end) exp(-k / iterations).
struct AlphaSchedule {
  enum class Kind { Constant, Linear, Exponential } kind = Kind::Constant;
  double start = 0, end = 0;
  int iterations = 1;
  double at(int k) const;
};

struct CoreConfig {
  Switches switches;
  GainMode gain = GainMode::ScaleOverN;
  double scale = 18.6;        // s when no beta is given (the twin's trainable scale)
  std::vector<double> beta;   // empty: use scale; one value or one per output channel
  std::vector<double> alpha;  // empty: no alpha*z term; one value or one per channel
  std::optional<double> gamma;  // momentum gamma*(z - z_prev), z_prev starts at zero
  Nonlinearity nonlinearity = Nonlinearity::Twin;
  LedModel led = LedModel::Twin;
  bool closed_loop = true;  // the twin always applies it where the hardware has one
  bool input_clip = true;   // the twin always clips x + b
  // Iteration physics the twin does not model: the fraction of its step the state reaches in one
  // loop period (finite electronic bandwidth, 1 = settles fully; see step_fraction() in
  // sim/physics_spec.hpp) and an annealing schedule that replaces alpha.
  double step_fraction = 1.0;
  AlphaSchedule alpha_schedule;
  // The optimisation sampler (runtime/optimize/optimize.hpp): which channels are binary under
  // Nonlinearity::Ising (1 binary, 0 continuous; empty: every channel binary), and the inelastic
  // walls that clip the state to [-wall, wall] after every step.
  std::vector<std::uint8_t> binary;
  std::optional<double> wall;
  // The comparator's output level: t = level sign(z) on a binary channel, level z on a continuous
  // one (1 for the ideal loop; the electronics' swing for the machine, runtime/optimize/optimize.cpp).
  double ising_level = 1.0;

  // The twin's AOCCell.from_parameters defaults for this machine (alpha from create_default_aoc_model).
  static CoreConfig twin_defaults(const Hardware& hw);
  // The twin with every non-ideality switch off (closed loop and clip stay on, as in the twin).
  static CoreConfig twin_all_off(const Hardware& hw);
  // The ideal loop z' = alpha*z + beta*tanh(z) W + x + b: no calibration is used at all.
  static CoreConfig ideal(double alpha, double beta);
};

// Checks that alpha and beta hold 1 or N values and that W is square, finite and not all zero.
// Throws aoc::Error naming the field.
void check_loop_shapes(const CoreConfig& cfg, long rows, long cols, bool finite, double max_abs);

// Per-channel value of a coefficient list that is empty, one value, or one per channel.
double coeff_at(const std::vector<double>& v, int j, double if_empty);

}  // namespace aoc
