// The readout chain's saturation: a piecewise fit applied to a fixed point as it is read out
// (the twin's apply_output_saturation). Outside the loop; identity in the middle range.
#pragma once
#include "sim/hardware.hpp"

namespace aoc {

// The 48-variable fit's first piece is documented as c0 - cos(1/(k0*z)), which joins its
// neighbours; the twin's torch code computes c0 - cos(k0*z), which jumps to about -4.7 inside it.
// We follow the documented, continuous form unless asked for the twin's code (docs/twin.md).
enum class Piece0Form { Documented, TwinCode };

double readout_saturation(const ReadoutSaturation& r, double z, Piece0Form form = Piece0Form::Documented);

}  // namespace aoc
