#include "sim/noise.hpp"

#include <Random123/philox.h>
#if defined(__AVX__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

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

void normals(std::uint64_t seed, Source s, std::uint32_t a, std::uint32_t b, std::uint32_t c0, int n, double* out) {
  int k = 0;
  if (n > 0 && (c0 & 1)) out[k++] = normal(seed, s, a, b, c0);  // the odd half of the first block
  for (; k < n; k += 2) {
    const auto [even, odd] = block_pair(seed, s, a, b, (c0 + static_cast<std::uint32_t>(k)) >> 1);
    out[k] = even;
    if (k + 1 < n) out[k + 1] = odd;
  }
}


namespace {

// Philox4x32-10 over a list of blocks, several in flight at once: Random123's rounds, vectorised by
// hand because GCC's own vectorisation of them is latency-bound and 4x slower. Integer arithmetic,
// so every path gives Random123's words exactly (tests/test_noise.cpp checks them against it).
constexpr std::uint32_t kMul0 = 0xD2511F53, kMul1 = 0xCD9E8D57, kWeyl0 = 0x9E3779B9, kWeyl1 = 0xBB67AE85;

typedef std::uint32_t u32x8 __attribute__((vector_size(32)));
typedef std::int32_t i32x8 __attribute__((vector_size(32)));
typedef float f32x8 __attribute__((vector_size(32)));
typedef std::uint32_t u32x16 __attribute__((vector_size(64)));
using fastmath::f32x16;
using fastmath::i32x16;

// The unsigned and signed integer vectors of a float vector's width.
template <class F>
struct Words;
template <>
struct Words<f32x8> {
  using u = u32x8;
  using i = i32x8;
};
template <>
struct Words<f32x16> {
  using u = u32x16;
  using i = i32x16;
};

// Box-Muller on vectors of pairs of words (8 or 16 lanes), lane by lane: the radius sqrt(-2 ln u)
// from word a, u = ((a >> 1) + 1/2) / 2^31 (in (0, 1): the largest radius is 6.66, at a < 2), and
// the angle 2 pi (b + 1/2) / 2^32 from word b, as (pi/2)(n + x) with n the nearest quarter turn
// (b's top bits) and x in [-1/2, 1/2] (the rest), so that the sine and cosine polynomials
// (Cephes', within 2e-7 on [-pi/4, pi/4]) need no range reduction and no comparisons: the quadrant
// swaps and negates them by bit masks. ln u takes u - 1 from the complement word where u is near 1
// (small radii), where float u has lost it. A lane's value depends only on its two words: vector
// width, position and path do not change a bit (the same operations in every lane, and sqrt is
// correctly rounded in every path).
// N transforms in lockstep: each step for all N before the next, since each is a long chain of
// dependent operations (a log polynomial, a square root, a sine polynomial) that one alone leaves
// mostly idle.
template <int N, class F>
inline void box_muller(const typename Words<F>::u* a, const typename Words<F>::u* b, F* cos_out, F* sin_out) {
  using U = typename Words<F>::u;
  using I = typename Words<F>::i;
#define AOC_EACH _Pragma("GCC unroll 16") for (int i = 0; i < N; ++i)
  I e[N];
  F t[N], r[N];
  AOC_EACH {
    const F u = __builtin_convertvector((I)(a[i] >> 1), F) * 0x1p-31f + 0x1p-32f;
    const F v = __builtin_convertvector((I)(~a[i] >> 1), F) * 0x1p-31f + 0x1p-32f;  // 1 - u
    const fastmath::LogParts<F> p = fastmath::log_split(u);
    const I top = p.e == 0;  // u in [sqrt(1/2), 1]: t = u - 1 = -v
    e[i] = p.e, t[i] = (F)(((I)p.t & ~top) | ((I)-v & top));
  }
  fastmath::log_join<N>(e, t, r);
  AOC_EACH r[i] = -2.0f * r[i];
#if defined(__AVX512F__)
  if constexpr (sizeof(F) == 64) {
    AOC_EACH r[i] = (F)_mm512_sqrt_ps((__m512)r[i]);
  } else {
    AOC_EACH r[i] = (F)_mm256_sqrt_ps((__m256)r[i]);
  }
#elif defined(__AVX__)
  static_assert(sizeof(F) == 32);
  AOC_EACH r[i] = (F)_mm256_sqrt_ps((__m256)r[i]);
#else
  AOC_EACH for (int l = 0; l < static_cast<int>(sizeof(F) / 4); ++l) r[i][l] = std::sqrt(r[i][l]);
#endif
  AOC_EACH {
    const U n = (b[i] + 0x20000000u) >> 30;
    const F x = (__builtin_convertvector((I)(b[i] << 2), F) + 2.0f) * 0x1.921fb6p-32f;  // (pi/2) / 2^32
    const F x2 = x * x;
    const F sx = x + x * x2 * (-1.6666654611e-1f + x2 * (8.3321608736e-3f + x2 * -1.9515295891e-4f));
    const F cx = 1.0f - 0.5f * x2 + x2 * x2 * (4.166664568298827e-2f + x2 * (-1.388731625493765e-3f + x2 * 2.443315711809948e-5f));
    const I odd = -(I)(n & 1u);  // a quarter turn: cos and sin swap
    const F c = (F)(((I)cx & ~odd) | ((I)sx & odd)), s = (F)(((I)sx & ~odd) | ((I)cx & odd));
    cos_out[i] = r[i] * (F)((U)c ^ (((n ^ (n >> 1)) & 1u) << 31));  // negative in quadrants 1 and 2
    sin_out[i] = r[i] * (F)((U)s ^ ((n >> 1) << 31));                // in 2 and 3
  }
#undef AOC_EACH
}

// The vector instructions Philox's rounds run on: 16 blocks per vector with AVX-512, 8 with AVX2.
// Either gives Random123's words exactly (integer arithmetic), in the same block order.
// GCC 12's own AVX-512 intrinsics (_mm512_mul_epu32, the 64-bit shifts, _mm512_sqrt_ps) pass an
// undefined vector as their unused merge source, which it then reports as used uninitialised where
// they are inlined: a false positive in its headers.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#if defined(__AVX512F__)
struct Isa {
  using V = __m512i;
  using U = u32x16;
  using F = f32x16;
  static constexpr int kLanes = 16;
  static V load(const std::uint32_t* p) { return _mm512_loadu_si512(p); }
  static V set1(std::uint32_t x) { return _mm512_set1_epi32(static_cast<int>(x)); }
  static V xor3(V a, V b, V c) { return _mm512_ternarylogic_epi32(a, b, c, 0x96); }
  // The 64-bit products of the even and the odd lanes, then one two-source permute each for the
  // low and the high words.
  static void mulhilo(V x, V m, V& lo, V& hi) {
    const V even = _mm512_mul_epu32(x, m), odd = _mm512_mul_epu32(_mm512_srli_epi64(x, 32), m);
    const V lo_words = _mm512_setr_epi32(0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30);
    lo = _mm512_permutex2var_epi32(even, lo_words, odd);
    hi = _mm512_permutex2var_epi32(even, _mm512_add_epi32(lo_words, _mm512_set1_epi32(1)), odd);
  }
  // 4 vectors of 16 (word j of 16 blocks) to block order: block i's 4 values at out[4i .. 4i + 3].
  static void store_blocks(V c0, V c1, V c2, V c3, void* out) {
    const V t0 = _mm512_unpacklo_epi32(c0, c1), t1 = _mm512_unpackhi_epi32(c0, c1);
    const V t2 = _mm512_unpacklo_epi32(c2, c3), t3 = _mm512_unpackhi_epi32(c2, c3);
    // u0 holds blocks 0, 4, 8, 12 (one per 128-bit lane), u1 blocks 1, 5, 9, 13, and so on
    const V u0 = _mm512_unpacklo_epi64(t0, t2), u1 = _mm512_unpackhi_epi64(t0, t2);
    const V u2 = _mm512_unpacklo_epi64(t1, t3), u3 = _mm512_unpackhi_epi64(t1, t3);
    const V v0 = _mm512_shuffle_i32x4(u0, u1, 0x44), v1 = _mm512_shuffle_i32x4(u2, u3, 0x44);
    const V v2 = _mm512_shuffle_i32x4(u0, u1, 0xEE), v3 = _mm512_shuffle_i32x4(u2, u3, 0xEE);
    auto* o = reinterpret_cast<V*>(out);
    _mm512_storeu_si512(o, _mm512_shuffle_i32x4(v0, v1, 0x88));
    _mm512_storeu_si512(o + 1, _mm512_shuffle_i32x4(v0, v1, 0xDD));
    _mm512_storeu_si512(o + 2, _mm512_shuffle_i32x4(v2, v3, 0x88));
    _mm512_storeu_si512(o + 3, _mm512_shuffle_i32x4(v2, v3, 0xDD));
  }
};
#elif defined(__AVX2__)
struct Isa {
  using V = __m256i;
  using U = u32x8;
  using F = f32x8;
  static constexpr int kLanes = 8;
  static V load(const std::uint32_t* p) { return _mm256_loadu_si256(reinterpret_cast<const V*>(p)); }
  static V set1(std::uint32_t x) { return _mm256_set1_epi32(static_cast<int>(x)); }
  static V xor3(V a, V b, V c) { return _mm256_xor_si256(_mm256_xor_si256(a, b), c); }
  static void mulhilo(V x, V m, V& lo, V& hi) {
    const V even = _mm256_mul_epu32(x, m), odd = _mm256_mul_epu32(_mm256_srli_epi64(x, 32), m);
    lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
    hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
  }
  // 4 vectors of 8 (word j of 8 blocks) to block order: block i's 4 values at out[4i .. 4i + 3].
  static void store_blocks(V c0, V c1, V c2, V c3, void* out) {
    const V t0 = _mm256_unpacklo_epi32(c0, c1), t1 = _mm256_unpackhi_epi32(c0, c1);
    const V t2 = _mm256_unpacklo_epi32(c2, c3), t3 = _mm256_unpackhi_epi32(c2, c3);
    const V u0 = _mm256_unpacklo_epi64(t0, t2), u1 = _mm256_unpackhi_epi64(t0, t2);
    const V u2 = _mm256_unpacklo_epi64(t1, t3), u3 = _mm256_unpackhi_epi64(t1, t3);
    auto* o = reinterpret_cast<V*>(out);
    _mm256_storeu_si256(o, _mm256_permute2x128_si256(u0, u1, 0x20));
    _mm256_storeu_si256(o + 1, _mm256_permute2x128_si256(u2, u3, 0x20));
    _mm256_storeu_si256(o + 2, _mm256_permute2x128_si256(u0, u1, 0x31));
    _mm256_storeu_si256(o + 3, _mm256_permute2x128_si256(u2, u3, 0x31));
  }
};
#endif

#if defined(__AVX2__)
constexpr int kLanes = Isa::kLanes;  // blocks per vector

// S vectors of kLanes blocks in step (the rounds are a long dependency chain: S chains hide its
// latency). Block i's counter is (ctr[0][i], ctr[1][i], ctr[2][i], ctr[3][i]); its 4 words (Out =
// uint32_t), or the normals of its two pairs of words (Out = float: words 0 and 1 give elements 0
// and 1, words 2 and 3 elements 2 and 3), go to out[4i .. 4i + 3].
template <int S, class Out>
void philox_lanes(std::uint64_t seed, const std::uint32_t* const* ctr, Out* out) {
  using V = Isa::V;
  V c0[S], c1[S], c2[S], c3[S];
  for (int v = 0; v < S; ++v)
    c0[v] = Isa::load(ctr[0] + kLanes * v), c1[v] = Isa::load(ctr[1] + kLanes * v), c2[v] = Isa::load(ctr[2] + kLanes * v),
    c3[v] = Isa::load(ctr[3] + kLanes * v);
  const V m0 = Isa::set1(kMul0), m1 = Isa::set1(kMul1);
#pragma GCC unroll 10
  for (int r = 0; r < 10; ++r) {
    const V k0 = Isa::set1(static_cast<std::uint32_t>(seed) + r * kWeyl0), k1 = Isa::set1(static_cast<std::uint32_t>(seed >> 32) + r * kWeyl1);
    for (int v = 0; v < S; ++v) {
      V lo0, hi0, lo1, hi1;
      Isa::mulhilo(c0[v], m0, lo0, hi0);
      Isa::mulhilo(c2[v], m1, lo1, hi1);
      c0[v] = Isa::xor3(hi1, c1[v], k0);
      c2[v] = Isa::xor3(hi0, c3[v], k1);
      c1[v] = lo1;
      c3[v] = lo0;
    }
  }
  if constexpr (std::is_same_v<Out, float>) {
    using U = Isa::U;
    U a[2 * S], b[2 * S];  // the pairs (word 0, word 1) and (word 2, word 3) of every vector
    for (int v = 0; v < S; ++v) a[2 * v] = (U)c0[v], b[2 * v] = (U)c1[v], a[2 * v + 1] = (U)c2[v], b[2 * v + 1] = (U)c3[v];
    Isa::F zc[2 * S], zs[2 * S];
    box_muller<2 * S>(a, b, zc, zs);
    for (int v = 0; v < S; ++v) Isa::store_blocks((V)zc[2 * v], (V)zs[2 * v], (V)zc[2 * v + 1], (V)zs[2 * v + 1], out + 4 * kLanes * v);
  } else {
    for (int v = 0; v < S; ++v) Isa::store_blocks(c0[v], c1[v], c2[v], c3[v], out + 4 * kLanes * v);
  }
}
#else
constexpr int kLanes = 8;  // blocks per vector

// Without AVX2: the same rounds as plain loops over the lanes, which GCC vectorises as it can.
template <int S, class Out>
void philox_lanes(std::uint64_t seed, const std::uint32_t* const* ctr, Out* out) {
  constexpr int n = S * kLanes;
  std::uint32_t c[4][n];
  for (int i = 0; i < n; ++i) c[0][i] = ctr[0][i], c[1][i] = ctr[1][i], c[2][i] = ctr[2][i], c[3][i] = ctr[3][i];
  std::uint32_t key0 = static_cast<std::uint32_t>(seed), key1 = static_cast<std::uint32_t>(seed >> 32);
  for (int r = 0; r < 10; ++r) {
    for (int i = 0; i < n; ++i) {
      const std::uint64_t p0 = std::uint64_t{kMul0} * c[0][i], p1 = std::uint64_t{kMul1} * c[2][i];
      c[0][i] = static_cast<std::uint32_t>(p1 >> 32) ^ c[1][i] ^ key0;
      c[2][i] = static_cast<std::uint32_t>(p0 >> 32) ^ c[3][i] ^ key1;
      c[1][i] = static_cast<std::uint32_t>(p1);
      c[3][i] = static_cast<std::uint32_t>(p0);
    }
    key0 += kWeyl0, key1 += kWeyl1;
  }
  for (int v = 0; v < n; v += kLanes) {
    Out o[4][kLanes];
    if constexpr (std::is_same_v<Out, float>) {
      u32x8 w[4];
      for (int j = 0; j < 4; ++j) std::memcpy(&w[j], c[j] + v, sizeof w[j]);
      const u32x8 a[2] = {w[0], w[2]}, b[2] = {w[1], w[3]};
      f32x8 zc[2], zs[2];
      box_muller<2>(a, b, zc, zs);
      const f32x8 z[4] = {zc[0], zs[0], zc[1], zs[1]};
      for (int j = 0; j < 4; ++j) std::memcpy(o[j], &z[j], sizeof z[j]);
    } else {
      for (int j = 0; j < 4; ++j) std::copy_n(c[j] + v, kLanes, o[j]);
    }
    for (int i = 0; i < kLanes; ++i)
      for (int j = 0; j < 4; ++j) out[4 * (v + i) + j] = o[j][i];
  }
}
#endif
#pragma GCC diagnostic pop

// The words (or normals) of `count` blocks, block i's counter (ctr[0][i], .., ctr[3][i]): its word
// (element) j at out[4i + j]. The counts are rounded up to whole vectors of kLanes blocks: ctr must
// hold (and out have room for) that many, and the blocks past `count` are computed from whatever
// their counters hold, then ignored.
template <class Out>
void philox_blocks(std::uint64_t seed, const std::uint32_t* const* ctr, int count, Out* out) {
  // vectors in flight: as many as keep the registers from spilling (measured with aoc bench)
  constexpr int kWide = std::is_same_v<Out, float> ? (kLanes == 16 ? 4 : 2) : 4;
  const std::uint32_t* c[4];
  auto at = [&](int i) {
    for (int w = 0; w < 4; ++w) c[w] = ctr[w] + i;
  };
  int i = 0;
  for (; i + kWide * kLanes <= count; i += kWide * kLanes) at(i), philox_lanes<kWide>(seed, c, out + 4 * i);
  if (i < count) {  // the last few vectors, all in flight at once
    at(i);
    switch ((count - i + kLanes - 1) / kLanes) {
      case 1: philox_lanes<1>(seed, c, out + 4 * i); break;
      case 2: philox_lanes<2>(seed, c, out + 4 * i); break;
      case 3: philox_lanes<3>(seed, c, out + 4 * i); break;
      default: philox_lanes<4>(seed, c, out + 4 * i); break;
    }
  }
}

// Elements c0 .. c0 + n - 1 of each stream (V: their Philox words, or normals), kChunk blocks at a
// time, whatever the streams: a chunk's blocks are drawn together (so that short streams keep the
// vectors full). Where the output is dense (c0 and n multiples of 4, rows n apart) and the chunk
// whole vectors of blocks, they are drawn into the output itself. Element c is element c % 4 of
// block c / 4 (both wrap with c at 2^32).
constexpr int kChunk = 384;  // a multiple of every kWide * kLanes: no short vectors but at the end of a draw
template <class V>
void by_chunk(std::uint64_t seed, const Stream* streams, int rows, std::uint32_t c0, int n, V* out, std::ptrdiff_t ld) {
  if (n <= 0 || rows <= 0) return;
  const int skip = static_cast<int>(c0 % 4), per_row = (skip + n + 3) / 4;
  const bool dense = skip == 0 && n % 4 == 0 && ld == n;
  const std::uint32_t k0 = c0 / 4;
  constexpr int kRoom = kChunk + kLanes;  // the counters are written, and the blocks computed, in whole vectors
  std::uint32_t ctr[4][kRoom];
  const std::uint32_t* c[4] = {ctr[0], ctr[1], ctr[2], ctr[3]};
  V values[4 * kRoom];
  int r = 0, j = 0;  // the next block to draw: stream r's j-th
  while (r < rows) {
    const int r_first = r, j_first = j;
    int len = 0;
    while (len < kChunk && r < rows) {  // stream r's blocks j .. j + run - 1
      const int run = std::min(kChunk - len, per_row - j);
      const Stream& st = streams[r];
      const std::uint32_t kj = k0 + static_cast<std::uint32_t>(j);
      // whole vectors of 8 counters: the ones past the run are overwritten by the next run or are
      // the padding of the last vector (the arrays have room for it)
      const u32x8 s8 = u32x8{} + static_cast<std::uint32_t>(st.s), a8 = u32x8{} + st.a, b8 = u32x8{} + st.b;
      for (int q = 0; q < run; q += 8) {
        const u32x8 k8 = (kj + static_cast<std::uint32_t>(q) + u32x8{0, 1, 2, 3, 4, 5, 6, 7}) & 0x3fffffffu;
        std::memcpy(ctr[0] + len + q, &s8, sizeof s8), std::memcpy(ctr[1] + len + q, &a8, sizeof a8);
        std::memcpy(ctr[2] + len + q, &b8, sizeof b8), std::memcpy(ctr[3] + len + q, &k8, sizeof k8);
      }
      len += run;
      if ((j += run) == per_row) j = 0, ++r;
    }
    for (int q = len; q % kLanes; ++q) ctr[0][q] = ctr[1][q] = ctr[2][q] = ctr[3][q] = 0;  // the last vector's padding
    if (dense) {
      V* to = out + (static_cast<std::ptrdiff_t>(r_first) * per_row + j_first) * 4;
      if (len % kLanes == 0) {
        philox_blocks(seed, c, len, to);
      } else {
        philox_blocks(seed, c, len, values);
        std::copy_n(values, 4 * len, to);
      }
      continue;
    }
    philox_blocks(seed, c, len, values);
    // each stream's run of blocks, without the elements before c0 and after c0 + n - 1
    for (int i = 0, rr = r_first, jj = j_first; i < len; ++rr, jj = 0) {
      const int run = std::min(len - i, per_row - jj);
      const int e0 = std::max(0, 4 * jj - skip), e1 = std::min(n, 4 * (jj + run) - skip);
      std::copy_n(values + 4 * i + (e0 + skip - 4 * jj), e1 - e0, out + rr * ld + e0);
      i += run;
    }
  }
}

}  // namespace

void philox_words(std::uint64_t seed, Source s, std::uint32_t a, std::uint32_t b, std::uint32_t c0, int n, std::uint32_t* out) {
  const Stream st{s, a, b};
  by_chunk<std::uint32_t>(seed, &st, 1, c0, n, out, n);
}

void normals_f32(std::uint64_t seed, const Stream* streams, int count, std::uint32_t c0, int n, float* out, std::ptrdiff_t ld) {
  by_chunk<float>(seed, streams, count, c0, n, out, ld);
}

namespace {

// A direct-mapped table of recent draws: a slot holds one stream's n values from c0.
struct RecentDraws {
  static constexpr int kSlots = 128;
  struct Slot {
    std::uint64_t seed = 0;
    Stream st{};
    std::uint32_t c0 = 0;
    int n = -1;
    std::vector<float> v;
    bool holds(std::uint64_t sd, const Stream& s, std::uint32_t c, int len) const {
      return n == len && c0 == c && seed == sd && st.s == s.s && st.a == s.a && st.b == s.b;
    }
  };
  Slot slots[kSlots];
  static int slot_of(std::uint64_t seed, const Stream& s, std::uint32_t c0) {
    std::uint64_t h = seed ^ (static_cast<std::uint64_t>(s.s) << 32 | s.a) * 0x9E3779B97F4A7C15ULL;
    h ^= (static_cast<std::uint64_t>(s.b) << 32 | c0) * 0xC2B2AE3D27D4EB4FULL;
    h ^= h >> 29;
    return static_cast<int>((h * 0x165667B19E3779F9ULL) >> 57);  // 7 bits: kSlots
  }
};

}  // namespace

void normals_f32_recent(std::uint64_t seed, const Stream* streams, int count, std::uint32_t c0, int n, float* out, std::ptrdiff_t ld) {
  if (n <= 0 || count <= 0) return;
  thread_local RecentDraws memo;
  thread_local std::vector<Stream> missing;
  thread_local std::vector<int> rows;
  thread_local std::vector<float> drawn;
  missing.clear(), rows.clear();
  for (int r = 0; r < count; ++r) {
    const RecentDraws::Slot& slot = memo.slots[RecentDraws::slot_of(seed, streams[r], c0)];
    if (slot.holds(seed, streams[r], c0, n)) {
      std::copy_n(slot.v.data(), n, out + r * ld);
    } else {
      missing.push_back(streams[r]), rows.push_back(r);
    }
  }
  if (missing.empty()) return;
  drawn.resize(missing.size() * static_cast<size_t>(n));
  normals_f32(seed, missing.data(), static_cast<int>(missing.size()), c0, n, drawn.data(), n);
  for (size_t q = 0; q < missing.size(); ++q) {
    const float* v = drawn.data() + q * n;
    std::copy_n(v, n, out + rows[q] * ld);
    RecentDraws::Slot& slot = memo.slots[RecentDraws::slot_of(seed, missing[q], c0)];
    slot.seed = seed, slot.st = missing[q], slot.c0 = c0, slot.n = n;
    slot.v.assign(v, v + n);
  }
}

void normals_f32(std::uint64_t seed, Source s, std::uint32_t a, std::uint32_t b, std::uint32_t c0, int n, float* out) {
  const Stream st{s, a, b};
  normals_f32(seed, &st, 1, c0, n, out, n);
}

std::pair<float, float> normal_pair(std::uint32_t a, std::uint32_t b) {
  const u32x8 wa = u32x8{} + a, wb = u32x8{} + b;
  f32x8 c, s;
  box_muller<1>(&wa, &wb, &c, &s);
  return {c[0], s[0]};
}

float normal_f32(std::uint64_t seed, Source s, std::uint32_t a, std::uint32_t b, std::uint32_t c) {
  using G = r123::Philox4x32;
  const G::key_type key = {{static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)}};
  const G::ctr_type ctr = {{static_cast<std::uint32_t>(s), a, b, c / 4}};
  const G::ctr_type w = G()(ctr, key);
  const int pair = c % 4 / 2;
  const auto [even, odd] = normal_pair(w[2 * pair], w[2 * pair + 1]);
  return c % 2 ? odd : even;
}

}  // namespace aoc::noise
