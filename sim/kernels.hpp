// The optical tile's matrix products (sim/tile.cpp): out = L F, every
// output element one chain of fused multiply-adds over k in order. The loops (sim/simd.hpp) are
// compiled once per x86-64 level (sim/tile_products.cpp) and chosen by the CPU (sim/isa.hpp); each
// copy gives the same bits.
#pragma once
#include <cstdint>

namespace aoc::kern {

// IEEE half-precision values as their bits: a light map kept in half precision (half the bytes a
// read streams) is accumulated in float.
using Half = std::uint16_t;

// What the product's epilogue adds to each output: out = kappa*(acc + c + alpha z + inj
// + gamma (z - z_prev)) + (1 - kappa) z. Without z (a program's tile) it is acc + c; without c too,
// the product as is. Pointers index [row0 + r, j] with the output's row stride.
template <class T>
struct Epilogue {
  const T *c = nullptr, *alpha = nullptr, *z = nullptr, *inj = nullptr, *zprev = nullptr;
  T gamma = 0, kappa = 1;
  bool has_gamma = false;
};

// Columns [j0, j1) of rows x ... outputs: L (rows x K, row stride ldl) times F (K rows, ldf apart)
// into out (row stride ldo). j0 and j1 - j0 are whole 64-byte vectors (16 floats, 8 doubles), as the
// padded rows hold (sim/batch.hpp).
void product(const float* L, int ldl, int K, const float* F, int ldf, int j0, int j1, int rows, float* out, int ldo);
void product(const float* L, int ldl, int K, const Half* F, int ldf, int j0, int j1, int rows, float* out, int ldo);
void product(const double* L, int ldl, int K, const double* F, int ldf, int j0, int j1, int rows, double* out, int ldo);

}  // namespace aoc::kern
