// Shared by the tests: the bundled machines, loaded once.
#pragma once
#include <catch2/catch.hpp>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

#include "sim/hardware.hpp"

namespace aoc::test {

inline const Hardware& hw48() {
  static const Hardware hw = load_hardware(resolve_hardware_path("aoc-48"));
  return hw;
}
inline const Hardware& hw16() {
  static const Hardware hw = load_hardware(resolve_hardware_path("aoc-16"));
  return hw;
}
inline const Hardware& machine(int n_variables) { return n_variables == 16 ? hw16() : hw48(); }

// The aoc executable run as a user would: exit status and everything it printed.
struct Run {
  int status;
  std::string out;
};

// A shell command line (give it 2>&1 for stderr too): what it printed and its exit status (-1
// where a signal ended it).
inline Run run_shell(const std::string& cmd) {
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  const int st = pclose(p);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

inline Run run_aoc(const std::string& args) { return run_shell(std::string(AOC_BINARY) + " " + args + " 2>&1"); }

}  // namespace aoc::test
