// aoc bench's program section (bench/program_bench.hpp) at a tiny size: its cells are there, say
// what they measured and have positive rates and ratios. No timing is asserted: the figures depend
// on the machine and its load.
#include <filesystem>
#include <fstream>
#include <map>

#include "bench/loop_bench.hpp"
#include "bench/program_bench.hpp"
#include "bench/reference_bench.hpp"
#include "bench/train_bench.hpp"
#include "sim/error.hpp"
#include "support.hpp"

namespace {

aoc::ProgramBenchOptions tiny() {
  aoc::ProgramBenchOptions o;
  o.batch = 1, o.length = 2, o.runs = 1;
  o.check_batch = 1, o.check_length = 2, o.seeds = 1;
  o.estimate_config = std::string(AOC_SOURCE_DIR) + "/tests/data/implicit-lm/mamba2-state-tracking-implicit/config.json", o.estimate_runs = 1;
  return o;
}

std::string error_of(const aoc::ProgramBenchOptions& o) {
  try {
    aoc::run_program_bench(o, false);
  } catch (const aoc::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("bench: the program section times the parity model on cpu and sim and the check, each cell saying what it measured", "[bench]") {
  const aoc::ProgramBench b = aoc::run_program_bench(tiny(), false);
  const nlohmann::json j = aoc::program_bench_json(b);
  std::map<std::string, nlohmann::json> cells;
  for (const auto& c : j) cells[c.at("cell").get<std::string>()] = c;
  for (const char* name : {"parity cpu", "parity sim", "parity sim/cpu", "check", "estimate"}) {
    INFO(name);
    REQUIRE(cells.count(name));
    const nlohmann::json& c = cells.at(name);
    CHECK(c.at("hardware") == "aoc-48");
    CHECK_FALSE(c.at("model").get<std::string>().empty());
    CHECK(c.at("config_hash").get<std::string>().size() == 16);
    CHECK(c.at("version") == AOC_VERSION);
    CHECK(c.at("seed") == 1);
    CHECK(c.contains("batch"));
    CHECK(c.contains("length"));
  }
  CHECK(cells.at("parity cpu").at("batch") == 1);
  CHECK(cells.at("parity cpu").at("length") == 2);
  CHECK(cells.at("parity cpu").at("mode") == "sequential");
  for (const char* name : {"parity cpu", "parity sim"}) {
    INFO(name);
    CHECK(cells.at(name).at("tokens_per_s").get<double>() > 0);
    CHECK(cells.at(name).at("iterations_per_token").get<double>() > 0);
  }
  const nlohmann::json& sim = cells.at("parity sim");
  CHECK(sim.at("quantize") == true);
  CHECK(sim.at("noise") == true);
  CHECK(sim.at("optics") == "calibrated");
  CHECK(sim.at("precision") == "f32");
  CHECK(cells.at("parity sim/cpu").at("ratio").get<double>() > 0);
  CHECK(cells.at("parity sim/cpu").at("ratio_per_iteration").get<double>() > 0);
  const nlohmann::json& check = cells.at("check");
  CHECK(check.at("model") == "mamba2-state-tracking-implicit");
  CHECK(check.at("seeds") == 1);
  CHECK(check.at("seconds").get<double>() > 0);
  CHECK(check.at("argmax_agreement").at("mean").get<double>() >= 0);
  const nlohmann::json& est = cells.at("estimate");
  CHECK(est.at("model") == "mamba2-state-tracking-implicit");
  CHECK(est.at("tiles").get<int>() > 0);
  CHECK(est.at("best_s").get<double>() > 0);
  CHECK_FALSE(est.contains("target_s"));  // the target is the published 1.3B model's

  const std::string table = aoc::program_bench_table(b);
  CHECK(table.find("parity sim/cpu") != std::string::npos);
  CHECK(table.find("--seeds 1") != std::string::npos);
}

TEST_CASE("bench: a program section size out of range or a missing model is a one-line error naming it", "[bench]") {
  aoc::ProgramBenchOptions o = tiny();
  o.length = 0;
  CHECK(error_of(o) == "bench: program length 0: must be at least 1");
  o = tiny();
  o.model = "/nonexistent/parity";
  const std::string e = error_of(o);
  CHECK(e.find("/nonexistent/parity/config.json: no such file") != std::string::npos);
  CHECK(e.find('\n') == std::string::npos);
}

TEST_CASE("bench: --help explains the program section and its switch", "[bench]") {
  const aoc::test::Run r = aoc::test::run_aoc("bench --help");
  CHECK(r.status == 0);
  CHECK(r.out.find("--no-program") != std::string::npos);
  CHECK(r.out.find("parity") != std::string::npos);
  CHECK(r.out.find("--check-seeds") != std::string::npos);
}

TEST_CASE("bench: --no-program leaves the program cells out of the JSON, and the loop's rows stay", "[bench]") {
  const aoc::test::Run r = aoc::test::run_aoc("bench --batches 1 --iterations 5 --min-seconds 0 --no-gpu --no-program --no-reference --no-train --json");
  REQUIRE(r.status == 0);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  CHECK_FALSE(j.contains("programs"));
  CHECK_FALSE(j.at("rows").empty());
}

TEST_CASE("bench: the noisy loop's row carries its time over the noiseless loop's, against the target", "[bench]") {
  aoc::BenchOptions o;
  o.batches = {1};
  o.iterations = 5;
  o.min_seconds = 0;
  const std::vector<aoc::BenchRow> rows = aoc::run_loop_bench(o, false);
  const nlohmann::json j = aoc::bench_json(o, rows);
  int noisy = 0;
  for (const auto& r : j.at("rows")) {
    if (r.at("cell") != "twin + noise") {
      CHECK_FALSE(r.contains("noise_on_over_off"));
      continue;
    }
    ++noisy;
    CHECK(r.at("noise_on_over_off").get<double>() > 0);
    CHECK(r.at("noise_target") == aoc::kNoiseCostTarget);
  }
  CHECK(noisy == 1);
  CHECK(aoc::bench_table(o, rows).find("noise on / off") != std::string::npos);
  // the machine the figures come from, in the JSON and beside the instruction sets
  const std::string cpu = j.at("cpu");
  CHECK_FALSE(cpu.empty());
  CHECK(aoc::bench_table(o, rows).find("CPU: " + cpu + "; instruction sets: ") != std::string::npos);
}

TEST_CASE("bench: the reference section times the cpu backend against the GEMV roofline at batch 1 and with 2 threads", "[bench][slow]") {
  aoc::ReferenceBenchOptions o;
  o.config = std::string(AOC_SOURCE_DIR) + "/tests/data/implicit-lm/mamba2-state-tracking-implicit/config.json";
  o.length = 2, o.runs = 1, o.batch = 3;
  const aoc::ReferenceBench b = aoc::run_reference_bench(o, false);
  const nlohmann::json j = aoc::reference_bench_json(b);
  CHECK(j.at("cell") == "reference");
  CHECK(j.at("model") == "mamba2-state-tracking-implicit");
  CHECK(j.at("config_hash").get<std::string>().size() == 16);
  CHECK(j.at("version") == AOC_VERSION);
  CHECK(j.at("loop_weights").get<std::int64_t>() > 0);
  const nlohmann::json &token = j.at("token"), &batched = j.at("batched");
  CHECK(token.at("batch") == 1);
  CHECK(batched.at("batch") == 3);
  CHECK(token.at("evaluations").get<long long>() >= 2);  // at least a step and a commit per token
  CHECK(token.at("over_roofline").get<double>() > 0);
  CHECK(token.at("target") == aoc::kReferenceOverGemvTarget);
  CHECK(batched.at("two_thread_speedup").get<double>() > 0);
  CHECK(batched.at("target") == aoc::kTwoThreadSpeedupTarget);
  const std::string table = aoc::reference_bench_table(b);
  CHECK(table.find("GEMV roofline") != std::string::npos);
  CHECK(table.find("batch 3") != std::string::npos);
}

TEST_CASE("bench: a reference section option out of range is a one-line error", "[bench]") {
  aoc::ReferenceBenchOptions o;
  o.batch = 0;
  CHECK_THROWS_WITH(aoc::run_reference_bench(o, false), "bench: reference length, runs and batch must be at least 1");
}

TEST_CASE("bench: the training section times a bounded and a free step and compares them with PyTorch's figure when given", "[bench][slow]") {
  aoc::TrainBenchOptions o;
  o.steps = 1;
  const aoc::TrainBench plain = aoc::run_train_bench(o, false);
  const nlohmann::json j = aoc::train_bench_json(plain);
  REQUIRE(j.size() == 2);
  CHECK(j[0].at("cell") == "train bounded");
  CHECK(j[1].at("cell") == "train free");
  for (const auto& c : j) {
    CHECK(c.at("model") == "parity-implicit");
    CHECK(c.at("seconds_per_step").get<double>() > 0);
    CHECK(c.at("config_hash").get<std::string>().size() == 16);
    CHECK_FALSE(c.contains("over_torch"));
  }
  CHECK(aoc::train_bench_table(plain).find("no PyTorch figure") != std::string::npos);

  const auto dir = std::filesystem::temp_directory_path() / "aoc-bench-torch";
  std::filesystem::create_directories(dir);
  const std::string figures = (dir / "torch.json").string();
  std::ofstream(figures) << R"({"torch": "test", "threads": 1, "batch": 64, "length": 32,
    "seconds_per_step": {"f64": {"bounded": 2.0, "free": 4.0}, "f32": {"bounded": 1.0, "free": 8.0}}})";
  o.torch_step = figures;
  const aoc::TrainBench with = aoc::run_train_bench(o, false);
  const nlohmann::json k = aoc::train_bench_json(with);
  CHECK(k[0].at("torch").at("faster_precision") == "f32");  // the faster of the two is the figure
  CHECK(k[1].at("torch").at("faster_precision") == "f64");
  CHECK(k[0].at("over_torch").get<double>() == Approx(k[0].at("seconds_per_step").get<double>() / 1.0));
  CHECK(k[1].at("over_torch").get<double>() == Approx(k[1].at("seconds_per_step").get<double>() / 4.0));
  CHECK(k[0].at("target") == aoc::kTrainOverTorchTarget);
}

TEST_CASE("bench: PyTorch figures for another batch or missing a field are a one-line error naming the file and field", "[bench]") {
  const auto dir = std::filesystem::temp_directory_path() / "aoc-bench-torch";
  std::filesystem::create_directories(dir);
  const std::string other = (dir / "other-batch.json").string(), partial = (dir / "partial.json").string();
  std::ofstream(other) << R"({"batch": 8, "length": 32, "seconds_per_step": {}})";
  std::ofstream(partial) << R"({"batch": 64, "length": 32, "seconds_per_step": {"f64": {"bounded": 1.0}}})";
  aoc::TrainBenchOptions o;
  o.steps = 1;
  o.torch_step = other;
  CHECK_THROWS_WITH(aoc::run_train_bench(o, false), Catch::Contains("other-batch.json") && Catch::Contains("batch"));
  o.torch_step = partial;
  CHECK_THROWS_WITH(aoc::run_train_bench(o, false), Catch::Contains("partial.json") && Catch::Contains("seconds_per_step.f64.free"));
}
