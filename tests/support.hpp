// Shared by the tests: the bundled machines, loaded once.
#pragma once
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

}  // namespace aoc::test
