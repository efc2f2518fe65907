// Inputs are checked for meaning, not only syntax (issue 22): a value that becomes an index, a count
// or a class is a whole number in range before it is converted (a double of 1e300 or 2^64 cast to an
// integer is undefined behaviour), and what a file says twice or transposed is an error.
#include <H5Cpp.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>

#include "compiler/ir.hpp"
#include "compiler/program_h5.hpp"
#include "sim/h5file.hpp"
#include "graph_support.hpp"
#include "runtime/run/dt_golden.hpp"
#include "runtime/sweep/sweep.hpp"
#include "runtime/sweep/sweep_results.hpp"
#include "sim/error.hpp"
#include "support.hpp"

using namespace aoc;
using namespace aoc::test;

namespace {

// Logits [1, 3, 2] whose argmax is class 1, 0, 1.
ir::Tensor logits() { return tensor({1, 3, 2}, {0, 1, 1, 0, 0, 1}); }

sweep::Header header() {
  sweep::Header h;
  h.scenario = "s", h.name = "n", h.config_hash = "abc", h.tool_version = "1", h.points = 4;
  return h;
}

sweep::Row row(std::size_t index) {
  sweep::Row r;
  r.index = index, r.seed = index;
  return r;
}

// A journal holding rows 0 and 1, then `extra` appended as it stands.
std::string journal_with(const std::string& name, const std::string& extra) {
  const std::string path = (temp_dir() / name).string();
  std::remove(path.c_str());
  {
    sweep::Journal j(path, header(), false);
    j.append({row(0), row(1)});
  }
  std::ofstream(path, std::ios::app) << extra << "\n";
  return path;
}

std::string golden_with(const std::string& name, const std::string& n_variables) {
  const std::string path = (temp_dir() / name).string();
  std::ofstream(path) << R"({"cases": [{"hw_n_variables": )" << n_variables
                      << R"(, "flags": {}, "W_aoc": [[1]], "z0": [[0]], "one_step": [[0]]}]})";
  return path;
}

}  // namespace

TEST_CASE("meaning: labels are classes of the outputs: 2 of 2 classes, 0.5 and 1e300 are refused") {
  CHECK(ir::label_accuracy(logits(), tensor({1, 3}, {1, 0, -1})) == 1.0);  // negative: position skipped
  for (double bad : {2.0, 0.5, 1e300, 9.3e18})
    CHECK_THROWS_WITH(ir::label_accuracy(logits(), tensor({1, 3}, {1, bad, 0})), Catch::Contains("at position 1 is not a class"));
}

TEST_CASE("meaning: labels of the outputs' positions transposed are refused") {
  CHECK_THROWS_WITH(ir::label_accuracy(logits(), tensor({3, 1}, {1, 0, 1})), "labels: shape [3, 1], the outputs' positions are [1, 3] (transposed?)");
}

TEST_CASE("meaning: a sweep journal that holds a point twice is refused, naming the line") {
  const std::string path = journal_with("twice.partial", sweep::row_line(row(1)));
  CHECK_THROWS_WITH(sweep::Journal(path, header(), true), path + ": line 4: point 1 is there twice");
}

TEST_CASE("meaning: a sweep journal's index of 2^64 or 1e30 is refused, not converted") {
  for (const std::string index : {"18446744073709551616", "1e30", "-1"}) {
    const std::string path = journal_with("big-" + index + ".partial",
                                          R"({"index": )" + index + R"(, "seed": 0, "status": "ok", "error": "", "params": [], "metrics": []})");
    CHECK_THROWS_WITH(sweep::Journal(path, header(), true), Catch::Contains("index: expected a whole number from 0 to 2^64 - 1"));
  }
}

TEST_CASE("meaning: a golden file's machine size of 1e300 or 48.5 is refused, not converted") {
  for (const std::string n : {"1e300", "48.5"})
    CHECK_THROWS_WITH(load_dt_golden(golden_with("golden-" + n + ".json", n)), Catch::Contains("hw_n_variables: expected a whole number"));
}

TEST_CASE("meaning: training whose weights diverge (lr 1000) stops with one line and writes nothing", "[slow]") {
  const std::string scenario = (temp_dir() / "lr1000.json").string(), out = (temp_dir() / "lr1000-model").string();
  std::filesystem::remove_all(out);
  std::ifstream in(std::string(AOC_SOURCE_DIR) + "/scenarios/train/parity-implicit.json");
  nlohmann::json j = nlohmann::json::parse(in);
  j["train"]["lr"] = 1000, j["train"]["steps"] = 20, j["train"]["clip"] = 1e6;
  std::ofstream(scenario) << j.dump();
  const Run r = run_aoc("train " + scenario + " -o " + out);
  INFO(r.out);
  CHECK(r.status == 1);
  CHECK(r.out.find("aoc: error: train: step ") != std::string::npos);
  CHECK(r.out.find("the weights diverged (lower train.lr or train.clip)") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(out));
}

TEST_CASE("meaning: a state size of -5 is refused, not run as the machine's 48 channels") {
  const Run r = run_aoc("loop --n -5");
  CHECK(r.status != 0);
  CHECK(r.out.find("--n") != std::string::npos);
}

TEST_CASE("meaning: a sweep's integer range up to 1e30 is refused, not rounded to -9.2e18") {
  std::ifstream in(std::string(AOC_SOURCE_DIR) + "/scenarios/sweeps/parity-noise-bits.json");
  nlohmann::json j = nlohmann::json::parse(in);
  j["workload"]["model"] = std::string(AOC_SOURCE_DIR) + "/models/trained/parity-implicit";
  j["sampling"] = {{"method", "random"}, {"points", 2}};
  for (const auto& [name, hi, what] : {std::tuple{"batch", 1e30, "an integer range must lie within +-2^53"},
                                       std::tuple{"converters.slm_bits", 1e30, "an integer range must lie within +-2^53"},
                                       std::tuple{"batch", 1e5, "1e+05 is out of range for batch (at most 65536)"}}) {
    j["parameters"] = {{name, {{"range", {1, hi}}, {"integer", true}}}};
    const std::string path = (temp_dir() / "range.json").string();
    std::ofstream(path) << j.dump();
    CHECK_THROWS_WITH(sweep::read_scenario(path), Catch::Contains(std::string("parameters.") + name + ".range: " + what));
  }
}

TEST_CASE("meaning: a program whose DAC range is reversed or whose ADC range is 0 to 0 is refused, naming the field") {
  const std::string model = std::string(AOC_SOURCE_DIR) + "/models/trained/parity-implicit";
  const std::string g = (temp_dir() / "range-g.json").string(), prog = (temp_dir() / "range.aocp.h5").string();
  REQUIRE(run_aoc("import " + model + "/config.json --shapes-only -o " + g).status == 0);
  REQUIRE(run_aoc("compile " + g + " --weights " + model + "/weights.h5 --hw aoc-48 -o " + prog).status == 0);
  for (const auto& [field, value] : {std::pair{"dac_range", "[1.0, -1.0]"}, std::pair{"adc_range", "[0.0, 0.0]"}}) {
    {
      H5::H5File f(prog, H5F_ACC_RDWR);
      nlohmann::json meta = nlohmann::json::parse(h5_string(f.openDataSet("program"), "program"));
      meta["target"][field] = nlohmann::json::parse(value);
      f.unlink("program");
      h5_put_text(f, "program", meta.dump());
    }
    CHECK_THROWS_WITH(ir::read_program_h5(prog), Catch::Contains(std::string("target.") + field + ": expected [lo, hi] with lo < hi"));
    REQUIRE(run_aoc("compile " + g + " --weights " + model + "/weights.h5 --hw aoc-48 -o " + prog).status == 0);  // fresh for the next
  }
}
