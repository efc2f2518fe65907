// Converters between the analog loop and the digital world: SLM weight codes, the input DAC and
// the readout ADC. Codes are plain integers so that outputs can expose them.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "sim/batch.hpp"
#include "sim/stages.hpp"

namespace aoc {

// Signed b-bit SLM codes, the paper's scheme: normalise by max|W|, round to
// q = clamp(round(W / max|W| * qmax), qmin, qmax) with qmax = 2^(b-1) - 1, qmin = -2^(b-1);
// the lost scale max|W| comes back through the loop gain, so W is represented as q * max|W| / qmax.
struct WeightCodes {
  RowMatrix<std::int32_t> codes;
  double scale = 0;  // value of one code step: max|W| / qmax
  int bits = 0;
  MatrixXdR values() const;  // codes * scale
};
WeightCodes quantize_weights(const Eigen::Ref<const MatrixXdR>& W, int bits);

// A uniform converter over [lo, hi] with 2^bits levels: inputs outside the range clip to its ends.
// Inline: programs convert every element of every iteration through one.
struct UniformConverter {
  double lo = 0, hi = 1;
  int bits = 8;
  double top() const {  // 2^bits - 1, the highest code (exactly as a double for bits < 53)
    return bits >= 0 && bits < 63 ? static_cast<double>((std::uint64_t{1} << bits) - 1) : std::ldexp(1.0, bits) - 1;
  }
  double step() const { return (hi - lo) / top(); }
  std::int32_t code(double v) const { return static_cast<std::int32_t>(code_of(v, lo, step(), top())); }  // 0 .. 2^bits - 1
  double value(std::int32_t code) const { return lo + code * step(); }
  double quantize(double v) const { return quantized(v, lo, step(), top()); }  // value(code(v))
  // quantize() over n values in place, the step computed once (a loop that vectorises); returns how
  // many were outside [lo, hi] (they clip to its ends).
  long long quantize_all(double* v, std::size_t n) const {
    const double l = lo, h = hi, s = step(), t = top();  // locals: v might alias the members
    long long outside = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const double x = v[i];
      outside += static_cast<long long>((x < l) | (x > h));
      v[i] = quantized(x, l, s, t);
    }
    return outside;
  }

 private:
  // v's code from lo l with step s and top code t, as a double (exact below 2^31). Plain selects, so
  // that loops that call it vectorise; a NaN fails q >= 0: code 0.
  static double code_of(double v, double l, double s, double t) {
    double q = std::nearbyint((v - l) / s);
    q = q >= 0.0 ? q : 0.0;
    return q > t ? t : q;
  }
  static double quantized(double v, double l, double s, double t) { return l + code_of(v, l, s, t) * s; }  // value(code(v))
};

}  // namespace aoc
