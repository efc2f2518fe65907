// One copy of the optical tile's products (sim/kernels.hpp) for the x86-64 level this file is
// compiled for: CMake builds it once per level with -march=LEVEL and AOC_ISA_NS naming the
// namespace (aoc_isa_kernels). Nothing here may be shared with the rest of the binary (no inline
// function or template outside that namespace left out of line: tests/isa_objects_test.sh checks).
#include "sim/simd.hpp"

namespace aoc::kern::AOC_ISA_NS {

void product(const float* L, int ldl, int K, const float* F, int ldf, int j0, int j1, int rows, float* out, int ldo) {
  gemm(L, ldl, K, F, ldf, j0, j1, rows, out, ldo);
}
void product(const float* L, int ldl, int K, const Half* F, int ldf, int j0, int j1, int rows, float* out, int ldo) {
  gemm(L, ldl, K, F, ldf, j0, j1, rows, out, ldo);
}
void product(const double* L, int ldl, int K, const double* F, int ldf, int j0, int j1, int rows, double* out, int ldo) {
  gemm(L, ldl, K, F, ldf, j0, j1, rows, out, ldo);
}

}  // namespace aoc::kern::AOC_ISA_NS
