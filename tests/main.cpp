// The test runner: Catch2's, plus --needs-cuda. ctest runs the [cuda] tests with it
// (tests/CMakeLists.txt), and where the cuda backend cannot run (no CUDA build or no device) they
// exit 77, which ctest reports as skipped rather than passed or failed.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "runtime/backend/cuda_backend.hpp"

namespace {

// The tests write their scratch files under the system's temporary directory, each named
// aoc-...-<pid>[.json] (tests/*.cpp): removed when this process's run ends, whatever it left.
void remove_scratch() {
  namespace fs = std::filesystem;
  const std::string pid = "-" + std::to_string(::getpid());
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(fs::temp_directory_path(), ec)) {
    const std::string name = e.path().filename().string(), stem = e.path().stem().string();
    if (name.rfind("aoc-", 0) == 0 && (name.ends_with(pid) || stem.ends_with(pid))) fs::remove_all(e.path(), ec);
  }
}

}  // namespace

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
  const int rc = session.run();
  remove_scratch();
  return rc;
}
