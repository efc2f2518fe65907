#include "runtime/cli/program_flags.hpp"

namespace aoc::cli {

void add_program_flags(CLI::App* c, ProgramFlags& f, bool with_physics) {
  c->add_option("--inputs", f.inputs, "HDF5 file with one dataset per program input, by name (e.g. /tokens, int [B, L])")
      ->check(CLI::ExistingFile);
  c->add_option("--sequence", f.sequence,
                "simultaneous: each fixed-point step runs the whole sequence; sequential: token by token, "
                "each token's fixed point with the earlier tokens' states committed")
      ->check(CLI::IsMember({"simultaneous", "sequential"}))
      ->capture_default_str();
  c->add_flag("--optics", f.optics,
              "sim: every tile through the machine's calibrated optical chain (fan-in, SLM distortion, TIA gains, crosstalk)");
  if (!with_physics) return;
  c->add_flag("--quantize", f.quantize, "sim: the program's SLM codes and the DAC/ADC of every conversion");
  c->add_flag("--noise", f.noise, "sim: the hardware's noise (receiver noise, SLM fixed pattern)");
  c->add_option("--seed", f.seed, "noise seed")->capture_default_str();
  c->add_option("--threads", f.threads, "threads (results are identical for any count)")->check(CLI::PositiveNumber)->capture_default_str();
}

BackendOptions backend_options(const ProgramFlags& f) {
  BackendOptions o;
  o.threads = f.threads;
  o.seed = f.seed;
  o.noise = f.noise;
  o.quantize = f.quantize;
  o.optics = f.optics;
  o.mode = f.sequence == "sequential" ? ir::Mode::Sequential : ir::Mode::Simultaneous;
  return o;
}

Hardware program_hardware(const ir::Program& p) {
  return load_hardware(resolve_hardware_path(p.target.hardware_path), p.target.overrides);
}

}  // namespace aoc::cli
