#include "runtime/cli/loop_flags.hpp"

#include <cmath>
#include <cstdio>

#include "runtime/cli/commands.hpp"
#include "sim/error.hpp"

namespace aoc::cli {

namespace {

// NaN or inf in a loop coefficient would run a meaningless solve: refused where it is given.
const CLI::Validator kFinite(
    [](std::string& s) -> std::string {
      double v = 0;
      try {
        v = std::stod(s);
      } catch (...) {
        return "";  // not a number: CLI11's conversion says so
      }
      return std::isfinite(v) ? "" : "must be a finite number, got " + s;
    },
    "FINITE");

}  // namespace

void add_machine_flags(CLI::App* c, LoopSettings& f, const char* seed_help) {
  c->add_option("--hw", f.hw, "hardware file or bundled machine (aoc-48, aoc-16, aoc-scale)")->capture_default_str();
  c->add_option("--set", f.set, "override a hardware value, e.g. --set noise.thermal_sigma=0.002 (repeatable)");
  c->add_option("--mode", f.mode, "default: the twin's switches; all-off: every non-ideality off; ideal: tanh loop")
      ->check(CLI::IsMember({"default", "all-off", "ideal"}))->capture_default_str();
  c->add_option("--precision", f.precision, "f32 or f64")->check(CLI::IsMember({"f32", "f64"}))->capture_default_str();
  c->add_flag("--quantize", f.quantize, "SLM weight codes, input DAC, and the readout chain: the saturation curve, then the ADC (the hardware's converters section)");
  c->add_flag("--noise", f.noise, "add the hardware's noise sources (its noise section)");
  c->add_flag("--bandwidth", f.bandwidth, "finite loop bandwidth from the hardware's timing section");
  c->add_option("--seed", f.seed, seed_help)->check(seed_value())->capture_default_str();
  add_program_seed_flag(c, f.program_seed);
  add_zero_reads_flag(c, f.zero_reads);
  add_clock_flags(c, f.after_programming_us, f.zero_every_us);
  c->add_option("--threads", f.threads, "threads (results are identical for any count)")->check(positive())->capture_default_str();
}

void add_loop_flags(CLI::App* c, LoopSettings& f, const char* seed_help) {
  add_machine_flags(c, f, seed_help);
  c->add_option_function<double>("--alpha", [&f](double v) { f.alpha = v; }, "leak / feedback coefficient (default: the mode's; ideal: 0.5)")
      ->check(kFinite);
  c->add_option("--rule", f.rule, "stop rule: twin (batch max residual), relative (per sample, damped), fixed")
      ->check(CLI::IsMember({"twin", "relative", "fixed"}))->capture_default_str();
  c->add_option("--max-iter", f.max_iter, "iteration limit (the count, for --rule fixed)")->check(positive())->capture_default_str();
  c->add_option("--tol", f.tol, "residual tolerance")->check(positive() & kFinite)->capture_default_str();
  c->add_option("--damping", f.damping, "relative rule: z <- (1-d) z + d f(z)")->check(between(1e-6, 1.0))->capture_default_str();
  add_floor_patience_flag(c, f.floor_patience, "with --noise (twin and relative rules)");
  c->add_flag("--hardware-readout", f.hardware_readout,
              "read out on the machine's clock: settle time, then the mean of the ADC's sample window (timing section)");
  c->add_option("--anneal", f.anneal, "alpha schedule replacing --alpha: linear:START:END:ITERS or exp:START:END:ITERS");
  c->add_flag("--trace", f.trace, "keep every sample's residual at every step");
  c->add_option("--first-sample", f.first_sample,
                "the index of this batch's first sample in the whole input, when one input is split over several runs: each sample's "
                "noise is keyed by its index there, so the parts give what one run of the whole does (with a per-sample stop rule)")
      ->check(CLI::Range(0, (1 << 30)))
      ->capture_default_str();
}

}  // namespace aoc::cli
