// `aoc bench`'s GPU reference section (built with AOC_CUDA; docs/bench.md): what a digital GPU does
// with the work the AOC does, timed with CUDA events.
//   - the 48-variable loop z' = alpha z + beta W tanh(z) + x, batched: per iteration one kernel
//     (tanh(z) and alpha z + x) and one GEMM that adds beta tanh(z) W^T; and a loop of the GEMMs alone;
//   - one token's matrix work of a model: every product by a weight once (GEMV at batch 1, GEMM
//     above), the products inside the model's fixed point apart from the others.
// float32 and float64, no TF32 (cuBLAS pedantic math), weights and inputs filled on the device.
// Plain C++ types only, so that the CLI includes it without CUDA's headers.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace aoc {

struct GpuBenchOptions {
  int channels = 48;                                // the loop's N
  std::vector<int> batches{1, 1024, 65536, 1048576};  // samples of the loop
  std::vector<int> token_batches{1, 64, 1024};      // tokens multiplied at once in the matrix work
  int iterations = 100;                             // loop iterations per timed run
  double min_seconds = 0.3;                         // per measurement (at least 5 runs)
  unsigned long long seed = 1;
};

struct GpuLoopRow {
  std::string cell;       // "loop" or "matmul only"
  std::string precision;  // "f32" or "f64"
  int batch = 0;
  double best = 0, median = 0;  // sample-iterations per second
};

// A product by a weight: y[rows] = W[rows, cols] x[cols], once per token, or once per iteration of
// the fixed point when in_loop.
struct GpuMatrix {
  std::int64_t rows = 0, cols = 0;
  bool in_loop = false;
};

struct GpuMatrixRow {
  std::string precision;
  int batch = 0;                      // tokens multiplied at once
  double loop_s = 0, other_s = 0;     // median seconds of one pass over the loop's products, the others'
  double loop_weights = 0, other_weights = 0;
};

std::vector<GpuLoopRow> gpu_loop_bench(const GpuBenchOptions& o);
// Throws aoc::Error when the matrices do not fit the device's free memory.
std::vector<GpuMatrixRow> gpu_matrix_bench(const std::vector<GpuMatrix>& matrices, const GpuBenchOptions& o);

}  // namespace aoc
