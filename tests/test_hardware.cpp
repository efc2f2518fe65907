// The hardware-description loader (sim/hardware.hpp, docs/hardware.md): the bundled machines load
// with the right values, and every kind of mistake in a file is a one-line error that names the
// file and the field.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>

#include "sim/error.hpp"
#include "sim/hardware.hpp"

namespace {

using json = nlohmann::ordered_json;
namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

std::string bundled_path(const std::string& name) {
  return std::string(AOC_SOURCE_DIR) + "/scenarios/hardware/" + name + ".json";
}

json bundled(const std::string& name) {
  std::ifstream in(bundled_path(name));
  REQUIRE(in);
  return json::parse(in);
}

// A file in the temp directory, removed again at the end of the test.
struct TempFile {
  fs::path path;
  explicit TempFile(const std::string& text) {
    static int counter = 0;
    path = fs::temp_directory_path() /
           ("aoc-test-hardware-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + ".json");
    std::ofstream(path) << text;
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  ~TempFile() {
    std::error_code ec;
    fs::remove(path, ec);
  }
  std::string str() const { return path.string(); }
};

// Loads `text` from a temp file; returns {file, message of the aoc::Error} (message empty if it loaded).
std::pair<std::string, std::string> load_text(const std::string& text) {
  TempFile f(text);
  try {
    aoc::load_hardware(f.str());
  } catch (const aoc::Error& e) {
    return {f.str(), e.what()};
  }
  return {f.str(), ""};
}

// Loading `text` fails with "<file>: <field>: ..." containing `what`, on one line.
void expect_error_text(const std::string& text, const std::string& field, const std::string& what) {
  const auto [file, msg] = load_text(text);
  INFO("message: " << msg);
  REQUIRE_FALSE(msg.empty());
  CHECK_THAT(msg, StartsWith(file + ": " + field + ": "));
  CHECK_THAT(msg, Contains(what));
  CHECK(msg.find('\n') == std::string::npos);
}

void expect_error(const json& j, const std::string& field, const std::string& what) {
  expect_error_text(j.dump(1), field, what);
}

aoc::Hardware load_json(const json& j) {
  TempFile f(j.dump(1));
  return aoc::load_hardware(f.str());
}

json& cal(json& j, const std::string& key) { return j["calibration"][key]["value"]; }

// Restores an environment variable on scope exit.
struct EnvGuard {
  std::string name;
  std::optional<std::string> old;
  explicit EnvGuard(std::string n) : name(std::move(n)) {
    if (const char* v = std::getenv(name.c_str())) old = v;
  }
  ~EnvGuard() {
    if (old) ::setenv(name.c_str(), old->c_str(), 1);
    else ::unsetenv(name.c_str());
  }
};

}  // namespace

// ---------------------------------------------------------------------------------------------
// The bundled machines

TEST_CASE("hardware: the bundled 48-variable machine loads with its calibration") {
  const aoc::Hardware hw = aoc::load_hardware(bundled_path("aoc-48"));
  CHECK(hw.name == "aoc-48");
  CHECK(hw.channels == 48);
  CHECK(hw.tanh[0] == 3.5803695186081548);
  CHECK(hw.tanh[2] > 0);
  CHECK(hw.led_pos[0] == -0.22301843205003613);
  CHECK(hw.fan_in_pos.size() == 48);
  CHECK(hw.fan_in_pos[8] == 0);
  CHECK(hw.fan_in_neg[8] == 0);
  CHECK(hw.slm_pos.size() == 48);
  CHECK(hw.slm_pos[0][2] == 0.014815019614313009);  // slm darkness of column 0
  CHECK(hw.gain_pos.size() == 48);
  CHECK(hw.gain_pos[0] == 1.0342796087628983);
  CHECK(hw.pd_earlier_pos[0] == 0);
  CHECK(hw.pd_later_pos.size() == 48);
  CHECK(hw.clip_lo == -1.3);
  CHECK(hw.clip_hi == 1.3);
  CHECK(hw.pbs_model == aoc::PbsModel::PerChannel);
  CHECK(hw.pbs_neg_to_pos.size() == 48);
  CHECK(hw.pbs_pos_to_neg.size() == 48);
  CHECK(hw.pbs_leak_pos.empty());
  CHECK(hw.crosstalk_order == aoc::CrosstalkOrder::PbsThenPd);
  REQUIRE(hw.closed_loop);
  CHECK(hw.closed_loop->scaling.size() == 48);
  CHECK(hw.closed_loop->solution_to_adc_ratio == 1.9998618696327446);
  CHECK(hw.readout.model == aoc::ReadoutSaturation::Model::Piecewise48);
  CHECK(hw.readout.piece1_poly.size() == 3);
  CHECK(hw.readout.piece3_poly.size() == 5);
  CHECK(hw.readout.piece0[1] == hw.readout.piece1[0]);
}

TEST_CASE("hardware: the bundled 16-variable machine loads with its hard-coded gains and quadratic PBS leak") {
  const aoc::Hardware hw = aoc::load_hardware(bundled_path("aoc-16"));
  CHECK(hw.name == "aoc-16");
  CHECK(hw.channels == 16);
  CHECK(hw.gain_pos == std::vector<double>(16, 0.65));
  CHECK(hw.gain_neg == std::vector<double>(16, 1.0));
  CHECK(hw.pbs_model == aoc::PbsModel::QuadraticLeak);
  CHECK(hw.pbs_leak_pos.size() == 15);
  CHECK(hw.pbs_leak_neg.size() == 15);
  CHECK(hw.pbs_leak_norm_pos == 0.04);
  CHECK(hw.pbs_leak_norm_neg == 0.06);
  CHECK(hw.pbs_neg_to_pos.empty());
  CHECK(hw.crosstalk_order == aoc::CrosstalkOrder::PdThenPbs);
  CHECK_FALSE(hw.closed_loop);
  CHECK(hw.readout.model == aoc::ReadoutSaturation::Model::Piecewise16);
  CHECK(hw.readout.piece1_multiplier == 10.627059455483868);
}

TEST_CASE("hardware: five tanh coefficients leave g at zero") {
  const aoc::Hardware hw = aoc::load_hardware(bundled_path("aoc-16"));
  CHECK(hw.tanh[0] == 3.650472665);
  CHECK(hw.tanh[2] == 3.920930171);
  CHECK(hw.tanh[5] == 0);
}

TEST_CASE("hardware: the source of every calibration entry is recorded") {
  for (const char* name : {"aoc-48", "aoc-16"}) {
    const json j = bundled(name);
    const aoc::Hardware hw = aoc::load_hardware(bundled_path(name));
    for (const auto& [key, entry] : j["calibration"].items()) {
      INFO(name << " " << key);
      REQUIRE(hw.sources.count("calibration." + key) == 1);
      CHECK(hw.sources.at("calibration." + key) == entry["source"].get<std::string>());
    }
  }
  const aoc::Hardware hw = aoc::load_hardware(bundled_path("aoc-48"));
  CHECK(hw.sources.at("calibration.fan_in_pos") == "row_profiles.positive_row12");
  CHECK_THAT(hw.sources.at("defaults"), Contains("AOCCell.from_parameters"));
}

TEST_CASE("hardware: unused entries are kept with their source") {
  const aoc::Hardware hw = aoc::load_hardware(bundled_path("aoc-48"));
  CHECK(hw.sources.at("unused.best_to_worst_channels") == "best_to_worst_channels");
  CHECK(hw.sources.at("unused.pd_crosstalk/pd_positive_darkness") == "pd_crosstalk.pd_positive_darkness");
}

TEST_CASE("hardware: provenance is kept in file order") {
  const aoc::Hardware hw = aoc::load_hardware(bundled_path("aoc-48"));
  REQUIRE(hw.provenance.size() == 5);
  CHECK(hw.provenance[0] == std::pair<std::string, std::string>{"converted_by", "scripts/dt-yaml-to-json"});
  CHECK(hw.provenance[3] == std::pair<std::string, std::string>{"calibration_row", "12"});
}

TEST_CASE("hardware: the twin defaults are read from the file") {
  json j = bundled("aoc-48");
  j["defaults"]["scale"] = 10.5;
  j["defaults"]["alpha"] = -0.25;
  j["defaults"]["normalise_matrix"] = false;
  j["defaults"]["switches"]["pbs_crosstalk"] = true;
  j["defaults"]["switches"]["slm_darkness"] = false;
  const aoc::Hardware hw = load_json(j);
  CHECK(hw.defaults.scale == 10.5);
  CHECK(hw.defaults.alpha == -0.25);
  CHECK_FALSE(hw.defaults.normalise_matrix);
  CHECK(hw.defaults.switches.pbs_crosstalk);
  CHECK_FALSE(hw.defaults.switches.slm_darkness);
  CHECK(hw.defaults.switches.weight_distortion);
}

TEST_CASE("hardware: the bundled files carry the twin's factory defaults") {
  const aoc::Hardware hw = aoc::load_hardware(bundled_path("aoc-16"));
  CHECK(hw.defaults.scale == 18.6);
  CHECK(hw.defaults.alpha == 0.5);
  CHECK(hw.defaults.normalise_matrix);
  CHECK_FALSE(hw.defaults.switches.pbs_crosstalk);
  CHECK(hw.defaults.switches.pd_crosstalk);
}

TEST_CASE("hardware: an output gain may be one scalar for all channels") {
  json j = bundled("aoc-48");
  cal(j, "output_gain_neg") = 1.25;
  const aoc::Hardware hw = load_json(j);
  CHECK(hw.gain_neg == std::vector<double>(48, 1.25));
}

TEST_CASE("hardware: a machine without the closed-loop fields has no closed loop") {
  json j = bundled("aoc-48");
  for (const char* k : {"closed_loop_dc_offset", "closed_loop_linear_offset", "closed_loop_scaling",
                        "closed_loop_solution_to_adc_ratio"})
    j["calibration"].erase(k);
  CHECK_FALSE(load_json(j).closed_loop);
}

TEST_CASE("hardware: description, provenance and unused are optional") {
  json j = bundled("aoc-16");
  j.erase("description");
  j.erase("provenance");
  j.erase("unused");
  const aoc::Hardware hw = load_json(j);
  CHECK(hw.description.empty());
  CHECK(hw.provenance.empty());
  CHECK(hw.channels == 16);
}

TEST_CASE("hardware: an unused entry may hold any JSON value") {
  json j = bundled("aoc-16");
  j["unused"]["anything"] = {{"value", {{"nested", {1, "two", nullptr, true}}}}, {"source", "somewhere"}};
  j["unused"]["nothing"] = {{"value", nullptr}, {"source", "elsewhere"}};
  const aoc::Hardware hw = load_json(j);
  CHECK(hw.sources.at("unused.anything") == "somewhere");
  CHECK(hw.sources.at("unused.nothing") == "elsewhere");
}

// ---------------------------------------------------------------------------------------------
// resolve_hardware_path

TEST_CASE("hardware: resolve_hardware_path finds a bundled machine by name") {
  EnvGuard env("AOC_DATA_DIR");
  ::unsetenv("AOC_DATA_DIR");
  for (const char* name : {"aoc-48", "aoc-48.json"}) {
    const std::string p = aoc::resolve_hardware_path(name);
    CHECK_THAT(p, Catch::Matchers::EndsWith("scenarios/hardware/aoc-48.json"));
    CHECK(fs::equivalent(p, bundled_path("aoc-48")));
  }
  CHECK(aoc::load_hardware(aoc::resolve_hardware_path("aoc-16")).channels == 16);
}

TEST_CASE("hardware: resolve_hardware_path returns the path of an existing file unchanged") {
  TempFile f(bundled("aoc-16").dump());
  CHECK(aoc::resolve_hardware_path(f.str()) == f.str());
}

TEST_CASE("hardware: resolve_hardware_path of an unknown name is an error listing the bundled machines") {
  EnvGuard env("AOC_DATA_DIR");
  ::unsetenv("AOC_DATA_DIR");
  REQUIRE_THROWS_AS(aoc::resolve_hardware_path("aoc-99"), aoc::Error);
  REQUIRE_THROWS_WITH(aoc::resolve_hardware_path("aoc-99"),
                      StartsWith("aoc-99: no such hardware file (bundled: ") && Contains("aoc-16") &&
                          Contains("aoc-48"));
  REQUIRE_THROWS_WITH(aoc::resolve_hardware_path("no/such/file.json"),
                      StartsWith("no/such/file.json: no such hardware file"));
}

TEST_CASE("hardware: resolve_hardware_path looks in AOC_DATA_DIR when it is set") {
  EnvGuard env("AOC_DATA_DIR");
  const fs::path dir = fs::temp_directory_path() / ("aoc-test-data-" + std::to_string(::getpid()));
  fs::create_directories(dir / "scenarios/hardware");
  std::ofstream(dir / "scenarios/hardware/custom.json") << bundled("aoc-16").dump();
  ::setenv("AOC_DATA_DIR", dir.c_str(), 1);
  const std::string p = aoc::resolve_hardware_path("custom");
  CHECK(fs::equivalent(p, dir / "scenarios/hardware/custom.json"));
  CHECK_THROWS_WITH(aoc::resolve_hardware_path("aoc-48"), Contains("(bundled: custom)"));
  std::error_code ec;
  fs::remove_all(dir, ec);
}

// ---------------------------------------------------------------------------------------------
// Errors: the file and its syntax

TEST_CASE("hardware: a missing file is an error naming the file") {
  const std::string path = (fs::temp_directory_path() / "aoc-test-no-such-hardware.json").string();
  REQUIRE_THROWS_AS(aoc::load_hardware(path), aoc::Error);
  REQUIRE_THROWS_WITH(aoc::load_hardware(path), StartsWith(path + ": ") && Contains("no such file"));
}

TEST_CASE("hardware: a directory is not a hardware file") {
  const std::string path = fs::temp_directory_path().string();
  REQUIRE_THROWS_WITH(aoc::load_hardware(path), StartsWith(path + ": ") && Contains("directory"));
}

TEST_CASE("hardware: malformed JSON is a one-line error with the parser's position") {
  const std::string text = "{\n \"format\": \"aoc-hardware\",\n \"version\": 1,\n}\n";
  const auto [file, msg] = load_text(text);
  INFO(msg);
  CHECK_THAT(msg, StartsWith(file + ": line 4, column 1: malformed JSON: "));
  CHECK(msg.find('\n') == std::string::npos);
}

TEST_CASE("hardware: an empty file is malformed JSON") {
  const auto [file, msg] = load_text("");
  CHECK_THAT(msg, StartsWith(file + ": line 1, column 1: malformed JSON"));
}

TEST_CASE("hardware: a top level that is not an object is an error") {
  expect_error(json::array({1, 2}), "top level", "expected an object, got an array");
}

TEST_CASE("hardware: a number too large for a double is rejected as non-finite") {
  json j = bundled("aoc-48");
  cal(j, "led_poly_pos")[1] = 123456.25;
  std::string text = j.dump();
  const auto at = text.find("123456.25");
  REQUIRE(at != std::string::npos);
  text.replace(at, 9, "1e999");
  expect_error_text(text, "calibration.led_poly_pos.value[1]", "1e999 is not a finite number");

  j = bundled("aoc-48");
  j["defaults"]["alpha"] = 0.125;
  text = j.dump();
  text.replace(text.find("0.125"), 5, "-1e999");
  expect_error_text(text, "defaults.alpha", "1e999 is not a finite number");
}

TEST_CASE("hardware: a duplicate key is an error naming the key") {
  json j = bundled("aoc-48");
  std::string text = j.dump();
  const std::string ch = "\"channels\":48";
  text.replace(text.find(ch), ch.size(), ch + "," + ch);
  expect_error_text(text, "channels", "duplicate key");

  j["unused"]["x"] = {{"value", json::array({{{"a", 1}}})}, {"source", "s"}};
  text = j.dump();
  text.replace(text.find("{\"a\":1}"), 7, "{\"a\":1,\"a\":2}");
  expect_error_text(text, "unused.x.value[0].a", "duplicate key");
}

// ---------------------------------------------------------------------------------------------
// Errors: format, keys, fields, types

TEST_CASE("hardware: a wrong format tag is an error") {
  json j = bundled("aoc-48");
  j["format"] = "aoc-scenario";
  expect_error(j, "format", "expected \"aoc-hardware\", got the string \"aoc-scenario\"");
  j.erase("format");
  expect_error(j, "format", "missing required field");
}

TEST_CASE("hardware: an unsupported version is an error") {
  json j = bundled("aoc-48");
  j["version"] = 2;
  expect_error(j, "version", "unsupported version 2 (this build reads version 1)");
  j["version"] = "1";
  expect_error(j, "version", "expected an integer");
}

TEST_CASE("hardware: an unknown top-level key is an error naming the key") {
  json j = bundled("aoc-48");
  j["nosie"] = json::object();
  expect_error(j, "nosie", "unknown key (did you mean noise?)");
}

TEST_CASE("hardware: an unknown calibration key is an error that suggests the likely intended key") {
  json j = bundled("aoc-48");
  j["calibration"]["fan_in_pso"] = j["calibration"]["fan_in_pos"];
  expect_error(j, "calibration.fan_in_pso", "unknown key (did you mean fan_in_pos?)");
}

TEST_CASE("hardware: an unknown key inside a calibration entry is an error") {
  json j = bundled("aoc-48");
  j["calibration"]["fan_in_pos"]["unit"] = "V";
  expect_error(j, "calibration.fan_in_pos.unit", "unknown key");
}

TEST_CASE("hardware: an unknown key in defaults is an error") {
  json j = bundled("aoc-48");
  j["defaults"]["scael"] = 1.0;
  expect_error(j, "defaults.scael", "unknown key (did you mean scale?)");
}

TEST_CASE("hardware: an unknown key in defaults.switches is an error") {
  json j = bundled("aoc-16");
  j["defaults"]["switches"]["adc_noise"] = true;
  expect_error(j, "defaults.switches.adc_noise", "unknown key");
}

TEST_CASE("hardware: a missing calibration field is an error naming the file and the field") {
  json j = bundled("aoc-48");
  j["calibration"].erase("fan_in_neg");
  expect_error(j, "calibration.fan_in_neg", "missing required field");
}

TEST_CASE("hardware: a calibration entry without a value is an error") {
  json j = bundled("aoc-48");
  j["calibration"]["slm_distortion_neg"].erase("value");
  expect_error(j, "calibration.slm_distortion_neg.value", "missing required field");
}

TEST_CASE("hardware: a calibration entry needs a non-empty source") {
  json j = bundled("aoc-48");
  j["calibration"]["led_poly_neg"]["source"] = "";
  expect_error(j, "calibration.led_poly_neg.source", "must not be empty");
  j["calibration"]["led_poly_neg"].erase("source");
  expect_error(j, "calibration.led_poly_neg.source", "missing required field");
}

TEST_CASE("hardware: missing top-level, defaults and switch fields are errors") {
  json j = bundled("aoc-16");
  j.erase("channels");
  expect_error(j, "channels", "missing required field");
  j = bundled("aoc-16");
  j["defaults"].erase("scale");
  expect_error(j, "defaults.scale", "missing required field");
  j = bundled("aoc-16");
  j["defaults"]["switches"].erase("slm_darkness");
  expect_error(j, "defaults.switches.slm_darkness", "missing required field");
}

TEST_CASE("hardware: a value of the wrong type is an error naming the expected type") {
  json j = bundled("aoc-48");
  cal(j, "fan_in_pos") = "1.0";
  expect_error(j, "calibration.fan_in_pos.value", "expected an array of 48 numbers, got the string \"1.0\"");
  j = bundled("aoc-48");
  cal(j, "fan_in_pos")[2] = "1";
  expect_error(j, "calibration.fan_in_pos.value[2]", "expected a number, got the string \"1\"");
  j = bundled("aoc-48");
  j["defaults"]["switches"]["pd_crosstalk"] = 1;
  expect_error(j, "defaults.switches.pd_crosstalk", "expected true or false, got the number 1");
  j = bundled("aoc-48");
  j["calibration"]["tanh_coeffs"] = json::array({1, 2, 3});
  expect_error(j, "calibration.tanh_coeffs", "expected an object, got an array");
  j = bundled("aoc-48");
  cal(j, "output_gain_pos") = true;
  expect_error(j, "calibration.output_gain_pos.value", "expected a number or an array of 48 numbers, got true");
  j = bundled("aoc-48");
  j["name"] = 48;
  expect_error(j, "name", "expected a string");
}

TEST_CASE("hardware: null where a number is expected is an error") {
  json j = bundled("aoc-48");
  cal(j, "tanh_coeffs")[3] = nullptr;
  expect_error(j, "calibration.tanh_coeffs.value[3]", "expected a number, got null");
  j = bundled("aoc-48");
  j["defaults"]["scale"] = nullptr;
  expect_error(j, "defaults.scale", "expected a number, got null");
}

TEST_CASE("hardware: a vector of the wrong length is an error giving expected and actual lengths") {
  json j = bundled("aoc-48");
  cal(j, "fan_in_pos").erase(47);
  const auto [file, msg] = load_text(j.dump(1));
  CHECK(msg == file + ": calibration.fan_in_pos.value: expected 48 numbers, got 47");
  j = bundled("aoc-48");
  cal(j, "led_poly_pos").push_back(1.0);
  expect_error(j, "calibration.led_poly_pos.value", "expected 4 numbers, got 5");
}

TEST_CASE("hardware: a matrix with the wrong number of rows or columns is an error") {
  json j = bundled("aoc-48");
  cal(j, "slm_distortion_pos")[5] = json::array({1.0, 2.0});
  expect_error(j, "calibration.slm_distortion_pos.value[5]", "expected 3 numbers, got 2");
  j = bundled("aoc-48");
  cal(j, "slm_distortion_neg").erase(0);
  expect_error(j, "calibration.slm_distortion_neg.value", "expected 48 rows of 3 numbers, got 47 rows");
}

TEST_CASE("hardware: the channel count must be an integer from 1 to 4096") {
  json j = bundled("aoc-48");
  j["channels"] = 0;
  expect_error(j, "channels", "0 is out of range [1, 4096]");
  j["channels"] = 4097;
  expect_error(j, "channels", "4097 is out of range [1, 4096]");
  j["channels"] = 48.5;
  expect_error(j, "channels", "expected an integer, got the number 48.5");
}

TEST_CASE("hardware: calibration lengths follow the channel count") {
  json j = bundled("aoc-48");
  j["channels"] = 47;
  expect_error(j, "calibration.fan_in_pos.value", "expected 47 numbers, got 48");
}

// ---------------------------------------------------------------------------------------------
// Errors: ranges

TEST_CASE("hardware: a crosstalk ratio below 0 or from 1 up is an error naming the element") {
  json j = bundled("aoc-48");
  cal(j, "pd_crosstalk_to_later_pos")[3] = 1.7;
  const auto [file, msg] = load_text(j.dump(1));
  CHECK(msg == file + ": calibration.pd_crosstalk_to_later_pos.value[3]: 1.7 is out of range [0, 1)");
  j = bundled("aoc-48");
  cal(j, "pd_crosstalk_to_earlier_neg")[0] = 1.0;
  expect_error(j, "calibration.pd_crosstalk_to_earlier_neg.value[0]", "1 is out of range [0, 1)");
  j = bundled("aoc-48");
  cal(j, "pbs_pos_to_neg")[10] = -0.01;
  expect_error(j, "calibration.pbs_pos_to_neg.value[10]", "-0.01 is out of range [0, 1)");
}

TEST_CASE("hardware: a negative fan-in is an error") {
  json j = bundled("aoc-16");
  cal(j, "fan_in_neg")[4] = -0.5;
  expect_error(j, "calibration.fan_in_neg.value[4]", "-0.5 must be >= 0");
}

TEST_CASE("hardware: output gains must be positive") {
  json j = bundled("aoc-16");
  cal(j, "output_gain_pos") = 0;
  expect_error(j, "calibration.output_gain_pos.value", "0 must be > 0");
  j = bundled("aoc-48");
  cal(j, "output_gain_neg")[7] = -1.0;
  expect_error(j, "calibration.output_gain_neg.value[7]", "-1 must be > 0");
}

TEST_CASE("hardware: tanh coefficients must number five or six") {
  json j = bundled("aoc-48");
  cal(j, "tanh_coeffs") = json::array({1.0, 0.0, 2.0, 1.0});
  expect_error(j, "calibration.tanh_coeffs.value", "expected 5 or 6 numbers (a, b, c, d, f[, g]), got 4");
}

TEST_CASE("hardware: the tanh exponent c must be positive") {
  json j = bundled("aoc-16");
  cal(j, "tanh_coeffs")[2] = 0;
  expect_error(j, "calibration.tanh_coeffs.value[2]", "0 must be > 0");
}

TEST_CASE("hardware: an input clip needs lo < hi") {
  json j = bundled("aoc-48");
  cal(j, "input_clip") = json::array({1.3, -1.3});
  expect_error(j, "calibration.input_clip.value", "expected [lo, hi] with lo < hi, got [1.3, -1.3]");
  cal(j, "input_clip") = json::array({-1.3, 0.0, 1.3});
  expect_error(j, "calibration.input_clip.value", "expected 2 numbers, got 3");
}

TEST_CASE("hardware: an unknown PBS model is an error") {
  json j = bundled("aoc-48");
  cal(j, "pbs_model") = "diagonal";
  expect_error(j, "calibration.pbs_model.value", "\"diagonal\" is not one of per_channel, quadratic_leak");
}

TEST_CASE("hardware: fields of the other PBS model are an error") {
  json j = bundled("aoc-48");
  j["calibration"]["pbs_leak_norm_pos"] = {{"value", 0.04}, {"source", "x"}};
  expect_error(j, "calibration.pbs_leak_norm_pos", "not a field of pbs_model per_channel");
  j = bundled("aoc-16");
  j["calibration"]["pbs_neg_to_pos"] = {{"value", std::vector<double>(16, 0.01)}, {"source", "x"}};
  expect_error(j, "calibration.pbs_neg_to_pos", "not a field of pbs_model quadratic_leak");
}

TEST_CASE("hardware: each PBS model requires its own fields") {
  json j = bundled("aoc-48");
  j["calibration"].erase("pbs_pos_to_neg");
  expect_error(j, "calibration.pbs_pos_to_neg", "missing required field");
  j = bundled("aoc-16");
  j["calibration"].erase("pbs_leak_norm_neg");
  expect_error(j, "calibration.pbs_leak_norm_neg", "missing required field");
}

TEST_CASE("hardware: the quadratic-leak model needs n-1 rows of leak coefficients") {
  json j = bundled("aoc-16");
  cal(j, "pbs_leak_coeffs_pos").push_back(json::array({0.0, 0.0, 0.0}));
  expect_error(j, "calibration.pbs_leak_coeffs_pos.value", "expected 15 rows of 3 numbers, got 16 rows");
}

TEST_CASE("hardware: PBS leak norms must be positive") {
  json j = bundled("aoc-16");
  cal(j, "pbs_leak_norm_pos") = 0.0;
  expect_error(j, "calibration.pbs_leak_norm_pos.value", "0 must be > 0");
}

TEST_CASE("hardware: an unknown crosstalk order is an error") {
  json j = bundled("aoc-16");
  cal(j, "crosstalk_order") = "pbs_first";
  expect_error(j, "calibration.crosstalk_order.value", "\"pbs_first\" is not one of pbs_then_pd, pd_then_pbs");
}

TEST_CASE("hardware: the closed-loop correction needs all four fields or none") {
  json j = bundled("aoc-48");
  j["calibration"].erase("closed_loop_scaling");
  expect_error(j, "calibration.closed_loop_scaling", "all four closed_loop_* fields or none");
}

TEST_CASE("hardware: closed-loop scaling and ratio must be positive") {
  json j = bundled("aoc-48");
  cal(j, "closed_loop_scaling")[0] = 0.0;
  expect_error(j, "calibration.closed_loop_scaling.value[0]", "0 must be > 0");
  j = bundled("aoc-48");
  cal(j, "closed_loop_solution_to_adc_ratio") = -2.0;
  expect_error(j, "calibration.closed_loop_solution_to_adc_ratio.value", "-2 must be > 0");
}

TEST_CASE("hardware: the default scale must be positive") {
  json j = bundled("aoc-48");
  j["defaults"]["scale"] = 0;
  expect_error(j, "defaults.scale", "0 must be > 0");
}

// ---------------------------------------------------------------------------------------------
// Errors: readout saturation

TEST_CASE("hardware: an unknown readout saturation model is an error") {
  json j = bundled("aoc-48");
  j["calibration"]["readout_saturation"]["model"] = "piecewise32";
  expect_error(j, "calibration.readout_saturation.model", "\"piecewise32\" is not one of piecewise48, piecewise16");
}

TEST_CASE("hardware: readout saturation fields of the other model are an error") {
  json j = bundled("aoc-48");
  j["calibration"]["readout_saturation"]["piece1_multiplier"] = 1.0;
  expect_error(j, "calibration.readout_saturation.piece1_multiplier", "not a field of model piecewise48");
  j = bundled("aoc-16");
  j["calibration"]["readout_saturation"]["piece3_polynomials"] = json::array({1.0});
  expect_error(j, "calibration.readout_saturation.piece3_polynomials", "not a field of model piecewise16");
}

TEST_CASE("hardware: a missing readout saturation field is an error") {
  json j = bundled("aoc-48");
  j["calibration"]["readout_saturation"].erase("piece4_first_constant");
  expect_error(j, "calibration.readout_saturation.piece4_first_constant", "missing required field");
}

TEST_CASE("hardware: each readout piece needs start < stop") {
  json j = bundled("aoc-16");
  j["calibration"]["readout_saturation"]["piece1_start_stop"] = json::array({1.0, 0.0});
  expect_error(j, "calibration.readout_saturation.piece1_start_stop",
               "expected [start, stop] with start < stop, got [1, 0]");
}

TEST_CASE("hardware: readout pieces must be in increasing order") {
  json j = bundled("aoc-48");
  j["calibration"]["readout_saturation"]["piece3_start_stop"] = json::array({-2.0, 4.0});
  expect_error(j, "calibration.readout_saturation.piece3_start_stop",
               "starts at -2, before piece1_start_stop stops at");
}

TEST_CASE("hardware: readout saturation needs negative below positive") {
  json j = bundled("aoc-16");
  j["calibration"]["readout_saturation"]["positive_saturation"] = -4.0;
  expect_error(j, "calibration.readout_saturation.positive_saturation", "must be greater than negative_saturation");
}

// ---------------------------------------------------------------------------------------------
// Errors: provenance and unused

TEST_CASE("hardware: provenance holds only strings and numbers") {
  json j = bundled("aoc-48");
  j["provenance"]["calibration_row"] = true;
  expect_error(j, "provenance.calibration_row", "expected a string or a number, got true");
}

TEST_CASE("hardware: an unused entry needs a value and a source") {
  json j = bundled("aoc-48");
  j["unused"]["best_to_worst_channels"].erase("source");
  expect_error(j, "unused.best_to_worst_channels.source", "missing required field");
  j = bundled("aoc-48");
  j["unused"]["extra"] = 3;
  expect_error(j, "unused.extra", "expected an object, got the number 3");
  j = bundled("aoc-48");
  j["unused"]["extra"] = {{"source", "x"}};
  expect_error(j, "unused.extra.value", "missing required field");
}

// ---------------------------------------------------------------------------------------------
// describe

TEST_CASE("hardware: describe summarises the machine, its calibration and its sources") {
  const aoc::Hardware hw = aoc::load_hardware(bundled_path("aoc-48"));
  const std::string d = aoc::describe(hw);
  CHECK_THAT(d, Contains("aoc-48"));
  CHECK_THAT(d, Contains("The 48-variable analog optical computer"));
  CHECK_THAT(d, Contains("channels     48"));
  CHECK_THAT(d, Contains("microsoft/aoc@92d9014b8738ae43ac37e68d34440b4480a51bd3"));
  CHECK_THAT(d, Contains("min 0 (channel 8)"));
  CHECK_THAT(d, Contains("row_profiles.positive_row12"));
  CHECK_THAT(d, Contains("closed_loop_scaling"));
  CHECK_THAT(d, Contains("pbs_crosstalk off"));
  CHECK_THAT(d, Contains("10 entries"));

  const std::string d16 = aoc::describe(aoc::load_hardware(bundled_path("aoc-16")));
  CHECK_THAT(d16, Contains("all 0.65"));
  CHECK_THAT(d16, Contains("quadratic_leak"));
  CHECK_THAT(d16, Contains("15x3"));
  CHECK(d16.find("closed_loop") == std::string::npos);
}

TEST_CASE("hardware: describe aligns the calibration table's columns") {
  const std::string d = aoc::describe(aoc::load_hardware(bundled_path("aoc-16")));
  std::istringstream in(d);
  std::string line;
  while (std::getline(in, line) && line != "calibration") {
  }
  std::getline(in, line);
  const auto shape = line.find("shape"), summary = line.find("summary"), source = line.find("source");
  REQUIRE(source != std::string::npos);
  int rows = 0;
  while (std::getline(in, line) && !line.empty()) {
    INFO(line);
    REQUIRE(line.size() > source);
    for (auto col : {shape, summary, source}) {
      CHECK(line[col - 1] == ' ');
      CHECK(line[col] != ' ');
    }
    ++rows;
  }
  CHECK(rows == 21);
}
