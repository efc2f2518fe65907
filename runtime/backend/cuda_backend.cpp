// The cuda and cuda-f32 backends (runtime/backend/cuda_backend.hpp): host C++ on the CUDA runtime and
// cuBLAS; built only with AOC_CUDA (runtime/backend/backend.cpp has the stand-ins of a build without it).
#include "runtime/backend/cuda_backend.hpp"

#include <cuda_runtime_api.h>

#include <climits>
#include <cstdio>
#include <map>
#include <utility>
#include <vector>

#include "runtime/backend/cublas_loader.hpp"
#include "sim/error.hpp"

namespace aoc {

namespace {

using cuda::cublas;
using ir::Tensor;

void check(cudaError_t e, const char* what) { cuda::check(e, "backend cuda", what); }
void check(cublasStatus_t s, const char* what) { cuda::check(s, "backend cuda", what); }

// Device memory for n elements of T, freed with its owner; grows, never shrinks.
template <class T>
class DeviceArray {
 public:
  DeviceArray() = default;
  DeviceArray(DeviceArray&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  ~DeviceArray() {
    if (p_) cudaFree(p_);
  }
  T* reserve(std::size_t n) {  // room for n elements; the contents are lost when it grows
    if (n <= n_) return p_;
    if (p_) cudaFree(p_);
    p_ = nullptr, n_ = 0;
    check(cudaMalloc(reinterpret_cast<void**>(&p_), n * sizeof(T)), "cudaMalloc");
    n_ = n;
    return p_;
  }
  T* get() const { return p_; }

 private:
  T* p_ = nullptr;
  std::size_t n_ = 0;
};

// Column-major C (m x n) = A^T B with A k x m and B k x n: a row-major [R, in] operand times the
// transpose of a row-major [out, in] matrix is exactly this with m = out, n = R, k = in.
cublasStatus_t gemm_tn(cublasHandle_t h, int m, int n, int k, const double* A, const double* B, double* C) {
  const double one = 1, zero = 0;
  return cublas().dgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &one, A, k, B, k, &zero, C, m);
}
cublasStatus_t gemm_tn(cublasHandle_t h, int m, int n, int k, const float* A, const float* B, float* C) {
  const float one = 1, zero = 0;
  return cublas().sgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &one, A, k, B, k, &zero, C, m);
}

int as_int(std::int64_t v, const std::string& op) {
  if (v > INT_MAX) throw Error("backend cuda: op '" + op + "': a dimension of " + std::to_string(v) + " is beyond cuBLAS's int");
  return static_cast<int>(v);
}

// The products in T on the device; everything else is the interpreter's, on the host. The
// interpreter calls hooks from one thread, one op at a time, so the scratch buffers are shared.
template <class T>
class CudaHooks : public ir::Hooks {
 public:
  explicit CudaHooks(const ir::Program& p) : p_(p) {
    check(cublas().create(&handle_), "cublasCreate");
    // A reference: no TF32 or other reduced-precision math, whatever the environment asks for.
    check(cublas().set_math_mode(handle_, CUBLAS_PEDANTIC_MATH), "cublasSetMathMode");
  }
  ~CudaHooks() override { cublas().destroy(handle_); }
  CudaHooks(const CudaHooks&) = delete;
  CudaHooks& operator=(const CudaHooks&) = delete;

  Tensor optical(const ir::Op& op, const Tensor& x, const Tensor& w, const ir::OpContext&) const override {
    const ir::OpticalPlan* plan = p_.plan(op.name);
    if (!plan) throw Error("run: optical op '" + op.name + "' has no plan");
    if (x.shape.empty() || x.shape.back() != plan->cols)
      throw Error("run: op '" + plan->op + "': input has last dim " + (x.shape.empty() ? std::string("none") : std::to_string(x.shape.back())) +
                  ", the matrix has " + std::to_string(plan->cols) + " columns");
    Tensor y;
    y.shape = x.shape;
    y.shape.back() = plan->rows;
    const std::int64_t R = plan->cols == 0 ? 0 : static_cast<std::int64_t>(x.data.size()) / plan->cols;
    y.data.assign(static_cast<std::size_t>(R * plan->rows), 0.0);
    if (R == 0 || plan->rows == 0 || plan->cols == 0) return y;
    const T* W = matrix(*plan, w);
    host_.assign(x.data.begin(), x.data.end());  // rounds to float in cuda-f32
    T* dx = x_.reserve(host_.size());
    T* dy = y_.reserve(y.data.size());
    check(cudaMemcpy(dx, host_.data(), host_.size() * sizeof(T), cudaMemcpyHostToDevice), "copy to the device");
    check(gemm_tn(handle_, as_int(plan->rows, op.name), as_int(R, op.name), as_int(plan->cols, op.name), W, dx, dy), "gemm");
    host_.resize(y.data.size());
    check(cudaMemcpy(host_.data(), dy, host_.size() * sizeof(T), cudaMemcpyDeviceToHost), "copy from the device");
    std::copy(host_.begin(), host_.end(), y.data.begin());
    return y;
  }

  Tensor convert(const ir::Op&, const Tensor& x, const ir::OpContext&) const override { return x; }

 private:
  const ir::Program& p_;
  cublasHandle_t handle_ = nullptr;
  mutable std::map<std::string, DeviceArray<T>> matrices_;  // by op: uploaded on first use, kept for the run
  mutable DeviceArray<T> x_, y_;
  mutable std::vector<T> host_;

  // The op's [out, in] matrix (row-major, whatever the weight's stored layout) on the device.
  const T* matrix(const ir::OpticalPlan& plan, const Tensor& w) const {
    if (auto it = matrices_.find(plan.op); it != matrices_.end()) return it->second.get();
    std::vector<T> m(static_cast<std::size_t>(plan.rows * plan.cols));
    for (std::int64_t r = 0; r < plan.rows; ++r)
      for (std::int64_t c = 0; c < plan.cols; ++c) m[static_cast<std::size_t>(r * plan.cols + c)] = static_cast<T>(plan.weight_at(w, r, c));
    DeviceArray<T> d;
    check(cudaMemcpy(d.reserve(m.size()), m.data(), m.size() * sizeof(T), cudaMemcpyHostToDevice), "copy a matrix to the device");
    return matrices_.emplace(plan.op, std::move(d)).first->second.get();
  }
};

template <class T>
class CudaBackend : public Backend {
 public:
  std::string name() const override { return sizeof(T) == 4 ? "cuda-f32" : "cuda"; }
  ProgramResult run(const ir::Program& p, const std::map<std::string, Tensor>& inputs, const BackendOptions& o) const override {
    const CudaHooks<T> hooks(p);
    return run_with_hooks(p, inputs, o, hooks);
  }
};

}  // namespace

bool cuda_built() { return true; }

std::string cuda_unavailable() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) return std::string("no CUDA device (cudaGetDeviceCount: ") + cudaGetErrorString(e) + ")";
  if (n == 0) return "no CUDA device";
  try {
    cublas();
  } catch (const Error& err) {
    return err.what();
  }
  return "";
}

std::string cuda_device_description() {
  cudaDeviceProp prop{};
  int runtime = 0, major = 0, minor = 0, patch = 0;
  if (!cuda_unavailable().empty() || cudaGetDeviceProperties(&prop, 0) != cudaSuccess) return "";
  cudaRuntimeGetVersion(&runtime);
  cublas().property(MAJOR_VERSION, &major);
  cublas().property(MINOR_VERSION, &minor);
  cublas().property(PATCH_LEVEL, &patch);
  char s[768];  // the name is at most 256
  std::snprintf(s, sizeof s, "%s, %.1f GiB, CUDA runtime %d.%d, cuBLAS %d.%d.%d", prop.name,
                static_cast<double>(prop.totalGlobalMem) / (1024.0 * 1024 * 1024), runtime / 1000, runtime % 1000 / 10, major, minor, patch);
  return s;
}

std::unique_ptr<Backend> make_cuda_backend(bool f32) {
  if (const std::string why = cuda_unavailable(); !why.empty()) throw Error("backend " + std::string(f32 ? "cuda-f32" : "cuda") + ": " + why);
  if (f32) return std::make_unique<CudaBackend<float>>();
  return std::make_unique<CudaBackend<double>>();
}

}  // namespace aoc
