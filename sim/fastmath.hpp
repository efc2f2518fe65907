// Vectorised log and exp for 8 or 16 floats at a time (GCC vector extensions), for the electronics
// nonlinearity in the hot loop and the radius of the noise's Box-Muller transform; 16 (an AVX-512
// register) where the machine has one, each lane's arithmetic the same at either width. 8 floats is an AVX2 register: on
// vectors wider than the machine's, GCC does comparisons lane by lane, which cost more than the
// polynomials. Eigen's packet log handles every special case (negative, NaN,
// denormal inputs) and costs as much as the whole matrix product here; our inputs are
// non-negative, so a lean version of the same Cephes polynomials does. Accuracy: within a few
// float ulps (tests/test_fastmath.cpp).
#pragma once
#include <cstdint>

namespace aoc::fastmath {

typedef float f32x8 __attribute__((vector_size(32)));
typedef std::int32_t i32x8 __attribute__((vector_size(32)));
typedef float f32x16 __attribute__((vector_size(64)));
typedef std::int32_t i32x16 __attribute__((vector_size(64)));

// The integer vector of a float vector's width.
template <class F>
struct IntOf;
template <>
struct IntOf<f32x8> {
  using type = i32x8;
};
template <>
struct IntOf<f32x16> {
  using type = i32x16;
};

// x = 2^e (1 + t) with 1 + t in [sqrt(1/2), sqrt(2)), by one integer offset (no comparisons).
template <class F = f32x8>
struct LogParts {
  typename IntOf<F>::type e;
  F t;
};
template <class F>
inline LogParts<F> log_split(F x) {
  using I = typename IntOf<F>::type;
  const I yb = (I)x - 0x3f3504f3;  // the bits of sqrt(1/2)
  return {yb >> 23, (F)((yb & 0x007fffff) + 0x3f3504f3) - 1.0f};
}

// log(2^e (1 + t)) for 1 + t in [sqrt(1/2), sqrt(2)): the Cephes polynomial in t, for N vectors in
// lockstep (each step for all N: one polynomial alone is a chain of dependent steps). A caller
// that knows t better than fl(x) - 1 (x just below 1, where that cancels) may pass its own.
template <int N, class F>
inline void log_join(const typename IntOf<F>::type* ei, const F* t, F* out) {
#define AOC_EACH _Pragma("GCC unroll 16") for (int i = 0; i < N; ++i)
  F e[N], z[N], y[N];
  AOC_EACH e[i] = __builtin_convertvector(ei[i], F), z[i] = t[i] * t[i], y[i] = F{} + 7.0376836292e-2f;
  AOC_EACH y[i] = y[i] * t[i] - 1.1514610310e-1f;
  AOC_EACH y[i] = y[i] * t[i] + 1.1676998740e-1f;
  AOC_EACH y[i] = y[i] * t[i] - 1.2420140846e-1f;
  AOC_EACH y[i] = y[i] * t[i] + 1.4249322787e-1f;
  AOC_EACH y[i] = y[i] * t[i] - 1.6668057665e-1f;
  AOC_EACH y[i] = y[i] * t[i] + 2.0000714765e-1f;
  AOC_EACH y[i] = y[i] * t[i] - 2.4999993993e-1f;
  AOC_EACH y[i] = y[i] * t[i] + 3.3333331174e-1f;
  AOC_EACH y[i] = y[i] * t[i] * z[i] + e[i] * -2.12194440e-4f - 0.5f * z[i];
  AOC_EACH out[i] = t[i] + y[i] + e[i] * 0.693359375f;
#undef AOC_EACH
}

// Natural log of x >= 0. log(0) and denormals give about -88 (finite), which is what the caller
// wants: exp(c * log 0) must be 0, not NaN.
template <class F>
inline F log_nonneg(F x) {
  const LogParts<F> p = log_split(x);
  F y;
  log_join<1>(&p.e, &p.t, &y);
  return y;
}

// exp(x); inputs below -87.3 give 2^-126 (not 0), above 88.3 are clamped.
template <class F>
inline F exp(F x) {
  using I = typename IntOf<F>::type;
  x = x < -87.3f ? F{} - 87.3f : x;
  x = x > 88.3f ? F{} + 88.3f : x;
  const F magic = F{} + 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const F n = (x * 1.44269504088896341f + magic) - magic;
  x -= n * 0.693359375f;
  x -= n * -2.12194440e-4f;
  const F z = x * x;
  F y = F{} + 1.9875691500e-4f;
  y = y * x + 1.3981999507e-3f;
  y = y * x + 8.3334519073e-3f;
  y = y * x + 4.1665795894e-2f;
  y = y * x + 1.6666665459e-1f;
  y = y * x + 5.0000001201e-1f;
  y = y * z + x + 1.0f;
  const I pow2 = (__builtin_convertvector(n, I) + 127) << 23;
  return y * (F)pow2;
}

}  // namespace aoc::fastmath
