// The loop of `aoc run` from a program of one's own, through find_package(aoc).
#include <cstdio>

#include "runtime/run/loop_settings.hpp"
#include "runtime/io/output.hpp"
#include "runtime/run/loop_problem.hpp"

int main() {
  aoc::LoopSettings s;
  s.hw = "aoc-16";
  s.noise = s.quantize = true;
  const aoc::Hardware hw = aoc::load_machine(s);
  const aoc::LoopProblem p = aoc::random_problem(hw.channels, 4, 1);
  const aoc::LoopRunResult r = aoc::run_loop(hw, aoc::loop_config(s, hw), p, aoc::run_options(s));
  std::printf("%s: %ld samples, fixed points %s\n", hw.name.c_str(), static_cast<long>(r.solve.z.rows()),
              aoc::digest_hex(r.solve.z.data(), sizeof(double) * r.solve.z.size()).c_str());
  return 0;
}
