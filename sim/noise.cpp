#include "sim/noise.hpp"

#include <Random123/philox.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "sim/error.hpp"
#include "sim/fastmath.hpp"

namespace aoc::noise {

namespace {

// 53-bit uniform in (0, 1] from two 32-bit words.
double unit(std::uint32_t hi, std::uint32_t lo) {
  const std::uint64_t bits = (static_cast<std::uint64_t>(hi) << 21) ^ (lo >> 11);
  return (static_cast<double>(bits & ((1ULL << 53) - 1)) + 1.0) * 0x1.0p-53;
}

}  // namespace

namespace {

// The two normals of block k: (cos branch, sin branch).
std::pair<double, double> block_pair(std::uint64_t seed, Source s, std::uint32_t a, std::uint32_t b, std::uint32_t k) {
  using G = r123::Philox4x32;
  const G::key_type key = {{static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)}};
  const G::ctr_type ctr = {{static_cast<std::uint32_t>(s), a, b, k}};
  const G::ctr_type r = G()(ctr, key);
  const double rad = std::sqrt(-2.0 * std::log(unit(r[0], r[1]))), ang = 2.0 * M_PI * unit(r[2], r[3]);
  return {rad * std::cos(ang), rad * std::sin(ang)};
}

}  // namespace

double normal(std::uint64_t seed, Source s, std::uint32_t a, std::uint32_t b, std::uint32_t c) {
  const auto [even, odd] = block_pair(seed, s, a, b, c >> 1);
  return (c & 1) ? odd : even;
}

void normals(std::uint64_t seed, Source s, std::uint32_t a, std::uint32_t b, int n, double* out) {
  for (int c = 0; c < n; c += 2) {
    const auto [even, odd] = block_pair(seed, s, a, b, static_cast<std::uint32_t>(c) >> 1);
    out[c] = even;
    if (c + 1 < n) out[c + 1] = odd;
  }
}


namespace {

// normals_f32 works a group of 16 Philox blocks (64 words, 64 elements, aligned on the element
// index) at a time: one vector of 64 floats. That wide a vector gives each step of the inverse
// CDF's long dependency chain several registers' worth of independent work: 1.6x the throughput
// of 16 lanes with AVX2.
constexpr int kBlocks = 16, kWords = 4 * kBlocks;
typedef std::uint32_t u32v __attribute__((vector_size(4 * kWords)));
typedef std::int32_t i32v __attribute__((vector_size(4 * kWords)));
typedef float f32v __attribute__((vector_size(4 * kWords)));

// Words of the Philox4x32-10 blocks with counters (s, a, b, k0 + i), i = 0 .. 15, in element order:
// word j of block k0 + i at out[4i + j]. Plain loops, all blocks in step round by round, which
// GCC vectorises with its widening 32x32 -> 64-bit multiply (its vector extensions have none:
// their 64-bit products take three multiplies each, 1.5x slower). Integer arithmetic, so the words
// are exact however it is compiled.
void philox16(std::uint64_t seed, Source s, std::uint32_t a, std::uint32_t b, std::uint32_t k0, std::uint32_t* out) {
  std::uint32_t c0[kBlocks], c1[kBlocks], c2[kBlocks], c3[kBlocks];
  for (int i = 0; i < kBlocks; ++i) c0[i] = static_cast<std::uint32_t>(s), c1[i] = a, c2[i] = b, c3[i] = k0 + i;
  std::uint32_t key0 = static_cast<std::uint32_t>(seed), key1 = static_cast<std::uint32_t>(seed >> 32);
#pragma GCC unroll 10  // without it GCC 12 leaves the block loop scalar: 3x slower
  for (int r = 0; r < 10; ++r) {
    for (int i = 0; i < kBlocks; ++i) {
      // low halves as 32-bit products, not as the 64-bit ones truncated: 30% faster
      const auto hi0 = static_cast<std::uint32_t>((std::uint64_t{0xD2511F53} * c0[i]) >> 32), lo0 = 0xD2511F53u * c0[i];
      const auto hi1 = static_cast<std::uint32_t>((std::uint64_t{0xCD9E8D57} * c2[i]) >> 32), lo1 = 0xCD9E8D57u * c2[i];
      c0[i] = hi1 ^ c1[i] ^ key0;
      c2[i] = hi0 ^ c3[i] ^ key1;
      c1[i] = lo1;
      c3[i] = lo0;
    }
    key0 += 0x9E3779B9, key1 += 0xBB67AE85;
  }
  for (int i = 0; i < kBlocks; ++i) out[4 * i] = c0[i], out[4 * i + 1] = c1[i], out[4 * i + 2] = c2[i], out[4 * i + 3] = c3[i];
}

// The normal of each of kWords words. Out of line so that normal_from_word and normals_f32 run
// the very same instructions and agree to the bit; lanes never mix, so a word's normal does not
// depend on where it sits. No branches, and no comparisons: GCC 12 does those lane by lane on
// vectors wider than the machine's, so masks come from sign bits.
__attribute__((noinline)) void to_normals(const std::uint32_t* words, float* out) {
  u32v word;
  std::memcpy(&word, words, sizeof word);
  // u = (word + 0.5) / 2^32. With m = min(word, ~word): t = min(u, 1 - u) = (m + 0.5) / 2^32 and
  // |2u - 1| = (k + 0.5) / 2^31 with k = 2^31 - 1 - m, each exact where it is small (no
  // cancellation), and the sign comes from the word's top bit, so normal(~word) = -normal(word)
  // exactly.
  const u32v m = word ^ -(word >> 31);
  const f32v t = __builtin_convertvector((i32v)m, f32v) * 0x1p-32f + 0x1p-33f;
  const f32v x = __builtin_convertvector((i32v)(m ^ 0x7fffffffu), f32v) * 0x1p-31f + 0x1p-32f;
  // Giles' erfinv needs w = -ln((1 - x)(1 + x)) = -ln(4t(1 - t)), with 4t(1 - t) in [2^-31, 1].
  const f32v w = -fastmath::log_positive<f32v, i32v>(4.0f * t * (1.0f - t));  // in [0, 31 ln 2]
  // erfinv(x) / x for w < 5: Giles' single-precision polynomial
  const f32v c = w - 2.5f;
  f32v ratio = f32v{} + 2.81022636e-08f;
  ratio = ratio * c + 3.43273939e-07f;
  ratio = ratio * c - 3.5233877e-06f;
  ratio = ratio * c - 4.39150654e-06f;
  ratio = ratio * c + 0.00021858087f;
  ratio = ratio * c - 0.00125372503f;
  ratio = ratio * c - 0.00417768164f;
  ratio = ratio * c + 0.246640727f;
  ratio = ratio * c + 1.50140941f;
  // and for w >= 5 (0.34% of words), in d = sqrt(w) - 3.5. Giles' tail polynomial is fitted up
  // to w = 16 (where 1 - x^2 stops in float) and is 4e-4 off at our w = 21.5, so this is a
  // Chebyshev fit over w in [5, 21.6], within 1.5e-8 before float rounding. sqrt(w) = w / sqrt(w),
  // the latter by Newton from the bit-trick guess (3.4% -> 0.18% -> 5e-6 -> 1.4e-7): std::sqrt on
  // vectors goes lane by lane, for errno's sake.
  f32v rs = (f32v)(0x5f375a86u - ((u32v)w >> 1));
  for (int i = 0; i < 3; ++i) rs = rs * (1.5f - 0.5f * w * rs * rs);
  const f32v d = w * rs - 3.5f;
  f32v q = f32v{} - 2.22058407e-05f;
  q = q * d + 2.45882547e-05f;
  q = q * d + 9.47722438e-05f;
  q = q * d - 0.000263373367f;
  q = q * d + 0.000415424991f;
  q = q * d - 0.000657584809f;
  q = q * d + 0.00109997974f;
  q = q * d - 0.0020686246f;
  q = q * d + 0.00327586569f;
  q = q * d + 1.00736916f;
  q = q * d + 3.3354857f;
  const i32v central = (i32v)(w - 5.0f) >> 31;  // all ones where w < 5
  ratio = (f32v)(((i32v)ratio & central) | ((i32v)q & ~central));
  const f32v z = ratio * x * 1.41421356f;  // normal = sqrt(2) erfinv(2u - 1)
  const f32v signed_z = (f32v)((u32v)z ^ (~word & 0x80000000u));
  std::memcpy(out, &signed_z, sizeof signed_z);
}

// Elements c0 .. c0 + n - 1 a group at a time: fill(g, dst) writes group g's kWords values,
// straight into out where the whole group is wanted.
template <class T, class Fill>
void by_group(std::uint32_t c0, int n, T* out, Fill fill) {
  T buf[kWords];
  for (int k = 0; k < n;) {
    const std::uint32_t c = c0 + static_cast<std::uint32_t>(k);  // wraps as the element index does
    const int skip = static_cast<int>(c % kWords), len = std::min(kWords - skip, n - k);
    if (len == kWords) {
      fill(c / kWords, out + k);
    } else {
      fill(c / kWords, buf);
      std::copy_n(buf + skip, len, out + k);
    }
    k += len;
  }
}

}  // namespace

void philox_words(std::uint64_t seed, Source s, std::uint32_t a, std::uint32_t b, std::uint32_t c0, int n, std::uint32_t* out) {
  by_group(c0, n, out, [&](std::uint32_t g, std::uint32_t* dst) { philox16(seed, s, a, b, g * kBlocks, dst); });
}

void normals_f32(std::uint64_t seed, Source s, std::uint32_t a, std::uint32_t b, std::uint32_t c0, int n, float* out) {
  by_group(c0, n, out, [&](std::uint32_t g, float* dst) {
    std::uint32_t w[kWords];
    philox16(seed, s, a, b, g * kBlocks, w);
    to_normals(w, dst);
  });
}

float normal_from_word(std::uint32_t w) {
  const std::uint32_t words[kWords] = {w};
  float z[kWords];
  to_normals(words, z);
  return z[0];
}

float normal_f32(std::uint64_t seed, Source s, std::uint32_t a, std::uint32_t b, std::uint32_t c) {
  using G = r123::Philox4x32;
  const G::key_type key = {{static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)}};
  const G::ctr_type ctr = {{static_cast<std::uint32_t>(s), a, b, c / 4}};
  return normal_from_word(G()(ctr, key)[c % 4]);
}

}  // namespace aoc::noise
