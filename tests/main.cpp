// The test runner: Catch2's, plus --needs-cuda. ctest runs the [cuda] tests with it
// (tests/CMakeLists.txt), and where the cuda backend cannot run (no CUDA build or no device) they
// exit 77, which ctest reports as skipped rather than passed or failed.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>

#include "runtime/cuda_backend.hpp"

int main(int argc, char* argv[]) {
  Catch::Session session;
  bool needs_cuda = false;
  session.cli(session.cli() | Catch::clara::Opt(needs_cuda)["--needs-cuda"]("exit 77 (skipped) when the cuda backend cannot run here"));
  if (const int rc = session.applyCommandLine(argc, argv)) return rc;
  if (needs_cuda) {
    if (const std::string why = aoc::cuda_unavailable(); !why.empty()) {
      std::printf("skipped: %s\n", why.c_str());
      return 77;
    }
  }
  return session.run();
}
