// The options of the commands that run compiled programs (`aoc run PROG`, `aoc check PROG`): the
// inputs, the sequence mode, the simulator's converters and noise, seed and threads. One definition,
// one set of help texts.
#pragma once
#include <CLI/CLI.hpp>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "compiler/program.hpp"
#include "runtime/backend.hpp"
#include "sim/hardware.hpp"

namespace aoc::cli {

struct ProgramFlags {
  std::string inputs, sequence = "simultaneous";
  bool quantize = false, noise = false, optics = false;
  std::uint64_t seed = 1;
  int threads = 1;
};

// Adds --inputs, --sequence; `with_physics` also --quantize, --noise, --seed, --threads (aoc run has
// its own of those four, shared with the loop).
void add_program_flags(CLI::App* c, ProgramFlags& f, bool with_physics);

BackendOptions backend_options(const ProgramFlags& f);

// The machine a program was compiled for: its recorded file (or bundled name) with its overrides.
Hardware program_hardware(const ir::Program& p);

}  // namespace aoc::cli
