#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "runtime/cli/commands.hpp"
#include "runtime/loop_run.hpp"
#include "runtime/problem.hpp"
#include "sim/energy.hpp"
#include "sim/error.hpp"
#include "sim/hardware.hpp"

namespace aoc::cli {

namespace {

struct Opts {
  std::string hw = "aoc-48", json_out;
  int n = 0, threads = 1;
  long long fixed_points = 64;
  double iterations = -1, photons = 0;
  std::uint64_t seed = 1;
  bool json = false;
  std::vector<std::string> set;
};

constexpr int kMeasureBatch = 64;

// "1.23 us", "306 ns", "0 J": three significant digits with an SI prefix.
std::string si(double v, const char* unit) {
  static const char* const prefix[] = {"a", "f", "p", "n", "u", "m", "", "k", "M", "G", "T", "P"};
  char buf[64];
  if (v == 0 || !std::isfinite(v)) {
    std::snprintf(buf, sizeof buf, "%g %s", v, unit);
    return buf;
  }
  int e = static_cast<int>(std::floor(std::log10(std::fabs(v)) / 3));
  e = std::clamp(e, -6, 5);
  std::snprintf(buf, sizeof buf, "%.3g %s%s", v / std::pow(10.0, 3 * e), prefix[e + 6], unit);
  return buf;
}

struct Measured {
  double mean = 0;
  int min = 0, max = 0, converged = 0;
};

// Mean iterations of the twin's stop rule on a seeded random problem of this size.
Measured measure(const Hardware& hw, int n, const Opts& o) {
  LoopRunOptions lo;
  lo.f64 = false;
  lo.solver = SolverOptions::twin();
  lo.threads = o.threads;
  // photon-budget mode: the same photon count sets the shot noise of the run that measures K
  lo.noise = o.photons > 0 && hw.noise.has_value();
  lo.seed = o.seed;
  const LoopRunResult r = run_loop(hw, CoreConfig::twin_defaults(hw), random_problem(n, kMeasureBatch, o.seed), lo);
  Measured m;
  for (int i : r.solve.iterations) m.mean += i / static_cast<double>(r.solve.iterations.size());
  const auto [lo_it, hi_it] = std::minmax_element(r.solve.iterations.begin(), r.solve.iterations.end());
  m.min = *lo_it, m.max = *hi_it;
  m.converged = static_cast<int>(std::count(r.solve.converged.begin(), r.solve.converged.end(), 1));
  return m;
}

nlohmann::ordered_json band(const Band& b) { return {{"min", b.min}, {"typ", b.typ}, {"max", b.max}}; }

int run(const Opts& o) {
  Hardware hw = load_hardware(resolve_hardware_path(o.hw), o.set);
  // Photon-budget mode: one number sets the precision, the shot noise of the run that measures K
  // (the other noise sources off) and the LEDs' energy.
  if (o.photons > 0 && hw.noise) {
    NoiseSpec shot_only;
    shot_only.led_bias = hw.noise->led_bias;
    shot_only.drift_time_us = hw.noise->drift_time_us;
    shot_only.photons_per_sample = o.photons;
    hw.noise = shot_only;
  }
  const int n = o.n > 0 ? o.n : hw.channels;
  if (n > hw.channels) throw Error("--n: " + std::to_string(n) + " is more than the " + std::to_string(hw.channels) + " channels of " + hw.name);
  const bool measured = o.iterations < 0;
  Measured m;
  if (measured) m = measure(hw, n, o);
  const double K = measured ? m.mean : o.iterations;
  Workload w = inference_workload(hw, n, o.fixed_points, K);
  if (o.photons > 0) w.photons_per_sample = o.photons;
  const EnergyReport r = estimate(hw, w);
  const double F = static_cast<double>(o.fixed_points);
  const std::string how = measured ? "measured: twin stop rule on a seeded random problem, batch " + std::to_string(kMeasureBatch) +
                                         ", seed " + std::to_string(o.seed) + ", f32; " + std::to_string(m.converged) +
                                         " of " + std::to_string(kMeasureBatch) + " converged, min " + std::to_string(m.min) +
                                         ", max " + std::to_string(m.max)
                                   : "given (--iterations)";

  if (o.json) {
    nlohmann::ordered_json j{{"tool", "aoc estimate"}, {"version", AOC_VERSION}, {"hardware", hw.name}, {"n", n},
                             {"fixed_points", w.fixed_points}, {"iterations_per_fixed_point", K}, {"iterations_from", how}};
    j["workload"] = {{"weight_writes", w.weight_writes}, {"weight_reloads", w.weight_reloads},
                     {"dac_conversions", w.dac_conversions}, {"adc_conversions", w.adc_conversions},
                     {"digital_macs", w.digital_macs}};
    j["photon_budget"] = r.photon_budget;
    if (r.photon_budget) j["led_pj_per_channel_iteration"] = r.led_pj_photon;
    for (const auto& l : r.latency)
      j["latency"].push_back({{"name", l.name}, {"seconds", l.seconds}, {"per_fixed_point_s", l.seconds / F},
                              {"formula", l.formula}, {"source", l.source}});
    j["latency_total_s"] = r.total_seconds;
    j["latency_per_fixed_point_s"] = r.total_seconds / F;
    for (const auto& l : r.energy)
      j["energy"].push_back({{"name", l.name}, {"action", l.action}, {"count", l.count}, {"per_action_typ", l.per_action},
                             {"unit", l.action == "second" ? "W" : "pJ"}, {"joules", band(l.joules)}, {"source", l.source}});
    j["energy_total_j"] = band(r.total_joules);
    j["energy_per_fixed_point_j"] = band({r.total_joules.min / F, r.total_joules.typ / F, r.total_joules.max / F});
    j["analog_macs"] = r.analog_macs;
    j["ops"] = r.ops;
    j["tops_per_watt"] = band(r.tops_per_watt);
    j["gpu"] = {{"name", r.gpu.name}, {"flops", r.gpu.flops}, {"watts", r.gpu.watts}, {"pj_per_mac", r.gpu.pj_per_mac},
                {"joules", r.gpu.joules}, {"seconds", r.gpu.seconds}, {"tops_per_watt", r.gpu.tops_per_watt},
                {"energy_ratio_gpu_over_aoc_typ", r.gpu.joules / r.total_joules.typ}, {"source", r.gpu.source}};
    j["notes"] = r.notes;
    emit_json(j.dump(1), o.json_out);
    return 0;
  }

  std::printf("estimate: %s (%d channels), n %d, %lld fixed points per inference, %.4g iterations per fixed point\n",
              hw.name.c_str(), hw.channels, n, w.fixed_points, K);
  std::printf("          iterations %s\n", how.c_str());
  std::printf("          weights programmed once (%lld writes, %lld reload), %lld DAC and %lld ADC conversions, %lld digital MACs\n\n",
              w.weight_writes, w.weight_reloads, w.dac_conversions, w.adc_conversions, w.digital_macs);

  std::printf("latency          per fixed point  per inference  how\n");
  for (const auto& l : r.latency)
    std::printf("  %-14s %15s %14s  %s\n", l.name.c_str(), si(l.seconds / F, "s").c_str(), si(l.seconds, "s").c_str(), l.formula.c_str());
  std::printf("  %-14s %15s %14s\n\n", "total", si(r.total_seconds / F, "s").c_str(), si(r.total_seconds, "s").c_str());

  std::printf("energy per inference   action             count       per action        min        typ        max  typ per fixed point\n");
  for (const auto& l : r.energy) {
    const bool watts = l.action == "second";
    std::printf("  %-22s %-17s %9.4g %13s %10s %10s %10s %10s\n", l.name.c_str(), l.action.c_str(), l.count,
                si(watts ? l.per_action : l.per_action * 1e-12, watts ? "W" : "J").c_str(), si(l.joules.min, "J").c_str(),
                si(l.joules.typ, "J").c_str(), si(l.joules.max, "J").c_str(), si(l.joules.typ / F, "J").c_str());
  }
  std::printf("  %-22s %-17s %9s %13s %10s %10s %10s %10s\n\n", "total", "", "", "", si(r.total_joules.min, "J").c_str(),
              si(r.total_joules.typ, "J").c_str(), si(r.total_joules.max, "J").c_str(), si(r.total_joules.typ / F, "J").c_str());

  std::printf("analog MACs: n*n*K = %.4g per fixed point, %.4g per inference; ops = 2 x MACs = %.4g\n", r.analog_macs / F,
              r.analog_macs, r.ops);
  std::printf("TOPS/W: %.4g typ (band %.4g .. %.4g); %.4g fJ per MAC typ\n", r.tops_per_watt.typ, r.tops_per_watt.min,
              r.tops_per_watt.max, r.total_joules.typ / r.analog_macs * 1e15);
  std::printf("GPU, %s (%.4g TFLOPS at %.4g W = %.4g pJ per MAC, %.4g TOPS/W): %s and %s per inference;\n",
              r.gpu.name.c_str(), r.gpu.flops * 1e-12, r.gpu.watts, r.gpu.pj_per_mac, r.gpu.tops_per_watt,
              si(r.gpu.joules, "J").c_str(), si(r.gpu.seconds, "s").c_str());
  std::printf("     the AOC's typ energy is %.4g x the GPU's (GPU / AOC = %.4g)\n\n", r.total_joules.typ / r.gpu.joules,
              r.gpu.joules / r.total_joules.typ);

  std::printf("sources\n");
  for (const auto& l : r.latency) std::printf("  latency %s: %s\n", l.name.c_str(), l.source.c_str());
  for (const auto& l : r.energy) std::printf("  energy %s: %s\n", l.name.c_str(), l.source.c_str());
  std::printf("  gpu: %s\n", r.gpu.source.c_str());
  std::printf("notes\n");
  for (const auto& s : r.notes) std::printf("  %s\n", s.c_str());
  return 0;
}

}  // namespace

void add_estimate(CLI::App& app) {
  static Opts o;
  auto* c = app.add_subcommand("estimate", "Energy and latency of an inference on a machine (Accelergy-style), against a GPU");
  c->add_option("--hw", o.hw, "hardware file or bundled machine with timing and energy sections (aoc-48, aoc-16, aoc-scale)")
      ->capture_default_str();
  c->add_option("--n", o.n, "state size: channels used (default: all of the machine's)")->check(CLI::PositiveNumber);
  c->add_option("--iterations", o.iterations,
                "mean iterations per fixed point (default: measured by running the loop, twin stop rule, batch 64)")
      ->check(CLI::NonNegativeNumber);
  c->add_option("--fixed-points", o.fixed_points, "fixed points per inference, run one after another with the same weights")
      ->check(CLI::PositiveNumber)->capture_default_str();
  c->add_option("--set", o.set, "override a hardware value, e.g. --set timing.loop_period_ns=1 (repeatable)");
  c->add_option("--photons", o.photons,
                "photons per detector sample: photon-budget mode, the LED energy follows from energy.photon_budget")
      ->check(CLI::PositiveNumber);
  c->add_option("--seed", o.seed, "seed of the problem the iterations are measured on")->capture_default_str();
  c->add_option("--threads", o.threads, "threads for the measurement")->check(CLI::PositiveNumber)->capture_default_str();
  c->add_flag("--json", o.json, "print a JSON record (every line with its count, band and source)");
  c->add_option("-o,--output", o.json_out, "write the JSON record to this file (with --json)");
  c->footer(
      "Energy: each component of the file's energy section times the count of its action: n*K\n"
      "channel-iterations per fixed point, DAC/ADC conversions, weight writes, seconds of static power\n"
      "(docs/energy.md). Latency: K loop periods + settle + readout window per fixed point, plus the\n"
      "SLM reload. TOPS/W counts 2 ops per analog MAC (n*n MACs per iteration).\n"
      "Example:\n  aoc estimate --hw aoc-scale --fixed-points 1000000 --iterations 20\n"
      "  aoc estimate --hw aoc-48 --json -o estimate.json     (iterations measured on the loop)");
  c->callback([] { exit_status() = run(o); });
}

}  // namespace aoc::cli
