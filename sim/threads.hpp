// One thread count per run: OpenMP's for a scope (every parallel loop without a num_threads clause
// of its own, and Eigen's products, which ask OpenMP), restored when the scope ends. A command's
// --threads is honoured by each part of its run, not only by the loops that are told it. (Eigen's
// GEMM blocks its sums by its thread count: code whose bits must not depend on --threads keeps
// Eigen's products on a fixed count, or uses kernels that do not split a sum.)
#pragma once
#include <omp.h>

namespace aoc {

class ScopedThreads {
 public:
  explicit ScopedThreads(int n) : saved_(omp_get_max_threads()) { omp_set_num_threads(n > 0 ? n : 1); }
  ~ScopedThreads() { omp_set_num_threads(saved_); }
  ScopedThreads(const ScopedThreads&) = delete;
  ScopedThreads& operator=(const ScopedThreads&) = delete;

 private:
  int saved_;
};

}  // namespace aoc
