// The energy and latency model (sim/energy.hpp, docs/energy.md) and `aoc estimate`: a hand-computed
// case to the last digit, the latency formula, TOPS/W, the photon budget, the errors of the energy
// section, and the bundled machines' new sections.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <catch2/catch.hpp>

#include "tests/support.hpp"
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "sim/energy.hpp"
#include "sim/error.hpp"
#include "sim/hardware.hpp"

using aoc::test::Run;
using aoc::test::run_aoc;

namespace {

using json = nlohmann::ordered_json;
namespace fs = std::filesystem;
using Catch::Matchers::Contains;

// Every figure a power of two (or a small multiple), so that each product and sum is exact.
aoc::EnergyComponent comp(const std::string& name, const std::string& unit, double lo, double typ, double hi) {
  return {name, "", unit, {lo, typ, hi}, "test figure for " + name};
}

aoc::Hardware small_machine() {
  aoc::Hardware hw;
  hw.path = "small.json";
  hw.name = "small";
  hw.channels = 4;
  aoc::TimingSpec t;
  t.loop_period_ns = 16;
  t.settle_ns = 64;
  t.readout_samples = 4;
  t.readout_rate_mhz = 62.5;  // the 4-sample window is 64 ns, 4 loop periods
  t.slm_reload_us = 1024;
  t.dac_conversion_ns = 8;
  hw.timing = t;
  aoc::ConverterSpec v;
  v.slm_bits = 9;
  v.dac_bits = 8;
  v.adc_bits = 4;
  hw.converters = v;
  aoc::EnergySpec e;
  e.components = {comp("led_drive", "pJ", 1, 2, 4),       comp("photodetector_receiver", "pJ", 0.25, 0.5, 1),
                  comp("analog_electronics", "pJ", 0.5, 1, 2), comp("slm_static", "W", 1, 2, 4),
                  comp("slm_reload", "pJ", 2, 4, 8),      comp("dac", "pJ", 4, 8, 16),
                  comp("adc", "pJ", 1, 2, 4),             comp("activation_io", "pJ", 0.5, 1, 2),
                  comp("digital", "pJ", 0.125, 0.25, 0.5), comp("control", "pJ", 8, 16, 32)};
  hw.energy = e;
  return hw;
}

// n 4, 2 fixed points of 8 iterations, each closed for 8 + 4 periods (the 64 ns settle lies within
// the 128 ns of iterations, then the 64 ns readout window): 96 channel-iterations; 16 weight writes
// and one reload; 8 DAC and 32 ADC conversions (4 readout samples per channel), 8 x 8 + 32 x 4 =
// 192 bits of activation I/O; 64 digital MACs.
aoc::Workload small_work() {
  aoc::Workload w;
  w.n = 4;
  w.fixed_points = 2;
  w.iterations_per_fixed_point = 8;
  w.weight_writes = 16;
  w.weight_reloads = 1;
  w.dac_conversions = 8;
  w.adc_conversions = 32;
  w.digital_macs = 64;
  return w;
}

// loop 2 x 8 x 16 ns, no settle left after the iterations, readout 2 x 4 samples / 62.5 MHz, 2 x 8 ns
// input conversion, one 1024 us reload.
const double kSmallSeconds = 256e-9 + 128e-9 + 16e-9 + 1024e-6;
// The one 1024 us reload: 4 channels x 1024 us / 16 ns = 256,000 receiver and analog channel-periods,
// and the controller for 1024 us / (64 ns settle + 64 ns window) = 8000 fixed points' worth.
const double kReloadChannelPeriods = 4 * 64000;
const double kReloadControl = 8000;

template <class Line>
const Line& named(const std::vector<Line>& lines, const std::string& name) {
  const auto it = std::find_if(lines.begin(), lines.end(), [&](const Line& l) { return l.name == name; });
  REQUIRE(it != lines.end());
  return *it;
}
const aoc::EnergyLine& line(const aoc::EnergyReport& r, const std::string& name) { return named(r.energy, name); }
const aoc::LatencyLine& lat(const aoc::EnergyReport& r, const std::string& name) { return named(r.latency, name); }

// One component's line of 1000 fixed points of 10 iterations on every channel of the file's machine
// with the overrides `set` (the figures per action do not depend on the counts).
aoc::EnergyLine component_line(const aoc::HardwareFile& file, const std::vector<std::string>& set, const std::string& name) {
  const aoc::Hardware hw = file.load(set);
  return line(aoc::estimate(hw, aoc::inference_workload(hw, hw.channels, 1000, 10)), name);
}

// A bundled file as JSON, to be edited and loaded from a temporary file.
json bundled(const std::string& name) {
  std::ifstream in(std::string(AOC_SOURCE_DIR) + "/scenarios/hardware/" + name + ".json");
  REQUIRE(in);
  return json::parse(in);
}

// Loads `j` from a temporary file; returns the aoc::Error message ("" if it loaded).
std::string load_error(const json& j) {
  const fs::path p = fs::temp_directory_path() / ("aoc-test-energy-" + std::to_string(::getpid()) + ".json");
  std::ofstream(p) << j.dump(1);
  std::string msg;
  try {
    aoc::load_hardware(p.string());
  } catch (const aoc::Error& e) {
    msg = e.what();
  }
  fs::remove(p);
  return msg;
}

std::string estimate_error(const aoc::Hardware& hw, const aoc::Workload& w) {
  try {
    aoc::estimate(hw, w);
  } catch (const aoc::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("energy: a hand-computed workload gives every line and the total to the last digit") {
  const aoc::EnergyReport r = aoc::estimate(small_machine(), small_work());
  // count x figure: 96 channel-iterations x 2 pJ (LEDs); 96 + 256,000 (the reload) x 0.5 and 1 pJ;
  // 16 writes x 4 pJ; 8 x 8 pJ; 32 x 2 pJ; 192 bits x 1 pJ; 64 x 0.25 pJ; 2 + 8000 x 16 pJ
  const double rx = 96 + kReloadChannelPeriods, ctl = 2 + kReloadControl;
  CHECK(line(r, "led_drive").count == Approx(96).epsilon(1e-14));
  CHECK(line(r, "led_drive").joules.typ == Approx(192e-12).epsilon(1e-14));
  CHECK(line(r, "led_drive").joules.min == Approx(96e-12).epsilon(1e-14));
  CHECK(line(r, "led_drive").joules.max == Approx(384e-12).epsilon(1e-14));
  CHECK(line(r, "photodetector_receiver").count == Approx(rx).epsilon(1e-14));
  CHECK(line(r, "photodetector_receiver").joules.typ == Approx(rx * 0.5e-12).epsilon(1e-14));
  CHECK(line(r, "analog_electronics").joules.typ == Approx(rx * 1e-12).epsilon(1e-14));
  CHECK(line(r, "slm_static").count == Approx(kSmallSeconds).epsilon(1e-14));
  CHECK(line(r, "slm_static").joules.typ == Approx(2 * kSmallSeconds).epsilon(1e-14));
  CHECK(line(r, "slm_static").joules.max == Approx(4 * kSmallSeconds).epsilon(1e-14));
  CHECK(line(r, "slm_reload").joules.typ == 64e-12);
  CHECK(line(r, "dac").joules.typ == 64e-12);
  CHECK(line(r, "adc").joules.typ == 64e-12);
  CHECK(line(r, "activation_io").count == 192);
  CHECK(line(r, "activation_io").joules.typ == 192e-12);
  CHECK(line(r, "digital").joules.typ == 16e-12);
  CHECK(line(r, "control").count == Approx(ctl).epsilon(1e-14));
  CHECK(line(r, "control").joules.typ == Approx(ctl * 16e-12).epsilon(1e-14));
  CHECK(line(r, "control").source == "test figure for control");
  CHECK(r.total_joules.typ ==
        Approx(192e-12 + rx * 1.5e-12 + 2 * kSmallSeconds + 64e-12 + 64e-12 + 64e-12 + 192e-12 + 16e-12 + ctl * 16e-12).epsilon(1e-14));
  CHECK(r.total_joules.min ==
        Approx(96e-12 + rx * 0.75e-12 + 1 * kSmallSeconds + 32e-12 + 32e-12 + 32e-12 + 96e-12 + 8e-12 + ctl * 8e-12).epsilon(1e-14));
  CHECK(r.total_joules.max ==
        Approx(384e-12 + rx * 3e-12 + 4 * kSmallSeconds + 128e-12 + 128e-12 + 128e-12 + 384e-12 + 32e-12 + ctl * 32e-12).epsilon(1e-14));
  CHECK_FALSE(r.photon_budget);
}

TEST_CASE("energy: activation I/O is the bits of every conversion, each DAC input in and each ADC sample out") {
  // the loop form: n x F DAC conversions at dac_bits, n x F x readout_samples ADC samples at adc_bits
  const aoc::Hardware hw = small_machine();
  const aoc::EnergyReport r = aoc::estimate(hw, aoc::inference_workload(hw, 4, 2, 8));
  CHECK(line(r, "activation_io").action == "bit");
  CHECK(line(r, "activation_io").count == 4 * 2 * 8 + 4 * 2 * 4 * 4);
  CHECK(line(r, "activation_io").joules.max == (4 * 2 * 8 + 4 * 2 * 4 * 4) * 2e-12);
  // the bundled bench machine: 48 channels x 64 fixed points, an 8-bit DAC, 40 samples of a 10-bit ADC
  const aoc::Hardware b = aoc::load_hardware(aoc::resolve_hardware_path("aoc-48"));
  const aoc::EnergyLine io = line(aoc::estimate(b, aoc::inference_workload(b, 48, 64, 10)), "activation_io");
  CHECK(io.count == 48.0 * 64 * 8 + 48.0 * 64 * 40 * 10);
  CHECK(io.joules.typ == Approx(io.count * b.energy->find("activation_io")->value.typ * 1e-12).epsilon(1e-14));
  CHECK_FALSE(io.source.empty());
  // the bits follow the converters' resolution
  aoc::Hardware wide = small_machine();
  wide.converters->adc_bits = 12;
  CHECK(line(aoc::estimate(wide, small_work()), "activation_io").count == 8 * 8 + 32 * 12);
  // without a converters section the bits are unknown: an error naming it
  aoc::Hardware none = small_machine();
  none.converters.reset();
  CHECK_THAT(estimate_error(none, small_work()), Contains("small.json: converters: missing"));
}

TEST_CASE("energy: through the digital phases every channel in use keeps its receivers, electronics and controller on") {
  aoc::Hardware hw = small_machine();
  hw.timing->digital_gmac_per_s = 0.0625;  // 1000 serial MACs: 16 us, 1000 loop periods of 16 ns
  aoc::Workload w = small_work();
  w.serial_digital_macs = 0;
  w.modules = 3;
  const aoc::EnergyReport without = aoc::estimate(hw, w);
  w.serial_digital_macs = 1000;
  const aoc::EnergyReport with = aoc::estimate(hw, w);
  CHECK(line(with, "led_drive").count == line(without, "led_drive").count);
  // 3 modules x 4 channels x 1000 loop periods; the controller for 16 us / 128 ns
  CHECK(line(with, "photodetector_receiver").count - line(without, "photodetector_receiver").count == Approx(3 * 4 * 1000));
  CHECK(line(with, "analog_electronics").count - line(without, "analog_electronics").count == Approx(3 * 4 * 1000));
  CHECK(line(with, "control").count - line(without, "control").count == Approx(16e-6 / 128e-9));
  CHECK(std::any_of(with.notes.begin(), with.notes.end(), [](const std::string& n) { return n.find("digital phases") != std::string::npos; }));
  CHECK(std::none_of(without.notes.begin(), without.notes.end(), [](const std::string& n) { return n.find("digital phases") != std::string::npos; }));
}

TEST_CASE("energy: through a weight reload the receivers, analog electronics and controller stay on, the LEDs off") {
  aoc::Workload w = small_work();
  w.weight_reloads = 0;
  const aoc::EnergyReport without = aoc::estimate(small_machine(), w);
  const aoc::EnergyReport with = aoc::estimate(small_machine(), small_work());
  CHECK(*with.work.reloaded_channels == 4);  // the loop form: n channels per reload
  CHECK(line(with, "led_drive").count == line(without, "led_drive").count);
  CHECK(line(with, "photodetector_receiver").count - line(without, "photodetector_receiver").count == Approx(kReloadChannelPeriods));
  CHECK(line(with, "analog_electronics").count - line(without, "analog_electronics").count == Approx(kReloadChannelPeriods));
  CHECK(line(with, "control").count - line(without, "control").count == Approx(kReloadControl));
  bool said = false;
  for (const auto& n : with.notes) said = said || (n.find("LEDs off") != std::string::npos && n.find("(1024 us / 16 ns)") != std::string::npos);
  CHECK(said);
  // proportional to the reload time: what a reload adds doubles with timing.slm_reload_us
  const aoc::HardwareFile file(aoc::resolve_hardware_path("aoc-48"));
  auto at = [&](const std::string& us) {
    const aoc::Hardware hw = file.load({"timing.slm_reload_us=" + us});
    return aoc::estimate(hw, aoc::inference_workload(hw, 48, 64, 10));
  };
  const aoc::EnergyReport r0 = at("0"), r1 = at("10000"), r2 = at("20000");
  for (const char* name : {"photodetector_receiver", "analog_electronics", "control"}) {
    INFO(name);
    const double added = line(r1, name).joules.typ - line(r0, name).joules.typ;
    CHECK(added > 0);
    CHECK(line(r2, name).joules.typ - line(r0, name).joules.typ == Approx(2 * added).epsilon(1e-9));
  }
  // aoc-48's 10 ms: 48 channels x 500,000 periods x 2 nJ (receivers) and 3 nJ (analog); the controller's
  // 18 uJ per 2.5 us settle + 6.4 us window, 2.02 W, for 10 ms
  CHECK(line(r1, "photodetector_receiver").joules.typ - line(r0, "photodetector_receiver").joules.typ == Approx(48 * 5e5 * 2e-9));
  CHECK(line(r1, "analog_electronics").joules.typ - line(r0, "analog_electronics").joules.typ == Approx(48 * 5e5 * 3e-9));
  CHECK(line(r1, "control").joules.typ - line(r0, "control").joules.typ == Approx(18e-6 * 10e-3 / 8.9e-6));
  CHECK(line(r1, "led_drive").joules.typ == line(r0, "led_drive").joules.typ);
}

TEST_CASE("energy: latency is iterations x loop period, the settle left after them and the readout window per fixed point, plus the reloads") {
  const aoc::EnergyReport r = aoc::estimate(small_machine(), small_work());
  CHECK(lat(r, "loop").seconds == 256e-9);  // 2 fixed points x 8 iterations x 16 ns
  CHECK(lat(r, "settle").seconds == 0);     // the 64 ns settle ran during the 128 ns of iterations
  CHECK(lat(r, "readout").seconds == Approx(128e-9).epsilon(1e-14));  // 2 x 4 samples / 62.5 MHz
  CHECK(lat(r, "conversions").seconds == 16e-9);  // 2 x 8 ns
  CHECK_THAT(lat(r, "conversions").source, Contains("timing.dac_conversion_ns"));
  CHECK(lat(r, "weight_reload").seconds == 1024e-6);  // 1 reload x 1024 us
  CHECK(r.total_seconds == Approx(kSmallSeconds).epsilon(1e-14));
}

TEST_CASE("energy: the settle clock starts at loop closure, so a short solve waits for the rest of the settle") {
  aoc::Workload w = small_work();
  w.iterations_per_fixed_point = 2;  // 32 ns of iterations: 32 ns of the 64 ns settle remain
  const aoc::EnergyReport r = aoc::estimate(small_machine(), w);
  CHECK(lat(r, "settle").seconds == Approx(2 * 32e-9).epsilon(1e-14));
  CHECK_THAT(lat(r, "settle").formula, Contains("the settle clock starts at loop closure"));
}

TEST_CASE("energy: the LEDs, receivers and analog electronics are on every period the loop is closed, through settle and readout") {
  aoc::Workload w = small_work();
  w.weight_reloads = 0;              // the loop alone (a reload keeps the receivers on too: below)
  w.iterations_per_fixed_point = 2;  // closed for 2 iterations + 2 settle periods + 4 readout periods
  const aoc::EnergyReport r = aoc::estimate(small_machine(), w);
  CHECK(*r.work.hold_periods == Approx(6).epsilon(1e-14));
  for (const char* name : {"led_drive", "photodetector_receiver", "analog_electronics"}) {
    INFO(name);
    CHECK(line(r, name).count == Approx(4 * (2 + 6) * 2).epsilon(1e-14));  // n x (K + hold) x F
  }
  CHECK(r.analog_macs == 4 * 4 * 2 * 2);  // the MACs count the iterations only
}

TEST_CASE("energy: TOPS/W is 2 n n K F ops over the energy, its band from the max and min energy") {
  const aoc::EnergyReport r = aoc::estimate(small_machine(), small_work());
  CHECK(r.analog_macs == 256);  // 4 x 4 x 8 x 2
  CHECK(r.ops == 512);
  CHECK(r.tops_per_watt.typ == 512 / r.total_joules.typ * 1e-12);
  CHECK(r.tops_per_watt.min == 512 / r.total_joules.max * 1e-12);
  CHECK(r.tops_per_watt.max == 512 / r.total_joules.min * 1e-12);
}

TEST_CASE("energy: the GPU comparison defaults to the H100 SXM at the machine's precision, batch 1, on the same MACs") {
  const aoc::EnergyReport r = aoc::estimate(small_machine(), small_work());
  CHECK(r.gpu.gpu == "h100-sxm");
  CHECK(r.gpu.precision == "bf16");  // 9-bit SLM codes
  CHECK(r.gpu.batch == 1);
  CHECK(r.gpu.macs == 256);
  CHECK(r.gpu.weights_in_l2);  // 4 x 4 weights
  CHECK(r.gpu.weight_bytes == 32);
  CHECK(r.gpu.compute_seconds == Approx(512 / 989.4e12).epsilon(1e-12));
  CHECK(r.gpu.kernels == aoc::estimate(small_machine(), small_work()).gpu.kernels);
  CHECK(r.gpu.joules ==
        Approx(700 * (std::max({r.gpu.compute_seconds, r.gpu.memory_seconds, r.gpu.l2_seconds}) + r.gpu.launch_seconds)).epsilon(1e-12));
  CHECK_THAT(r.gpu.source, Contains("physics.md"));
  const aoc::EnergyReport b = aoc::estimate(small_machine(), small_work(), {"b200", "fp8", 1});
  CHECK(b.gpu.name == "NVIDIA B200 (HGX)");
  CHECK(b.gpu.compute_seconds == Approx(512 / 4500e12).epsilon(1e-12));
}

TEST_CASE("energy: in photon-budget mode the LED energy follows from the photon count and replaces the file's led_drive") {
  aoc::Hardware hw = small_machine();
  hw.energy->photon_budget = aoc::PhotonBudget{520, 0.25, 0.8, 0.2, 0};
  aoc::Workload w = small_work();
  w.photons_per_sample = 65536;
  const aoc::EnergyReport r = aoc::estimate(hw, w);
  const double pj = 65536 * (6.62607015e-34 * 299792458.0 / 520e-9) / (0.8 * 0.25) / 0.2 * 1e12;  // 0.626 pJ
  CHECK(r.photon_budget);
  CHECK(r.led_pj_photon == Approx(pj).epsilon(1e-12));
  CHECK(r.led_pj_photon == Approx(0.6259).epsilon(1e-4));
  const aoc::EnergyLine& led = line(r, "led_drive");
  CHECK(led.joules.typ == Approx(96 * pj * 1e-12).epsilon(1e-12));
  CHECK(led.joules.min == led.joules.typ);
  CHECK(led.joules.max == led.joules.typ);
  CHECK_THAT(led.source, Contains("photon budget"));
  bool said = false;
  for (const auto& n : r.notes) said = said || n.find("replaces the file's led_drive") != std::string::npos;
  CHECK(said);
}

TEST_CASE("energy: the photon count comes from the workload before the energy section's design point") {
  aoc::Hardware hw = small_machine();
  hw.energy->photon_budget = aoc::PhotonBudget{520, 0.25, 0.8, 0.2, 256};
  const double from_file = aoc::estimate(hw, small_work()).led_pj_photon;
  // the noise section's shot-noise level does not switch the energy model to the photon budget:
  // a bench-top machine's LEDs burn their bias current whatever the detectors receive
  aoc::NoiseSpec noise;
  noise.photons_per_sample = 1024;
  hw.noise = noise;
  CHECK(aoc::estimate(hw, small_work()).led_pj_photon == from_file);
  aoc::Workload w = small_work();
  w.photons_per_sample = 4096;
  const double from_work = aoc::estimate(hw, w).led_pj_photon;
  CHECK(from_work == Approx(16 * from_file).epsilon(1e-12));
}

TEST_CASE("energy: a photon count without a photon_budget section is an error naming it") {
  aoc::Workload w = small_work();
  w.photons_per_sample = 100;
  const std::string msg = estimate_error(small_machine(), w);
  CHECK_THAT(msg, Contains("small.json: energy.photon_budget: missing"));
}

TEST_CASE("energy: a component the workload needs but the file lacks is an error naming it") {
  aoc::Hardware hw = small_machine();
  auto& c = hw.energy->components;
  c.erase(std::remove_if(c.begin(), c.end(), [](const auto& x) { return x.name == "adc"; }), c.end());
  const std::string msg = estimate_error(hw, small_work());
  CHECK_THAT(msg, Contains("small.json: energy.adc: missing"));
  CHECK_THAT(msg, Contains("32 conversions"));
}

TEST_CASE("energy: a component the file lacks and the workload does not use contributes nothing") {
  aoc::Hardware hw = small_machine();
  auto& c = hw.energy->components;
  c.erase(std::remove_if(c.begin(), c.end(), [](const auto& x) { return x.name == "digital"; }), c.end());
  aoc::Workload w = small_work();
  w.digital_macs = 0;
  const aoc::EnergyReport r = aoc::estimate(hw, w);
  CHECK(line(r, "digital").joules.max == 0);
  CHECK(r.total_joules.typ == Approx(aoc::estimate(small_machine(), small_work()).total_joules.typ - 16e-12).epsilon(1e-14));
}

TEST_CASE("energy: a machine without a timing section cannot be estimated") {
  aoc::Hardware hw = small_machine();
  hw.timing.reset();
  CHECK_THAT(estimate_error(hw, small_work()), Contains("small.json: timing: missing"));
}

TEST_CASE("energy: an unknown component in the file is an error naming it") {
  json j = bundled("aoc-16");
  j["energy"]["laser"] = {{"min", 1}, {"typ", 2}, {"max", 3}, {"unit", "pJ"}, {"source", "x"}};
  const std::string msg = load_error(j);
  CHECK_THAT(msg, Contains("energy.laser: unknown key"));
  CHECK(msg.find('\n') == std::string::npos);
}

TEST_CASE("energy: an unknown photon_budget parameter is an error naming it") {
  json j = bundled("aoc-16");
  j["energy"]["photon_budget"]["fill_factor"] = {{"value", 1}, {"unit", "1"}, {"source", "x"}};
  CHECK_THAT(load_error(j), Contains("energy.photon_budget.fill_factor: unknown key"));
}

TEST_CASE("energy: a band must have min <= typ <= max") {
  json j = bundled("aoc-16");
  j["energy"]["adc"]["min"] = 100;
  CHECK_THAT(load_error(j), Contains("energy.adc: expected min <= typ <= max"));
  j = bundled("aoc-16");
  j["energy"]["adc"]["max"] = 1;
  CHECK_THAT(load_error(j), Contains("energy.adc: expected min <= typ <= max"));
}

TEST_CASE("energy: the bundled machines load with their timing, converters and energy sections") {
  for (const char* name : {"aoc-48", "aoc-16"}) {
    INFO(name);
    const aoc::Hardware hw = aoc::load_hardware(aoc::resolve_hardware_path(name));
    REQUIRE(hw.timing);
    CHECK(hw.timing->loop_period_ns == 20);
    CHECK(hw.timing->readout_samples == 40);
    CHECK(hw.timing->readout_rate_mhz == 6.25);
    REQUIRE(hw.converters);
    CHECK(hw.converters->slm_bits == 9);
    CHECK(hw.converters->dac_range[0] == hw.clip_lo);
    REQUIRE(hw.energy);
    CHECK(hw.energy->components.size() == 10);
    REQUIRE(hw.energy->photon_budget);
    CHECK(hw.energy->photon_budget->wavelength_nm == 520);
    for (const auto& c : hw.energy->components) CHECK_FALSE(c.source.empty());
    CHECK(hw.sources.count("energy.led_drive") == 1);
    CHECK(hw.sources.count("timing.slm_reload_us") == 1);
  }
}

TEST_CASE("energy: the at-scale module has 2048 channels and an 8-bit photon budget") {
  const aoc::Hardware hw = aoc::load_hardware(aoc::resolve_hardware_path("aoc-scale"));
  CHECK(hw.channels == 2048);
  CHECK(hw.fan_in_pos.size() == 2048);
  REQUIRE(hw.energy);
  REQUIRE(hw.energy->photon_budget);
  CHECK(hw.energy->photon_budget->photons_per_sample == 65536);  // 4^8
  const aoc::EnergyReport r = aoc::estimate(hw, aoc::inference_workload(hw, 2048, 1000, 16));
  CHECK(r.photon_budget);
  CHECK(r.tops_per_watt.min <= r.tops_per_watt.typ);
  CHECK(r.tops_per_watt.typ <= r.tops_per_watt.max);
  CHECK(r.gpu.joules > r.total_joules.typ);
}

TEST_CASE("energy: aoc estimate prints a TOPS/W figure for aoc-scale and exits 0") {
  const Run r = run_aoc("estimate --hw aoc-scale --iterations 16 --fixed-points 1000");
  INFO(r.out);
  CHECK(r.status == 0);
  CHECK_THAT(r.out, Contains("TOPS/W: "));
  CHECK_THAT(r.out, Contains("photon budget: 65536 photons per sample"));
  CHECK_THAT(r.out, Contains("H100"));
}

TEST_CASE("energy: aoc estimate measures the iterations on the loop when none are given") {
  const Run r = run_aoc("estimate --hw aoc-16");
  INFO(r.out);
  CHECK(r.status == 0);
  CHECK_THAT(r.out, Contains("iterations measured: every sample settled"));
}

TEST_CASE("energy: under too few photons aoc estimate reports non-convergence and counts the cap") {
  auto measured = [](const std::string& photons) {
    const Run r = run_aoc("estimate --hw aoc-48 --photons " + photons + " --json");
    INFO(r.out);
    REQUIRE(r.status == 0);
    return json::parse(r.out);
  };
  const json few = measured("100"), many = measured("1e8");
  // at 100 photons the shot noise moves the state by more than half an ADC step every iteration
  CHECK(few["iterations_measured"]["samples_settled"] == 0);
  CHECK(few["iterations_measured"]["converged"] == false);
  CHECK(few["iterations_per_fixed_point"] == few["iterations_measured"]["cap"]);
  CHECK(few["iterations_measured"]["last_step_max_residual_rms"].get<double>() >
        few["iterations_measured"]["tolerance_rms_per_channel"].get<double>());
  CHECK_THAT(few["iterations_from"].get<std::string>(), Contains("NOT CONVERGED, 0 of 64 samples settled"));
  // a run that delivers no fixed point has no efficiency to report (fewer joules must not score better)
  CHECK(few["converged"] == false);
  CHECK(few["tops_per_watt"].is_null());
  CHECK_THAT(few["tops_per_watt_withheld"].get<std::string>(), Contains("did not converge"));
  CHECK(many["converged"] == true);
  CHECK(many["tops_per_watt"]["typ"].get<double>() > 0);
  // at 1e8 every sample settles, in fewer iterations; K is the p99 of their settling steps
  CHECK(many["iterations_measured"]["samples_settled"] == 64);
  CHECK(many["iterations_per_fixed_point"] == many["iterations_measured"]["settled_step_p99"]);
  CHECK(many["iterations_per_fixed_point"].get<double>() < few["iterations_per_fixed_point"].get<double>());
}

TEST_CASE("energy: aoc estimate --bits finds the photons that leave that many bits of the product against shot noise") {
  auto at = [](int bits) {
    const Run r = run_aoc("estimate --hw aoc-48 --iterations 10 --json --bits " + std::to_string(bits));
    INFO(r.out);
    REQUIRE(r.status == 0);
    return json::parse(r.out);
  };
  const json six = at(6), eight = at(8);
  const json& f6 = six["photons_for_bits"];
  const json& f8 = eight["photons_for_bits"];
  // measured, not assumed: the optics' term over the shot noise is 2^bits at the photons found
  CHECK(f6["bits_measured"].get<double>() == Approx(6).margin(0.05));
  CHECK(f8["bits_measured"].get<double>() == Approx(8).margin(0.05));
  CHECK(f8["optics_term_rms"].get<double>() / f8["shot_noise_rms"].get<double>() == Approx(256).epsilon(0.04));
  // shot noise falls as 1/sqrt(P): two more bits take about 16 times the light, not the 4^bits rule's
  // fixed count (the product's statistics and fan-in set it)
  const double p6 = f6["photons_per_sample"].get<double>(), p8 = f8["photons_per_sample"].get<double>();
  CHECK(p8 / p6 == Approx(16).epsilon(0.15));
  CHECK(p8 != Approx(65536).epsilon(0.5));
  // and the estimate runs in photon-budget mode at that count
  CHECK(eight["photon_budget"] == true);
  CHECK(eight["photons_for_bits"]["how"].get<std::string>().find("photons for 8 bits") == 0);
  // --bits is the loop estimate's, and not beside --photons
  CHECK(run_aoc("estimate --hw aoc-48 --bits 8 --photons 1000").status != 0);
}

TEST_CASE("energy: the measured iterations stop at half an ADC step rms per channel") {
  const Run r = run_aoc("estimate --hw aoc-48 --json");
  INFO(r.out);
  REQUIRE(r.status == 0);
  const json m = json::parse(r.out)["iterations_measured"];
  // aoc-48: a 10-bit ADC over -3.3 .. 3.3 V, 48 channels
  const double half_step = 0.5 * 6.6 / 1024;
  CHECK(m["tolerance_rms_per_channel"].get<double>() == Approx(half_step));
  CHECK(m["tolerance_l2"].get<double>() == Approx(half_step * std::sqrt(48.0)));
  CHECK(m["noise"] == true);
  CHECK(m["converters"] == true);
}

TEST_CASE("energy: aoc estimate --photons on a machine without a noise section is a one-line error naming the file") {
  json hw = json::parse(std::ifstream(aoc::resolve_hardware_path("aoc-16")));
  hw.erase("noise");
  const fs::path p = fs::temp_directory_path() / ("aoc-test-no-noise-" + std::to_string(::getpid()) + ".json");
  std::ofstream(p) << hw.dump();
  const Run r = run_aoc("estimate --hw " + p.string() + " --photons 1000 --iterations 10");
  fs::remove(p);
  CHECK(r.status != 0);
  CHECK_THAT(r.out, Contains("--photons: " + p.string() + " has no noise section"));
  CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 1);
}

TEST_CASE("energy: aoc estimate --json -o writes the report with every line's count and source") {
  const fs::path p = fs::temp_directory_path() / ("aoc-test-estimate-" + std::to_string(::getpid()) + ".json");
  const Run r = run_aoc("estimate --hw aoc-48 --iterations 16 --fixed-points 4 --json -o " + p.string());
  INFO(r.out);
  REQUIRE(r.status == 0);
  std::ifstream in(p);
  const json j = json::parse(in);
  fs::remove(p);
  CHECK(j["n"] == 48);
  CHECK(j["analog_macs"].get<double>() == 48.0 * 48 * 16 * 4);
  CHECK(j["energy"].size() == 10);
  for (const auto& l : j["energy"]) CHECK_FALSE(l["source"].get<std::string>().empty());
  for (const auto& l : j["latency"]) CHECK_FALSE(l["source"].get<std::string>().empty());
  CHECK(j["tops_per_watt"]["typ"].get<double>() > 0);
}

TEST_CASE("energy: a hardware file without activation_io cannot estimate conversions: a one-line error naming the file and the field") {
  json j = bundled("aoc-16");
  j["energy"].erase("activation_io");
  const fs::path p = fs::temp_directory_path() / ("aoc-test-estimate-noio-" + std::to_string(::getpid()) + ".json");
  std::ofstream(p) << j.dump(1);
  const Run r = run_aoc("estimate --iterations 10 --hw " + p.string());
  fs::remove(p);
  INFO(r.out);
  CHECK(r.status == 1);
  CHECK_THAT(r.out, Contains(p.string() + ": energy.activation_io: missing (needed for"));
  CHECK_THAT(r.out, Contains("bits of the estimate"));
  CHECK(r.out.find('\n') == r.out.size() - 1);
}

TEST_CASE("energy: aoc estimate of a machine without an energy section is a one-line error") {
  json j = bundled("aoc-16");
  j.erase("energy");
  j["noise"]["photons_per_sample"] = {{"value", 1e5}, {"unit", "photons"}, {"source", "given: nothing to derive it from"}};
  const fs::path p = fs::temp_directory_path() / ("aoc-test-estimate-noenergy-" + std::to_string(::getpid()) + ".json");
  std::ofstream(p) << j.dump(1);
  const Run r = run_aoc("estimate --iterations 10 --hw " + p.string());
  fs::remove(p);
  INFO(r.out);
  CHECK(r.status == 1);
  CHECK_THAT(r.out, Contains("energy: missing"));
  CHECK(r.out.find('\n') == r.out.size() - 1);
}

TEST_CASE("energy: aoc estimate --help shows an example") {
  const Run r = run_aoc("estimate --help");
  CHECK(r.status == 0);
  CHECK_THAT(r.out, Contains("Example"));
}

TEST_CASE("energy: every file a source cites is in the repository, and nothing cites a path outside it") {
  const std::filesystem::path root = AOC_SOURCE_DIR;
  std::vector<std::filesystem::path> files = {root / "scenarios" / "gpus.json"};
  for (const auto& e : std::filesystem::directory_iterator(root / "scenarios" / "hardware")) files.push_back(e.path());
  const std::regex cited(R"(((?:docs|scenarios|scripts|models|sim|runtime|compiler)/[A-Za-z0-9_./-]+\.(?:md|json|yaml|py|cpp|hpp)))");
  int paths = 0;
  for (const auto& f : files) {
    std::ifstream in(f);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    INFO(f.string());
    CHECK(text.find("../") == std::string::npos);      // nothing outside the repository
    CHECK(text.find("shared/research") == std::string::npos);
    CHECK(!std::regex_search(text, std::regex(R"((^|[^/\w])physics\.md)")));  // research notes by their repository path
    for (std::sregex_iterator it(text.begin(), text.end(), cited), end; it != end; ++it) {
      INFO((*it)[1].str());
      CHECK(std::filesystem::exists(root / (*it)[1].str()));
      ++paths;
    }
  }
  CHECK(paths > 50);
}

TEST_CASE("energy: the noise's photons are the light the LED energy pays for, and move with the LED drive") {
  const aoc::HardwareFile file(aoc::resolve_hardware_path("aoc-48"));
  const aoc::Hardware base = file.load({}), half = file.load({"energy.led_drive.typ=600"});
  REQUIRE(base.noise);
  CHECK(base.noise->photons_derived);
  // 1200 pJ x wall-plug 0.1 x path 0.25 x QE 0.8 / (h c / 520 nm) = 6.28e7
  const double photon_j = 6.62607015e-34 * 299792458.0 / 520e-9;
  CHECK(base.noise->photons_per_sample == Approx(1200e-12 * 0.1 * 0.25 * 0.8 / photon_j).epsilon(1e-12));
  CHECK(base.noise->photons_per_sample == Approx(6.283e7).epsilon(1e-3));
  CHECK(base.noise->photons_band[0] == Approx(base.noise->photons_per_sample / 4).epsilon(1e-12));  // 300 pJ
  CHECK(base.noise->photons_band[1] == Approx(base.noise->photons_per_sample * 2).epsilon(1e-12));  // 2400 pJ
  CHECK_THAT(base.sources.at("noise.photons_per_sample"), Catch::Matchers::StartsWith("derived: energy.led_drive 1200 pJ"));
  // half the LED energy: half the photons (twice the shot-noise variance) and half the LED line
  CHECK(half.noise->photons_per_sample == Approx(base.noise->photons_per_sample / 2).epsilon(1e-12));
  const aoc::Workload w = aoc::inference_workload(base, 48, 1000, 12);
  CHECK(line(aoc::estimate(half, w), "led_drive").joules.typ == Approx(line(aoc::estimate(base, w), "led_drive").joules.typ / 2).epsilon(1e-12));
  // re-derived after an override, the source says it once
  const std::string& s = half.sources.at("noise.photons_per_sample");
  CHECK(s.find("derived:") == s.rfind("derived:"));
  // a value given replaces the derivation
  const aoc::Hardware given = file.load({"noise.photons_per_sample=1e5"});
  CHECK_FALSE(given.noise->photons_derived);
  CHECK(given.noise->photons_per_sample == 1e5);
}

TEST_CASE("energy: the receiver's electrons follow from its noise density over the loop period") {
  const aoc::HardwareFile file(aoc::resolve_hardware_path("aoc-48"));
  const aoc::Hardware base = file.load({}), slow = file.load({"timing.loop_period_ns=80"}), quiet = file.load({"noise.receiver_noise_density=0"});
  // 3 pA/sqrt(Hz) on each of two paths over 1/(2 x 20 ns): 3e-12 sqrt(20e-9) / q = 2648 electrons
  CHECK(base.noise->receiver_electrons == Approx(3e-12 * std::sqrt(20e-9) / 1.602176634e-19).epsilon(1e-12));
  CHECK(base.noise->receiver_electrons == Approx(2648).epsilon(1e-3));
  CHECK(slow.noise->receiver_electrons == Approx(2 * base.noise->receiver_electrons).epsilon(1e-12));  // 4x the period: 2x
  CHECK(quiet.noise->receiver_electrons == 0);
  CHECK_THAT(base.sources.at("noise.receiver_electrons"), Catch::Matchers::StartsWith("derived: noise.receiver_noise_density 3 pA/sqrt(Hz)"));
  // the integrated module's front end: a 20 fF capacitor's reset noise, 57 electrons
  const aoc::Hardware scale = aoc::load_hardware(aoc::resolve_hardware_path("aoc-scale"));
  CHECK(scale.noise->receiver_electrons == Approx(57).epsilon(0.01));
  json j = bundled("aoc-16");
  j.erase("timing");
  CHECK_THAT(load_error(j), Contains("noise.receiver_noise_density: an amplifier's noise density needs the loop period"));
  j = bundled("aoc-16");
  j["noise"]["receiver_noise_density"]["unit"] = "pA/sqrt(Hz)";
  CHECK_THAT(load_error(j), Contains("noise.receiver_noise_density.unit: expected \"A/sqrt(Hz)\""));
}

TEST_CASE("energy: the at-scale module's shot noise is its photon budget's design point") {
  const aoc::Hardware hw = aoc::load_hardware(aoc::resolve_hardware_path("aoc-scale"));
  CHECK(hw.noise->photons_derived);
  CHECK(hw.noise->photons_per_sample == hw.energy->photon_budget->photons_per_sample);
}

TEST_CASE("energy: derived photons need the photon budget, and derive from the energy section only") {
  json j = bundled("aoc-16");
  j["energy"].erase("photon_budget");
  CHECK_THAT(load_error(j), Contains("noise.photons_per_sample.derived: derived from the LED operating point, but the file has no energy.photon_budget"));
  j = bundled("aoc-16");
  j["noise"]["photons_per_sample"]["derived"] = "receiver";
  CHECK_THAT(load_error(j), Contains("noise.photons_per_sample.derived: expected \"energy\""));
  j = bundled("aoc-16");
  j["noise"]["photons_per_sample"]["value"] = 5;
  CHECK_THAT(load_error(j), Contains("noise.photons_per_sample.value: unknown key"));
}

TEST_CASE("energy: a loop whose optics do not move its fixed points is no computation and has no TOPS/W") {
  auto estimate = [](const std::string& extra) {
    const Run r = run_aoc("estimate --hw aoc-48 --json" + extra);
    INFO(r.out);
    REQUIRE(r.status == 0);
    return json::parse(r.out);
  };
  const json on = estimate(""), off = estimate(" --set defaults.scale=0.000001");
  // the twin's gain: the optics move the fixed points by tens of mV, far above half an ADC step
  CHECK(on["iterations_measured"]["optics_visible"] == true);
  CHECK(on["iterations_measured"]["optics_term_rms"].get<double>() > 10 * on["iterations_measured"]["tolerance_rms_per_channel"].get<double>());
  CHECK(on["converged"] == true);
  CHECK(on["tops_per_watt"]["typ"].get<double>() > 0);
  // bits of the product above the machine's noise and converters: log2(optics / error)
  const json& m = on["iterations_measured"];
  CHECK(m["product_bits"].get<double>() == Approx(std::log2(m["optics_term_rms"].get<double>() / m["error_rms"].get<double>())));
  CHECK(m["product_bits"].get<double>() > 2);
  // the optics' gain at 1e-6: the loop still settles (the leak), but on the input alone
  CHECK(off["iterations_measured"]["samples_settled"] == 64);
  CHECK(off["iterations_measured"]["optics_visible"] == false);
  CHECK(off["converged"] == false);
  CHECK(off["tops_per_watt"].is_null());
  CHECK_THAT(off["tops_per_watt_withheld"].get<std::string>(), Contains("settles without computing"));
  CHECK_THAT(off["iterations_from"].get<std::string>(), Contains("NOT A COMPUTATION"));
}

TEST_CASE("energy: converter energy follows the converters' bits from the figure's own resolution") {
  const aoc::HardwareFile file(aoc::resolve_hardware_path("aoc-48"));
  auto per_action = [&](const std::vector<std::string>& set, const char* name) { return component_line(file, set, name); };
  // at the file's bits (ADC 10, DAC 8, SLM 9) the figures as written
  CHECK(per_action({}, "adc").per_action == 28);
  CHECK(per_action({}, "dac").per_action == 28);
  CHECK(per_action({}, "slm_reload").per_action == 180);
  // Walden: 2^(bits - at_bits) per conversion
  CHECK(per_action({"converters.adc_bits=4"}, "adc").per_action == Approx(28.0 / 64));
  CHECK(per_action({"converters.adc_bits=12"}, "adc").per_action == Approx(28.0 * 4));
  CHECK(per_action({"converters.dac_bits=12"}, "dac").per_action == Approx(28.0 * 16));
  const aoc::EnergyLine adc12 = per_action({"converters.adc_bits=12"}, "adc");
  CHECK(adc12.joules.max == Approx(adc12.joules.typ * 10));  // the band scales with it (280 / 28)
  CHECK_THAT(adc12.source, Contains("scaled to 12 bits from the figure at 10"));
  // the SLM's codes: bits moved per write
  CHECK(per_action({"converters.slm_bits=4"}, "slm_reload").per_action == Approx(180.0 * 4 / 9));
  CHECK(per_action({"converters.slm_bits=12"}, "slm_reload").per_action == Approx(180.0 * 12 / 9));
}

TEST_CASE("energy: at_bits is for converters only") {
  json j = bundled("aoc-16");
  j["energy"]["control"]["at_bits"] = 8;
  CHECK_THAT(load_error(j), Contains("energy.control.at_bits: unknown key"));
}

TEST_CASE("area: a module is its components per channel, per weight and per module, and the machine its modules") {
  const aoc::Hardware hw = aoc::load_hardware(aoc::resolve_hardware_path("aoc-scale"));
  REQUIRE(hw.area);
  const aoc::AreaReport a = aoc::area_report(hw);
  CHECK(a.channels == 2048);
  CHECK(a.modules == 25);
  REQUIRE(a.lines.size() == 8);
  double typ = 0;
  for (const aoc::AreaLine& l : a.lines) {
    const aoc::AreaComponent* c = nullptr;
    for (const auto& k : hw.area->components)
      if (k.name == l.name) c = &k;
    REQUIRE(c);
    const double count = l.per == "channel" ? 2048.0 : l.per == "weight" ? 2048.0 * 2048 : 1.0;
    CHECK(l.count == count);
    CHECK(l.mm2.typ == Approx(c->mm2.typ * count * l.scale));
    CHECK(l.mm2.min <= l.mm2.typ);
    CHECK(l.mm2.typ <= l.mm2.max);
    CHECK_FALSE(l.source.empty());
    typ += l.mm2.typ;
  }
  CHECK(named(a.lines, "slm").mm2.typ == Approx(1.28e-4 * 2048 * 2048));  // two 8 um pixels per weight
  CHECK(a.module_mm2.typ == Approx(typ));
  CHECK(a.machine_mm2.typ == Approx(25 * typ));
  CHECK_THAT(a.not_counted, Contains("optics"));
}

TEST_CASE("area: a converter's area doubles per bit from the figure's resolution") {
  const aoc::HardwareFile file(aoc::resolve_hardware_path("aoc-scale"));
  auto adc = [&](const std::vector<std::string>& set) { return named(aoc::area_report(file.load(set)).lines, "adc"); };
  const aoc::AreaLine at8 = adc({}), at10 = adc({"converters.adc_bits=10"}), at6 = adc({"converters.adc_bits=6"});
  CHECK(at8.scale == 1);
  CHECK(at10.mm2.typ == Approx(4 * at8.mm2.typ));
  CHECK(at6.mm2.max == Approx(at8.mm2.max / 4));
  CHECK_THAT(at10.source, Contains("scaled to 10 bits from the figure at 8"));
  CHECK(named(aoc::area_report(file.load({"converters.adc_bits=10"})).lines, "dac").scale == 1);  // the DAC keeps its bits
}

TEST_CASE("area: an unknown component or a unit other than mm2 is an error naming the field") {
  json j = bundled("aoc-scale");
  j["area"]["lens"] = j["area"]["slm"];
  CHECK_THAT(load_error(j), Contains("area.lens: unknown key"));
  j = bundled("aoc-scale");
  j["area"]["slm"]["unit"] = "m2";
  CHECK_THAT(load_error(j), Contains("area.slm.unit: expected \"mm2\" (per weight)"));
  j = bundled("aoc-scale");
  j["area"]["control"]["at_bits"] = 8;
  CHECK_THAT(load_error(j), Contains("area.control.at_bits: unknown key"));
}

TEST_CASE("area: aoc estimate prints the machine's area and --json carries it, and a machine without one says so") {
  const Run t = run_aoc("estimate --hw aoc-scale --iterations 10 --fixed-points 1000");
  REQUIRE(t.status == 0);
  CHECK_THAT(t.out, Contains("one module"));
  CHECK_THAT(t.out, Contains("not counted: the free-space optics"));
  const Run j = run_aoc("estimate --hw aoc-scale --iterations 10 --fixed-points 1000 --json");
  REQUIRE(j.status == 0);
  const json a = json::parse(j.out)["area"];
  CHECK(a["modules"] == 25);
  CHECK(a["machine_mm2"]["typ"].get<double>() == Approx(25 * a["module_mm2"]["typ"].get<double>()));
  CHECK(a["components"].size() == 8);
  const Run none = run_aoc("estimate --hw aoc-48 --iterations 10 --json");
  REQUIRE(none.status == 0);
  CHECK(json::parse(none.out)["area"].is_null());
  CHECK_THAT(run_aoc("estimate --hw aoc-48 --iterations 10").out, Contains("gives no area section"));
}

TEST_CASE("energy: a converter run faster than its figure's rate pays in proportion to the rate, slower keeps the figure") {
  const aoc::HardwareFile file(aoc::resolve_hardware_path("aoc-scale"));
  auto per_action = [&](const std::vector<std::string>& set, const char* name) { return component_line(file, set, name); };
  const double adc = per_action({}, "adc").per_action;  // 1 GS/s readout: the figure as written
  CHECK(adc == 2.5);
  CHECK(per_action({"timing.readout_rate_mhz=4000"}, "adc").per_action == Approx(4 * adc));
  CHECK(per_action({"timing.readout_rate_mhz=250"}, "adc").per_action == adc);
  CHECK(per_action({"timing.dac_conversion_ns=0.5"}, "dac").per_action == Approx(2 * adc));  // 2 GS/s
  const aoc::EnergyLine both = per_action({"timing.readout_rate_mhz=2000", "converters.adc_bits=10"}, "adc");
  CHECK(both.per_action == Approx(adc * 4 * 2));  // Walden's 2^2 and the rate's 2
  CHECK_THAT(both.source, Contains("scaled to 10 bits"));
  CHECK_THAT(both.source, Contains("scaled to 2000 MHz from the figure's 1000 MHz"));
  json j = bundled("aoc-scale");
  j["energy"]["slm_reload"]["at_rate_mhz"] = 100;
  CHECK_THAT(load_error(j), Contains("energy.slm_reload.at_rate_mhz: unknown key"));
}
