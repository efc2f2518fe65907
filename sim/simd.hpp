// The register-tiled matrix product of the optical tile, with the loop's epilogue: GCC vector
// extensions as wide as the target's registers. Internal to sim/: included by the tile (the build's
// own target: namespace kern::build) and by sim/tile_products.cpp, which is compiled once per x86-64
// level with AOC_ISA_NS naming its namespace (sim/isa.hpp). Rows are padded to 64 bytes whatever
// the width (sim/batch.hpp), so every copy sees whole vectors.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "sim/kernels.hpp"

#ifndef AOC_ISA_NS
#define AOC_ISA_NS build
#endif

namespace aoc::kern::AOC_ISA_NS {
#if defined(__AVX512F__)
constexpr int kVecBytes = 64, kMR = 4, kNV = 4;  // register tile: rows x vectors (16 accumulators of 32)
#elif defined(__AVX__)
constexpr int kVecBytes = 32, kMR = 4, kNV = 2;  // 8 accumulators of 16
#else
constexpr int kVecBytes = 16, kMR = 4, kNV = 2;
#endif
template <class T> struct Vec;
template <> struct Vec<float> { typedef float type __attribute__((vector_size(kVecBytes))); };
template <> struct Vec<double> { typedef double type __attribute__((vector_size(kVecBytes))); };
template <class T>
constexpr int kVecLanes = kVecBytes / static_cast<int>(sizeof(T));
static_assert(64 % kVecBytes == 0, "row padding must hold whole vectors");

template <class T>
inline typename Vec<T>::type load(const T* p) {
  typename Vec<T>::type v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <class T>
inline void store(T* p, typename Vec<T>::type v) { std::memcpy(p, &v, sizeof v); }

// A panel of the product's right-hand side holds T, or for float products IEEE half-precision
// values (Half). Either way one vector of T.
template <class T, class B>
inline typename Vec<T>::type load_panel(const B* p) {
  if constexpr (std::is_same_v<B, T>) {
    return load(p);
  } else {
    static_assert(std::is_same_v<T, float> && std::is_same_v<B, Half>, "half panels are for float products");
#if defined(__AVX512F__)
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
#elif defined(__AVX__) && defined(__F16C__)
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
#else
    typename Vec<float>::type v;
    for (int i = 0; i < kVecLanes<float>; ++i) {
      _Float16 h;
      std::memcpy(&h, p + i, sizeof h);
      v[i] = static_cast<float>(h);
    }
    return v;
#endif
  }
}

// acc + a b with one rounding, the same wherever a kernel computes it. Left to the compiler's
// contraction it is not: GCC keeps a separate multiply and add in some loop shapes (a single
// vector of columns), and a column computed there would differ by an ulp from its neighbours.
template <class T>
inline typename Vec<T>::type madd(T a, typename Vec<T>::type b, typename Vec<T>::type acc) {
  using V = typename Vec<T>::type;
  const V av = V{} + a;
#if defined(__AVX512F__)
  if constexpr (sizeof(T) == 4) return _mm512_fmadd_ps(av, b, acc);
  else return _mm512_fmadd_pd(av, b, acc);
#elif defined(__AVX__) && defined(__FMA__)
  if constexpr (sizeof(T) == 4) return _mm256_fmadd_ps(av, b, acc);
  else return _mm256_fmadd_pd(av, b, acc);
#elif defined(__FMA__)
  if constexpr (sizeof(T) == 4) return _mm_fmadd_ps(av, b, acc);
  else return _mm_fmadd_pd(av, b, acc);
#else
  V r;  // no FMA instruction on the target: the C library's fma, exact and slow (the same bits)
  for (int i = 0; i < kVecLanes<T>; ++i) r[i] = std::fma(av[i], b[i], acc[i]);
  return r;
#endif
}

// The epilogue of one vector of outputs at column j of the row at offset `at` (row0 + the row's
// offset in the output), written to row[j].
template <class T>
inline void finish(typename Vec<T>::type g, const Epilogue<T>& e, size_t at, int j, T* row) {
  using V = typename Vec<T>::type;
  if (e.c) g += load(e.c + j);
  if (e.z) {
    const V zv = load(e.z + at + j);
    g += load(e.alpha + j) * zv;
    g += load(e.inj + at + j);
    if (e.has_gamma) g += e.gamma * (zv - (e.zprev ? load(e.zprev + at + j) : V{}));
    if (e.kappa != T(1)) g = e.kappa * g + (T(1) - e.kappa) * zv;
  }
  store(row + j, g);
}

// out[i, j] = sum_k L[i, k] F[k, j], for MR rows and NV vectors of columns from j0 (F's rows ldf
// apart, out's ldo). Every output element is one madd chain over k in order,
// whichever instantiation computes it and whatever columns a call covers.
template <class T, int MR, int NV, class B>
inline void gemm_tile(const T* L, int ldl, const B* F, int ldf, int K, int j0, T* out, int ldo) {
  using V = typename Vec<T>::type;
  constexpr int W = kVecLanes<T>;
  V acc[MR][NV];
  for (int i = 0; i < MR; ++i)
    for (int v = 0; v < NV; ++v) acc[i][v] = V{};
  for (int k = 0; k < K; ++k) {
    V b[NV];
    for (int v = 0; v < NV; ++v) b[v] = load_panel<T>(F + static_cast<size_t>(k) * ldf + j0 + v * W);
    for (int i = 0; i < MR; ++i) {
      const T a = L[static_cast<size_t>(i) * ldl + k];
      for (int v = 0; v < NV; ++v) acc[i][v] = madd<T>(a, b[v], acc[i][v]);
    }
  }
  for (int i = 0; i < MR; ++i) {
    const size_t r = static_cast<size_t>(i) * ldo;
    for (int v = 0; v < NV; ++v) store(out + r + j0 + v * W, acc[i][v]);
  }
}

// Columns [j0, j1) (whole vectors) of MR rows.
template <class T, int MR, class B>
inline void gemm_rows(const T* L, int ldl, const B* F, int ldf, int K, int j0, int j1, T* out, int ldo) {
  constexpr int W = kVecLanes<T>;
  const int nvec = (j1 - j0) / W;
  int v0 = 0;
  auto tile = [&]<int NV>(std::integral_constant<int, NV>) { gemm_tile<T, MR, NV, B>(L, ldl, F, ldf, K, j0 + v0 * W, out, ldo); };
  // Enough accumulators to hide the FMA latency: 12 for blocks of rows (instead of 8), 8 or 6 for
  // a single row (instead of 2 or 3), where the registers allow. A single row through a panel of
  // the light map (8 vectors) is then one pass over memory in order.
  if constexpr (kNV == 2 && MR == 1) {
    for (; v0 + 8 <= nvec; v0 += 8) tile(std::integral_constant<int, 8>{});
    for (; v0 + 6 <= nvec; v0 += 6) tile(std::integral_constant<int, 6>{});
  } else if constexpr (kNV == 2) {
    if (nvec % 3 == 0) {
      for (; v0 < nvec; v0 += 3) tile(std::integral_constant<int, 3>{});
      return;
    }
  }
  for (; v0 + kNV <= nvec; v0 += kNV) tile(std::integral_constant<int, kNV>{});
  switch (nvec - v0) {
    case 0: break;
    case 1: tile(std::integral_constant<int, 1>{}); break;
    case 2: tile(std::integral_constant<int, 2>{}); break;
    case 3: tile(std::integral_constant<int, 3>{}); break;
  }
}

// Columns [j0, j1) (whole vectors) of rows x ... outputs: L (rows x K, row stride ldl) times F (K
// rows, ldf apart; T or Half) into out (row stride ldo); row blocks of kMR, then single rows.
template <class T, class B>
void gemm(const T* L, int ldl, int K, const B* F, int ldf, int j0, int j1, int rows, T* out, int ldo) {
  int r = 0;
  for (; r + kMR <= rows; r += kMR) {
    const size_t o = static_cast<size_t>(r) * ldo;
    gemm_rows<T, kMR, B>(L + static_cast<size_t>(r) * ldl, ldl, F, ldf, K, j0, j1, out + o, ldo);
  }
  for (; r < rows; ++r) {
    const size_t o = static_cast<size_t>(r) * ldo;
    gemm_rows<T, 1, B>(L + static_cast<size_t>(r) * ldl, ldl, F, ldf, K, j0, j1, out + o, ldo);
  }
}

}  // namespace aoc::kern::AOC_ISA_NS

namespace aoc::kern {
namespace simd = AOC_ISA_NS;  // this translation unit's copy
}
