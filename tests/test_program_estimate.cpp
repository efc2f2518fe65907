// The energy and latency of a compiled program (runtime/estimate/program_estimate.hpp, `aoc estimate PROG`,
// docs/energy.md "Programs"): one token's counts of tiny programs checked by hand (tiles,
// conversions, MACs, loop iterations, digital partial sums, weight reloads), the missing digital
// throughput, a published config's tile count, and the command on a graph and a program file.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "compiler/graph_json.hpp"
#include "compiler/import_config.hpp"
#include "compiler/program_h5.hpp"
#include "runtime/estimate/program_estimate.hpp"
#include "runtime/run/program_run.hpp"
#include "sim/error.hpp"
#include "sim/hardware.hpp"
#include "tests/support.hpp"

using aoc::test::Run;
using aoc::test::run_aoc;
using Catch::Matchers::Contains;

namespace {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

fs::path temp_dir() {
  const fs::path d = fs::temp_directory_path() / ("aoc-test-program-estimate-" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d;
}

// x[B, L, 100] -> y = x W^T with W [60, 100] -> (Tanh when `tanh`) -> out. On aoc-48 (48 channels)
// W is 2 x 3 tiles: rows 48 + 12, columns 48 + 48 + 4.
std::string linear_graph_text(bool tanh) {
  std::string t = R"({"format": "aoc-graph", "version": 1, "name": "tiny-linear",
  "inputs": [{"name": "x", "shape": ["B", "L", 100]}], "weights": [{"name": "W", "shape": [60, 100]}],
  "ops": [{"op": "Linear", "name": "mix", "in": ["x", "W"], "out": ["y"]})";
  t.append(tanh ? R"(, {"op": "Tanh", "name": "act", "in": ["y"], "out": ["t"]}], "outputs": ["t"]})" : R"(], "outputs": ["y"]})");
  return t;
}

// A native loop: z = tanh(W z + x), W [40, 40] (one tile: aoc-48 has 47 lit LED channels), max_iter 50.
const char* const kLoop = R"({"format": "aoc-graph", "version": 1, "name": "tiny-loop",
  "inputs": [{"name": "x", "shape": ["B", "L", 40]}], "weights": [{"name": "W", "shape": [40, 40]}],
  "ops": [{"op": "FixedPoint", "name": "deq", "in": ["x"], "out": ["z"],
           "attrs": {"tol": 1e-3, "max_iter": 50, "like": "x"},
           "body": {"args": ["zi", "xc"],
                    "ops": [{"op": "Linear", "name": "mix", "in": ["zi", "W"], "out": ["wz"]},
                            {"op": "Add", "name": "inject", "in": ["wz", "xc"], "out": ["pre"]},
                            {"op": "Tanh", "name": "act", "in": ["pre"], "out": ["zn"]}],
                    "results": ["zn"]}}],
  "outputs": ["z"]})";

// A digital op before the optics: Exp (not an analog function of aoc-48) of x[B, L, 40].
const char* const kDigital = R"({"format": "aoc-graph", "version": 1, "name": "tiny-digital",
  "inputs": [{"name": "x", "shape": ["B", "L", 40]}], "weights": [{"name": "W", "shape": [40, 40]}],
  "ops": [{"op": "Exp", "name": "e", "in": ["x"], "out": ["ex"]},
          {"op": "Linear", "name": "mix", "in": ["ex", "W"], "out": ["y"]}],
  "outputs": ["y"]})";

struct Compiled {
  aoc::Hardware hw;
  aoc::ir::Program program;
};

Compiled compile(const std::string& graph_text, const std::vector<std::string>& overrides) {
  Compiled c;
  const std::string path = aoc::resolve_hardware_path("aoc-48");
  c.hw = aoc::load_hardware(path, overrides);
  c.program = aoc::compile_for_estimate(aoc::ir::parse_graph(graph_text), c.hw, "aoc-48", overrides);
  return c;
}

aoc::ProgramEstimate estimate(const Compiled& c, std::optional<double> iterations = std::nullopt) {
  aoc::ProgramEstimateOptions o;
  o.iterations = iterations;
  return aoc::estimate_program(c.program, c.hw, o);
}

const aoc::EnergyLine& energy_line(const aoc::EnergyReport& r, const std::string& name) {
  for (const auto& l : r.energy)
    if (l.name == name) return l;
  FAIL("no energy line " << name);
  throw;
}

const aoc::LatencyLine& latency_line(const aoc::EnergyReport& r, const std::string& name) {
  for (const auto& l : r.latency)
    if (l.name == name) return l;
  FAIL("no latency line " << name);
  throw;
}

std::string write_temp(const std::string& name, const std::string& text) {
  const fs::path p = temp_dir() / name;
  std::ofstream(p) << text;
  return p.string();
}

}  // namespace

TEST_CASE("program estimate: a tiny program's tiles, conversions and MACs per token, by hand") {
  // 6 modules hold the 6 tiles; the column tiles' partial sums are added in analog.
  const Compiled c = compile(linear_graph_text(true), {"architecture.modules=6", "architecture.partial_sums=analog"});
  const aoc::ProgramEstimate e = estimate(c);
  CHECK(e.tiles == 6);
  CHECK(e.modules_used == 6);
  CHECK(e.passes == 1);
  CHECK(e.parameters == 6000);
  CHECK(e.placement.at("optical") == 1);
  CHECK(e.placement.at("analog") == 1);  // Tanh on the analog electronics
  CHECK(e.loops.empty());
  const aoc::Workload& w = e.token.work;
  CHECK(w.dac_conversions == 100);  // x, once per token
  CHECK(w.adc_conversions == 60);   // tanh(y), once per token
  // Every input lights the LEDs of both row tiles (100 x 2), every output is detected on all 3 column
  // tiles (60 x 3); then the 60 channels read out stay on through the settle and the readout window.
  const aoc::TimingSpec& t = *c.hw.timing;
  const double hold = (t.settle_ns + 40 / t.readout_rate_mhz * 1e3) / t.loop_period_ns;  // 445 periods on aoc-48
  CHECK(hold == Approx(445));
  CHECK(*w.led_channel_iterations == Approx(200 + 60 * hold));
  CHECK(*w.receiver_channel_iterations == Approx(180 + 60 * hold));
  CHECK(e.token.analog_macs == 6000);
  CHECK(e.tile_runs == 6);
  CHECK(e.utilisation == Approx(6000.0 / (6 * 48 * 48)));
  CHECK(w.digital_macs == 0);
  CHECK(w.weight_reloads == 0);
  CHECK(w.weight_writes == 0);
  CHECK(e.initial_writes == 6000);
  CHECK(w.fixed_points == 1);  // one run of the core (control)
  CHECK(*w.loop_periods == 1);
  CHECK(*w.dac_steps == 1);
  CHECK(*w.settle_events == 1);
  CHECK(*w.adc_samples == 40);  // one readout of aoc-48's 40 samples
  // The energy lines count the same actions; the SLMs of the 6 modules draw power for the whole latency.
  CHECK(energy_line(e.token, "led_drive").count == *w.led_channel_iterations);
  CHECK(energy_line(e.token, "photodetector_receiver").count == *w.receiver_channel_iterations);
  CHECK(energy_line(e.token, "analog_electronics").count == *w.receiver_channel_iterations);
  CHECK(energy_line(e.token, "dac").count == 100);
  CHECK(energy_line(e.token, "adc").count == 60);
  CHECK(energy_line(e.token, "slm_static").count == Approx(6 * e.token.total_seconds));
  CHECK(e.token.total_seconds == Approx(t.loop_period_ns * 1e-9 + t.settle_ns * 1e-9 + 40 / (t.readout_rate_mhz * 1e6) +
                                        t.dac_conversion_ns * 1e-9 + 0.0));
  // The GPU runs the same MACs.
  CHECK(e.token.gpu.macs == 6000);
}

TEST_CASE("program estimate: column tiles summed in digital cost an ADC of the rows per extra tile and digital adds") {
  const Compiled c = compile(linear_graph_text(false), {"architecture.modules=6"});  // aoc-48: partial_sums digital
  REQUIRE_FALSE(c.program.target.analog_partial_sums);
  const aoc::ProgramEstimate e = estimate(c);
  const aoc::Workload& w = e.token.work;
  // y is read by its ADC (60); columns 2 and 3 add 60 each; 120 digital adds.
  CHECK(w.adc_conversions == 60 + 120);
  CHECK(e.partial_sum_adc == 120);
  CHECK(w.digital_macs == 120);
  CHECK(e.digital.at("partial sums").ops == 120);
  CHECK(w.dac_conversions == 100);
}

TEST_CASE("program estimate: a program whose tiles exceed the modules reloads weights every token") {
  // 6 tiles on 4 modules: tiles 0-3 on pass 0, tiles 4-5 reload modules 0 and 1 (pass 1).
  const Compiled c = compile(linear_graph_text(false), {"architecture.modules=4", "architecture.partial_sums=analog"});
  const aoc::ProgramEstimate e = estimate(c);
  CHECK(e.tiles == 6);
  CHECK(e.passes == 2);
  CHECK(e.modules_used == 4);
  // Tiles, row-major, of at most 47 inputs (aoc-48's LED channel 8 is dark): 48x47, 48x47, 48x6,
  // 12x47, 12x47, 12x6. Initially tiles 0-3 are loaded.
  CHECK(e.initial_writes == 2256 + 2256 + 288 + 564);
  // In steady state each token reprograms tiles 0 and 1 (pass 0, over 4 and 5) then 4 and 5:
  // two reload events, each the modules in parallel.
  const aoc::Workload& w = e.token.work;
  CHECK(w.weight_reloads == 2);
  CHECK(w.weight_writes == 2256 + 2256 + 564 + 72);
  CHECK(*w.loop_periods == 2);  // the op's two passes one after the other
  CHECK(latency_line(e.token, "weight_reload").seconds == Approx(2 * c.hw.timing->slm_reload_us * 1e-6));
  CHECK(energy_line(e.token, "slm_reload").count == 2256 + 2256 + 564 + 72);
  bool said = false;
  for (const auto& n : e.notes) said = said || n.find("--set architecture.modules=6") != std::string::npos;
  CHECK(said);
}

TEST_CASE("program estimate: a batch shares each module programming, on the machine and the GPU alike") {
  // 6 tiles on 4 modules: two reload events per token at batch 1.
  const Compiled c = compile(linear_graph_text(false), {"architecture.modules=4", "architecture.partial_sums=analog"});
  aoc::ProgramEstimateOptions o;
  o.zero_reads = 0;  // the auto-zero goes with the programmings (its own test below)
  const aoc::ProgramEstimate one = aoc::estimate_program(c.program, c.hw, o);
  o.batch = 8;
  const aoc::ProgramEstimate eight = aoc::estimate_program(c.program, c.hw, o);
  const aoc::Workload &w1 = one.token.work, &w8 = eight.token.work;
  CHECK(eight.batch == 8);
  CHECK(w8.weight_reloads == Approx(w1.weight_reloads / 8));
  CHECK(w8.weight_writes == Approx(w1.weight_writes / 8));
  CHECK(*w8.reloaded_channels == Approx(*w1.reloaded_channels / 8));
  // the products still run one vector at a time: the same light, conversions and MACs
  CHECK(*w8.led_channel_iterations == *w1.led_channel_iterations);
  CHECK(w8.adc_conversions == w1.adc_conversions);
  CHECK(*w8.analog_macs == *w1.analog_macs);
  CHECK(latency_line(eight.token, "weight_reload").seconds == Approx(latency_line(one.token, "weight_reload").seconds / 8));
  CHECK(eight.token.total_joules.typ < one.token.total_joules.typ);
  o.batch = 0.5;
  CHECK_THROWS_WITH(aoc::estimate_program(c.program, c.hw, o), Contains("batch must be >= 1"));
  // the CLI's --batch batches the GPU too; the loop estimate refuses it
  const std::string path = (temp_dir() / "batched.h5").string();
  aoc::ir::write_program_h5(path, c.program);
  const Run r = run_aoc("estimate " + path + " --batch 8 --json");
  INFO(r.out);
  REQUIRE(r.status == 0);
  const json j = json::parse(r.out);
  CHECK(j["batch"] == 8);
  CHECK(j["gpu"]["batch"] == 8);
  CHECK(j["per_token"]["weight_reloads"].get<double>() == Approx(w1.weight_reloads / 8));
  const Run loop = run_aoc("estimate --hw aoc-48 --iterations 5 --batch 8");
  CHECK(loop.status != 0);
  CHECK_THAT(loop.out, Contains("--batch is for a program"));
}

TEST_CASE("program estimate: write-verify bills the writes again and a reload per round, from the pattern's spread") {
  const Compiled c = compile(linear_graph_text(false), {"architecture.modules=4", "architecture.partial_sums=analog"});
  const aoc::ProgramEstimate plain = estimate(c);
  aoc::ProgramEstimateOptions o;
  o.write_verify = c.hw.noise->slm_fixed_pattern_sigma, o.verify_rounds = 3;  // tolerance 1 sigma: a write fails with p = erfc(1/sqrt 2)
  const aoc::ProgramEstimate v = aoc::estimate_program(c.program, c.hw, o);
  const double p = std::erfc(1 / std::sqrt(2.0)), writes = 1 + 2 * (p + p * p + p * p * p);
  const aoc::Workload &w0 = plain.token.work, &w = v.token.work;
  CHECK(w.weight_writes == Approx(w0.weight_writes * writes));
  CHECK(w.weight_reloads == Approx(w0.weight_reloads * 4));  // 2 x 48^2 pixels: every round has a failure
  CHECK(latency_line(v.token, "weight_reload").seconds == Approx(4 * latency_line(plain.token, "weight_reload").seconds));
  CHECK(v.load.work.weight_writes == Approx(plain.load.work.weight_writes * writes));
  CHECK(v.token.total_joules.typ > plain.token.total_joules.typ);
  aoc::Hardware quiet = c.hw;
  quiet.noise.reset();
  CHECK_THROWS_WITH(aoc::estimate_program(c.program, quiet, o), Contains("write-verify needs the SLM's fixed pattern"));
  const Run loop = run_aoc("estimate --hw aoc-48 --iterations 5 --write-verify 0.005");
  CHECK(loop.status != 0);
  CHECK_THAT(loop.out, Contains("--write-verify is for a program"));
}

TEST_CASE("program estimate: the auto-zero after each programming bills its ADC samples and the channels lit meanwhile") {
  // 6 tiles on 4 modules: two reload events per token, 2 x 2 x 48 channels reprogrammed.
  const Compiled c = compile(linear_graph_text(false), {"architecture.modules=4", "architecture.partial_sums=analog"});
  aoc::ProgramEstimateOptions o;
  o.zero_reads = 0;
  const aoc::ProgramEstimate none = aoc::estimate_program(c.program, c.hw, o);
  o.zero_reads = 1000;
  const aoc::ProgramEstimate zeroed = aoc::estimate_program(c.program, c.hw, o);
  const aoc::TimingSpec& t = *c.hw.timing;
  const aoc::Workload &w0 = none.token.work, &w = zeroed.token.work;
  CHECK(w.adc_conversions == w0.adc_conversions + 1000 * 2 * 2 * 48);
  CHECK(*w.adc_samples == *w0.adc_samples + 1000 * 2);  // the modules sample in parallel, one read after another
  const double lit = 1000 / (t.readout_rate_mhz * 1e6) / (t.loop_period_ns * 1e-9);
  CHECK(*w.led_channel_iterations == Approx(*w0.led_channel_iterations + lit * 2 * 2 * 48));
  CHECK(latency_line(zeroed.token, "readout").seconds == Approx(latency_line(none.token, "readout").seconds + 2 * 1000 / (t.readout_rate_mhz * 1e6)));
  CHECK(zeroed.load.work.adc_conversions == 1000 * 4 * 48);
  CHECK(std::any_of(zeroed.notes.begin(), zeroed.notes.end(), [](const std::string& n) { return n.find("auto-zero") != std::string::npos; }));
  CHECK(std::none_of(none.notes.begin(), none.notes.end(), [](const std::string& n) { return n.find("auto-zero") != std::string::npos; }));
}

TEST_CASE("program estimate: the auto-zero taken again bills a token's share of its reads on every channel in use") {
  const Compiled c = compile(linear_graph_text(false), {"architecture.modules=4", "architecture.partial_sums=analog"});
  aoc::ProgramEstimateOptions o;
  const aoc::ProgramEstimate once = aoc::estimate_program(c.program, c.hw, o);
  const aoc::TimingSpec& t = *c.hw.timing;
  const double zero_us = 1024 / t.readout_rate_mhz, T = 10 * zero_us;
  o.zero_every_us = T;
  const aoc::ProgramEstimate again = aoc::estimate_program(c.program, c.hw, o);
  // the tokens run in the T - zero_us between zeros: the latency grows by T / (T - zero_us)
  CHECK(again.token.total_seconds == Approx(once.token.total_seconds * T / (T - zero_us)).epsilon(1e-9));
  const double zeros = once.token.total_seconds * 1e6 / (T - zero_us), channels = 4 * 48;
  CHECK(again.token.work.adc_conversions == Approx(once.token.work.adc_conversions + 1024 * channels * zeros));
  CHECK(again.token.total_joules.typ > once.token.total_joules.typ);
  CHECK(std::any_of(again.notes.begin(), again.notes.end(), [](const std::string& n) { return n.find("taken again every") != std::string::npos; }));
  o.zero_every_us = zero_us;  // no clock left between the zeros
  CHECK_THROWS_WITH(aoc::estimate_program(c.program, c.hw, o), Catch::Contains("no longer than one zero's 1024 reads"));
  o.zero_every_us = T, o.zero_reads = 0;
  CHECK_THROWS_WITH(aoc::estimate_program(c.program, c.hw, o), Catch::Contains("needs --zero-reads above 0"));
}

TEST_CASE("program estimate: activation I/O is the bits of the program's DAC and ADC conversions") {
  // aoc-48: an 8-bit DAC and a 10-bit ADC. x in (100 DAC conversions), tanh(y) out (60 ADC).
  const Compiled c = compile(linear_graph_text(true), {"architecture.modules=6", "architecture.partial_sums=analog"});
  const aoc::ProgramEstimate e = estimate(c);
  CHECK(energy_line(e.token, "activation_io").count == 100 * 8 + 60 * 10);
  CHECK(energy_line(e.token, "activation_io").joules.typ ==
        Approx((100 * 8 + 60 * 10) * c.hw.energy->find("activation_io")->value.typ * 1e-12).epsilon(1e-14));
  // column tiles summed digitally: their partial sums leave the module too (120 more ADC conversions)
  const Compiled d = compile(linear_graph_text(false), {"architecture.modules=6"});
  CHECK(energy_line(estimate(d).token, "activation_io").count == 100 * 8 + (60 + 120) * 10);
}

TEST_CASE("program estimate: a reload bills the reprogrammed modules' receivers and analog electronics and the controller for its time") {
  // 6 tiles on 4 modules: each token reprograms modules 0 and 1 twice (two reload events).
  const std::vector<std::string> set = {"architecture.modules=4", "architecture.partial_sums=analog"};
  const Compiled c = compile(linear_graph_text(false), set);
  const aoc::ProgramEstimate e = estimate(c);
  const aoc::Workload& w = e.token.work;
  const aoc::TimingSpec& t = *c.hw.timing;
  CHECK(w.weight_reloads == 2);
  CHECK(*w.reloaded_channels == 2 * 2 * 48);
  const double periods = t.slm_reload_us * 1e3 / t.loop_period_ns;  // 500,000 on aoc-48
  CHECK(energy_line(e.token, "photodetector_receiver").count == Approx(*w.receiver_channel_iterations + 2 * 2 * 48 * periods));
  CHECK(energy_line(e.token, "analog_electronics").count == Approx(*w.receiver_channel_iterations + 2 * 2 * 48 * periods));
  CHECK(energy_line(e.token, "led_drive").count == *w.led_channel_iterations);
  const double window_s = (t.settle_ns + 40 / t.readout_rate_mhz * 1e3) * 1e-9;
  CHECK(energy_line(e.token, "control").count == Approx(w.fixed_points + 2 * t.slm_reload_us * 1e-6 / window_s));
  // the initial programming loads the 4 modules at once
  CHECK(*e.load.work.reloaded_channels == 4 * 48);
  const double zeroing = aoc::kZeroReads / (t.readout_rate_mhz * 1e6) / (t.loop_period_ns * 1e-9);  // the auto-zero's lit periods
  CHECK(energy_line(e.load, "photodetector_receiver").count == Approx(4 * 48 * (periods + zeroing)));
  // proportional to timing.slm_reload_us
  std::vector<std::string> slow = set;
  slow.push_back("timing.slm_reload_us=20000");
  const Compiled cs = compile(linear_graph_text(false), slow);
  const aoc::ProgramEstimate es = estimate(cs);
  for (const char* name : {"photodetector_receiver", "analog_electronics", "control"}) {
    INFO(name);
    // what the token costs without the reloads: its channel-iterations, or its control runs
    const double figure = c.hw.energy->find(name)->value.typ * 1e-12;
    const double loop_only = (std::string(name) == "control" ? w.fixed_points : *w.receiver_channel_iterations) * figure;
    const double reload = energy_line(e.token, name).joules.typ - loop_only;
    CHECK(reload > 0);
    CHECK(energy_line(es.token, name).joules.typ - loop_only == Approx(2 * reload));
  }
}

TEST_CASE("program estimate: a loop body counts K times per token, K the max_iter upper bound unless given") {
  const Compiled c = compile(kLoop, {});
  const aoc::ProgramEstimate bound = estimate(c);
  REQUIRE(bound.loops.size() == 1);
  CHECK(bound.loops[0].layout == "native");
  CHECK(bound.loops[0].iterations == 50);
  CHECK(bound.loops[0].upper_bound);
  CHECK(bound.token.analog_macs == 50 * 40 * 40);

  const aoc::ProgramEstimate e = estimate(c, 10.0);
  CHECK_FALSE(e.loops[0].upper_bound);
  const aoc::Workload& w = e.token.work;
  CHECK(e.token.analog_macs == 10 * 40 * 40);
  CHECK(*w.led_channel_iterations == Approx(400 + 40 * 445));  // 10 iterations, then the readout holds the 40 channels 445 periods
  CHECK(*w.loop_periods == 10);
  CHECK(w.dac_conversions == 40);  // the injection x, once per fixed point
  CHECK(w.adc_conversions == 40);  // the fixed point's readout
  CHECK(*w.settle_events == 1);
  CHECK(w.fixed_points == 1);
  CHECK(w.digital_macs == 0);
  CHECK(w.weight_reloads == 0);
}

TEST_CASE("program estimate: digital work without timing.digital_gmac_per_s is an error naming it") {
  Compiled c = compile(kDigital, {});
  CHECK(estimate(c).token.work.digital_macs == 40);  // Exp: 1 per element
  c.hw.timing->digital_gmac_per_s = 0;
  std::string msg;
  try {
    estimate(c);
  } catch (const aoc::Error& e) {
    msg = e.what();
  }
  CHECK_THAT(msg, Contains("timing.digital_gmac_per_s: missing"));
  CHECK(msg.find('\n') == std::string::npos);
  // A program without digital work does not need it.
  Compiled loop = compile(kLoop, {});
  loop.hw.timing->digital_gmac_per_s = 0;
  CHECK_NOTHROW(estimate(loop, 10.0));
}

TEST_CASE("program estimate: aoc estimate of a graph on a machine without timing.digital_gmac_per_s is a one-line error") {
  std::ifstream in(std::string(AOC_SOURCE_DIR) + "/scenarios/hardware/aoc-48.json");
  json hw = json::parse(in);
  hw["timing"].erase("digital_gmac_per_s");
  const std::string hw_path = write_temp("no-digital.json", hw.dump(1));
  const std::string graph = write_temp("digital.json", kDigital);
  const Run r = run_aoc("estimate " + graph + " --hw " + hw_path);
  INFO(r.out);
  CHECK(r.status == 1);
  CHECK_THAT(r.out, Contains("timing.digital_gmac_per_s: missing"));
  CHECK(r.out.find('\n') == r.out.size() - 1);
}

TEST_CASE("program estimate: the published mamba2-130m implicit config has ceil(rows/2048) x ceil(cols/2048) tiles per matrix") {
  aoc::ir::ImportOptions io;
  io.weights = false;
  const aoc::ir::Imported m = aoc::ir::import_config(AOC_TEST_DATA "/implicit-lm/mamba2-130m-implicit/config.json", io);
  const aoc::Hardware hw = aoc::load_hardware(aoc::resolve_hardware_path("aoc-scale"));
  const aoc::ir::Program p = aoc::compile_for_estimate(m.graph, hw, "aoc-scale", {});
  aoc::ProgramEstimateOptions o;
  o.iterations = 20;
  const aoc::ProgramEstimate e = aoc::estimate_program(p, hw, o);
  int expected = 0;
  for (const auto& plan : p.optical)
    expected += static_cast<int>(((plan.rows + 2047) / 2048) * ((plan.cols + 2047) / 2048));
  CHECK(e.tiles == expected);
  // By hand: 24 layers x (in_proj 3352 x 768: 2 tiles + out_proj 768 x 1536: 1) + the tied head 50280 x 768: 25.
  CHECK(e.tiles == 24 * 3 + 25);
  CHECK(e.modules == 25);
  CHECK(e.passes == 4);
  CHECK(e.token.work.weight_reloads > 0);
  // the released rule: 20 steps and the final call, 21 evaluations of the body
  CHECK(e.token.analog_macs == Approx(21.0 * 24 * (3352 * 768 + 768 * 1536) + 50280.0 * 768));
  CHECK(e.token.total_joules.typ > 0);
  CHECK(e.loops.at(0).iterations == 20);
}

TEST_CASE("program estimate: aoc estimate GRAPH.json --hw aoc-scale --json reports the tiles, energy and latency per token") {
  const fs::path g = temp_dir() / "m130.json";
  const Run imp = run_aoc("import " AOC_TEST_DATA "/implicit-lm/mamba2-130m-implicit/config.json --shapes-only -o " + g.string());
  REQUIRE(imp.status == 0);
  const Run r = run_aoc("estimate " + g.string() + " --hw aoc-scale --iterations 20 --seq-len 512 --json");
  INFO(r.out);
  REQUIRE(r.status == 0);
  const json j = json::parse(r.out);
  CHECK(j["mapping"]["tiles"] == 97);
  CHECK(j["mapping"]["modules_weight_stationary"] == 97);
  CHECK(j["seq_len"] == 512);
  CHECK(j["loops"][0]["iterations"] == 20);
  CHECK(j["latency_per_sequence_s"].get<double>() == Approx(512 * j["latency_per_token_s"].get<double>()));
  CHECK(j["energy_per_sequence_j"]["typ"].get<double>() == Approx(512 * j["energy_per_token_j"]["typ"].get<double>()));
  for (const auto& l : j["energy"]) CHECK_FALSE(l["source"].get<std::string>().empty());
  for (const auto& l : j["latency"]) CHECK_FALSE(l["source"].get<std::string>().empty());
  // Weight-stationary on 97 modules: no reloads.
  const Run ws = run_aoc("estimate " + g.string() + " --hw aoc-scale --iterations 20 --set architecture.modules=97 --json");
  REQUIRE(ws.status == 0);
  CHECK(json::parse(ws.out)["per_token"]["weight_reloads"] == 0);
  // Text: the upper bound is said when no K is given.
  const Run t = run_aoc("estimate " + g.string() + " --hw aoc-scale");
  CHECK(t.status == 0);
  CHECK_THAT(t.out, Contains("UPPER BOUND"));
  CHECK_THAT(t.out, Contains("H100"));
}

TEST_CASE("program estimate: aoc estimate PROG.h5 takes the hardware the program was compiled for and checks a given one") {
  const Compiled c = compile(kLoop, {"architecture.modules=2"});
  const std::string path = (temp_dir() / "loop.h5").string();
  aoc::ir::write_program_h5(path, c.program);
  const Run r = run_aoc("estimate " + path + " --iterations 10 --json");
  INFO(r.out);
  REQUIRE(r.status == 0);
  const json j = json::parse(r.out);
  CHECK(j["hardware"] == "aoc-48");
  CHECK(j["mapping"]["modules"] == 2);  // the recorded override
  CHECK(j["per_token"]["analog_macs"].get<double>() == 10 * 40 * 40);
  const Run other = run_aoc("estimate " + path + " --hw aoc-16");
  INFO(other.out);
  CHECK(other.status == 1);
  CHECK_THAT(other.out, Contains("compiled for aoc-48"));
}

TEST_CASE("program estimate: --iterations-from takes each FixedPoint's K from an aoc run of the program, its mean over the solves", "[slow]") {
  const fs::path d = temp_dir();
  const std::string m = (d / "m.json").string(), w = (d / "m.h5").string(), p = (d / "p.h5").string();
  const std::string tok = (d / "tok.h5").string(), out = (d / "run.h5").string();
  REQUIRE(run_aoc("import " AOC_TEST_DATA "/implicit-lm/mamba2-state-tracking-implicit/config.json -o " + m).status == 0);
  REQUIRE(run_aoc("compile " + m + " --weights " + w + " --hw aoc-48 -o " + p).status == 0);
  REQUIRE(run_aoc("run " + p + " --example-input " + tok + " --batch 2 --length 6 --seed 1").status == 0);
  REQUIRE(run_aoc("run " + p + " --inputs " + tok + " --sequence sequential --quiet -o " + out).status == 0);
  const aoc::IterationSummary s = aoc::read_run_iterations(out, "deq");
  CHECK(s.solves == 12);  // 2 samples x 6 tokens, each token a solve of its own

  const Run r = run_aoc("estimate " + p + " --iterations-from " + out + " --json");
  INFO(r.out);
  REQUIRE(r.status == 0);
  const json j = json::parse(r.out);
  REQUIRE(j["loops"].size() == 1);
  CHECK(j["loops"][0]["iterations"].get<double>() == Approx(s.mean));
  CHECK(j["loops"][0]["upper_bound"] == false);
  CHECK_THAT(j["loops"][0]["iterations_from"].get<std::string>(), Contains("the mean over 12 solves"));

  // a file that is not a run's output is a one-line error naming it
  const Run bad = run_aoc("estimate " + p + " --iterations-from " + tok);
  CHECK(bad.status != 0);
  CHECK_THAT(bad.out, Contains(tok + ": attribute tool"));
  CHECK(std::count(bad.out.begin(), bad.out.end(), '\n') == 1);
}
