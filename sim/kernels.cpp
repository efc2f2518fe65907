// The optical tile's products, dispatched to the copy for the kernels' instruction set.
#include "sim/kernels.hpp"

#include "sim/isa.hpp"

namespace aoc::kern {

#define AOC_DECLARE(ns)                                                                                                               \
  namespace ns {                                                                                                                      \
  void product(const float*, int, int, const float*, int, int, int, int, float*, int);                     \
  void product(const float*, int, int, const Half*, int, int, int, int, float*, int);                      \
  void product(const double*, int, int, const double*, int, int, int, int, double*, int);                 \
  }
AOC_ISA_FOR_EACH(AOC_DECLARE)
#undef AOC_DECLARE

void product(const float* L, int ldl, int K, const float* F, int ldf, int j0, int j1, int rows, float* out, int ldo) {
  AOC_ISA_DISPATCH(product(L, ldl, K, F, ldf, j0, j1, rows, out, ldo))
}
void product(const float* L, int ldl, int K, const Half* F, int ldf, int j0, int j1, int rows, float* out, int ldo) {
  AOC_ISA_DISPATCH(product(L, ldl, K, F, ldf, j0, j1, rows, out, ldo))
}
void product(const double* L, int ldl, int K, const double* F, int ldf, int j0, int j1, int rows, double* out, int ldo) {
  AOC_ISA_DISPATCH(product(L, ldl, K, F, ldf, j0, j1, rows, out, ldo))
}

}  // namespace aoc::kern
