// What decides a run of the fixed-point loop, as `aoc run`, `aoc loop` and the Python module's
// aoc.solve take it: the machine and its overrides, the mode, the stop rule, precision, converters,
// noise, bandwidth, readout, annealing, seed, threads. One record, one way to turn it into the
// core's configuration and the run's options, one config hash: the CLI and Python agree bit for bit.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "runtime/run/loop_run.hpp"

namespace aoc {

struct LoopSettings {
  std::string hw = "aoc-48", mode = "default", rule = "twin", precision = "f32";
  std::vector<std::string> set;  // hardware overrides section.field=value
  int max_iter = 40, threads = 1;
  int first_sample = 0;  // the batch's first sample in the whole input (noise keys)
  double tol = 1e-3, damping = 1.0;
  std::optional<double> alpha;  // overrides the mode's and the input's alpha (mode ideal: 0.5 when not given)
  std::uint64_t seed = 1;
  std::optional<std::uint64_t> program_seed;  // the SLM's programming errors apart from the read noise; none: seed
  int zero_reads = kZeroReads;  // the auto-zero after each programming (TileNoise::zero_reads; 0: none)
  std::optional<double> after_programming_us;  // the run this long after the programming (TileNoise::after_programming_us)
  std::optional<double> zero_every_us;         // the auto-zero again this often (TileNoise::zero_every_us)
  bool quantize = false, noise = false, bandwidth = false, trace = false, hardware_readout = false;
  // with noise, under the twin and relative rules: a sample whose residual has stopped falling for
  // this many steps stops at its noise floor (SolverOptions::floor_patience; 0: off)
  int floor_patience = SolverOptions::kNoisyPatience;
  std::string anneal;  // "linear:START:END:ITERS" or "exp:START:END:ITERS"
};

// Coefficients that come with the input (an input file's root attributes, aoc.solve's arguments):
// they override the mode's; LoopSettings::alpha overrides alpha again.
struct LoopCoefficients {
  std::vector<double> alpha, beta;
  std::optional<double> gamma;
};

// after_programming_us: 0 to 1e15 and only with noise (it places the noise on the clock), else
// aoc::Error naming the field.
void check_after_programming(const std::optional<double>& us, bool noise);
// zero_every_us: above 0 and at most 1e15, with noise, after_programming_us (the zeros sit on the
// clock from the programming) and zero reads, else aoc::Error naming the field.
void check_zero_every(const std::optional<double>& us, const std::optional<double>& after_programming_us, int zero_reads, bool noise);
// floor_patience: at least 0 (0: off), else aoc::Error naming the field.
void check_floor_patience(int steps);

// A field's value among the allowed ones, else aoc::Error "FIELD: expected one of A, B, got 'V'".
void check_choice(const std::string& field, const std::string& v, std::initializer_list<const char*> allowed);

// Every field checked (names as the CLI's flags): unknown mode, rule or precision, a tolerance that
// is not positive, damping outside (0, 1], a non-finite alpha. Throws aoc::Error.
void check_settings(const LoopSettings& s);
Hardware load_machine(const LoopSettings& s);
// The mode's configuration, then the input's coefficients, then alpha and the anneal schedule.
CoreConfig loop_config(const LoopSettings& s, const Hardware& hw, const LoopCoefficients& given = {});
LoopRunOptions run_options(const LoopSettings& s);

// A digest over everything that decides the result: the settings in a canonical text, the hardware
// file's bytes and the input arrays' values as float64 (threads are left out: they change nothing).
template <class S>
std::string loop_config_hash(const LoopSettings& s, const Hardware& hw, const CoreConfig& cfg, const LoopView<S>& p);

extern template std::string loop_config_hash<float>(const LoopSettings&, const Hardware&, const CoreConfig&, const LoopView<float>&);
extern template std::string loop_config_hash<double>(const LoopSettings&, const Hardware&, const CoreConfig&, const LoopView<double>&);

}  // namespace aoc
