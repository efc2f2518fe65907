// The options of the commands that run compiled programs (`aoc run PROG`, `aoc check PROG`): the
// inputs, the sequence mode, the simulator's converters, noise and optics, run-time hardware
// overrides, precision, seed, threads and the progress meter. One definition, one set of help texts.
#pragma once
#include <CLI/CLI.hpp>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/run/program_settings.hpp"

namespace aoc::cli {

// The settings (runtime/run/program_settings.hpp), the inputs file and the meter as flags.
struct ProgramFlags : ProgramSettings {
  std::string inputs;
  bool quiet = false;
};

// Adds --inputs, --sequence, --ideal-optics, --light-map, --quiet; `with_shared` (aoc check) also --quantize and
// --noise, on by default (a check checks the machine; --no-quantize, --no-noise),
// --set, --precision, --seed, --program-seed, --zero-reads, --threads (aoc run has its own of those, shared with the loop).
void add_program_flags(CLI::App* c, ProgramFlags& f, bool with_shared);

// Options that do not apply to what was asked are errors, never ignored: the first of `names`
// given on the command line is an aoc::Error "CMD: NAME WHY".
void refuse_given(const CLI::App* c, const std::string& cmd, const std::vector<std::string>& names, const std::string& why);

// What the progress meter counts in a program run: tokens (sequential), or the steps of the fixed
// point running (simultaneous; its max_iter bounds them).
const char* progress_unit(const ProgramFlags& f);
inline bool progress_bound(const ProgramFlags& f) { return f.sequence != "sequential"; }

}  // namespace aoc::cli
