// The GPU reference (docs/cuda.md): the cpu backend's semantics (every optical op the exact product,
// every Convert the identity) with the products computed by cuBLAS on an NVIDIA GPU.
//
// Like the other backends it is the graph interpreter with an optical hook. Each optical op's
// [out, in] matrix is uploaded once per run and kept on the device; a call multiplies every row of
// its operand (batch and sequence, B x L, or B in sequential mode) in one GEMM. Only the products
// run on the GPU: the elementwise and digital ops (tanh, norms, the scan, attention, the fixed-point
// iteration and its stop rule) stay in the interpreter on the host, in double, and each product
// moves its operand and result over PCIe. It is a reference to check against, not a fast runtime.
//   cuda      the products in float64 (DGEMM); equal to cpu up to summation order
//   cuda-f32  the products in float32: operand and matrix rounded to float, float accumulation
//             (SGEMM, no TF32 or other reduced-precision shortcuts); the rest in double as above
// The plan's tiles do not change an exact product, so each matrix is one GEMM (the cpu backend sums
// the tiles, equal within rounding).
//
// Built with the CMake option AOC_CUDA (AUTO, ON, OFF). Without it, or without a device, the
// functions below say so in one line instead of failing later.
#pragma once
#include <memory>
#include <string>

#include "runtime/backend/backend.hpp"

namespace aoc {

// Whether this aoc was built with the CUDA backend.
bool cuda_built();

// Why the cuda backends cannot run here, in one line ("" when they can):
//   "aoc was built without CUDA (AOC_CUDA=OFF or no nvcc)"
//   "no CUDA device (cudaGetDeviceCount: <CUDA's reason>)"
std::string cuda_unavailable();

// The first device's name and memory, e.g. "NVIDIA H200, 139.8 GiB, CUDA 13.0, cuBLAS 130000"; ""
// when unavailable.
std::string cuda_device_description();

// The "cuda" (f32 = false) or "cuda-f32" backend; throws aoc::Error with cuda_unavailable() when it
// cannot run. make_backend("cuda" / "cuda-f32") calls this.
std::unique_ptr<Backend> make_cuda_backend(bool f32);

}  // namespace aoc
