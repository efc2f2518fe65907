// The options `aoc loop` and `aoc run` share: which machine and overrides, mode, stop rule,
// precision, converters, noise, bandwidth, seed, threads. One definition, one set of help texts.
#pragma once
#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/loop_run.hpp"
#include "runtime/output.hpp"

namespace aoc::cli {

struct LoopFlags {
  std::string hw = "aoc-48", mode = "default", rule = "twin", precision = "f32";
  std::vector<std::string> set;  // hardware overrides section.field=value
  int max_iter = 40, threads = 1;
  int first_sample = 0;  // the batch's first sample in the whole input (noise keys; aoc loop: also its inputs)
  double tol = 1e-3, damping = 1.0, alpha = 0.5;
  std::uint64_t seed = 1;
  bool quantize = false, noise = false, bandwidth = false, trace = false, hardware_readout = false;
  std::string anneal;  // "linear:START:END:ITERS" or "exp:START:END:ITERS"
  const CLI::Option* alpha_opt = nullptr;
};

void add_loop_flags(CLI::App* c, LoopFlags& f, const char* seed_help);
Hardware load_machine(const LoopFlags& f);
CoreConfig mode_config(const LoopFlags& f, const Hardware& hw);  // the mode, then --alpha if given
LoopRunOptions run_options(const LoopFlags& f);

}  // namespace aoc::cli
