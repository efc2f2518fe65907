// cuBLAS, loaded on first use rather than linked. A binary linked to libcublas loads and relocates
// its ~600 MB of libraries at every start (0.3 s to over 1 s and 200 MB of memory on the
// development machine), also for the commands that never touch a GPU; aoc starts often (scripts,
// the tests), so only the cuda backends and `aoc bench` pay for it. The functions aoc calls, and
// nothing else. Included by runtime/backend/cuda_backend.cpp and bench/gpu_bench.cu (CUDA builds only).
#pragma once
#include <cublas_v2.h>
#include <dlfcn.h>

#include <string>
#include <type_traits>

#include "sim/error.hpp"

namespace aoc::cuda {

// The exported name behind one of cublas_v2.h's macros (cublasCreate is cublasCreate_v2).
#define AOC_CUBLAS_NAME2(f) #f
#define AOC_CUBLAS_NAME(f) AOC_CUBLAS_NAME2(f)

struct Cublas {
  decltype(&cublasCreate) create = nullptr;
  decltype(&cublasDestroy) destroy = nullptr;
  decltype(&cublasSetMathMode) set_math_mode = nullptr;
  decltype(&cublasGetStatusString) status_string = nullptr;
  decltype(&cublasGetProperty) property = nullptr;
  decltype(&cublasDgemm) dgemm = nullptr;
  decltype(&cublasSgemm) sgemm = nullptr;
  decltype(&cublasDgemv) dgemv = nullptr;
  decltype(&cublasSgemv) sgemv = nullptr;
};

// libcublas.so.<major> from the loader's search path, else from the toolkit the build used
// (AOC_CUDA_LIBRARY_DIR); throws aoc::Error saying what is missing (and tries again next time).
inline const Cublas& cublas() {
  static const Cublas lib = [] {
    const std::string so = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
    void* h = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
#ifdef AOC_CUDA_LIBRARY_DIR
    if (!h) h = dlopen((std::string(AOC_CUDA_LIBRARY_DIR) + "/" + so).c_str(), RTLD_NOW | RTLD_LOCAL);
#endif
    if (!h) throw Error("cannot load " + so + " (cuBLAS): " + dlerror());
    Cublas c;
    const auto get = [&](auto& f, const char* name) {
      f = reinterpret_cast<std::remove_reference_t<decltype(f)>>(dlsym(h, name));
      if (!f) throw Error(so + ": no function " + name);
    };
    get(c.create, AOC_CUBLAS_NAME(cublasCreate));
    get(c.destroy, AOC_CUBLAS_NAME(cublasDestroy));
    get(c.set_math_mode, "cublasSetMathMode");
    get(c.status_string, "cublasGetStatusString");
    get(c.property, "cublasGetProperty");
    get(c.dgemm, AOC_CUBLAS_NAME(cublasDgemm));
    get(c.sgemm, AOC_CUBLAS_NAME(cublasSgemm));
    get(c.dgemv, AOC_CUBLAS_NAME(cublasDgemv));
    get(c.sgemv, AOC_CUBLAS_NAME(cublasSgemv));
    return c;
  }();
  return lib;
}

// A failed CUDA or cuBLAS call as one aoc::Error line: "<who>: <what>: <the library's reason>".
inline void check(cudaError_t e, const char* who, const char* what) {
  if (e != cudaSuccess) throw Error(std::string(who) + ": " + what + ": " + cudaGetErrorString(e));
}
inline void check(cublasStatus_t st, const char* who, const char* what) {
  if (st != CUBLAS_STATUS_SUCCESS) throw Error(std::string(who) + ": " + what + ": " + cublas().status_string(st));
}

}  // namespace aoc::cuda
