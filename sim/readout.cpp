#include "sim/readout.hpp"

#include <cmath>

namespace aoc {

namespace {
double polyval(const std::vector<double>& p, double z) {
  double acc = 0;
  for (double c : p) acc = acc * z + c;
  return acc;
}
bool in(const std::array<double, 2>& piece, double z) { return z > piece[0] && z <= piece[1]; }
}  // namespace

double readout_saturation(const ReadoutSaturation& r, double z, Piece0Form form) {
  using M = ReadoutSaturation::Model;
  if (r.model == M::Piecewise16) {
    if (z <= r.piece0[0]) return r.negative_saturation;
    if (in(r.piece0, z)) return r.piece0_constant - std::cos(r.piece0_cosine_coeff * z);
    if (in(r.piece1, z)) return z - r.piece1_multiplier * std::pow(std::sin(r.piece1_sine_coeff * z), 5);
    if (z > r.piece1[1]) return r.positive_saturation;
    return z;
  }
  if (z <= r.piece0[0]) return r.negative_saturation;
  if (in(r.piece0, z)) {
    const double arg = form == Piece0Form::Documented ? 1.0 / (r.piece0_cosine_coeff * z) : r.piece0_cosine_coeff * z;
    return r.piece0_constant - std::cos(arg);
  }
  if (in(r.piece1, z)) return polyval(r.piece1_poly, z);
  if (in(r.piece3, z)) return polyval(r.piece3_poly, z);
  if (in(r.piece4, z)) return std::cos(z + r.piece4_first_constant) + r.piece4_second_constant;
  if (z > r.piece4[1]) return r.positive_saturation;
  return z;
}

}  // namespace aoc
