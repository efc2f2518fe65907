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

#include "compiler/program.hpp"
#include "runtime/backend.hpp"
#include "sim/hardware.hpp"

namespace aoc::cli {

struct ProgramFlags {
  std::string inputs, sequence = "simultaneous", precision = "f32", light_map = "auto";
  std::vector<std::string> set;  // run-time hardware overrides (noise.*, timing.*, converter bits)
  bool quantize = false, noise = false, ideal_optics = false, trace = false, quiet = false;
  std::uint64_t seed = 1;
  int threads = 1;
};

// Adds --inputs, --sequence, --ideal-optics, --light-map, --quiet; `with_shared` also --quantize, --noise,
// --set, --precision, --seed, --threads (aoc run has its own of those, shared with the loop).
void add_program_flags(CLI::App* c, ProgramFlags& f, bool with_shared);

BackendOptions backend_options(const ProgramFlags& f);

// What --set may change at run time, for the help texts.
extern const char* const kRunTimeSet;

// The machine a program was compiled for: its recorded file (or bundled name) with its compile-time
// overrides, then `run_set` on top. A run-time override of anything compiled into the program
// (SLM bits, converter ranges, architecture, channels, calibration) is an aoc::Error naming it and
// saying how to recompile ("run: --set converters.slm_bits=4: compiled into the program ...").
Hardware program_hardware(const ir::Program& p, const std::vector<std::string>& run_set = {}, const std::string& cmd = "run");

// Options that do not apply to what was asked are errors, never ignored: the first of `names`
// given on the command line is an aoc::Error "CMD: NAME WHY".
void refuse_given(const CLI::App* c, const std::string& cmd, const std::vector<std::string>& names, const std::string& why);

// What the progress meter counts in a program run: tokens (sequential), or the steps of the fixed
// point running (simultaneous; its max_iter bounds them).
const char* progress_unit(const ProgramFlags& f);
inline bool progress_bound(const ProgramFlags& f) { return f.sequence != "sequential"; }

}  // namespace aoc::cli
