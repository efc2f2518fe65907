// The GPU reference section of `aoc bench` (bench/gpu_bench.hpp).
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "bench/gpu_bench.hpp"
#include "runtime/backend/cublas_loader.hpp"
#include "sim/error.hpp"

namespace aoc {

namespace {

using cuda::cublas;

void check(cudaError_t e, const char* what) { cuda::check(e, "bench gpu", what); }
void check(cublasStatus_t s, const char* what) { cuda::check(s, "bench gpu", what); }

template <class T>
struct DeviceArray {
  T* p = nullptr;
  explicit DeviceArray(std::size_t n) { check(cudaMalloc(reinterpret_cast<void**>(&p), std::max<std::size_t>(n, 1) * sizeof(T)), "cudaMalloc"); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  ~DeviceArray() { cudaFree(p); }
};

struct Handle {
  cublasHandle_t h = nullptr;
  Handle() {
    check(cublas().create(&h), "cublasCreate");
    check(cublas().set_math_mode(h, CUBLAS_PEDANTIC_MATH), "cublasSetMathMode");  // no TF32: the precision named
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() { cublas().destroy(h); }
};

// Seeded U(-1, 1) from a counter (splitmix64), so that gigabytes of weights need no host copy.
__device__ double uniform(unsigned long long seed, unsigned long long i) {
  unsigned long long z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-52 - 1.0;
}

template <class T>
__global__ void fill(T* p, std::size_t n, double scale, unsigned long long seed) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    p[i] = static_cast<T>(scale * uniform(seed, i));
}

__device__ float tanh_of(float v) { return tanhf(v); }
__device__ double tanh_of(double v) { return tanh(v); }

// One iteration's elementwise work: f = tanh(z), the GEMM's operand, and zn = alpha z + x, to which
// the GEMM adds beta f W^T.
template <class T>
__global__ void pre_step(const T* z, const T* x, T* f, T* zn, std::size_t n, T alpha) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    f[i] = tanh_of(z[i]);
    zn[i] = alpha * z[i] + x[i];
  }
}

int blocks(std::size_t n) { return static_cast<int>(std::min<std::size_t>((n + 255) / 256, 8192)); }

template <class T>
void fill_device(T* p, std::size_t n, double scale, unsigned long long seed) {
  fill<T><<<blocks(n), 256>>>(p, n, scale, seed);
  check(cudaGetLastError(), "fill");
}

// Column-major C (m x n) = alpha A^T B + beta C, A k x m, B k x n: row-major y[R, out] (+)= x[R, in]
// W^T for a row-major W[out, in] (m = out, n = R, k = in).
cublasStatus_t gemm_tn(cublasHandle_t h, int m, int n, int k, double alpha, const double* A, const double* B, double beta, double* C) {
  return cublas().dgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &alpha, A, k, B, k, &beta, C, m);
}
cublasStatus_t gemm_tn(cublasHandle_t h, int m, int n, int k, double alpha, const float* A, const float* B, double beta, float* C) {
  const float a = static_cast<float>(alpha), b = static_cast<float>(beta);
  return cublas().sgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &a, A, k, B, k, &b, C, m);
}
// y[out] = W[out, in] x[in] for a row-major W: the column-major in x out matrix, transposed.
cublasStatus_t gemv(cublasHandle_t h, int out, int in, const double* W, const double* x, double* y) {
  const double one = 1, zero = 0;
  return cublas().dgemv(h, CUBLAS_OP_T, in, out, &one, W, in, x, 1, &zero, y, 1);
}
cublasStatus_t gemv(cublasHandle_t h, int out, int in, const float* W, const float* x, float* y) {
  const float one = 1, zero = 0;
  return cublas().sgemv(h, CUBLAS_OP_T, in, out, &one, W, in, x, 1, &zero, y, 1);
}

// Seconds per call of fn (best, median) over at least 5 timed calls and min_seconds, after a warm-up.
template <class F>
std::pair<double, double> time_gpu(double min_seconds, F&& fn) {
  cudaEvent_t a, b;
  check(cudaEventCreate(&a), "cudaEventCreate");
  check(cudaEventCreate(&b), "cudaEventCreate");
  fn();
  check(cudaDeviceSynchronize(), "warm-up");
  std::vector<double> t;
  const auto start = std::chrono::steady_clock::now();
  while (t.size() < 5 || (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < min_seconds && t.size() < 200)) {
    check(cudaEventRecord(a), "cudaEventRecord");
    fn();
    check(cudaEventRecord(b), "cudaEventRecord");
    check(cudaEventSynchronize(b), "a timed run");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime");
    t.push_back(ms * 1e-3);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(t.begin(), t.end());
  return {t.front(), t[t.size() / 2]};
}

template <class T>
void loop_rows(const GpuBenchOptions& o, std::vector<GpuLoopRow>& rows) {
  const char* prec = sizeof(T) == 4 ? "f32" : "f64";
  const int N = o.channels;
  Handle h;
  DeviceArray<T> W(static_cast<std::size_t>(N) * N);
  fill_device(W.p, static_cast<std::size_t>(N) * N, 1.0 / std::sqrt(static_cast<double>(N)), o.seed);
  for (int B : o.batches) {
    const std::size_t n = static_cast<std::size_t>(B) * N;
    DeviceArray<T> x(n), z(n), zn(n), f(n);
    fill_device(x.p, n, 1.3, o.seed + 1);
    T *a = z.p, *b = zn.p;
    const auto loop = [&] {
      check(cudaMemsetAsync(a, 0, n * sizeof(T)), "cudaMemsetAsync");
      for (int i = 0; i < o.iterations; ++i) {
        pre_step<T><<<blocks(n), 256>>>(a, x.p, f.p, b, n, T(0.5));
        check(gemm_tn(h.h, N, B, N, 1.0, W.p, f.p, 1.0, b), "gemm");
        std::swap(a, b);
      }
    };
    const auto [lb, lm] = time_gpu(o.min_seconds, loop);
    check(cudaGetLastError(), "pre_step");
    const auto matmul = [&] {  // the CPU bench's matmul-only loop: two chained products per iteration, from x
      const T* in = x.p;
      for (int i = 0; i < o.iterations; ++i) {
        check(gemm_tn(h.h, N, B, N, 1.0, W.p, in, 0.0, f.p), "gemm");
        check(gemm_tn(h.h, N, B, N, 1.0, W.p, f.p, 0.0, zn.p), "gemm");
        in = zn.p;
      }
    };
    const auto [mb, mm] = time_gpu(o.min_seconds, matmul);
    const double work = static_cast<double>(B) * o.iterations;
    rows.push_back({"loop", prec, B, work / lb, work / lm});
    rows.push_back({"matmul only", prec, B, work / mb, work / mm});
  }
}

template <class T>
void matrix_rows(const std::vector<GpuMatrix>& ms, const GpuBenchOptions& o, std::vector<GpuMatrixRow>& rows) {
  // Every matrix at its own place (256-byte aligned), so that a pass reads all the weights as a
  // token would, not one matrix out of the cache.
  std::vector<std::size_t> at;
  std::size_t total = 0, max_rows = 0, max_cols = 0;
  for (const GpuMatrix& m : ms) {
    at.push_back(total);
    total += (static_cast<std::size_t>(m.rows * m.cols) + 63) / 64 * 64;
    max_rows = std::max<std::size_t>(max_rows, m.rows), max_cols = std::max<std::size_t>(max_cols, m.cols);
  }
  const std::size_t max_batch = static_cast<std::size_t>(*std::max_element(o.token_batches.begin(), o.token_batches.end()));
  const std::size_t need = (total + (max_rows + max_cols) * max_batch) * sizeof(T);
  std::size_t free = 0, all = 0;
  check(cudaMemGetInfo(&free, &all), "cudaMemGetInfo");
  if (need > free / 10 * 9)
    throw Error("bench gpu: the model's matrices need " + std::to_string(need >> 20) + " MiB in " + (sizeof(T) == 4 ? "f32" : "f64") +
                ", the device has " + std::to_string(free >> 20) + " MiB free");
  Handle h;
  DeviceArray<T> w(total), x(max_cols * max_batch), y(max_rows * max_batch);
  fill_device(w.p, total, 0.02, o.seed);
  fill_device(x.p, max_cols * max_batch, 1.0, o.seed + 1);
  for (int B : o.token_batches) {
    GpuMatrixRow r{sizeof(T) == 4 ? "f32" : "f64", B};
    for (bool in_loop : {true, false}) {
      double weights = 0;
      for (const GpuMatrix& m : ms)
        if (m.in_loop == in_loop) weights += static_cast<double>(m.rows * m.cols);
      const auto pass = [&] {
        for (std::size_t k = 0; k < ms.size(); ++k) {
          const GpuMatrix& m = ms[k];
          if (m.in_loop != in_loop) continue;
          const int out = static_cast<int>(m.rows), in = static_cast<int>(m.cols);
          if (B == 1) check(gemv(h.h, out, in, w.p + at[k], x.p, y.p), "gemv");
          else check(gemm_tn(h.h, out, B, in, 1.0, w.p + at[k], x.p, 0.0, y.p), "gemm");
        }
      };
      const double t = weights > 0 ? time_gpu(o.min_seconds, pass).second : 0;
      (in_loop ? r.loop_s : r.other_s) = t;
      (in_loop ? r.loop_weights : r.other_weights) = weights;
    }
    rows.push_back(r);
  }
}

}  // namespace

std::vector<GpuLoopRow> gpu_loop_bench(const GpuBenchOptions& o) {
  std::vector<GpuLoopRow> rows;
  loop_rows<float>(o, rows);
  loop_rows<double>(o, rows);
  return rows;
}

std::vector<GpuMatrixRow> gpu_matrix_bench(const std::vector<GpuMatrix>& matrices, const GpuBenchOptions& o) {
  std::vector<GpuMatrixRow> rows;
  for (const GpuMatrix& m : matrices)
    if (m.rows <= 0 || m.cols <= 0 || m.rows > 1 << 30 || m.cols > 1 << 30) throw Error("bench gpu: a matrix of " + std::to_string(m.rows) + " x " + std::to_string(m.cols));
  if (matrices.empty() || o.token_batches.empty()) return rows;
  matrix_rows<float>(matrices, o, rows);
  matrix_rows<double>(matrices, o, rows);
  return rows;
}

}  // namespace aoc
