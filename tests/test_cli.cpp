// The aoc executable as a user meets it: exit codes, one-line errors, outputs.
#include <catch2/catch.hpp>

#include "tests/support.hpp"
#include "sim/hardware.hpp"

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <chrono>
#include <iterator>
#include <map>
#include <regex>
#include <string>
#include <thread>
#include <vector>
#include <sys/wait.h>
#include <unistd.h>

using aoc::test::Run;
using aoc::test::run_aoc;

namespace {

std::filesystem::path temp_dir() {
  auto d = std::filesystem::temp_directory_path() / ("aoc-cli-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(d);
  return d;
}

nlohmann::json golden() {
  std::ifstream in(AOC_TEST_DATA "/dt_golden.json");
  return nlohmann::json::parse(in);
}

void write(const std::filesystem::path& p, const std::string& s) { std::ofstream(p) << s; }

bool one_line(const std::string& s) {
  return !s.empty() && s.find('\n') == s.size() - 1;
}

}  // namespace

TEST_CASE("cli: verify-dt passes every bundled golden case and exits 0") {
  const Run r = run_aoc("verify-dt");
  INFO(r.out);
  CHECK(r.status == 0);
  CHECK(r.out.find("12 of 12 case runs within tolerance") != std::string::npos);
  CHECK(r.out.find("FAIL") == std::string::npos);
}

TEST_CASE("cli: verify-dt exits 1 when the simulator misses a case by more than the tolerance") {
  nlohmann::json g = golden();
  g["cases"][1]["one_step"][0][0] = g["cases"][1]["one_step"][0][0].get<double>() + 1e-3;
  const auto f = temp_dir() / "perturbed.json";
  write(f, g.dump());
  const Run r = run_aoc("verify-dt " + f.string() + " --precision f64");
  INFO(r.out);
  CHECK(r.status == 1);
  CHECK(r.out.find("FAIL") != std::string::npos);
}

TEST_CASE("cli: a malformed golden file is a one-line error naming the file") {
  const auto f = temp_dir() / "broken.json";
  write(f, "{\"cases\": [ {\"name\": ");
  const Run r = run_aoc("verify-dt " + f.string());
  INFO(r.out);
  CHECK(r.status == 1);
  CHECK(one_line(r.out));
  CHECK(r.out.find(f.string()) != std::string::npos);
}

TEST_CASE("cli: a golden case with a wrong-shaped field is an error naming the case and the field") {
  nlohmann::json g = golden();
  g["cases"][2]["x"][0].erase(0);
  const auto f = temp_dir() / "ragged.json";
  write(f, g.dump());
  const Run r = run_aoc("verify-dt " + f.string());
  INFO(r.out);
  CHECK(r.status == 1);
  CHECK(one_line(r.out));
  CHECK(r.out.find("cases[2].x") != std::string::npos);
}

TEST_CASE("cli: an unknown switch in a golden case is an error naming it") {
  nlohmann::json g = golden();
  g["cases"][1]["flags"]["apply_magic"] = true;
  const auto f = temp_dir() / "unknown-switch.json";
  write(f, g.dump());
  const Run r = run_aoc("verify-dt " + f.string());
  INFO(r.out);
  CHECK(r.status == 1);
  CHECK(r.out.find("cases[1].flags.apply_magic: unknown switch") != std::string::npos);
}

TEST_CASE("cli: hw show of a missing file exits non-zero with a one-line error") {
  const Run r = run_aoc("hw show /nonexistent/machine.json");
  INFO(r.out);
  CHECK(r.status != 0);
  CHECK(one_line(r.out));
  CHECK(r.out.find("/nonexistent/machine.json") != std::string::npos);
}

TEST_CASE("cli: the loop's fixed points are bit-identical with 1 and 2 threads") {
  auto digest = [](const Run& r) {
    const auto at = r.out.find("digest of the fixed points ");
    REQUIRE(at != std::string::npos);
    return r.out.substr(at + 27, 16);
  };
  for (const char* prec : {"f32", "f64"}) {
    const std::string args = std::string("loop --batch 200 --seed 3 --precision ") + prec;
    const Run one = run_aoc(args + " --threads 1"), two = run_aoc(args + " --threads 2");
    REQUIRE(one.status == 0);
    REQUIRE(two.status == 0);
    CHECK(digest(one) == digest(two));
  }
}

TEST_CASE("cli: a different seed gives different fixed points") {
  const Run a = run_aoc("loop --batch 8 --seed 1 --json"), b = run_aoc("loop --batch 8 --seed 2 --json");
  REQUIRE(a.status == 0);
  REQUIRE(b.status == 0);
  CHECK(nlohmann::json::parse(a.out)["digest"] != nlohmann::json::parse(b.out)["digest"]);
}

TEST_CASE("cli: JSON written with -o lands complete and leaves no temporary file") {
  const auto dir = temp_dir() / "out";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const auto f = dir / "verify.json";
  const Run r = run_aoc("verify-dt --json -o " + f.string());
  INFO(r.out);
  REQUIRE(r.status == 0);
  std::ifstream in(f);
  const nlohmann::json j = nlohmann::json::parse(in);
  CHECK(j["passed"] == 12);
  CHECK(j["version"].is_string());
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) files += e.is_regular_file();
  CHECK(files == 1);
}

TEST_CASE("cli: writing into a missing directory fails cleanly") {
  const Run r = run_aoc("verify-dt --json -o /nonexistent/dir/out.json");
  INFO(r.out);
  CHECK(r.status == 1);
  CHECK(one_line(r.out));
}

TEST_CASE("cli: every subcommand's help shows an example") {
  for (const char* sub : {"hw show", "verify-dt", "loop", "bench"}) {
    const Run r = run_aoc(std::string(sub) + " --help");
    INFO(sub << "\n" << r.out);
    CHECK(r.status == 0);
    CHECK(r.out.find("Example") != std::string::npos);
  }
}

TEST_CASE("cli: run and check --help teach the run-time --set, --ideal-optics and --quiet with examples") {
  for (const char* sub : {"run", "check"}) {
    const Run r = run_aoc(std::string(sub) + " --help");
    INFO(sub << "\n" << r.out);
    CHECK(r.status == 0);
    CHECK(r.out.find("Examples:") != std::string::npos);
    CHECK(r.out.find("--set noise.thermal_sigma=") != std::string::npos);
    CHECK(r.out.find("converters.dac_bits") != std::string::npos);
    CHECK(r.out.find("--ideal-optics") != std::string::npos);
    CHECK(r.out.find("--quiet") != std::string::npos);
    CHECK(r.out.find("--optics ") == std::string::npos);
  }
}

TEST_CASE("cli: -o without --json is a one-line error naming both, and writes nothing, for every command with a JSON record") {
  const std::filesystem::path p = std::filesystem::temp_directory_path() / "aoc-cli-o-without-json.json";
  const std::string file = std::string(AOC_TEST_DATA) + "/implicit-lm/README.md";  // exists (the parser checks that first), never read
  for (const std::string& cmd : std::vector<std::string>{"loop --batch 1", "estimate --iterations 5", "bench --no-gpu --no-program --no-reference --no-train --batches 1", "verify-dt",
                                "pareto " + file, "check " + file + " --inputs " + file}) {
    std::filesystem::remove(p);
    const Run r = run_aoc(cmd + " -o " + p.string());
    INFO(cmd << ": " << r.out);
    CHECK(r.status != 0);
    CHECK_THAT(r.out, Catch::Contains(": -o writes the JSON record: give --json too"));
    CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 1);
    CHECK_FALSE(std::filesystem::exists(p));
  }
}

TEST_CASE("cli: hw show prints every section of a machine, its timing, photon budget and architecture included") {
  const Run r = run_aoc("hw show aoc-scale");
  INFO(r.out);
  REQUIRE(r.status == 0);
  for (const char* s : {"\nnoise\n", "\nconverters\n", "\ntiming\n", "\nenergy\n", "\nenergy.photon_budget\n", "\narchitecture\n", "\narea\n",
                        "dac_conversion_ns", "digital_gmac_per_s", "led_wall_plug_efficiency", "analog_functions", "state_memory"})
    CHECK_THAT(r.out, Catch::Contains(s));
}

TEST_CASE("cli: hw new makes a machine of 256 channels from aoc-scale, its calibration a stand-in named as one, and it estimates") {
  const std::string dir = std::filesystem::temp_directory_path() / ("aoc-test-hw-new-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string f = dir + "/aoc-256.json";
  const Run r = run_aoc("hw new aoc-256 --channels 256 -o " + f);
  INFO(r.out);
  REQUIRE(r.status == 0);
  const aoc::Hardware hw = aoc::load_hardware(f), src = aoc::load_hardware(aoc::resolve_hardware_path("aoc-scale"));
  CHECK(hw.name == "aoc-256");
  CHECK(hw.channels == 256);
  REQUIRE(hw.fan_in_pos.size() == 256);
  for (double v : hw.fan_in_pos) CHECK(v == Approx(src.fan_in_pos[0]).epsilon(1e-12));  // aoc-scale's are all its mean already
  CHECK_THAT(hw.sources.at("calibration.fan_in_pos"), Catch::Contains("[stand-in: aoc-scale's mean over its 2048 channels"));
  CHECK_THAT(hw.description, Catch::Contains("a stand-in, not a measurement"));
  CHECK(hw.area.has_value());
  CHECK(hw.energy->components.size() == src.energy->components.size());
  const Run e = run_aoc("estimate --hw " + f + " --fixed-points 1000");
  INFO(e.out);
  CHECK(e.status == 0);
  CHECK_THAT(e.out, Catch::Contains("estimate: aoc-256 (256 channels)"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("cli: hw new from aoc-48 takes each per-channel vector's mean and each row's column means, then --set") {
  const Run r = run_aoc("hw new aoc-96 --channels 96 --from aoc-48 --set architecture.modules=4 --set converters.adc_bits=6");
  REQUIRE(r.status == 0);
  const std::string f = std::filesystem::temp_directory_path() / ("aoc-test-hw-new96-" + std::to_string(::getpid()) + ".json");
  std::ofstream(f) << r.out;
  const aoc::Hardware hw = aoc::load_hardware(f), src = aoc::load_hardware(aoc::resolve_hardware_path("aoc-48"));
  std::filesystem::remove(f);
  CHECK(hw.channels == 96);
  CHECK(hw.architecture->modules == 4);
  CHECK(hw.converters->adc_bits == 6);
  double gain = 0;
  std::array<double, 3> col{};
  for (int i = 0; i < 48; ++i) {
    gain += src.gain_pos[i];
    for (int k = 0; k < 3; ++k) col[k] += src.slm_pos[i][k];
  }
  CHECK(hw.gain_pos == std::vector<double>(96, gain / 48));
  for (int k = 0; k < 3; ++k) CHECK(hw.slm_pos[95][k] == col[k] / 48);
  CHECK(hw.tanh == src.tanh);  // not per channel: copied
  CHECK(hw.led_pos == src.led_pos);
  CHECK_THAT(hw.provenance[0].second, Catch::Contains("aoc hw new aoc-96 --channels 96 --from aoc-48 --set architecture.modules=4"));
}

TEST_CASE("cli: hw new refuses a bad size, an unknown override and an unwritable output, writing nothing") {
  const Run small = run_aoc("hw new x --channels 1");
  CHECK(small.status != 0);
  CHECK_THAT(small.out, Catch::Contains("--channels: 1 is outside 2..4096"));
  const Run set = run_aoc("hw new x --channels 64 --set timing.nope=1");
  CHECK(set.status != 0);
  CHECK_THAT(set.out, Catch::Contains("timing.nope"));
  const Run out = run_aoc("hw new x --channels 64 -o /nonexistent-dir/x.json");
  CHECK(out.status != 0);
  CHECK_FALSE(std::filesystem::exists("/nonexistent-dir/x.json"));
}

TEST_CASE("cli: aoc loop refuses a non-finite --alpha, and a diverged solve exits 1 naming the samples, the same every run") {
  const Run nan = run_aoc("loop --alpha nan --batch 2");
  CHECK(nan.status != 0);
  CHECK_THAT(nan.out, Catch::Contains("--alpha: must be a finite number, got nan"));
  const Run a = run_aoc("loop --mode ideal --alpha 1e300 --batch 3 --json"), b = run_aoc("loop --mode ideal --alpha 1e300 --batch 3 --json");
  CHECK(a.status == 1);
  CHECK_THAT(a.out, Catch::Contains("aoc: error: loop: 3 of 3 samples diverged to NaN or inf (sample 0 first)"));
  CHECK_THAT(a.out, Catch::Contains("\"non_finite\": 3"));
  const auto digest = [](const std::string& out) { return out.substr(out.find("\"digest\""), 30); };
  CHECK(digest(a.out) == digest(b.out));  // NaN results, bit for bit the same: no uninitialised memory
}

TEST_CASE("cli: aoc loop with noise stops samples at their noise floor, --floor-patience 0 runs to --max-iter") {
  const auto field = [](const std::string& out, const std::string& key) {
    const auto at = out.find("\"" + key + "\": ");
    REQUIRE(at != std::string::npos);
    return std::stoi(out.substr(at + key.size() + 4));
  };
  const Run floor = run_aoc("loop --hw aoc-48 --batch 16 --noise --quantize --json");
  REQUIRE(floor.status == 0);
  CHECK(field(floor.out, "noise_floor_stops") + field(floor.out, "converged") == 16);
  CHECK(field(floor.out, "noise_floor_stops") > 0);
  CHECK(field(floor.out, "steps") < 40);
  const Run endless = run_aoc("loop --hw aoc-48 --batch 16 --noise --quantize --json --floor-patience 0");
  REQUIRE(endless.status == 0);
  CHECK(field(endless.out, "noise_floor_stops") == 0);
  CHECK(field(endless.out, "steps") == 40);
  // noise-free runs never use the rule: the same bits with any patience
  const Run a = run_aoc("loop --hw aoc-48 --batch 4 --json"), b = run_aoc("loop --hw aoc-48 --batch 4 --json --floor-patience 3");
  const auto digest = [](const std::string& out) { return out.substr(out.find("\"digest\""), 30); };
  CHECK(digest(a.out) == digest(b.out));
  CHECK_THAT(run_aoc("loop --floor-patience -1").out, Catch::Contains("--floor-patience"));
  // the auto-zero after programming: on with noise, recorded; without it the same run reads differently
  const Run zeroed = run_aoc("loop --hw aoc-48 --batch 4 --noise --json"), raw = run_aoc("loop --hw aoc-48 --batch 4 --noise --json --zero-reads 0");
  REQUIRE(zeroed.status == 0);
  REQUIRE(raw.status == 0);
  CHECK(field(zeroed.out, "zero_reads") == 1024);
  CHECK(field(raw.out, "zero_reads") == 0);
  CHECK(digest(zeroed.out) != digest(raw.out));
}

TEST_CASE("cli: two identical aoc compile runs a second apart write byte-identical programs and weights") {
  const auto dir = std::filesystem::temp_directory_path() / "aoc-identical";
  std::filesystem::create_directories(dir);
  const auto bytes = [](const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  std::string program[2], weights[2];
  for (int i = 0; i < 2; ++i) {
    const std::string g = (dir / ("g" + std::to_string(i) + ".json")).string(), p = (dir / ("p" + std::to_string(i) + ".h5")).string();
    REQUIRE(run_aoc("import " + std::string(AOC_TEST_DATA) + "/implicit-lm/mamba2-state-tracking-implicit/config.json -o " + g).status == 0);
    REQUIRE(run_aoc("compile " + g + " --hw aoc-48 -o " + p).status == 0);
    program[i] = bytes(p), weights[i] = bytes(dir / ("g" + std::to_string(i) + ".h5"));
    if (i == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1100));  // HDF5's timestamps have 1 s resolution
  }
  CHECK(program[0].size() > 1000);
  CHECK(program[0] == program[1]);
  CHECK(weights[0] == weights[1]);
}

TEST_CASE("cli: an output that names one of the command's inputs is refused before anything is written") {
  const auto dir = std::filesystem::temp_directory_path() / "aoc-eat";
  std::filesystem::create_directories(dir);
  const std::string g = (dir / "g.json").string(), p = (dir / "p.h5").string(), tok = (dir / "tok.h5").string();
  REQUIRE(run_aoc("import " + std::string(AOC_TEST_DATA) + "/implicit-lm/mamba2-state-tracking-implicit/config.json -o " + g).status == 0);
  REQUIRE(run_aoc("compile " + g + " --hw aoc-48 -o " + p).status == 0);
  REQUIRE(run_aoc("run " + p + " --example-input " + tok).status == 0);
  const auto bytes = [](const std::string& f) {
    std::ifstream in(f, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const std::string graph = bytes(g), program = bytes(p), tokens = bytes(tok);
  const std::string same_dir = (dir / "." / "p.h5").string();  // the same file by another name
  struct Case {
    std::string args, says;
  };
  for (const Case& c : {Case{"compile " + g + " --hw aoc-48 -o " + g, "-o: " + g + " is also the graph"},
                        Case{"compile " + g + " --hw aoc-48 -o " + (dir / "g.h5").string(), "is also --weights"},
                        Case{"run " + p + " --inputs " + tok + " -o " + same_dir, "-o: " + same_dir + " is also the program"},
                        Case{"run " + p + " --inputs " + tok + " -o " + tok, "is also --inputs"},
                        Case{"report " + p + " -o " + p, "is also the results"},
                        Case{"run " + p + " --example-input " + same_dir, "--example-input: " + same_dir + " is also the program"},
                        Case{"estimate " + p + " --json -o " + same_dir, "-o: " + same_dir + " is also the program"},
                        Case{"check " + p + " --inputs " + tok + " --json -o " + tok, "-o: " + tok + " is also --inputs"},
                        Case{"task parity --tokens " + tok + " --labels " + tok, "--labels: " + tok + " is also --tokens"}}) {
    INFO(c.args);
    const Run r = run_aoc(c.args);
    CHECK(r.status == 1);
    CHECK_THAT(r.out, Catch::Contains(c.says));
    CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 1);
  }
  CHECK(bytes(g) == graph);
  CHECK(bytes(p) == program);
  CHECK(bytes(tok) == tokens);
}

namespace {

// Each subcommand's options as its --help shows them: name -> (base type, default; "" when none shown).
std::map<std::string, std::map<std::string, std::pair<std::string, std::string>>> shown_options() {
  std::vector<std::string> commands{"hw list", "hw show", "hw new"};
  const std::string top = run_aoc("--help").out;
  const std::regex sub(R"(\n  ([a-z][a-z-]+) {2,})");
  for (std::sregex_iterator it(top.begin(), top.end(), sub), end; it != end; ++it)
    if ((*it)[1] != "hw") commands.push_back((*it)[1]);
  std::map<std::string, std::map<std::string, std::pair<std::string, std::string>>> by_name;
  const std::regex opt(R"(\n +(?:-\w, )?(--[a-z0-9-]+)(?: ([A-Z]+)[^\s=]*)?(?:=(\S+))?)");
  for (const std::string& c : commands) {
    const std::string help = run_aoc(c + " --help").out;
    for (std::sregex_iterator it(help.begin(), help.end(), opt), end; it != end; ++it)
      by_name[(*it)[1]][c] = {(*it)[2], (*it)[3]};
  }
  return by_name;
}

}  // namespace

TEST_CASE("cli: an option has one type and one default in every subcommand that takes it") {
  // Shared names whose default differs on purpose, each with its reason (docs: the commands' --help).
  const std::map<std::string, std::string> differ = {
      {"--precision", "verify-dt checks the golden cases in both precisions unless told one"},
      {"--threads", "sweep, the long batch job, defaults to the machine's cores; every other command to 1"},
      {"--seed", "explore's default is its scenario's seed (a search is the scenario's unless told another)"},
      {"--batch", "loop's batch of its run; run's is the shape of the --example-input it writes; task requires one"},
      {"--length", "run's is the shape of the --example-input it writes; task requires one"},
      {"--iterations", "bench's fixed count of loop iterations per timed run; estimate's K (a mean: a float), default each loop's max_iter"},
      {"--hw", "train trains for a machine only when given one (none by default); every other command runs on aoc-48 unless told"}};
  const auto by_name = shown_options();
  REQUIRE(by_name.count("--seed"));
  CHECK(by_name.at("--seed").size() >= 6);
  for (const auto& [name, where] : by_name) {
    if (where.size() < 2 || differ.count(name)) continue;
    const auto& [first_cmd, first] = *where.begin();
    for (const auto& [cmd, shown] : where) {
      INFO(name << ": " << first_cmd << " shows " << first.first << "=" << first.second << ", " << cmd << " " << shown.first << "="
                << shown.second);
      CHECK(shown.first == first.first);
      CHECK(shown.second == first.second);
    }
  }
}

TEST_CASE("cli: hw show applies --set and prints the resolved description as JSON") {
  const Run r = run_aoc("hw show aoc-48 --set noise.thermal_sigma=0.004");
  REQUIRE(r.status == 0);
  CHECK(r.out.find("override noise.thermal_sigma=0.004") != std::string::npos);
  const Run j = run_aoc("hw show aoc-48 --set noise.thermal_sigma=0.004 --json");
  REQUIRE(j.status == 0);
  CHECK(nlohmann::json::parse(j.out)["noise"]["thermal_sigma"]["value"] == 0.004);
  const Run bad = run_aoc("hw show aoc-48 --set noise.no_such=1");
  CHECK(bad.status != 0);
  CHECK(one_line(bad.out));
}

TEST_CASE("cli: --floor-patience sets how long a noisy fixed point waits at its floor, the readout the mean of that window") {
  // an A5 model: its noisy solves on aoc-48 stop at their floor (a parity model's converge)
  const auto dir = temp_dir() / "floor-patience";
  std::filesystem::create_directories(dir);
  const std::string model = std::string(AOC_SOURCE_DIR) + "/models/trained/a5-implicit-ideal1800";
  const std::string g = (dir / "g.json").string(), prog = (dir / "p.aocp.h5").string(), tok = (dir / "tok.h5").string();
  REQUIRE(run_aoc("import " + model + "/config.json --shapes-only -o " + g).status == 0);
  REQUIRE(run_aoc("task a5 --batch 4 --length 8 --seed 3 --tokens " + tok + " --labels " + (dir / "lab.h5").string()).status == 0);
  REQUIRE(run_aoc("compile " + g + " --weights " + model + "/weights.h5 --hw aoc-48 --calibrate " + tok + " -o " + prog).status == 0);
  const auto record = [&](const std::string& flags) {
    const Run r = run_aoc("check " + prog + " --inputs " + tok + " --sequence sequential --json --quiet " + flags);
    INFO(r.out);
    REQUIRE(r.status == 0);
    return nlohmann::json::parse(r.out.substr(r.out.find('{')));
  };
  const auto usual = record(""), patient = record("--floor-patience 32");
  CHECK(usual["floor_patience"] == 8);
  CHECK(patient["floor_patience"] == 32);
  CHECK(usual["noise_floor_stops"]["max"].get<double>() > 0);
  CHECK(patient["iterations_mean"]["mean"].get<double>() > usual["iterations_mean"]["mean"].get<double>() + 8);
  const auto digest = [&](const std::string& flags) {
    const Run r = run_aoc("run " + prog + " --inputs " + tok + " --sequence sequential --noise --quantize --json -o " + (dir / "out.h5").string() + " " + flags);
    INFO(r.out);
    REQUIRE(r.status == 0);
    const auto j = nlohmann::json::parse(r.out.substr(r.out.find('{')));
    CHECK(j["floor_patience"] == (flags.empty() ? 8 : 32));
    return j["output_digest"];
  };
  CHECK(digest("--floor-patience 32") != digest(""));
  const Run bad = run_aoc("check " + prog + " --inputs " + tok + " --floor-patience -1");
  CHECK(bad.status != 0);
  CHECK_THAT(bad.out, Catch::Contains("--floor-patience"));
}

TEST_CASE("cli: import --tol sets every fixed point's tolerance, which the reference solves to, and refuses a model without one") {
  const auto dir = temp_dir() / "import-tol";
  std::filesystem::create_directories(dir);
  const std::string model = std::string(AOC_SOURCE_DIR) + "/models/trained/s5-implicit-aoc48-1800";
  const std::string tok = (dir / "tok.h5").string();
  REQUIRE(run_aoc("task s5 --batch 8 --length 8 --seed 3 --tokens " + tok + " --labels " + (dir / "lab.h5").string()).status == 0);
  const auto iterations = [&](const std::string& flags, const std::string& name) {
    const std::string g = (dir / (name + ".json")).string(), prog = (dir / (name + ".aocp.h5")).string();
    const Run imp = run_aoc("import " + model + "/config.json --shapes-only --json -o " + g + " " + flags);
    INFO(imp.out);
    REQUIRE(imp.status == 0);
    const double tol = nlohmann::json::parse(imp.out)["fixed_points"][0]["tol"];
    REQUIRE(run_aoc("compile " + g + " --weights " + model + "/weights.h5 --hw aoc-48 -o " + prog).status == 0);
    const Run r = run_aoc("check " + prog + " --inputs " + tok + " --sequence sequential --ideal --json --quiet");
    INFO(r.out);
    REQUIRE(r.status == 0);
    return std::pair{tol, nlohmann::json::parse(r.out.substr(r.out.find('{')))["reference_iterations_mean"].get<double>()};
  };
  const auto [config_tol, config_iters] = iterations("", "config");
  const auto [tight_tol, tight_iters] = iterations("--tol 0.005", "tight");
  CHECK(config_tol == 0.05);
  CHECK(tight_tol == 0.005);
  CHECK(tight_iters > config_iters + 1);  // a tighter stopping rule takes more steps
  const Run text = run_aoc("import " + model + "/config.json --shapes-only --tol 0.02 -o " + (dir / "t.json").string());
  CHECK_THAT(text.out, Catch::Contains("tol 0.02 (--tol; the config's 0.05)"));
  const std::string none = (dir / "explicit.json").string();
  const Run expl = run_aoc("import " + std::string(AOC_SOURCE_DIR) + "/models/trained/s5-explicit/config.json --shapes-only --tol 0.02 -o " + none);
  CHECK(expl.status != 0);
  CHECK_THAT(expl.out, Catch::Contains("--tol: the model has no fixed point"));
  CHECK_FALSE(std::filesystem::exists(none));
  for (const char* bad : {"0", "-1", "nan"}) CHECK(run_aoc("import " + model + "/config.json --shapes-only -o " + none + " --tol " + bad).status != 0);
  CHECK_FALSE(std::filesystem::exists(none));
}

TEST_CASE("cli: aoc check checks the machine by default, its converters and noise on, and --ideal the lowering alone") {
  const auto dir = temp_dir() / "check-default";
  std::filesystem::create_directories(dir);
  const std::string g = (dir / "st.json").string(), prog = (dir / "st.aocp.h5").string(), tok = (dir / "tok.h5").string();
  REQUIRE(run_aoc("import " + std::string(AOC_TEST_DATA) + "/implicit-lm/mamba2-state-tracking-implicit/config.json -o " + g).status == 0);
  REQUIRE(run_aoc("compile " + g + " --hw aoc-48 -o " + prog).status == 0);
  REQUIRE(run_aoc("run " + prog + " --example-input " + tok + " --batch 1 --length 2").status == 0);
  REQUIRE(run_aoc("compile " + g + " --hw aoc-48 -o " + prog + " --calibrate " + tok).status == 0);
  const auto record = [&](const std::string& flags) {
    const Run r = run_aoc("check " + prog + " --inputs " + tok + " --json --quiet " + flags);
    INFO(r.out);
    REQUIRE(r.status == 0);
    return nlohmann::json::parse(r.out.substr(r.out.find('{')));  // after a clipping warning (stderr) if any
  };
  const auto machine = record(""), off = record("--no-quantize --no-noise"), ideal = record("--ideal");
  CHECK(machine["quantize"] == true);
  CHECK(machine["noise"] == true);
  CHECK(off["quantize"] == false);
  CHECK(off["noise"] == false);
  CHECK(ideal["quantize"] == false);
  CHECK(ideal["max_abs_error"]["max"].get<double>() < 1e-9);
  CHECK(machine["max_abs_error"]["max"].get<double>() > 1e-3);  // the machine is not the exact lowering
  // one programmed chip under two read-noise seeds: recorded, and a different run from new chips
  const auto chip = record("--seeds 2 --program-seed 7"), chips = record("--seeds 2");
  CHECK(chip["program_seed"] == 7);
  CHECK(chips["program_seed"].is_null());
  CHECK(chip["max_abs_error"]["mean"] != chips["max_abs_error"]["mean"]);
  const Run bad = run_aoc("check " + prog + " --inputs " + tok + " --program-seed -1");
  CHECK(bad.status != 0);
  CHECK(bad.out.find("--program-seed") != std::string::npos);
  // write-verify: the pixels written again are counted; a tolerance is a fraction
  const auto verified = record("--write-verify 0.005");
  CHECK(verified["write_verify"]["rewrites"].get<long long>() > 0);
  CHECK(machine.find("write_verify") == machine.end());
  CHECK(run_aoc("check " + prog + " --inputs " + tok + " --write-verify 2").status != 0);
  // the auto-zero after each programming: on by default, recorded, and it moves the outputs
  const auto unzeroed = record("--zero-reads 0");
  CHECK(machine["zero_reads"] == 1024);
  CHECK(unzeroed["zero_reads"] == 0);
  CHECK(off.find("zero_reads") == off.end());
  const auto digest = [&](const std::string& flags) {
    const Run r = run_aoc("run " + prog + " --inputs " + tok + " --noise --quantize --json -o " + (dir / "out.h5").string() + " " + flags);
    REQUIRE(r.status == 0);
    return nlohmann::json::parse(r.out.substr(r.out.find('{')))["output_digest"];
  };
  CHECK(digest("--zero-reads 0") != digest(""));
  CHECK(run_aoc("check " + prog + " --inputs " + tok + " --zero-reads -1").status != 0);
  // the noise-floor window of a fixed point: recorded, 8 by default (its effect: the next test)
  CHECK(machine["floor_patience"] == 8);
  CHECK(off.find("floor_patience") == off.end());
  CHECK(digest("--floor-patience 8") == digest(""));
  CHECK(run_aoc("check " + prog + " --inputs " + tok + " --floor-patience -1").status != 0);
  // a run at a time after the programming: recorded, and on the clock (so it reads differently)
  const auto later = record("--after-programming-us 500000");
  CHECK(later["after_programming_us"] == 500000.0);
  CHECK(machine.find("after_programming_us") == machine.end());
  CHECK(digest("--after-programming-us 500000") != digest(""));
  CHECK(digest("--after-programming-us 500000") != digest("--after-programming-us 0"));
}

TEST_CASE("cli: programmed and zeroed at clock 0, the drift is gone at first, grows back with time, and goes with each zero taken again") {
  // drift alone (2 mV, 1 s correlation time on aoc-48): how far the noisy loop's fixed points sit from the clean ones
  const auto rms = [](const std::string& flags) {
    const Run r = run_aoc("loop --hw aoc-48 --batch 64 --noise --compare --seed 1 --json --set noise.thermal_sigma=0 --set noise.rin_sigma=0 "
                          "--set noise.slm_fixed_pattern_sigma=0 --set noise.photons_per_sample=0 --set noise.flicker_sigma=0 " + flags);
    REQUIRE(r.status == 0);
    return nlohmann::json::parse(r.out)["deviation_from_clean"]["rms"].get<double>();
  };
  const double unclocked = rms(""), at0 = rms("--after-programming-us 0"), ms10 = rms("--after-programming-us 10000"),
               ms300 = rms("--after-programming-us 300000"), s3 = rms("--after-programming-us 3000000");
  CHECK(unclocked > 1e-3);       // the drift of the run's moment, never zeroed
  CHECK(at0 < 0.01 * unclocked);  // zeroed at its moment
  CHECK(ms10 > at0);
  CHECK(ms300 > 10 * ms10);       // drifting away from the zero: linear between the knots
  CHECK(s3 > 0.5 * unclocked);    // past the drift's time: the zero no longer helps
  // the auto-zero taken again every millisecond: the drift of 300 ms and 3 s later is gone again
  const double ms300z = rms("--after-programming-us 300000 --zero-every-us 1000"), s3z = rms("--after-programming-us 3000000 --zero-every-us 1000");
  CHECK(ms300z < 0.05 * ms300);
  CHECK(s3z < 0.05 * s3);
  const Run unclocked_zeros = run_aoc("loop --hw aoc-48 --batch 4 --noise --zero-every-us 1000");
  CHECK(unclocked_zeros.status != 0);
  CHECK_THAT(unclocked_zeros.out, Catch::Contains("zero_every_us: the zeros sit on the clock from the programming's moment"));
  CHECK(run_aoc("loop --hw aoc-48 --batch 4 --noise --after-programming-us 0 --zero-every-us 0").status != 0);
  CHECK(run_aoc("loop --hw aoc-48 --batch 4 --noise --after-programming-us 0 --zero-every-us 1000 --zero-reads 0").status != 0);
  const Run off = run_aoc("loop --hw aoc-48 --batch 4 --after-programming-us 0");
  CHECK(off.status != 0);
  CHECK_THAT(off.out, Catch::Contains("after_programming_us: places the noise on the clock"));
  CHECK(run_aoc("loop --hw aoc-48 --batch 4 --noise --after-programming-us -1").status != 0);
}

TEST_CASE("cli: every command that writes files prints a JSON record of what it did with --json") {
  const auto dir = temp_dir() / "json-records";
  std::filesystem::create_directories(dir);
  const auto at = [&](const char* f) { return (dir / f).string(); };
  const auto record = [&](const std::string& args, const std::string& tool) {
    const Run r = run_aoc(args + " --json");
    INFO(args << "\n" << r.out);
    REQUIRE(r.status == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["tool"] == tool);
    CHECK(j["version"] == AOC_VERSION);
    return j;
  };
  CHECK(record("task parity --batch 2 --length 4 --tokens " + at("t.h5") + " --labels " + at("l.h5"), "aoc task")["vocabulary"] == 2);
  const auto imported = record("import " + std::string(AOC_TEST_DATA) + "/implicit-lm/mamba2-state-tracking-implicit/config.json -o " + at("g.json"),
                               "aoc import");
  CHECK(imported["weights_from"] == "seeded random");
  CHECK(imported["fixed_points"].size() == 1);
  CHECK(record("compile " + at("g.json") + " --hw aoc-48 -o " + at("p.h5"), "aoc compile")["mapping"].is_object());
  REQUIRE(run_aoc("run " + at("p.h5") + " --example-input " + at("tok.h5") + " --batch 2 --length 3").status == 0);
  CHECK(record("run " + at("p.h5") + " --inputs " + at("tok.h5") + " -o " + at("o.h5") + " --quantize", "aoc run")["conversions"]["dac"] > 0);
  REQUIRE(run_aoc("run --example-input " + at("in.h5") + " --n 16 --batch 3").status == 0);
  const auto loop = record("run " + at("in.h5") + " --hw aoc-16 -o " + at("lo.h5"), "aoc run");
  const Run text = run_aoc("run " + at("in.h5") + " --hw aoc-16 -o " + at("lo2.h5"));
  CHECK(text.out.find("digest of the output arrays " + loop["output_digest"].get<std::string>()) != std::string::npos);
  CHECK(record("sweep " + std::string(AOC_TEST_DATA) + "/sweeps/report-parity.json -o " + at("s.h5") + " --quiet --threads 1", "aoc sweep")["points"] == 9);
  CHECK(run_aoc("compile " + at("g.json") + " --hw aoc-48 --print --json").status != 0);
}

TEST_CASE("cli: inputs at the edges: empty dimensions, an overflowing loop, bad numbers, a binary file as JSON, a directory") {
  const auto dir = std::filesystem::temp_directory_path() / "aoc-edges";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const auto at = [&](const char* f) { return (dir / f).string(); };
  REQUIRE(run_aoc("import " + std::string(AOC_TEST_DATA) + "/implicit-lm/mamba2-state-tracking-implicit/config.json -o " + at("g.json")).status == 0);
  REQUIRE(run_aoc("compile " + at("g.json") + " --hw aoc-48 -o " + at("p.h5")).status == 0);
  const auto one_line = [](const Run& r) { return std::count(r.out.begin(), r.out.end(), '\n') == 1; };
  // tokens with an empty batch or sequence: refused by name, never a signal or a NaN printed as a result
  for (const char* shape : {"2 0", "0 6"}) {
    const std::string t = at("empty.h5");
    std::filesystem::remove(t);
    REQUIRE(aoc::test::run_shell("/usr/bin/python3 -c \"import h5py, numpy; f = h5py.File('" + t + "', 'w'); f['tokens'] = numpy.zeros((" +
                                 std::string(shape).replace(1, 1, ",") + "))\" 2>&1").status == 0);
    for (const std::string& cmd : {"run " + at("p.h5") + " --inputs " + t + " -o " + at("o.h5"), "check " + at("p.h5") + " --inputs " + t + " --quantize",
                                   "check " + at("p.h5") + " --inputs " + t + " --sequence sequential"}) {
      const Run r = run_aoc(cmd);
      INFO(cmd << ": " << r.out);
      CHECK(r.status == 1);
      CHECK(one_line(r));
      CHECK_THAT(r.out, Catch::Contains(t + ": /tokens: shape [") && Catch::Contains("nothing to run"));
    }
  }
  // a loop whose W overflows the ideal loop: an error, no file
  REQUIRE(run_aoc("run --example-input " + at("loop.h5") + " --batch 3").status == 0);
  REQUIRE(aoc::test::run_shell("/usr/bin/python3 -c \"import h5py; f = h5py.File('" + at("loop.h5") + "', 'r+'); w = f['W'][()] * 1e300; del f['W']; f['W'] = w\" 2>&1").status == 0);
  const Run big = run_aoc("run " + at("loop.h5") + " --mode ideal -o " + at("lo.h5"));
  INFO(big.out);
  CHECK(big.status == 1);
  CHECK_THAT(big.out, Catch::Contains("3 of 3 fixed points are not finite"));
  CHECK_FALSE(std::filesystem::exists(at("lo.h5")));
  // numbers a person would not mean: NaN, negative, a wrapped seed, a count no run could finish
  for (const auto& [cmd, says] : std::vector<std::pair<std::string, std::string>>{
           {"estimate " + at("p.h5") + " --iterations nan", "--iterations: expected a finite number, got nan"},
           {"estimate " + at("p.h5") + " --iterations -5", "--iterations: expected a number >= 0, got -5"},
           {"run " + at("p.h5") + " --example-input " + at("x.h5") + " --seed -1", "--seed: expected a whole number from 0 to 18446744073709551615, got -1"},
           {"check " + at("p.h5") + " --inputs " + at("p.h5") + " --seeds 2147483647", "--seeds: expected a number from 1 to 100000, got 2147483647"},
           {"loop --hw " + at("p.h5"), at("p.h5") + ": this is an HDF5 file, not JSON"},
           {"loop --hw " + dir.string(), dir.string() + ": is a directory"},
           {"run " + at("p.h5") + " --example-input " + dir.string(), dir.string() + ": is a directory"}}) {
    const Run r = run_aoc(cmd);
    INFO(cmd << ": " << r.out);
    CHECK(r.status != 0);
    CHECK(r.status < 128);
    CHECK_THAT(r.out, Catch::Contains(says));
    CHECK(r.out.find("internal error") == std::string::npos);
    CHECK(r.out.size() < 400);  // no 309-digit bound
  }
  std::filesystem::remove_all(dir);
}
