// What decides a run of a compiled program, as `aoc run PROG`, `aoc check` and the Python module's
// Program.run take it: the sequence mode, the simulator's converters, noise and optics, run-time
// hardware overrides, precision, seed, threads. One record, one way to the backend's options and
// to the machine the program runs on.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "compiler/program.hpp"
#include "runtime/backend/backend.hpp"
#include "sim/hardware.hpp"

namespace aoc {

struct ProgramSettings {
  std::string sequence = "simultaneous", precision = "f32", light_map = "auto";
  std::vector<std::string> set;  // run-time hardware overrides (noise.*, timing.*, converter bits)
  bool quantize = false, noise = false, ideal_optics = false, trace = false;
  std::uint64_t seed = 1;
  std::optional<std::uint64_t> program_seed;  // the SLM's programming errors apart from the read noise; none: seed
  double write_verify = 0;  // write-verify each SLM pixel to this relative error after programming (0: none)
  int verify_rounds = 8;
  int zero_reads = kZeroReads;  // auto-zero reads after each programming (TileNoise::zero_reads; 0: none)
  std::optional<double> after_programming_us;  // the run this long after the programming (TileNoise::after_programming_us)
  std::optional<double> zero_every_us;         // the auto-zero again this often (TileNoise::zero_every_us)
  // with noise, a fixed point whose residual has stopped falling for this many steps ends at its
  // noise floor with the mean of those iterates (BackendOptions::floor_patience; 0: off)
  int floor_patience = SolverOptions::kNoisyPatience;
  int threads = 1;
};

// Unknown sequence, precision or light map, threads below 1: an aoc::Error naming the field.
void check_settings(const ProgramSettings& s);
BackendOptions backend_options(const ProgramSettings& f);

// What a run-time override may change, for the help texts.
extern const char* const kRunTimeSet;

// The machine a program was compiled for: its recorded file (or bundled name) with its compile-time
// overrides, then `run_set` on top. A run-time override of anything compiled into the program
// (SLM bits, converter ranges, architecture, channels, calibration) is an aoc::Error naming it and
// saying how to recompile ("run: --set converters.slm_bits=4: compiled into the program ...").
Hardware program_hardware(const ir::Program& p, const std::vector<std::string>& run_set = {}, const std::string& cmd = "run");

}  // namespace aoc
