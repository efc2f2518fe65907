#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <nlohmann/json.hpp>

#include "compiler/graph_json.hpp"
#include "runtime/estimate/estimate_json.hpp"
#include "compiler/program_h5.hpp"
#include "runtime/cli/commands.hpp"
#include "runtime/io/h5io.hpp"
#include "runtime/run/loop_run.hpp"
#include "runtime/io/output.hpp"
#include "runtime/run/loop_problem.hpp"
#include "runtime/run/program_run.hpp"
#include "runtime/estimate/program_estimate.hpp"
#include "sim/energy.hpp"
#include "sim/error.hpp"
#include "sim/hardware.hpp"
#include "sim/json_reader.hpp"

namespace aoc::cli {

namespace {

struct Opts {
  std::string hw = "aoc-48", json_out, program, iterations_from;
  int n = 0, threads = 1;
  long long fixed_points = 64;
  double iterations = -1, photons = 0, bits = 0, batch = 0;  // batch 0: not given
  double write_verify = 0;
  int verify_rounds = 8;
  int zero_reads = kZeroReads;
  std::optional<double> zero_every_us;
  std::int64_t seq_len = 1024;
  std::uint64_t seed = 1;
  bool json = false;
  std::vector<std::string> set;
  GpuChoice gpu;
  // which options the command line gave (program mode takes the hardware from the program)
  bool hw_given = false, n_given = false, fixed_points_given = false, seq_len_given = false, seed_given = false;
};

constexpr int kMeasureBatch = 64;

// The iterations a fixed point takes, measured on the modeled machine (its converters and noise).
// A sample has settled at the first step its residual is below the readout's tolerance (half an
// ADC step rms per channel: below it the readout cannot tell the iterates apart). The machine has
// no converter inside its loop to stop on, so it runs a fixed count per fixed point: K is the p99
// of the samples' settling steps, or the cap when some sample never settles (not converged). The
// loop itself ran under the twin rule, until every residual was below the tolerance at once.
struct Measured {
  int k = 0;  // what a fixed point costs: the settling steps' p99, or the cap
  int run = 0, cap = 0, settled = 0, batch = 0;
  double settled_mean = 0, settled_p99 = 0;  // over the samples that met the tolerance
  double tol = 0;                            // L2 over the n channels
  double tol_rms = 0, last_rms = 0;          // per channel: the tolerance, the largest residual at the last step
  // How far the optics move the fixed points: rms per channel of the difference from the same run
  // with the optics' gain at 1e-12 (the same inputs and noise draws). Below the tolerance the readout cannot
  // tell the machine's answer from its input's: the loop converged without computing.
  double optics_rms = 0;
  bool optics_visible = true;
  // What the machine's noise and converters move the fixed points by (against the same loop exact,
  // noiseless, unquantized), and the bits of the optics' term above it: log2(optics / error).
  double error_rms = 0, bits = 0;
  bool noise = false, quantize = false;
  std::string tol_from;
};

// The rms per channel of the difference of two runs' fixed points.
double rms_difference(const LoopRunResult& a, const LoopRunResult& b) {
  return std::sqrt((a.solve.z - b.solve.z).squaredNorm() / static_cast<double>(a.solve.z.size()));
}

// The machine with the optics' gain all but off (the file's --set defaults.scale=1e-12): the
// weights' normalisation undoes a scaled matrix, and an all-zero one is refused.
CoreConfig dark_optics(const Hardware& hw) {
  CoreConfig dark = CoreConfig::twin_defaults(hw);
  dark.scale *= 1e-12;
  for (double& b : dark.beta) b *= 1e-12;
  return dark;
}

// The noise section reduced to shot noise at P photons per detector sample (the bias it acts on kept).
NoiseSpec shot_noise_only(const NoiseSpec& file, double photons) {
  NoiseSpec only;
  only.led_bias = file.led_bias;
  only.drift_time_us = file.drift_time_us;
  only.photons_per_sample = photons;
  return only;
}

Measured measure(const Hardware& hw, int n, const Opts& o) {
  LoopRunOptions lo;
  lo.f64 = false;
  lo.solver = SolverOptions::twin();
  lo.threads = o.threads;
  lo.noise = hw.noise.has_value();
  lo.quantize = hw.converters.has_value();
  lo.seed = o.seed;
  Measured m;
  m.noise = lo.noise, m.quantize = lo.quantize, m.batch = kMeasureBatch;
  if (const auto t = readout_tolerance(hw, n)) {
    lo.solver.tol = *t;
    m.tol_from = "half an ADC step (converters.adc_bits, adc_min, adc_max)";
  } else {
    m.tol_from = "the twin's 1e-3 (the file has no converters section to tie it to)";
  }
  m.tol = lo.solver.tol, m.tol_rms = m.tol / std::sqrt(static_cast<double>(n));
  const LoopProblem problem = random_problem(n, kMeasureBatch, o.seed);  // one problem, solved three ways
  const LoopRunResult r = run_loop(hw, CoreConfig::twin_defaults(hw), problem, lo);
  m.run = r.solve.steps, m.cap = lo.solver.max_iter;
  m.last_rms = r.solve.max_residual.back() / std::sqrt(static_cast<double>(n));
  std::vector<int> s;
  for (int k : r.solve.settled)
    if (k > 0) s.push_back(k);
  const IterationSummary st = summarize(s, {});
  m.settled = static_cast<int>(st.solves), m.settled_mean = st.mean, m.settled_p99 = st.p99;
  m.k = m.settled == m.batch ? st.p99 : m.cap;
  m.optics_rms = rms_difference(r, run_loop(hw, dark_optics(hw), problem, lo));
  m.optics_visible = m.optics_rms >= m.tol_rms;
  LoopRunOptions exact = lo;
  exact.noise = exact.quantize = false;
  const LoopRunResult c = run_loop(hw, CoreConfig::twin_defaults(hw), problem, exact);
  m.error_rms = rms_difference(r, c);
  m.bits = m.error_rms > 0 ? std::log2(m.optics_rms / m.error_rms) : std::numeric_limits<double>::infinity();
  return m;
}

// The photons per detector sample at which shot noise alone leaves `bits` bits of the product at
// the fixed points: log2(S / sigma) = bits, S the rms the optics move the fixed points by (exact
// against the optics' gain at 1e-12) and sigma the rms shot noise moves them by (the same loop
// exact), each loop run a fixed 40 steps (the readout's tolerance is far coarser than the noise).
// sigma falls as 1/sqrt(P): P <- P (2^bits sigma / S)^2 from 4^bits, until the measured bits are
// within 0.05 of the target (at most 4 measurements). The product's own statistics and fan-in set
// it: for biased intensity encoding the light, and so the shot noise, grows with the n inputs a
// detector sums while the signal of a random product grows as sqrt(n) (docs/energy.md).
struct PhotonsForBits {
  double bits = 0, photons = 0, optics_rms = 0, shot_rms = 0, delivered = 0;
  int measurements = 0;
};

PhotonsForBits photons_for_bits(const Hardware& hw, int n, const Opts& o) {
  if (!hw.noise) throw Error("--bits: " + hw.path + " has no noise section (its led_bias sets the light the shot noise comes from)");
  LoopRunOptions lo;
  lo.f64 = false;
  lo.solver = SolverOptions::fixed(40);
  lo.threads = o.threads;
  lo.seed = o.seed;
  const LoopProblem problem = random_problem(n, kMeasureBatch, o.seed);
  const LoopRunResult exact = run_loop(hw, CoreConfig::twin_defaults(hw), problem, lo);
  PhotonsForBits f;
  f.bits = o.bits;
  f.optics_rms = rms_difference(exact, run_loop(hw, dark_optics(hw), problem, lo));
  if (!(f.optics_rms > 0)) throw Error("--bits: the optics do not move the fixed points of " + hw.name + ": no photon count gives bits of a product");
  Hardware shot = hw;
  lo.noise = true;
  double P = std::pow(4.0, o.bits);
  for (int k = 1; k <= 4; ++k) {
    shot.noise = shot_noise_only(*hw.noise, P);
    f.photons = P, f.measurements = k;
    f.shot_rms = rms_difference(run_loop(shot, CoreConfig::twin_defaults(shot), problem, lo), exact);
    f.delivered = std::log2(f.optics_rms / f.shot_rms);
    if (!std::isfinite(f.delivered)) throw Error("--bits: shot noise at " + std::to_string(P) + " photons does not move the fixed points of " + hw.name);
    if (std::fabs(f.delivered - o.bits) <= 0.05) break;
    P *= std::pow(std::exp2(o.bits) / std::exp2(f.delivered), 2);
  }
  return f;
}

std::string photons_for_bits_text(const PhotonsForBits& f) {
  char b[512];
  std::snprintf(b, sizeof b,
                "photons for %.3g bits of the product: %.4g per detector sample (measured: the optics move the fixed points by %.3g mV rms, "
                "shot noise alone at %.4g photons by %.3g mV rms, %.3g bits; %d measurement%s from 4^bits = %.4g, a fixed 40 steps)",
                f.bits, f.photons, 1e3 * f.optics_rms, f.photons, 1e3 * f.shot_rms, f.delivered, f.measurements,
                f.measurements == 1 ? "" : "s", std::pow(4.0, f.bits));
  return b;
}

bool loop_converged(const Measured& m) { return m.settled == m.batch && m.optics_visible; }

// How K was measured, in one line for the text and the JSON.
std::string measured_text(const Measured& m, const Opts& o) {
  const char* what = m.noise ? (o.photons > 0 ? "shot noise only" : "the machine's noise") : "no noise section";
  char b[768];
  int at = 0;
  if (m.settled == m.batch)
    at = std::snprintf(b, sizeof b, "measured: every sample settled, at step %.3g mean, %d p99 (K)", m.settled_mean, m.k);
  else
    at = std::snprintf(b, sizeof b, "measured: NOT CONVERGED, %d of %d samples settled within the cap of %d (K = the cap)", m.settled,
                       m.batch, m.cap);
  at = std::clamp(at, 0, static_cast<int>(sizeof b) - 1);
  if (!m.optics_visible)
    at += std::snprintf(b + at, sizeof b - at, "; NOT A COMPUTATION: the optics move the fixed points by %.3g mV rms, less than the %.3g mV the readout resolves, so the answer is the input's",
                        1e3 * m.optics_rms, 1e3 * m.tol_rms);
  at = std::clamp(at, 0, static_cast<int>(sizeof b) - 1);
  std::snprintf(b + at, sizeof b - at,
                "; settled: residual below %.3g mV rms per channel, %s; a seeded random problem, batch %d, seed %llu, f32, %s%s; "
                "the loop ran %d steps, its largest residual at the last %.3g mV; the optics move the fixed points by %.3g mV rms, "
                "the machine's noise and converters by %.3g mV rms: %.2g bits of the product delivered",
                1e3 * m.tol_rms, m.tol_from.c_str(), m.batch, static_cast<unsigned long long>(o.seed), m.quantize ? "converters, " : "",
                what, m.run, 1e3 * m.last_rms, 1e3 * m.optics_rms, 1e3 * m.error_rms, m.bits);
  return b;
}

// The loop form's counts are whole numbers (n, F and the readout samples are).
long long whole(double count) { return std::llround(count); }

// Where every figure of a report came from, then the notes (the caller's first).
void print_sources(const EnergyReport& r, const std::vector<std::string>& notes) {
  std::printf("sources\n");
  for (const auto& l : r.latency) std::printf("  latency %s: %s\n", l.name.c_str(), l.source.c_str());
  for (const auto& l : r.energy) std::printf("  energy %s: %s\n", l.name.c_str(), l.source.c_str());
  std::printf("  gpu: %s\n", r.gpu.source.c_str());
  std::printf("notes\n");
  for (const auto& n : notes) std::printf("  %s\n", n.c_str());
  for (const auto& n : r.notes) std::printf("  %s\n", n.c_str());
}

// The GPU line: which bound holds at the batch, then the time and energy of the same work.
std::string mm2(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3g mm2", v);
  return b;
}

// The machine's area by component, where its file gives one.
void print_area(const Hardware& hw) {
  if (!hw.area) {
    std::printf("area: %s gives no area section (docs/energy.md, \"Area\")\n\n", hw.path.c_str());
    return;
  }
  const AreaReport a = area_report(hw);
  std::printf("area                     per          count           min           typ           max\n");
  for (const auto& l : a.lines)
    std::printf("  %-22s %-8s %9.4g %13s %13s %13s\n", l.name.c_str(), l.per.c_str(), l.count, mm2(l.mm2.min).c_str(),
                mm2(l.mm2.typ).c_str(), mm2(l.mm2.max).c_str());
  std::printf("  %-22s %-8s %9s %13s %13s %13s  (%d channels, %.4g weights)\n", "one module", "", "", mm2(a.module_mm2.min).c_str(),
              mm2(a.module_mm2.typ).c_str(), mm2(a.module_mm2.max).c_str(), a.channels, static_cast<double>(a.channels) * a.channels);
  std::printf("  %-22s %-8s %9d %13s %13s %13s\n", "the machine", "module", a.modules, mm2(a.machine_mm2.min).c_str(),
              mm2(a.machine_mm2.typ).c_str(), mm2(a.machine_mm2.max).c_str());
  std::printf("  not counted: %s\n\n", a.not_counted.c_str());
}

void print_gpu(const EnergyReport& r, const char* per, const std::string& work) {
  const GpuRoofline& g = r.gpu;
  std::string bound = g.bound();
  for (char& ch : bound) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  std::printf("GPU, %s at %s, batch %.4g (%.4g TOPS dense, %.4g TB/s, %.4g W): %s, %s-BOUND\n", g.name.c_str(), g.precision.c_str(), g.batch,
              g.tops, g.memory_tb_per_s, g.watts, work.c_str(), bound.c_str());
  const std::string weights = g.weights_in_l2 ? "in its L2: read once" : "over its L2: streamed once per pass, shared by the batch";
  std::printf("     compute %s at peak; weights %s (%s, %d byte%s each), %s from memory in %s", si(g.compute_seconds, "s").c_str(),
              si(g.distinct_weight_bytes, "B").c_str(), weights.c_str(), bytes_per_weight(g.precision),
              bytes_per_weight(g.precision) == 1 ? "" : "s", si(g.weight_bytes, "B").c_str(), si(g.memory_seconds, "s").c_str());
  if (g.weights_in_l2) std::printf(", %s from the L2 at %.4g TB/s in %s", si(g.l2_bytes, "B").c_str(), g.l2_tb_per_s, si(g.l2_seconds, "s").c_str());
  std::printf(";\n     %.4g dependent kernels at %.4g us each: %s:\n", g.kernels, g.launch_us, si(g.launch_seconds, "s").c_str());
  std::printf("     %s and %s per %s", si(g.joules, "J").c_str(), si(g.seconds, "s").c_str(), per);
  std::printf(" at board power (%.4g pJ per MAC, %.4g TOPS/W); the AOC's typ energy is %.4g x the GPU's (GPU / AOC = %.4g)\n\n",
              g.pj_per_mac, g.tops_per_watt, r.total_joules.typ / g.joules, g.joules / r.total_joules.typ);
}

int run(const Opts& given) {
  Opts o = given;
  if (o.batch > 0)
    throw Error("--batch is for a program (PROG): the loop's fixed points already share one weight load; --gpu-batch batches "
                "the GPU");
  if (o.write_verify > 0) throw Error("--write-verify is for a program (PROG): the loop's estimate bills one weight load without it");
  if (o.zero_every_us) throw Error("--zero-every-us is for a program (PROG): the loop's estimate bills no auto-zero");
  Hardware hw = load_hardware(resolve_hardware_path(o.hw), o.set);
  const int n = o.n > 0 ? o.n : hw.channels;
  if (n > hw.channels) throw Error("--n: " + std::to_string(n) + " is more than the " + std::to_string(hw.channels) + " channels of " + hw.name);
  // --bits: the photon budget found for that many bits of the product, then photon-budget mode at it
  std::optional<PhotonsForBits> for_bits;
  if (o.bits > 0) for_bits = photons_for_bits(hw, n, o), o.photons = for_bits->photons;
  // Photon-budget mode: one number sets the precision, the shot noise of the run that measures K
  // (the other noise sources off) and the LEDs' energy.
  if (o.photons > 0 && !hw.noise)
    throw Error("--photons: " + hw.path + " has no noise section, so the photon count would change the LEDs' energy but not the "
                "shot noise or the iterations; add one (docs/hardware.md) or leave --photons out");
  if (o.photons > 0) hw.noise = shot_noise_only(*hw.noise, o.photons);
  const bool measured = o.iterations < 0;
  Measured m;
  if (measured) m = measure(hw, n, o);
  const double K = measured ? m.k : o.iterations;
  Workload w = inference_workload(hw, n, o.fixed_points, K);
  if (o.photons > 0) w.photons_per_sample = o.photons;
  const EnergyReport r = estimate(hw, w, o.gpu);
  const double F = static_cast<double>(o.fixed_points);
  const std::string how = measured ? measured_text(m, o) : "given (--iterations)";
  // A loop that does not settle delivers no fixed point: its energy is spent, its operations are
  // not useful, and an efficiency figure would reward the failure (fewer joules for the same count).
  const bool converged = !measured || loop_converged(m);
  char withheld[320] = "";
  if (measured && m.settled != m.batch)
    std::snprintf(withheld, sizeof withheld, "none: the loop did not converge (%d of %d samples settled within the cap of %d), so it delivers no fixed point",
                  m.settled, m.batch, m.cap);
  else if (!converged)
    std::snprintf(withheld, sizeof withheld, "none: the optics move the fixed points by %.3g mV rms, below the %.3g mV the readout resolves: the loop settles without computing",
                  1e3 * m.optics_rms, 1e3 * m.tol_rms);

  if (o.json) {
    nlohmann::ordered_json j{{"tool", "aoc estimate"}, {"version", AOC_VERSION}, {"hardware", hw.name}, {"n", n},
                             {"fixed_points", whole(w.fixed_points)}, {"iterations_per_fixed_point", K}, {"iterations_from", how}};
    if (measured)
      j["iterations_measured"] = {{"run", m.run}, {"cap", m.cap}, {"converged", m.settled == m.batch}, {"batch", m.batch},
                                  {"samples_settled", m.settled}, {"settled_step_mean", m.settled_mean}, {"settled_step_p99", m.settled_p99},
                                  {"k", m.k},
                                  {"tolerance_l2", m.tol}, {"tolerance_rms_per_channel", m.tol_rms}, {"tolerance_from", m.tol_from},
                                  {"last_step_max_residual_rms", m.last_rms}, {"optics_term_rms", m.optics_rms}, {"error_rms", m.error_rms},
                                  {"product_bits", std::isfinite(m.bits) ? nlohmann::ordered_json(m.bits) : nlohmann::ordered_json(nullptr)},
                                  {"optics_visible", m.optics_visible}, {"noise", m.noise}, {"converters", m.quantize}};
    j["workload"] = {{"weight_writes", whole(w.weight_writes)}, {"weight_reloads", whole(w.weight_reloads)},
                     {"dac_conversions", whole(w.dac_conversions)}, {"adc_conversions", whole(w.adc_conversions)},
                     {"digital_macs", whole(w.digital_macs)}, {"reloaded_channels", whole(*r.work.reloaded_channels)}};
    j["photon_budget"] = r.photon_budget;
    if (for_bits)
      j["photons_for_bits"] = {{"bits", for_bits->bits}, {"photons_per_sample", for_bits->photons}, {"optics_term_rms", for_bits->optics_rms},
                               {"shot_noise_rms", for_bits->shot_rms}, {"bits_measured", for_bits->delivered},
                               {"measurements", for_bits->measurements}, {"how", photons_for_bits_text(*for_bits)}};
    if (r.photon_budget) j["led_pj_per_channel_iteration"] = r.led_pj_photon;
    for (const auto& l : r.latency)
      j["latency"].push_back({{"name", l.name}, {"seconds", l.seconds}, {"per_fixed_point_s", l.seconds / F},
                              {"formula", l.formula}, {"source", l.source}});
    j["latency_total_s"] = r.total_seconds;
    j["latency_per_fixed_point_s"] = r.total_seconds / F;
    for (const auto& l : r.energy)
      j["energy"].push_back({{"name", l.name}, {"action", l.action}, {"count", l.count}, {"per_action_typ", l.per_action},
                             {"unit", l.action == "second" ? "W" : "pJ"}, {"joules", band_json(l.joules)}, {"source", l.source}});
    j["energy_total_j"] = band_json(r.total_joules);
    j["energy_per_fixed_point_j"] = band_json({r.total_joules.min / F, r.total_joules.typ / F, r.total_joules.max / F});
    j["analog_macs"] = r.analog_macs;
    j["ops"] = r.ops;
    j["converged"] = converged;
    if (converged) {
      j["tops_per_watt"] = band_json(r.tops_per_watt);
    } else {
      j["tops_per_watt"] = nullptr;
      j["tops_per_watt_withheld"] = withheld;
    }
    j["area"] = area_json(hw);
    j["gpu"] = gpu_json(r, "the same work: the analog MACs, per inference");
    j["notes"] = r.notes;
    emit_json(j.dump(1), o.json_out);
    return 0;
  }

  std::printf("estimate: %s (%d channels), n %d, %lld fixed points per inference, %.4g iterations per fixed point\n",
              hw.name.c_str(), hw.channels, n, whole(w.fixed_points), K);
  if (for_bits) std::printf("          %s\n", photons_for_bits_text(*for_bits).c_str());
  std::printf("          iterations %s\n", how.c_str());
  std::printf("          weights programmed once (%lld writes, %lld reload), %lld DAC and %lld ADC conversions, %lld digital MACs\n\n",
              whole(w.weight_writes), whole(w.weight_reloads), whole(w.dac_conversions), whole(w.adc_conversions),
              whole(w.digital_macs));

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
  if (converged)
    std::printf("TOPS/W: %.4g typ (band %.4g .. %.4g); %.4g fJ per MAC typ\n", r.tops_per_watt.typ, r.tops_per_watt.min,
                r.tops_per_watt.max, r.total_joules.typ / r.analog_macs * 1e15);
  else
    std::printf("TOPS/W: %s; the energy above is spent per attempt\n", withheld);
  char work[128];
  std::snprintf(work, sizeof work, "the same %.4g analog MACs", r.analog_macs);
  print_area(hw);
  print_gpu(r, "inference", work);

  print_sources(r, {});
  return 0;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// "129,135,360": digits in groups of three, for counts a reader compares by eye.
std::string grouped(double v) {
  const long long n = std::llround(v);
  std::string d = std::to_string(n < 0 ? -n : n), out;
  for (std::size_t i = 0; i < d.size(); ++i) {
    if (i && (d.size() - i) % 3 == 0) out += ',';
    out += d[i];
  }
  return (n < 0 ? "-" : "") + out;
}

// Each top-level FixedPoint's K from an `aoc run` of the program: the mean over its solves (every
// sample, and every token in sequential mode), each solve stopped by the loop's own rule.
// `program_file` (empty for a graph compiled here) is compared with the program the run recorded.
void measured_iterations(const ir::Program& p, const std::string& program_file, const std::string& run, ProgramEstimateOptions& po) {
  if (read_h5_attr(run, "tool") != "aoc run") throw Error(run + ": attribute tool: not the output of `aoc run`");
  const bool same = !program_file.empty() && read_h5_attr(run, "config_hash") == file_digest(program_file);
  const std::string other = same ? "" : ", a run of " + read_h5_attr(run, "program") + (program_file.empty() ? "" : " (not this file: its digest differs)");
  for (const ir::Op& op : p.graph.ops) {
    if (op.kind != ir::OpKind::FixedPoint) continue;
    const std::string name = ir::op_label(op);
    const IterationSummary s = read_run_iterations(run, name);
    char b[320];
    std::snprintf(b, sizeof b, "measured: the mean over %lld solves of `aoc run` %s (p99 %d, min %d, max %d; %lld converged)", s.solves,
                  run.c_str(), s.p99, s.min, s.max, s.converged);
    po.measured[name] = {s.mean, b + other};
  }
  if (po.measured.empty()) throw Error("--iterations-from: the program has no FixedPoint at its top level to take iterations for");
}

// `aoc estimate PROG`: a program file (HDF5) or a graph JSON compiled here (shapes only).
int run_program(const Opts& o) {
  if (o.n_given || o.fixed_points_given || o.seed_given)
    throw Error("--n, --fixed-points and --seed are for the loop estimate (without PROG); a program's counts come from its ops");
  ir::Program p;
  std::string hw_path, how;
  std::vector<std::string> overrides;
  Hardware hw;
  if (ends_with(o.program, ".json")) {
    if (!o.hw_given) throw Error(o.program + ": a graph needs --hw, the machine to compile it for");
    hw_path = resolve_hardware_path(o.hw);
    overrides = o.set;
    hw = load_hardware(hw_path, overrides);
    p = compile_for_estimate(ir::read_graph(o.program), hw, o.hw, overrides);
    how = "graph " + o.program + " compiled here for " + hw.name + " (shapes only, no quantize)";
  } else {
    p = ir::read_program_h5(o.program);
    EstimateTarget t = estimate_target(p, o.program, o.hw_given ? o.hw : "", o.set);
    hw = std::move(t.hw), hw_path = std::move(t.path), overrides = std::move(t.overrides), how = std::move(t.source);
  }
  ProgramEstimateOptions po;
  if (o.iterations >= 0) po.iterations = o.iterations;
  if (!o.iterations_from.empty()) measured_iterations(p, ends_with(o.program, ".json") ? "" : o.program, o.iterations_from, po);
  po.seq_len = o.seq_len;
  if (o.photons > 0) po.photons_per_sample = o.photons;
  po.gpu = o.gpu;
  if (o.batch > 0) po.batch = po.gpu.batch = o.batch;
  po.write_verify = o.write_verify, po.verify_rounds = o.verify_rounds, po.zero_reads = o.zero_reads;
  po.zero_every_us = o.zero_every_us;
  const ProgramEstimate e = estimate_program(p, hw, po);
  const EnergyReport& r = e.token;
  const Workload& w = r.work;
  const double L = static_cast<double>(e.seq_len);
  const Band per_seq{r.total_joules.min * L, r.total_joules.typ * L, r.total_joules.max * L};

  if (o.json) {
    emit_json(program_estimate_json(e, hw, hw_path, overrides, how).dump(1), o.json_out);
    return 0;
  }

  std::printf("estimate: %s on %s (%d channels, %d modules), per token and per sequence of %lld tokens%s\n", e.program.c_str(),
              hw.name.c_str(), e.channels, e.modules, static_cast<long long>(e.seq_len),
              e.batch > 1 ? (", batch " + jsonr::num(e.batch) + " (per sequence-token)").c_str() : "");
  std::printf("          from %s\n", how.c_str());
  for (const auto& l : e.loops)
    std::printf("          FixedPoint '%s' (%s): K = %.4g iterations per token, %s\n", l.name.c_str(), l.layout.c_str(),
                l.iterations, l.from.c_str());
  if (e.loops.empty()) std::printf("          no FixedPoint (an explicit model): every op once per token\n");
  std::printf("\nmapping\n");
  std::printf("  parameters %s, of which %s in the %zu optical matrices\n", grouped(static_cast<double>(e.parameters)).c_str(),
              grouped(static_cast<double>(e.optical_weights)).c_str(), p.optical.size());
  std::printf("  tiles %d of at most %d x %d in %d module programmings (a weight-stationary mapping needs %d modules; the machine has %d, %d used, %d pass%s)\n",
              e.tiles, e.channels, e.channels, e.cores, e.cores, e.modules, e.modules_used, e.passes, e.passes == 1 ? "" : "es");
  std::printf("  utilisation %.1f %% (analog MACs / (tile runs x %d^2))\n", 100 * e.utilisation, e.channels);
  std::printf("  ops by placement:");
  for (const auto& [k, v] : e.placement) std::printf(" %s %d;", k.c_str(), v);
  std::printf("\n");
  // A matrix used for several products per evaluation (a Conv2d's positions) is programmed once.
  for (const OpticalUse& u : e.optical_ops)
    if (u.products > 1)
      std::printf("  weights reused: '%s' [%lld x %lld], %.4g products per evaluation (%.4g per token) through its %d tile%s, programmings %d\n",
                  u.op.c_str(), static_cast<long long>(u.rows), static_cast<long long>(u.cols), u.products, u.per_token, u.tiles,
                  u.tiles == 1 ? "" : "s", u.programmings);
  std::printf("\nper token\n");
  std::printf("  analog MACs %.4g (%.4g tile runs), digital ops %.4g\n", r.analog_macs, e.tile_runs, w.digital_macs);
  std::printf("  conversions: %.4g DAC, %.4g ADC (%.4g of them partial sums)\n", w.dac_conversions, w.adc_conversions, e.partial_sum_adc);
  std::printf("  weight reloads %.4g (%.4g weight writes); initial programming once per model load: %.4g writes, %s, %s\n",
              w.weight_reloads, w.weight_writes, e.initial_writes, si(e.load.total_joules.typ, "J").c_str(),
              si(e.load.total_seconds, "s").c_str());
  std::printf("  serial: %.4g loop periods, %.4g readouts (%.4g ADC samples), %.4g DAC steps, %.4g digital ops\n\n", *w.loop_periods,
              *w.settle_events, *w.adc_samples, *w.dac_steps, w.serial_digital_macs.value_or(0));

  std::printf("digital ops per token  %12s  rule\n", "ops");
  for (const auto& [kind, d] : e.digital) std::printf("  %-20s %12.4g  %s\n", kind.c_str(), d.ops, d.rule.c_str());

  std::printf("\nlatency          per token      per sequence  how (per token)\n");
  for (const auto& l : r.latency)
    std::printf("  %-14s %10s %17s  %s\n", l.name.c_str(), si(l.seconds, "s").c_str(), si(l.seconds * L, "s").c_str(), l.formula.c_str());
  std::printf("  %-14s %10s %17s\n\n", "total", si(r.total_seconds, "s").c_str(), si(r.total_seconds * L, "s").c_str());

  std::printf("energy per token       action             count       per action        min        typ        max  typ per sequence\n");
  for (const auto& l : r.energy) {
    const bool watts = l.action == "second";
    std::printf("  %-22s %-17s %9.4g %13s %10s %10s %10s %10s\n", l.name.c_str(), watts ? "module-second" : l.action.c_str(),
                l.count, si(watts ? l.per_action : l.per_action * 1e-12, watts ? "W" : "J").c_str(), si(l.joules.min, "J").c_str(),
                si(l.joules.typ, "J").c_str(), si(l.joules.max, "J").c_str(), si(l.joules.typ * L, "J").c_str());
  }
  std::printf("  %-22s %-17s %9s %13s %10s %10s %10s %10s\n\n", "total", "", "", "", si(r.total_joules.min, "J").c_str(),
              si(r.total_joules.typ, "J").c_str(), si(r.total_joules.max, "J").c_str(), si(per_seq.typ, "J").c_str());

  std::printf("TOPS/W: %.4g typ (band %.4g .. %.4g): 2 ops per analog MAC over all the energy (digital included)\n",
              r.tops_per_watt.typ, r.tops_per_watt.min, r.tops_per_watt.max);
  char work[160];
  std::snprintf(work, sizeof work, "the same %.4g analog MACs + %.4g digital ops (one MAC each)", r.analog_macs, w.digital_macs);
  print_area(hw);
  print_gpu(r, "token", work);

  print_sources(r, e.notes);
  return 0;
}

}  // namespace

void add_estimate(CLI::App& app) {
  static Opts o;
  auto* c = app.add_subcommand("estimate", "Energy and latency (Accelergy-style) of fixed points on a machine, or of a compiled program per token, against a GPU");
  static CLI::Option *hw, *n, *fp, *seq, *seed;
  c->add_option("program", o.program,
                "a compiled program (.h5) or a graph (.json, compiled here for --hw, shapes only): its energy and latency "
                "per token and per sequence")
      ->check(CLI::ExistingFile);
  hw = c->add_option("--hw", o.hw,
                     "hardware file or bundled machine with timing and energy sections (aoc-48, aoc-16, aoc-scale); "
                     "a program's default is the hardware it was compiled for")
           ->capture_default_str();
  n = c->add_option("--n", o.n, "state size: channels used (default: all of the machine's)")->check(positive());
  c->add_option("--iterations", o.iterations,
                "iterations per fixed point (default: measured on the machine with its converters and noise, a seeded "
                "problem of batch 64: the steps until every sample changes by less than half an ADC step, the cap of "
                "40 when some never do; for a program: each FixedPoint's max_iter, an upper bound)")
      ->check(non_negative());
  auto* from = c->add_option("--iterations-from", o.iterations_from,
                             "program: each top-level FixedPoint's K from an `aoc run` of it (output HDF5): the mean over its solves");
  from->excludes(c->get_option("--iterations"));
  fp = c->add_option("--fixed-points", o.fixed_points, "fixed points per inference, run one after another with the same weights")
           ->check(positive())->capture_default_str();
  seq = c->add_option("--seq-len", o.seq_len, "program: tokens per sequence (attention's mean context is half of it)")
            ->check(positive())->capture_default_str();
  c->add_option("--set", o.set, "override a hardware value, e.g. --set timing.loop_period_ns=1 (repeatable)");
  c->add_option("--photons", o.photons,
                "photons per detector sample: photon-budget mode, the LED energy follows from energy.photon_budget")
      ->check(positive());
  c->add_option("--bits", o.bits,
                "photon-budget mode at the photons per detector sample that leave this many bits of the product against "
                "shot noise alone, measured on the loop (docs/energy.md, \"Photon budget\")")
      ->check(between(1.0, 16.0))
      ->excludes(c->get_option("--photons"));
  seed = c->add_option("--seed", o.seed, "seed of the problem the iterations are measured on")->check(seed_value())->capture_default_str();
  c->add_option("--threads", o.threads, "threads for the measurement")->check(positive())->capture_default_str();
  c->add_option("--gpu", o.gpu.gpu, "the GPU compared with: a key of scenarios/gpus.json (h100-sxm, h200-sxm, b200)")
      ->capture_default_str();
  c->add_option("--gpu-batch", o.gpu.batch,
                "samples (or sequences) sharing each pass of the GPU over the weights: 1 is decode one at a time, "
                "memory-bound for large models")
      ->check(between(1.0, 1e12))->capture_default_str();
  c->add_option("--batch", o.batch,
                "program: B sequences stepped together on both sides: each module programming serves the B sequences' "
                "vectors before the next reload, and B sequences share each GPU pass (sets --gpu-batch); figures per "
                "sequence-token")
      ->check(between(1.0, 1e12))
      ->excludes(c->get_option("--gpu-batch"));
  add_write_verify_flags(c, o.write_verify, o.verify_rounds,
                         "program: bill write-verify after each programming, as aoc run --write-verify TOL: the expected writes "
                         "again (weight writes) and rounds (each a reload's time) for the file's SLM fixed pattern");
  c->add_option("--zero-reads", o.zero_reads,
                "program: bill the auto-zero after each programming, as aoc run --zero-reads N: N ADC samples of each "
                "reprogrammed channel with the values at 0 (0: none)")
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
  c->add_option("--zero-every-us", o.zero_every_us,
                "program: bill the auto-zero taken again every T microseconds, as aoc run --zero-every-us T: each zero's "
                "--zero-reads ADC samples of every channel of the modules in use, a token's share of them (default: none)");
  c->add_option("--gpu-precision", o.gpu.precision,
                "the GPU's precision (default: the machine's weights: fp8 for 8 bits or fewer, bf16 above)")
      ->check(CLI::IsMember({"bf16", "fp8", "int8"}));
  c->add_flag("--json", o.json, "print a JSON record (every line with its count, band and source)");
  c->add_option("-o,--output", o.json_out, "write the JSON record to this file (with --json)");
  c->footer(
      "Energy: each component of the file's energy section times the count of its action: n*(K + H)\n"
      "channel-iterations per fixed point (the loop stays lit and detected for H periods after its K\n"
      "iterations, through the settle and the readout window), DAC/ADC conversions, weight writes,\n"
      "seconds of static power (docs/energy.md). Latency: K loop periods + the settle left after them\n"
      "(its clock starts at loop closure) + readout window per fixed point, plus the SLM reload.\n"
      "K: measured on the machine with its converters and noise, the p99 of the steps at which samples\n"
      "change by less than half an ADC step rms per channel (NOT CONVERGED: the cap); the same problem\n"
      "is solved with the optics' gain at 1e-12, and where the optics move the fixed points by less than\n"
      "that step the loop settles without computing (NOT A COMPUTATION); and exact, for the bits of the\n"
      "product it delivers. TOPS/W counts 2 ops per analog MAC\n"
      "(n*n MACs per iteration); a run that does not converge or compute has none (null in JSON).\n"
      "A program (PROG): one token's actions counted from its ops (docs/energy.md, \"Programs\"): the\n"
      "optical tiles, every Convert (DAC/ADC), the digital ops, the weight reloads when the tiles\n"
      "outnumber the modules; per sequence = per token x --seq-len.\n"
      "GPU: the same work as a roofline on a GPU of scenarios/gpus.json: the longer of its compute at\n"
      "the dense peak of --gpu-precision and its weights read from memory (once if they fit in its L2,\n"
      "else once per pass, shared by --gpu-batch samples); energy at board power (docs/energy.md,\n"
      "\"GPU comparison\").\n"
      "Example:\n  aoc estimate --hw aoc-scale --fixed-points 1000000 --iterations 20\n"
      "  aoc estimate --hw aoc-scale --fixed-points 1000000 --bits 8   (the photons 8 bits of the product need)\n"
      "  aoc estimate --hw aoc-48 --json -o estimate.json     (iterations measured on the loop)\n"
      "  aoc estimate --hw aoc-scale --iterations 20 --gpu h200-sxm --gpu-batch 64\n"
      "  aoc import config.json -o g.json --shapes-only && aoc estimate g.json --hw aoc-scale --iterations 20\n"
      "  aoc run prog.h5 --inputs tok.h5 --noise -o run.h5 && aoc estimate prog.h5 --iterations-from run.h5");
  c->callback([c] {
    require_json_for_output(c, "estimate");
    o.hw_given = hw->count() > 0, o.n_given = n->count() > 0, o.fixed_points_given = fp->count() > 0;
    o.seq_len_given = seq->count() > 0, o.seed_given = seed->count() > 0;
    if (o.program.empty() && o.seq_len_given) throw Error("--seq-len is for a program (aoc estimate PROG)");
    if (!o.program.empty() && o.bits > 0) throw Error("--bits is for the loop estimate (aoc estimate --hw HW); a program takes --photons");
    if (o.program.empty() && !o.iterations_from.empty())
      throw Error("--iterations-from is for a program (aoc estimate PROG); the loop estimate measures its own");
    exit_status() = o.program.empty() ? run(o) : run_program(o);
  });
}

}  // namespace aoc::cli
