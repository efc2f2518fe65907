// The matrix products of the digital reference (kernels::dot_rows): every element one dot product
// in one fixed order, so that a value never depends on the batch it ran in, the thread count or the
// vector width, while the loops run at the memory's speed (one token) or near the FMA units' (many).
//
// The order: eight lanes, lane l summing the terms j = l, l + 8, ... with one fmadd each, in order of
// j; then ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)). Padding lanes past the end add nothing:
// a lane starts at +0 and fmadd never makes -0 from +0, so adding 0 x 0 leaves it as it was.
//
// This file is one copy of them for the x86-64 level it is compiled for: CMake builds it once per
// level with -march=LEVEL and AOC_ISA_NS naming the namespace (aoc_isa_kernels; compiler/kernels.cpp
// dispatches). Every copy gives the same bits: the lanes' chains are fused multiply-adds in every
// copy (the C library's exact fma where the level has no FMA instruction).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace aoc::ir::kernels::AOC_ISA_NS {

namespace {

// Eight lanes of partial sums, in whatever registers the machine has.
#if defined(__AVX512F__) && defined(__FMA__)
struct Lanes {
  __m512d v = _mm512_setzero_pd();
  static constexpr int kRows = 4;      // W rows per micro-tile: 4 x 3 accumulators of 32 registers
  static constexpr int kGemvRows = 8;  // W rows per micro-tile against one x row: 8 streams in flight
  static __m512d load(const double* p) { return _mm512_loadu_pd(p); }
  static __m512d load(const double* p, int n) { return _mm512_maskz_loadu_pd(static_cast<__mmask8>((1u << n) - 1), p); }
  void fma(__m512d a, __m512d b) { v = _mm512_fmadd_pd(a, b, v); }
  void store(double* l) const { _mm512_storeu_pd(l, v); }
};
using Vec = __m512d;
#elif defined(__AVX2__) && defined(__FMA__)
struct Vec {
  __m256d lo, hi;
};
struct Lanes {
  __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
  static constexpr int kRows = 2;  // 2 x 3 accumulators of two registers each: 12 of 16
  static constexpr int kGemvRows = 4;
  static Vec load(const double* p) { return {_mm256_loadu_pd(p), _mm256_loadu_pd(p + 4)}; }
  static Vec load(const double* p, int n) {
    const __m256i idx = _mm256_set_epi64x(3, 2, 1, 0);
    const __m256i m_lo = _mm256_cmpgt_epi64(_mm256_set1_epi64x(n), idx), m_hi = _mm256_cmpgt_epi64(_mm256_set1_epi64x(n - 4), idx);
    return {_mm256_maskload_pd(p, m_lo), _mm256_maskload_pd(p + 4, m_hi)};
  }
  void fma(const Vec& a, const Vec& b) { lo = _mm256_fmadd_pd(a.lo, b.lo, lo), hi = _mm256_fmadd_pd(a.hi, b.hi, hi); }
  void store(double* l) const { _mm256_storeu_pd(l, lo), _mm256_storeu_pd(l + 4, hi); }
};
#else
struct Vec {
  double v[8];
};
struct Lanes {
  double v[8] = {};
  static constexpr int kRows = 2;
  static constexpr int kGemvRows = 4;
  static Vec load(const double* p) { return load(p, 8); }
  static Vec load(const double* p, int n) {
    Vec a{};
    std::memcpy(a.v, p, sizeof(double) * static_cast<std::size_t>(n));
    return a;
  }
  void fma(const Vec& a, const Vec& b) {
    for (int l = 0; l < 8; ++l) v[l] = std::fma(a.v[l], b.v[l], v[l]);
  }
  void store(double* l) const { std::memcpy(l, v, sizeof v); }
};
#endif

// The lanes' sum, in the order every path shares.
double sum(const Lanes& a) {
  double l[8];
  a.store(l);
  return ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
}

constexpr int kXRows = 3;  // x rows per micro-tile

// y[r * ldy + o] = dot(x row r, W row o) for r < NR (<= kXRows) and o < NO: NR x NO dot products
// side by side, sharing each loaded vector.
template <int NR, int NO>
void micro(const double* x, std::int64_t ldx, const double* W, std::int64_t in, double* y, std::int64_t ldy) {
  Lanes acc[NR][NO];
  std::int64_t j = 0;
  for (; j + 8 <= in; j += 8) {
    Vec w[NO];
    for (int o = 0; o < NO; ++o) w[o] = Lanes::load(W + o * in + j);
    for (int r = 0; r < NR; ++r) {
      const Vec xv = Lanes::load(x + r * ldx + j);
      for (int o = 0; o < NO; ++o) acc[r][o].fma(xv, w[o]);
    }
  }
  if (j < in) {
    const int n = static_cast<int>(in - j);
    Vec w[NO];
    for (int o = 0; o < NO; ++o) w[o] = Lanes::load(W + o * in + j, n);
    for (int r = 0; r < NR; ++r) {
      const Vec xv = Lanes::load(x + r * ldx + j, n);
      for (int o = 0; o < NO; ++o) acc[r][o].fma(xv, w[o]);
    }
  }
  for (int r = 0; r < NR; ++r)
    for (int o = 0; o < NO; ++o) y[r * ldy + o] = sum(acc[r][o]);
}

// The micro-tile of no W rows (at most kGemvRows against one x row, kRows against more).
template <int NR, int NO = 1>
void micro_rows(int no, const double* x, std::int64_t ldx, const double* W, std::int64_t in, double* y, std::int64_t ldy) {
  if constexpr (NO < (NR == 1 ? Lanes::kGemvRows : Lanes::kRows)) {
    if (no > NO) return micro_rows<NR, NO + 1>(no, x, ldx, W, in, y, ldy);
  }
  micro<NR, NO>(x, ldx, W, in, y, ldy);
}

// Rows [r0, r1) of x against W rows [o0, o1): micro-tiles of kXRows x Lanes::kRows (one x row: x kGemvRows).
void block(const double* x, std::int64_t r0, std::int64_t r1, const double* W, std::int64_t o0, std::int64_t o1, std::int64_t in, double* y,
           std::int64_t out) {
  for (std::int64_t r = r0; r < r1; r += kXRows) {
    const int nr = static_cast<int>(std::min<std::int64_t>(kXRows, r1 - r));
    const int step = nr == 1 ? Lanes::kGemvRows : Lanes::kRows;
    for (std::int64_t o = o0; o < o1; o += step) {
      const int no = static_cast<int>(std::min<std::int64_t>(step, o1 - o));
      const double* xr = x + r * in;
      const double* wo = W + o * in;
      double* yr = y + r * out + o;
      if (nr == 3) micro_rows<3>(no, xr, in, wo, in, yr, out);
      else if (nr == 2) micro_rows<2>(no, xr, in, wo, in, yr, out);
      else micro_rows<1>(no, xr, in, wo, in, yr, out);
    }
  }
}

}  // namespace

double dot8(const double* a, const double* b, std::int64_t n) {
  double y = 0;
  micro<1, 1>(a, n, b, n, &y, 1);
  return y;
}

void dot_rows(const double* x, std::int64_t rows, const double* W, std::int64_t out, std::int64_t in, double* y, int threads) {
  if (rows <= 0 || out <= 0) return;
  if (in == 0) {
    std::fill_n(y, rows * out, 0.0);
    return;
  }
  // Blocks of W rows that stay in cache while blocks of x rows stream past them; one token's row
  // (a GEMV) is split over W rows alone, so that every thread streams its share of the weights.
  const std::int64_t w_block = std::max<std::int64_t>(Lanes::kRows, (std::int64_t{256} * 1024 / (8 * in)) / Lanes::kRows * Lanes::kRows);
  const std::int64_t x_block = 16 * kXRows;
  const std::int64_t wb = (out + w_block - 1) / w_block, xb = (rows + x_block - 1) / x_block;
  const std::int64_t jobs = wb * xb;
#pragma omp parallel for num_threads(threads) if (threads > 1 && jobs > 1) schedule(dynamic)
  for (std::int64_t job = 0; job < jobs; ++job) {
    const std::int64_t bw = job / xb, bx = job % xb;
    block(x, bx * x_block, std::min(rows, (bx + 1) * x_block), W, bw * w_block, std::min(out, (bw + 1) * w_block), in, y, out);
  }
}

// acc[l] = fmadd over n in order of (C[n], h_l[n], acc[l]) for 8 lanes of states h_l = rows + l N (a
// selective-scan readout: one chain per lane, the Einsum's order). With AVX2 and FMA, 4 lanes a
// vector through in-register 4 x 4 transposes of the rows (the chains' values are the same);
// otherwise lane by lane.
void readout8(const double* rows, std::int64_t N, const double* C, double* acc) {
  std::int64_t n = 0;
#if defined(__AVX2__) && defined(__FMA__)
  __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();  // lanes 0..3, 4..7
  auto step4 = [&](const double* r, __m256d a) {  // 4 lanes' rows r, r + N, .. at n .. n + 3
    const __m256d r0 = _mm256_loadu_pd(r + n), r1 = _mm256_loadu_pd(r + N + n), r2 = _mm256_loadu_pd(r + 2 * N + n),
                  r3 = _mm256_loadu_pd(r + 3 * N + n);
    const __m256d t0 = _mm256_unpacklo_pd(r0, r1), t1 = _mm256_unpackhi_pd(r0, r1), t2 = _mm256_unpacklo_pd(r2, r3),
                  t3 = _mm256_unpackhi_pd(r2, r3);
    const __m256d c0 = _mm256_permute2f128_pd(t0, t2, 0x20), c1 = _mm256_permute2f128_pd(t1, t3, 0x20),
                  c2 = _mm256_permute2f128_pd(t0, t2, 0x31), c3 = _mm256_permute2f128_pd(t1, t3, 0x31);
    a = _mm256_fmadd_pd(_mm256_set1_pd(C[n]), c0, a);
    a = _mm256_fmadd_pd(_mm256_set1_pd(C[n + 1]), c1, a);
    a = _mm256_fmadd_pd(_mm256_set1_pd(C[n + 2]), c2, a);
    return _mm256_fmadd_pd(_mm256_set1_pd(C[n + 3]), c3, a);
  };
  for (; n + 4 <= N; n += 4) lo = step4(rows, lo), hi = step4(rows + 4 * N, hi);
  _mm256_storeu_pd(acc, lo), _mm256_storeu_pd(acc + 4, hi);
#else
  std::fill_n(acc, 8, 0.0);
#endif
  for (; n < N; ++n)
    for (int l = 0; l < 8; ++l) acc[l] = std::fma(C[n], rows[l * N + n], acc[l]);
}

}  // namespace aoc::ir::kernels::AOC_ISA_NS
