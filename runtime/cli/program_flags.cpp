#include "runtime/cli/program_flags.hpp"

#include "runtime/cli/commands.hpp"
#include "sim/error.hpp"

namespace aoc::cli {

void add_program_flags(CLI::App* c, ProgramFlags& f, bool with_shared) {
  c->add_option("--inputs", f.inputs, "HDF5 file with one dataset per program input, by name (e.g. /tokens, int [B, L])")
      ->check(CLI::ExistingFile);
  c->add_option("--sequence", f.sequence,
                "simultaneous: each fixed-point step runs the whole sequence; sequential: token by token, "
                "each token's fixed point with the earlier tokens' states committed")
      ->check(CLI::IsMember({"simultaneous", "sequential"}))
      ->capture_default_str();
  add_write_verify_flags(c, f.write_verify, f.verify_rounds,
                         "sim, with noise: after programming, read each SLM pixel back and write it again while its transmission "
                         "is off by more than this fraction (its fixed pattern, noise.slm_fixed_pattern_sigma, drawn anew at each "
                         "write), at most --verify-rounds times; the reads are taken to resolve it (0, the default: no verify). "
                         "The run counts the pixels written again");
  c->add_flag("--ideal-optics", f.ideal_optics,
              "sim: ideal optics, each tile's product exact. Default: the machine as measured, every tile through its "
              "calibrated optical chain (fan-in profile, SLM distortion and darkness, TIA gains, crosstalk)");
  c->add_option("--light-map", f.light_map,
                 "sim: how each tile keeps its light map (the SLM's transmissions through the optics): f16 in half "
                 "precision, 11 significant bits (the SLM's codes have 8, its fixed pattern is 1 %), summed in float, half "
                 "the bytes a read streams (needs --precision f32); f32 in the products' precision; auto (default) f16 for "
                 "tiles whose map in float exceeds 1 MiB (modules of about 360 channels and more, whose reads stream it "
                 "from memory), f32 below. Runs record what was used beside the precision")
      ->check(CLI::IsMember({"auto", "f32", "f16"}))
      ->capture_default_str();
  c->add_flag("--quiet", f.quiet,
              "no progress meter (default: on stderr for runs over about 1 s, with the rate and the time left; "
              "a line redrawn on a terminal, a line every 10 s in a log)");
  if (!with_shared) return;
  // aoc check checks the machine: its converters and noise are on unless switched off
  f.quantize = f.noise = true;
  c->add_flag("--quantize,!--no-quantize", f.quantize,
              "sim: the program's SLM codes and the DAC/ADC of every conversion (default: on; --no-quantize: exact weights and conversions)");
  c->add_flag("--noise,!--no-noise", f.noise, "sim: the machine's noise, every source its noise section gives (default: on; --no-noise: none)");
  c->add_option("--set", f.set,
                std::string("sim: change the machine at run time, on top of the program's compile-time overrides, e.g. "
                            "--set noise.thermal_sigma=0.005 (repeatable): ") + kRunTimeSet +
                    "; the rest is compiled into the program (aoc compile --set)");
  c->add_option("--precision", f.precision, "sim: the tiles' products in f32 (as the machine's loop core) or f64")
      ->check(CLI::IsMember({"f32", "f64"}))
      ->capture_default_str();
  c->add_option("--seed", f.seed, "sim: noise seed (the same seed gives the same run for any --threads)")->check(seed_value())->capture_default_str();
  add_program_seed_flag(c, f.program_seed);
  add_zero_reads_flag(c, f.zero_reads);
  add_clock_flags(c, f.after_programming_us, f.zero_every_us);
  add_floor_patience_flag(c, f.floor_patience, "sim, with noise: each fixed point");
  c->add_option("--threads", f.threads, "threads (results are identical for any count)")->check(positive())->capture_default_str();
}

void refuse_given(const CLI::App* c, const std::string& cmd, const std::vector<std::string>& names, const std::string& why) {
  for (const auto& n : names)
    if (c->get_option(n)->count()) throw Error(cmd + ": " + n + " " + why);
}

const char* progress_unit(const ProgramFlags& f) { return f.sequence == "sequential" ? "tokens" : "steps"; }

}  // namespace aoc::cli
