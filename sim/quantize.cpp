#include "sim/quantize.hpp"

#include <algorithm>
#include <cmath>

#include "sim/error.hpp"

namespace aoc {

MatrixXdR WeightCodes::values() const { return codes.cast<double>() * scale; }

WeightCodes quantize_weights(const Eigen::Ref<const MatrixXdR>& W, int bits) {
  if (bits < 2 || bits > 24) throw Error("weight quantization: bits must be from 2 to 24, got " + std::to_string(bits));
  if (!W.allFinite()) throw Error("weights: contains NaN or infinity");
  const double m = W.cwiseAbs().maxCoeff();
  if (!(m > 0)) throw Error("weights: the matrix is all zeros");
  const double qmax = std::ldexp(1.0, bits - 1) - 1, qmin = -std::ldexp(1.0, bits - 1);
  WeightCodes q;
  q.bits = bits;
  q.scale = m / qmax;
  q.codes = W.unaryExpr([&](double w) {
    return static_cast<std::int32_t>(std::clamp(std::nearbyint(w / m * qmax), qmin, qmax));
  });
  return q;
}

}  // namespace aoc
