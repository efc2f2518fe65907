// The register-tiled matrix product of the optical tile (sim/tile.cpp), with the loop's epilogue.
// Internal to sim/: GCC vector extensions, as wide as the target's registers. Rows are padded to 64
// bytes whatever the width (sim/batch.hpp), so every instantiation sees whole vectors.
#pragma once
#include <cstddef>
#include <cstring>

namespace aoc::kern {

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

// What the product's epilogue adds to each output: out = kappa*(acc + c + alpha z + inj
// + gamma (z - z_prev)) + (1 - kappa) z. Without z (a program's tile) it is acc + c; without c too,
// the product as is. Pointers index [row0 + r, j] with the output's row stride.
template <class T>
struct Epilogue {
  const T *c = nullptr, *alpha = nullptr, *z = nullptr, *inj = nullptr, *zprev = nullptr;
  T gamma = 0, kappa = 1;
  bool has_gamma = false;
};

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

// out[i, j] = sum_k L[i, k] F[k, j] (+ epilogue), for MR rows and NV vectors of columns from j0.
// Every output element is one FMA chain over k in order, whichever instantiation computes it.
template <class T, int MR, int NV>
inline void gemm_tile(const T* L, int ldl, const T* F, int ld, int K, int j0, const Epilogue<T>& e, size_t row0, T* out) {
  using V = typename Vec<T>::type;
  constexpr int W = kVecLanes<T>;
  V acc[MR][NV];
  for (int i = 0; i < MR; ++i)
    for (int v = 0; v < NV; ++v) acc[i][v] = V{};
  for (int k = 0; k < K; ++k) {
    V b[NV];
    for (int v = 0; v < NV; ++v) b[v] = load(F + static_cast<size_t>(k) * ld + j0 + v * W);
    for (int i = 0; i < MR; ++i) {
      const T a = L[static_cast<size_t>(i) * ldl + k];
      for (int v = 0; v < NV; ++v) acc[i][v] += a * b[v];
    }
  }
  for (int i = 0; i < MR; ++i) {
    const size_t r = static_cast<size_t>(i) * ld;
    for (int v = 0; v < NV; ++v) finish<T>(acc[i][v], e, row0 + r, j0 + v * kVecLanes<T>, out + r);
  }
}

template <class T, int MR>
inline void gemm_rows(const T* L, int ldl, const T* F, int ld, int K, const Epilogue<T>& e, size_t row0, T* out) {
  constexpr int W = kVecLanes<T>;
  const int nvec = ld / W;
  int v0 = 0;
  // Enough accumulators to hide the FMA latency: 12 for blocks of rows (instead of 8), 6 for a
  // single row (instead of 2 or 3), where the registers allow.
  if constexpr (kNV == 2 && MR == 1) {
    for (; v0 + 6 <= nvec; v0 += 6) gemm_tile<T, 1, 6>(L, ldl, F, ld, K, v0 * W, e, row0, out);
  } else if constexpr (kNV == 2) {
    if (nvec % 3 == 0) {
      for (; v0 < nvec; v0 += 3) gemm_tile<T, MR, 3>(L, ldl, F, ld, K, v0 * W, e, row0, out);
      return;
    }
  }
  for (; v0 + kNV <= nvec; v0 += kNV) gemm_tile<T, MR, kNV>(L, ldl, F, ld, K, v0 * W, e, row0, out);
  switch (nvec - v0) {
    case 0: break;
    case 1: gemm_tile<T, MR, 1>(L, ldl, F, ld, K, v0 * W, e, row0, out); break;
    case 2: gemm_tile<T, MR, 2>(L, ldl, F, ld, K, v0 * W, e, row0, out); break;
    case 3: gemm_tile<T, MR, 3>(L, ldl, F, ld, K, v0 * W, e, row0, out); break;
  }
}

// One row through an F larger than the caches (a token at a time through a large module): F read
// in its memory order, row after row, into the output row held in L1, so that it streams at the
// memory's bandwidth instead of in column strips. The same FMA chain per element as gemm_tile.
template <class T>
inline void gemm_row_streamed(const T* L, int K, const T* F, int ld, const Epilogue<T>& e, size_t row0, T* out) {
  using V = typename Vec<T>::type;
  constexpr int W = kVecLanes<T>;
  for (int j = 0; j < ld; j += W) store(out + j, V{});
  for (int k = 0; k < K; ++k) {
    const T a = L[k];
    const T* f = F + static_cast<size_t>(k) * ld;
    for (int j = 0; j < ld; j += W) store(out + j, load(out + j) + a * load(f + j));
  }
  for (int j = 0; j < ld; j += W) finish<T>(load(out + j), e, row0, j, out);
}

constexpr std::size_t kStreamBytes = std::size_t(1) << 20;  // F from this size on streams single rows

// rows x ld outputs of L (rows x K, row stride ldl) times F (K x ld): row blocks of kMR, then single rows.
template <class T>
void gemm(const T* L, int ldl, int K, const T* F, int ld, int rows, const Epilogue<T>& e, T* out) {
  const bool stream = static_cast<std::size_t>(K) * ld * sizeof(T) >= kStreamBytes;
  int r = 0;
  for (; r + kMR <= rows; r += kMR) {
    const size_t o = static_cast<size_t>(r) * ld;
    gemm_rows<T, kMR>(L + static_cast<size_t>(r) * ldl, ldl, F, ld, K, e, o, out + o);
  }
  for (; r < rows; ++r) {
    const size_t o = static_cast<size_t>(r) * ld;
    if (stream) gemm_row_streamed<T>(L + static_cast<size_t>(r) * ldl, K, F, ld, e, o, out + o);
    else gemm_rows<T, 1>(L + static_cast<size_t>(r) * ldl, ldl, F, ld, K, e, o, out + o);
  }
}

}  // namespace aoc::kern
