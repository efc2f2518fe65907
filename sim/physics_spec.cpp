#include "sim/physics_spec.hpp"

#include <algorithm>
#include <cmath>

#include "sim/hardware_sections.hpp"

namespace aoc {

using namespace jsonr;

double readout_window_ns(const TimingSpec& t) { return t.readout_samples / t.readout_rate_mhz * 1e3; }

double settle_after_ns(const TimingSpec& t, double iterations) { return std::max(0.0, t.settle_ns - iterations * t.loop_period_ns); }

double hold_periods(const TimingSpec& t, double iterations) {
  return (settle_after_ns(t, iterations) + readout_window_ns(t)) / t.loop_period_ns;
}

double step_fraction(const TimingSpec& t) {
  if (t.bandwidth_mhz <= 0) return 1.0;
  // first-order response: after one period T the step is 1 - exp(-2 pi f T) complete
  return 1.0 - std::exp(-2.0 * M_PI * t.bandwidth_mhz * 1e6 * t.loop_period_ns * 1e-9);
}

void read_quantities(const Reader& r, const json& j, const std::string& section,
                     const std::vector<QuantityField>& fields, Hardware& hw) {
  r.object(j, section);
  std::vector<std::string> names;
  for (const auto& f : fields) names.push_back(f.name);
  r.only_keys(j, section, names);
  for (const auto& f : fields) {
    const json* e = r.find(j, f.name);
    if (!e) {
      if (f.required) r.fail(sub(section, f.name), "missing required field");
      continue;
    }
    const std::string F = sub(section, f.name);
    r.object(*e, F);
    r.only_keys(*e, F, {"value", "unit", "source"});
    const std::string unit = r.text(r.need(*e, F, "unit"), F + ".unit", false);
    if (unit != f.unit) r.fail(F + ".unit", "expected \"" + std::string(f.unit) + "\", got \"" + unit + "\"");
    *f.out = r.number(r.need(*e, F, "value"), F + ".value", f.range);
    hw.sources[F] = r.text(r.need(*e, F, "source"), F + ".source", true);
  }
}

namespace {
const Range kFraction{0, 1, true, true};
int bits(const Reader& r, double v, const std::string& field) {
  if (v != std::floor(v) || v < 1 || v > 24) r.fail(field, num(v) + " is not a whole number of bits from 1 to 24");
  return static_cast<int>(v);
}
}  // namespace

NoiseSpec read_noise(const Reader& r, const json& j, Hardware& hw) {
  NoiseSpec n;
  // photons_per_sample may be derived from the LED operating point instead of given: read the rest
  // as quantities and mark it (derive_operating_point fills it in once the energy section is read).
  json rest = j;
  if (const json* p = r.find(j, "photons_per_sample"); p && p->is_object() && p->contains("derived")) {
    const std::string F = "noise.photons_per_sample";
    r.only_keys(*p, F, {"derived", "unit", "source"});
    const std::string from = r.text(p->at("derived"), F + ".derived", false);
    if (from != "energy") r.fail(F + ".derived", "expected \"energy\" (the LED operating point of the energy section), got \"" + from + "\"");
    const std::string unit = r.text(r.need(*p, F, "unit"), F + ".unit", false);
    if (unit != "photons") r.fail(F + ".unit", "expected \"photons\", got \"" + unit + "\"");
    hw.sources[F] = r.text(r.need(*p, F, "source"), F + ".source", true);
    n.photons_derived = true;
    rest.erase("photons_per_sample");
  }
  read_quantities(r, rest, "noise",
                  {{"led_bias", "V", kPositive, &n.led_bias},
                   {"photons_per_sample", "photons", kNonNegative, &n.photons_per_sample, !n.photons_derived},
                   {"thermal_sigma", "V", kNonNegative, &n.thermal_sigma},
                   {"receiver_noise_density", "A/sqrt(Hz)", kNonNegative, &n.receiver_noise_density, false},
                   {"rin_sigma", "1", kFraction, &n.rin_sigma},
                   {"slm_fixed_pattern_sigma", "1", kFraction, &n.slm_fixed_pattern_sigma},
                   {"drift_sigma", "V", kNonNegative, &n.drift_sigma},
                   {"drift_time_us", "us", kPositive, &n.drift_time_us},
                   {"flicker_sigma", "V", kNonNegative, &n.flicker_sigma}},
                  hw);
  n.photons_band = {n.photons_per_sample, n.photons_per_sample};
  return n;
}

ConverterSpec read_converters(const Reader& r, const json& j, Hardware& hw) {
  ConverterSpec c;
  double slm = 0, dac = 0, adc = 0;
  read_quantities(r, j, "converters",
                  {{"slm_bits", "bit", kPositive, &slm},
                   {"dac_bits", "bit", kPositive, &dac},
                   {"dac_min", "V", kAny, &c.dac_range[0]},
                   {"dac_max", "V", kAny, &c.dac_range[1]},
                   {"adc_bits", "bit", kPositive, &adc},
                   {"adc_min", "V", kAny, &c.adc_range[0]},
                   {"adc_max", "V", kAny, &c.adc_range[1]}},
                  hw);
  c.slm_bits = bits(r, slm, "converters.slm_bits.value");
  if (c.slm_bits < 2) r.fail("converters.slm_bits.value", "signed weight codes need at least 2 bits");
  c.dac_bits = bits(r, dac, "converters.dac_bits.value");
  c.adc_bits = bits(r, adc, "converters.adc_bits.value");
  if (!(c.dac_range[0] < c.dac_range[1])) r.fail("converters.dac_max.value", "must be above dac_min");
  if (!(c.adc_range[0] < c.adc_range[1])) r.fail("converters.adc_max.value", "must be above adc_min");
  return c;
}

TimingSpec read_timing(const Reader& r, const json& j, Hardware& hw) {
  TimingSpec t;
  double samples = 0;
  read_quantities(r, j, "timing",
                  {{"loop_period_ns", "ns", kPositive, &t.loop_period_ns},
                   {"bandwidth_mhz", "MHz", kNonNegative, &t.bandwidth_mhz},
                   {"settle_ns", "ns", kNonNegative, &t.settle_ns},
                   {"readout_samples", "1", kPositive, &samples},
                   {"readout_rate_mhz", "MHz", kPositive, &t.readout_rate_mhz},
                   {"slm_reload_us", "us", kNonNegative, &t.slm_reload_us},
                   {"dac_conversion_ns", "ns", kNonNegative, &t.dac_conversion_ns},
                   {"digital_gmac_per_s", "GMAC/s", kPositive, &t.digital_gmac_per_s, false}},
                  hw);
  if (samples != std::floor(samples) || samples > 1e6) r.fail("timing.readout_samples.value", num(samples) + " is not a whole number of samples up to 1e6");
  t.readout_samples = static_cast<int>(samples);
  return t;
}

const std::vector<std::string>& analog_capable_functions() {
  static const std::vector<std::string> f = {"Add", "Sub", "Mul", "Neg", "Tanh", "Sigmoid", "Clip", "Relu"};
  return f;
}

bool ArchitectureSpec::analog(const std::string& op) const {
  return std::find(analog_functions.begin(), analog_functions.end(), op) != analog_functions.end();
}

ArchitectureSpec read_architecture(const Reader& r, const json& j, Hardware& hw) {
  ArchitectureSpec a;
  const std::string S = "architecture";
  r.object(j, S);
  r.only_keys(j, S, {"modules", "analog_functions", "partial_sums", "state_memory"});
  // Each entry is {"value", "source"} (modules also has "unit"); the source goes to hw.sources.
  const auto entry = [&](const char* key, bool unit) -> const json& {
    const std::string F = sub(S, key);
    const json& e = r.need(j, S, key);
    r.object(e, F);
    if (unit) {
      r.only_keys(e, F, {"value", "unit", "source"});
      const std::string u = r.text(r.need(e, F, "unit"), F + ".unit", false);
      if (u != "1") r.fail(F + ".unit", "expected \"1\", got \"" + u + "\"");
    } else {
      r.only_keys(e, F, {"value", "source"});
    }
    hw.sources[F] = r.text(r.need(e, F, "source"), F + ".source", true);
    return r.need(e, F, "value");
  };
  a.modules = static_cast<int>(r.integer(entry("modules", true), "architecture.modules.value", 1, 1'000'000));
  const json& f = entry("analog_functions", false);
  const std::string F = "architecture.analog_functions.value";
  if (!f.is_array()) r.fail(F, "expected an array of op names, got " + got(f));
  for (std::size_t i = 0; i < f.size(); ++i)
    a.analog_functions.push_back(r.choice(f[i], F + "[" + std::to_string(i) + "]", analog_capable_functions()));
  a.partial_sums = r.choice(entry("partial_sums", false), "architecture.partial_sums.value", {"analog", "digital"}) == "analog"
                       ? ArchitectureSpec::Sum::Analog
                       : ArchitectureSpec::Sum::Digital;
  a.state_memory = r.choice(entry("state_memory", false), "architecture.state_memory.value", {"digital", "analog"}) == "analog"
                       ? ArchitectureSpec::Memory::Analog
                       : ArchitectureSpec::Memory::Digital;
  return a;
}

}  // namespace aoc
