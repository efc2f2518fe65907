// The options `aoc loop` and `aoc run` share: which machine and overrides, mode, stop rule,
// precision, converters, noise, bandwidth, seed, threads. One definition, one set of help texts.
#pragma once
#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/run/loop_settings.hpp"
#include "runtime/io/output.hpp"

namespace aoc::cli {

// The settings (runtime/run/loop_settings.hpp) as flags; --alpha sets LoopSettings::alpha when given.
void add_loop_flags(CLI::App* c, LoopSettings& f, const char* seed_help);
// The part that says which machine runs and how (machine, overrides, mode, precision, converters,
// noise, bandwidth, seed, threads), for commands that run their own loop (aoc optimize).
void add_machine_flags(CLI::App* c, LoopSettings& f, const char* seed_help);

}  // namespace aoc::cli
