#include "sim/energy.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include "sim/error.hpp"
#include "sim/hardware_sections.hpp"

namespace aoc {

using namespace jsonr;

namespace {

struct Kind {
  const char* action;
  const char* unit;
};

// Every component a machine can list, with what one unit of it is. Anything else is an error.
const std::map<std::string, Kind>& kinds() {
  static const std::map<std::string, Kind> k = {
      {"led_drive", {"channel_iteration", "pJ"}},
      {"photodetector_receiver", {"channel_iteration", "pJ"}},
      {"analog_electronics", {"channel_iteration", "pJ"}},
      {"slm_static", {"second", "W"}},
      {"slm_reload", {"weight_write", "pJ"}},
      {"dac", {"conversion", "pJ"}},
      {"adc", {"conversion", "pJ"}},
      {"activation_io", {"bit", "pJ"}},
      {"digital", {"mac", "pJ"}},
      {"control", {"fixed_point", "pJ"}},
  };
  return k;
}

const Range kEfficiency{0, 1, false, true};  // (0, 1]

// Physical constants (SI, exact since 2019).
constexpr double kPlanck = 6.62607015e-34;  // J s
constexpr double kLight = 299792458.0;      // m / s
constexpr double kElementaryCharge = 1.602176634e-19;  // C

// What a converter's figure is worth at the machine's bits, and how that was reckoned ("" where the
// figure is taken as it is).
std::pair<double, std::string> resolution_factor(const Hardware& hw, const EnergyComponent& c) {
  double f = 1.0;
  std::string how;
  if (c.at_bits > 0 && hw.converters) {
    const ConverterSpec& v = *hw.converters;
    const int bits = c.name == "adc" ? v.adc_bits : c.name == "dac" ? v.dac_bits : v.slm_bits;
    if (bits != c.at_bits && c.name == "slm_reload") {
      f = static_cast<double>(bits) / c.at_bits;
      how = "scaled to " + std::to_string(bits) + "-bit codes from the figure at " + std::to_string(c.at_bits) + " (x " + g4(f) +
            ": bits moved per write)";
    } else if (bits != c.at_bits) {
      f = std::ldexp(1.0, bits - c.at_bits);
      how = "scaled to " + std::to_string(bits) + " bits from the figure at " + std::to_string(c.at_bits) + " (x 2^" +
            std::to_string(bits - c.at_bits) + " = " + g4(f) + ": Walden's figure of merit, energy per conversion step constant)";
    }
  }
  if (c.at_rate_mhz > 0 && hw.timing) {
    const TimingSpec& t = *hw.timing;
    const double rate = c.name == "adc" ? t.readout_rate_mhz : t.dac_conversion_ns > 0 ? 1e3 / t.dac_conversion_ns : 0;
    if (rate > c.at_rate_mhz) {
      const double r = rate / c.at_rate_mhz;
      f *= r;
      how += (how.empty() ? "" : "; ") + std::string("scaled to ") + g4(rate) + " MHz from the figure's " + g4(c.at_rate_mhz) + " MHz (x " + g4(r) +
             ": past the rate a figure holds at, energy per conversion grows in proportion to the rate)";
    }
  }
  return {f, how};
}

}  // namespace

double PhotonBudget::led_joules_per_photon() const {
  return kPlanck * kLight / (wavelength_nm * 1e-9) / (detector_quantum_efficiency * optical_path_efficiency * led_wall_plug_efficiency);
}

namespace {

// The photons per detector sample from the LED figure (or the photon budget's design point).
void derive_photons(const Reader& r, Hardware& hw) {
  if (!hw.noise->photons_derived) return;
  NoiseSpec& n = *hw.noise;
  const std::string F = "noise.photons_per_sample";
  if (!hw.energy || !hw.energy->photon_budget)
    r.fail(F + ".derived", "derived from the LED operating point, but the file has no energy.photon_budget (wavelength, path, quantum and wall-plug efficiency)");
  const PhotonBudget& p = *hw.energy->photon_budget;
  const std::string chain = "h c / " + num(p.wavelength_nm) + " nm / (quantum efficiency " + num(p.detector_quantum_efficiency) +
                            " x optical path " + num(p.optical_path_efficiency) + " x wall-plug " + num(p.led_wall_plug_efficiency) + ")";
  std::string how;
  if (p.photons_per_sample > 0) {
    // The design point of the budget: the LED energy follows from it (estimate), and so does the noise.
    n.photons_per_sample = p.photons_per_sample;
    n.photons_band = {p.photons_per_sample, p.photons_per_sample};
    how = "derived: energy.photon_budget.photons_per_sample, the budget's design point (its LED energy is " + g4(p.photons_per_sample) +
          " x " + chain + " = " + g4(p.photons_per_sample * p.led_joules_per_photon() * 1e12) + " pJ per channel-iteration)";
  } else {
    const EnergyComponent* led = hw.energy->find("led_drive");
    if (!led) r.fail(F + ".derived", "derived from the LED operating point, but the file has neither energy.led_drive nor energy.photon_budget.photons_per_sample");
    // One LED's electrical energy in a loop period, made light, carried and detected: on a square
    // core each detector collects about one LED's worth of light over its fan-in.
    const double per_pj = 1e-12 / p.led_joules_per_photon();
    n.photons_per_sample = led->value.typ * per_pj;
    n.photons_band = {led->value.min * per_pj, led->value.max * per_pj};
    how = "derived: energy.led_drive " + g4(led->value.typ) + " pJ (" + g4(led->value.min) + ".." + g4(led->value.max) + ") / " + chain + " = " +
          g4(n.photons_per_sample) + " (" + g4(n.photons_band[0]) + ".." + g4(n.photons_band[1]) + ") detected photons per detector sample";
  }
  std::string& src = hw.sources[F];
  if (src.rfind("derived: ", 0) == 0 && src.find("; ") != std::string::npos) src.erase(0, src.find("; ") + 2);  // derived again after an override
  src = how + "; " + src;
}

// The receiver's electrons per detector sample from its input-referred current noise density: each
// path's amplifier integrates over one loop period T, a noise bandwidth of 1/(2T), and the two
// paths add in power, so N = sqrt(2) x i x sqrt(1/(2T)) x T / q = i sqrt(T) / q. The tile counts
// them in units of the light, through photons_per_sample: with that at 0 (shot noise switched off)
// they are off too.
void derive_receiver(const Reader& r, Hardware& hw) {
  NoiseSpec& n = *hw.noise;
  n.receiver_electrons = 0;
  if (!(n.receiver_noise_density > 0)) return;
  const std::string F = "noise.receiver_noise_density";
  if (!hw.timing) r.fail(F, "an amplifier's noise density needs the loop period it integrates over (timing.loop_period_ns), and the file has no timing section");
  const double T = hw.timing->loop_period_ns * 1e-9;
  n.receiver_electrons = n.receiver_noise_density * std::sqrt(T) / kElementaryCharge;
  hw.sources["noise.receiver_electrons"] =
      "derived: noise.receiver_noise_density " + g4(n.receiver_noise_density * 1e12) + " pA/sqrt(Hz) on each of two paths over the loop period's noise bandwidth 1/(2 x " +
      g4(hw.timing->loop_period_ns) + " ns): " + g4(n.receiver_noise_density * 1e12) + " pA x sqrt(" + g4(hw.timing->loop_period_ns) + " ns) / q = " +
      g4(n.receiver_electrons) + " electrons rms per detector sample, against the shot noise's sqrt(" + g4(n.photons_per_sample) + ") = " +
      g4(std::sqrt(n.photons_per_sample)) + " at full light";
}

}  // namespace

void derive_operating_point(const Reader& r, Hardware& hw) {
  if (!hw.noise) return;
  derive_photons(r, hw);
  derive_receiver(r, hw);
}

const EnergyComponent* EnergySpec::find(const std::string& name) const {
  for (const auto& c : components)
    if (c.name == name) return &c;
  return nullptr;
}

BandEntry read_band_entry(const Reader& r, const json& c, const std::string& F, const std::string& unit, const std::string& per,
                          bool at_bits, bool at_rate) {
  r.object(c, F);
  std::vector<std::string> keys{"min", "typ", "max", "unit", "source"};
  if (at_bits) keys.push_back("at_bits");
  if (at_rate) keys.push_back("at_rate_mhz");
  r.only_keys(c, F, keys);
  BandEntry e;
  if (const json* b = r.find(c, "at_bits")) e.at_bits = static_cast<int>(r.integer(*b, F + ".at_bits", 1, 24));
  if (const json* b = r.find(c, "at_rate_mhz")) e.at_rate_mhz = r.number(*b, F + ".at_rate_mhz", kPositive);
  const std::string u = r.text(r.need(c, F, "unit"), F + ".unit", false);
  if (u != unit) r.fail(F + ".unit", "expected \"" + unit + "\" (per " + per + "), got \"" + u + "\"");
  e.value.min = r.number(r.need(c, F, "min"), F + ".min", kNonNegative);
  e.value.typ = r.number(r.need(c, F, "typ"), F + ".typ", kNonNegative);
  e.value.max = r.number(r.need(c, F, "max"), F + ".max", kNonNegative);
  if (!(e.value.min <= e.value.typ && e.value.typ <= e.value.max))
    r.fail(F, "expected min <= typ <= max, got " + num(e.value.min) + ", " + num(e.value.typ) + ", " + num(e.value.max));
  e.source = r.text(r.need(c, F, "source"), F + ".source", true);
  return e;
}

EnergySpec read_energy(const Reader& r, const json& j, Hardware& hw) {
  EnergySpec e;
  r.object(j, "energy");
  std::vector<std::string> names;
  for (const auto& [name, kind] : kinds()) names.push_back(name);
  names.push_back("photon_budget");
  r.only_keys(j, "energy", names);
  for (const auto& [name, c] : j.items()) {
    if (name == "photon_budget") {
      PhotonBudget p;
      read_quantities(r, c, "energy.photon_budget",
                      {{"wavelength_nm", "nm", kPositive, &p.wavelength_nm},
                       {"optical_path_efficiency", "1", kEfficiency, &p.optical_path_efficiency},
                       {"detector_quantum_efficiency", "1", kEfficiency, &p.detector_quantum_efficiency},
                       {"led_wall_plug_efficiency", "1", kEfficiency, &p.led_wall_plug_efficiency},
                       {"photons_per_sample", "photons", kPositive, &p.photons_per_sample, false}},
                      hw);
      e.photon_budget = p;
      continue;
    }
    const std::string F = sub("energy", name);
    const Kind& kind = kinds().at(name);
    const bool converter = name == "dac" || name == "adc" || name == "slm_reload";
    const BandEntry b = read_band_entry(r, c, F, kind.unit, kind.action, converter, name == "dac" || name == "adc");
    EnergyComponent comp;
    comp.name = name;
    comp.action = kind.action;
    comp.unit = kind.unit;
    comp.value = b.value;
    comp.at_bits = b.at_bits;
    comp.at_rate_mhz = b.at_rate_mhz;
    comp.source = b.source;
    hw.sources[F] = comp.source;
    e.components.push_back(comp);
  }
  return e;
}

Workload inference_workload(const Hardware& hw, int n, long long fixed_points, double iterations) {
  if (!hw.timing) throw Error(hw.path + ": timing: missing (needed for the readout samples of the estimate)");
  Workload w;
  w.n = n;
  w.fixed_points = static_cast<double>(fixed_points);
  w.iterations_per_fixed_point = iterations;
  w.weight_writes = static_cast<double>(static_cast<long long>(n) * n);
  w.weight_reloads = 1;
  w.dac_conversions = static_cast<double>(n * fixed_points);
  w.adc_conversions = static_cast<double>(n * fixed_points * hw.timing->readout_samples);
  return w;
}

namespace {

// The counts the loop form derives (docs/energy.md), for those the workload leaves unset; in the
// explicit form (n = 0) an unset count is 0.
Workload resolved(const Workload& given, const TimingSpec& t) {
  Workload w = given;
  const bool loop = w.n > 0;
  const double F = w.fixed_points, K = w.iterations_per_fixed_point, n = w.n;
  const auto fill = [&](std::optional<double>& v, double from_loop) {
    if (!v) v = loop ? from_loop : 0.0;
  };
  fill(w.hold_periods, hold_periods(t, K));
  fill(w.led_channel_iterations, n * (K + *w.hold_periods) * F);
  fill(w.receiver_channel_iterations, n * (K + *w.hold_periods) * F);
  fill(w.analog_macs, n * n * K * F);
  fill(w.modules, 1);
  fill(w.reloaded_channels, n * w.weight_reloads);
  fill(w.loop_periods, F * K);
  fill(w.settle_events, F);
  fill(w.dac_steps, F);
  fill(w.adc_samples, F * t.readout_samples);
  if (!w.gpu_macs) w.gpu_macs = w.analog_macs;
  if (!w.gpu_distinct_weights) w.gpu_distinct_weights = w.n > 0 ? static_cast<double>(w.n) * w.n : w.weight_writes;
  return w;
}

}  // namespace

std::string gpu_precision(const Hardware& hw, const GpuChoice& gpu) {
  if (!gpu.precision.empty()) return gpu.precision;
  return hw.converters && hw.converters->slm_bits <= 8 ? "fp8" : "bf16";
}

EnergyReport estimate(const Hardware& hw, const Workload& given, const GpuChoice& gpu) {
  const auto missing = [&](const std::string& field, const std::string& why) {
    return Error(hw.path + ": " + field + ": missing (needed " + why + ")");
  };
  const auto source = [&](const std::string& key) {
    const auto it = hw.sources.find(key);
    return it == hw.sources.end() ? std::string("-") : it->second;
  };
  const bool loop_form = given.n > 0;
  if (given.n < 0) throw Error("estimate: n must be at least 1 (the loop form) or 0 (explicit counts), got " + std::to_string(given.n));
  if (loop_form && given.fixed_points < 1) throw Error("estimate: fixed points must be at least 1, got " + num(given.fixed_points));
  if (loop_form && !(given.iterations_per_fixed_point >= 0 && std::isfinite(given.iterations_per_fixed_point)))
    throw Error("estimate: iterations per fixed point must be finite and >= 0, got " + num(given.iterations_per_fixed_point));
  if (!hw.timing) throw missing("timing", "for the latency of the estimate");
  if (!hw.energy) throw missing("energy", "for the estimate");
  const TimingSpec& t = *hw.timing;
  const EnergySpec& e = *hw.energy;
  const Workload w = resolved(given, t);
  for (double c : {w.fixed_points, w.weight_writes, w.weight_reloads, w.dac_conversions, w.adc_conversions, w.digital_macs,
                   *w.led_channel_iterations, *w.receiver_channel_iterations, *w.hold_periods, *w.analog_macs, *w.modules,
                   *w.reloaded_channels, *w.loop_periods, *w.settle_events, *w.dac_steps, *w.adc_samples,
                   w.serial_digital_macs.value_or(0), *w.gpu_macs, *w.gpu_distinct_weights})
    if (!(c >= 0 && std::isfinite(c))) throw Error("estimate: action counts must be finite and >= 0, got " + num(c));

  EnergyReport rep;
  rep.machine = hw.name;
  rep.work = w;
  const double F = w.fixed_points, K = w.iterations_per_fixed_point;

  // Latency: the serial counts times their durations. The loop form's formulas say it per fixed
  // point: K loop periods, a settle, the readout window, one input conversion.
  const std::string per_fp = num(F) + " fixed points x ";
  // Derived counts to six digits: "26.26 loop periods", not the sum's rounding noise 26.259999999999998.
  const auto count = [](double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.6g", v);
    return std::string(buf);
  };
  const auto times = [&](double n, const char* what) { return count(n) + " " + what + " x "; };
  rep.latency = {
      {"loop", *w.loop_periods * t.loop_period_ns * 1e-9,
       (loop_form ? per_fp + num(K) + " iterations x " : times(*w.loop_periods, "loop periods")) + num(t.loop_period_ns) + " ns",
       "timing.loop_period_ns: " + source("timing.loop_period_ns")},
      {"settle", loop_form ? F * settle_after_ns(t, K) * 1e-9 : *w.settle_events * t.settle_ns * 1e-9,
       loop_form ? per_fp + "max(0, " + num(t.settle_ns) + " ns - " + num(K) + " iterations x " + num(t.loop_period_ns) +
                       " ns): the settle clock starts at loop closure"
                 : times(*w.settle_events, "readouts") + num(t.settle_ns) + " ns",
       "timing.settle_ns: " + source("timing.settle_ns")},
      {"readout", *w.adc_samples / (t.readout_rate_mhz * 1e6),
       (loop_form ? per_fp + std::to_string(t.readout_samples) + " samples / "
                  : count(*w.adc_samples) + " ADC samples in series (timing.readout_samples " + std::to_string(t.readout_samples) +
                        " per readout) / ") +
           num(t.readout_rate_mhz) + " MHz",
       "timing.readout_samples: " + source("timing.readout_samples") + " | timing.readout_rate_mhz: " + source("timing.readout_rate_mhz")},
      {"conversions", *w.dac_steps * t.dac_conversion_ns * 1e-9,
       loop_form ? per_fp + num(t.dac_conversion_ns) + " ns: one input conversion per fixed point, all channels in parallel "
                   "(the ADC's samples are the readout window)"
                 : times(*w.dac_steps, "DAC steps") + num(t.dac_conversion_ns) +
                       " ns: the channels of one step in parallel (the ADC's samples are the readout)",
       "timing.dac_conversion_ns: " + source("timing.dac_conversion_ns")},
  };
  double digital_s = 0;  // the digital phases, in series with the optics
  if (w.serial_digital_macs) {
    const double macs = *w.serial_digital_macs;
    if (macs > 0 && !(t.digital_gmac_per_s > 0))
      throw missing("timing.digital_gmac_per_s", "for the latency of " + g4(macs) + " digital MACs of the estimate");
    digital_s = macs > 0 ? macs / (t.digital_gmac_per_s * 1e9) : 0.0;
    rep.latency.push_back({"digital", digital_s,
                           count(macs) + " digital MACs in series / " + num(t.digital_gmac_per_s) + " GMAC/s",
                           "timing.digital_gmac_per_s: " + source("timing.digital_gmac_per_s")});
  }
  rep.latency.push_back({"weight_reload", w.weight_reloads * t.slm_reload_us * 1e-6,
                         count(w.weight_reloads) + " reload(s) x " + num(t.slm_reload_us) + " us",
                         "timing.slm_reload_us: " + source("timing.slm_reload_us")});
  for (const auto& l : rep.latency) rep.total_seconds += l.seconds;

  if (loop_form)
    rep.notes.push_back("always on: the LEDs, receivers and analog electronics are counted every loop period the loop is closed: " +
                        num(K) + " iterations and " + g4(*w.hold_periods) + " hold periods per fixed point (the settle left after the "
                        "iterations, " + num(settle_after_ns(t, K)) + " ns, and the readout window, " + num(readout_window_ns(t)) +
                        " ns, at " + num(t.loop_period_ns) + " ns): n x F x (K + hold) = " + g4(*w.receiver_channel_iterations) +
                        " channel-iterations; the analog MACs count the K iterations only");
  // Photon budget: from the workload, else the noise section, else the energy section's design point.
  double photons = 0;
  std::string photons_from;
  if (w.photons_per_sample) {
    if (!(*w.photons_per_sample > 0 && std::isfinite(*w.photons_per_sample)))
      throw Error("estimate: photons per sample must be > 0, got " + num(*w.photons_per_sample));
    photons = *w.photons_per_sample, photons_from = "the workload (--photons)";
  } else if (e.photon_budget && e.photon_budget->photons_per_sample > 0) {
    photons = e.photon_budget->photons_per_sample, photons_from = "energy.photon_budget.photons_per_sample";
  }
  if (photons > 0) {
    if (!e.photon_budget) throw missing("energy.photon_budget", "for the photon budget of " + num(photons) + " photons per sample");
    const PhotonBudget& p = *e.photon_budget;
    rep.photon_budget = true;
    rep.led_pj_photon = photons * p.led_joules_per_photon() * 1e12;
    const EnergyComponent* file_led = e.find("led_drive");
    rep.notes.push_back("photon budget: " + num(photons) + " photons per sample (from " + photons_from + ") x h c / " +
                        num(p.wavelength_nm) + " nm / (quantum efficiency " + num(p.detector_quantum_efficiency) +
                        " x optical path " + num(p.optical_path_efficiency) + ") / wall-plug " +
                        num(p.led_wall_plug_efficiency) + " = " + g4(rep.led_pj_photon) +
                        " pJ per channel_iteration: replaces " +
                        (file_led ? "the file's led_drive figure (typ " + num(file_led->value.typ) + " pJ)" : std::string("led_drive (the file has none)")));
  }

  // Through a weight reload the core waits with its electronics on: the reprogrammed modules'
  // receivers and analog electronics draw their power for the reload's loop periods, and the
  // controller, whose figure per fixed point is its power over the settle and the readout window,
  // for the reload's worth of those windows. The LEDs may be off: nothing is detected.
  const double reload_s = w.weight_reloads * t.slm_reload_us * 1e-6;
  const double reload_periods = t.slm_reload_us * 1e3 / t.loop_period_ns;  // per reload
  const double reload_channel_periods = *w.reloaded_channels * reload_periods;
  const double control_window_ns = t.settle_ns + readout_window_ns(t);
  const double reload_control = reload_s / (control_window_ns * 1e-9);  // in fixed points' worth
  if (reload_s > 0) {
    std::string note = "during the weight reloads (" + count(w.weight_reloads) + " x " + num(t.slm_reload_us) +
                       " us) the core waits with its receivers, analog electronics and controller on and its LEDs off: " +
                       count(*w.reloaded_channels) + " reloaded channel(s) x " + count(reload_periods) + " loop periods per reload (" +
                       num(t.slm_reload_us) + " us / " + num(t.loop_period_ns) + " ns) = " + g4(reload_channel_periods) +
                       " receiver and analog channel-iterations beside the loop's";
    if (const EnergyComponent* c = e.find("control"))
      note += "; the controller's " + g4(c->value.typ * 1e-12) + " J per fixed point is its power over one fixed point's settle and "
              "readout window (" + num(t.settle_ns) + " ns + " + num(readout_window_ns(t)) + " ns): " +
              g4(c->value.typ * 1e-12 / (control_window_ns * 1e-9)) + " W, billed over the reloads as " + g4(reload_s) + " s / " +
              num(control_window_ns) + " ns = " + g4(reload_control) + " fixed points' worth (" + g4(reload_control * c->value.typ * 1e-12) +
              " J typ)";
    rep.notes.push_back(note);
  }
  // Through the digital phases (the serial digital MACs between the optical passes) the modules
  // wait as through a reload: every channel of each module in use keeps its receivers and analog
  // electronics on (biased amplifiers are not gated off for microseconds), and the controller runs.
  const double digital_channel_periods = *w.modules * hw.channels * digital_s / (t.loop_period_ns * 1e-9);
  const double digital_control = digital_s / (control_window_ns * 1e-9);
  if (digital_s > 0)
    rep.notes.push_back("during the digital phases (" + g4(digital_s) + " s of serial digital MACs) the modules wait with their receivers, "
                        "analog electronics and controller on and their LEDs off: " + count(*w.modules) + " module(s) x " +
                        std::to_string(hw.channels) + " channels x " + g4(digital_s / (t.loop_period_ns * 1e-9)) + " loop periods = " +
                        g4(digital_channel_periods) + " receiver and analog channel-iterations, and " + g4(digital_control) +
                        " fixed points' worth of the controller");
  // Activation I/O: every conversion's code crosses the module's edge, each DAC input in and each
  // ADC sample out (the module has no digital logic: a readout window's samples are averaged off it).
  double activation_bits = 0;
  if (w.dac_conversions + w.adc_conversions > 0) {
    if (!hw.converters)
      throw missing("converters", "for the bits of the activation I/O, " + g4(w.dac_conversions) + " DAC and " + g4(w.adc_conversions) +
                                      " ADC conversions of the estimate");
    const ConverterSpec& v = *hw.converters;
    activation_bits = w.dac_conversions * v.dac_bits + w.adc_conversions * v.adc_bits;
    rep.notes.push_back("activation I/O: " + g4(w.dac_conversions) + " DAC conversions x " + std::to_string(v.dac_bits) + " bits in + " +
                        g4(w.adc_conversions) + " ADC conversions x " + std::to_string(v.adc_bits) + " bits out (every ADC sample leaves "
                        "the module; a readout window's samples are averaged off it) = " + g4(activation_bits) + " bits");
  }

  // Energy: count of each component's action over the workload times its figure.
  for (const char* name : kEnergyComponents) {
    const Kind& kind = kinds().at(name);
    const std::string action = kind.action;
    double count = 0;
    if (action == "channel_iteration")
      count = std::string(name) == "led_drive" ? *w.led_channel_iterations
                                               : *w.receiver_channel_iterations + reload_channel_periods + digital_channel_periods;
    else if (action == "second") count = rep.total_seconds * *w.modules;
    else if (action == "weight_write") count = w.weight_writes;
    else if (action == "conversion") count = std::string(name) == "dac" ? w.dac_conversions : w.adc_conversions;
    else if (action == "bit") count = activation_bits;
    else if (action == "mac") count = w.digital_macs;
    else if (action == "fixed_point") count = F + reload_control + digital_control;
    const double scale = std::string(kind.unit) == "W" ? 1.0 : 1e-12;
    EnergyLine l{name, action, count, 0, {}, ""};
    const EnergyComponent* c = e.find(name);
    if (rep.photon_budget && l.name == "led_drive") {
      l.per_action = rep.led_pj_photon;
      const double j = count * rep.led_pj_photon * scale;
      l.joules = {j, j, j};
      l.source = "photon budget, computed (see notes) | photons: " +
                 (w.photons_per_sample ? std::string("given by the workload") : photons_from + ": " + source(photons_from)) +
                 " | wavelength: " + source("energy.photon_budget.wavelength_nm") +
                 " | optical path: " + source("energy.photon_budget.optical_path_efficiency") +
                 " | detector: " + source("energy.photon_budget.detector_quantum_efficiency") +
                 " | LED: " + source("energy.photon_budget.led_wall_plug_efficiency");
    } else if (c) {
      const auto [factor, how] = resolution_factor(hw, *c);
      l.per_action = c->value.typ * factor;
      l.joules = {count * c->value.min * factor * scale, count * c->value.typ * factor * scale, count * c->value.max * factor * scale};
      l.source = how.empty() ? c->source : how + "; the figure: " + c->source;
    } else if (count == 0) {
      l.source = "not in the file; not needed (count 0)";
    } else {
      throw missing("energy." + l.name, "for " + g4(count) + " " + action + (count == 1 ? "" : "s") + " of the estimate");
    }
    rep.total_joules.min += l.joules.min;
    rep.total_joules.typ += l.joules.typ;
    rep.total_joules.max += l.joules.max;
    rep.energy.push_back(l);
  }

  rep.analog_macs = *w.analog_macs;
  rep.ops = 2 * rep.analog_macs;
  rep.tops_per_watt = {rep.ops / rep.total_joules.max * 1e-12, rep.ops / rep.total_joules.typ * 1e-12,
                       rep.ops / rep.total_joules.min * 1e-12};

  // The GPU runs each of the AOC's optical passes in series as a kernel that waits for the one before.
  rep.gpu = gpu_roofline(find_gpu(gpu.gpu), gpu_precision(hw, gpu), gpu.batch, *w.gpu_macs, *w.analog_macs,
                         *w.gpu_distinct_weights, *w.loop_periods);
  return rep;
}

}  // namespace aoc
