// The GPU reference (runtime/backend/cuda_backend.hpp, docs/cuda.md). The tests tagged [cuda] need a device:
// ctest runs them with --needs-cuda and reports them as skipped where the cuda backend cannot run
// (tests/main.cpp). The others run everywhere: what a build without CUDA, or a machine without a
// device, says, and how `aoc check --backends` reads its list.
#include <catch2/catch.hpp>

#include <filesystem>

#include "compiler/graph_json.hpp"
#include "compiler/import_config.hpp"
#include "compiler/passes.hpp"
#include "runtime/backend/backend.hpp"
#include "runtime/backend/cuda_backend.hpp"
#include "runtime/run/program_run.hpp"
#include "sim/error.hpp"
#include "tests/graph_support.hpp"
#include "tests/support.hpp"

using namespace aoc;
using namespace aoc::ir;
using namespace aoc::test;

namespace {

namespace fs = std::filesystem;

const std::string kRoot = AOC_SOURCE_DIR;

// A program compiled for aoc-48 (tiled, quantized: the references ignore the codes) with seeded
// inputs of 2 sequences of 6 tokens.
struct Compiled {
  std::string name;
  Program p;
  std::map<std::string, Tensor> inputs;
};

Compiled compiled(const std::string& name, Graph g, WeightStore w) {
  Compiled c{name, {}, {}};
  c.p.graph = std::move(g);
  c.p.weights = std::move(w);
  c.p.target = target_of(hw48(), "aoc-48", {});
  run_pipeline(c.p, {});
  const std::string in = (temp_dir() / ("cuda-" + name + ".h5")).string();
  write_example_inputs(in, c.p, 2, 6, 1);
  c.inputs = read_program_inputs(in, c.p);
  return c;
}

Compiled imported(const std::string& name, const std::string& config) {
  Imported m = import_config(config);
  return compiled(name, std::move(m.graph), std::move(m.weights));
}

// Every bundled model: the trained ones, the tiny DEQ, the shrunk Mamba2 and Llama3 of the tests.
std::vector<Compiled> bundled() {
  std::vector<Compiled> v;
  std::vector<fs::path> trained;
  for (const auto& d : fs::directory_iterator(kRoot + "/models/trained")) trained.push_back(d.path());
  std::sort(trained.begin(), trained.end());
  for (const fs::path& d : trained) {
    ImportOptions io;
    io.weights = false;
    v.push_back(compiled(d.filename().string(), import_config((d / "config.json").string(), io).graph, read_weights_h5((d / "weights.h5").string())));
  }
  v.push_back(compiled("tiny-deq", read_graph(kRoot + "/models/graphs/tiny-deq.json"), read_weights_h5(kRoot + "/models/graphs/tiny-deq.h5")));
  v.push_back(imported("tiny-mamba2", tiny_mamba2()));
  v.push_back(imported("tiny-llama", tiny_llama()));
  return v;
}

struct Difference {
  double max_abs = 0, scale = 0;  // scale: the reference's largest |output|
  long long iterations_differ = 0;
};

Difference difference(const ProgramResult& a, const ProgramResult& b) {
  Difference d;
  for (const auto& [name, t] : b.values) {
    d.max_abs = std::max(d.max_abs, max_diff(a.values.at(name), t));
    for (double v : t.data) d.scale = std::max(d.scale, std::fabs(v));
  }
  REQUIRE(a.fixed_points.size() == b.fixed_points.size());
  for (std::size_t k = 0; k < a.fixed_points.size(); ++k)
    for (std::size_t i = 0; i < a.fixed_points[k].iterations.size(); ++i)
      d.iterations_differ += a.fixed_points[k].iterations[i] != b.fixed_points[k].iterations[i];
  return d;
}

// A tiny model compiled by the CLI, with seeded inputs.
struct CliProgram {
  fs::path dir = temp_dir() / "cuda-cli";
  std::string prog = (dir / "m.aocp.h5").string(), tokens = (dir / "tok.h5").string();
  CliProgram() {
    fs::create_directories(dir);
    const std::string graph = (dir / "m.json").string();
    REQUIRE(run_aoc("import " + tiny_mamba2() + " -o " + graph).status == 0);
    REQUIRE(run_aoc("compile " + graph + " --weights " + (dir / "m.h5").string() + " -o " + prog).status == 0);
    REQUIRE(run_aoc("run " + prog + " --example-input " + tokens + " --batch 2 --length 4").status == 0);
  }
};

}  // namespace

TEST_CASE("cuda: where the backend cannot run, make_backend says why in one line") {
  const std::string why = cuda_unavailable();
  if (!cuda_built()) CHECK(why == "aoc was built without CUDA (AOC_CUDA=OFF or no nvcc)");
  if (why.empty()) {  // a CUDA build on a machine with a device
    CHECK(make_backend("cuda")->name() == "cuda");
    CHECK(make_backend("cuda-f32")->name() == "cuda-f32");
    CHECK_FALSE(cuda_device_description().empty());
    return;
  }
  if (cuda_built()) CHECK_THAT(why, Catch::StartsWith("no CUDA device"));
  CHECK(why.find('\n') == std::string::npos);
  CHECK_THROWS_WITH(make_backend("cuda"), "backend cuda: " + why);
  CHECK_THROWS_WITH(make_backend("cuda-f32"), "backend cuda-f32: " + why);
  CHECK_THROWS_WITH(make_backend("gpu"), Catch::Contains("backends: cpu, sim, cuda, cuda-f32"));
}

TEST_CASE("cli: aoc run and aoc check with a cuda backend that cannot run: one error line, exit 1") {
  const std::string why = cuda_unavailable();
  if (why.empty()) return;  // a device: the [cuda] tests run these
  CliProgram m;
  const Run r = run_aoc("run " + m.prog + " --inputs " + m.tokens + " --backend cuda -o " + (m.dir / "out.h5").string());
  CHECK(r.status == 1);
  CHECK(r.out == "aoc: error: backend cuda: " + why + "\n");
  const Run c = run_aoc("check " + m.prog + " --inputs " + m.tokens + " --backends sim,cpu,cuda-f32");
  CHECK(c.status == 1);
  CHECK(c.out == "aoc: error: backend cuda-f32: " + why + "\n");  // before anything runs
}

TEST_CASE("cli: aoc check --backends checks every backend listed against cpu, else against the last") {
  CliProgram m;
  const std::string check = "check " + m.prog + " --inputs " + m.tokens + " --ideal ";
  const Run one = run_aoc(check + "--backends cpu");
  CHECK(one.status == 1);
  CHECK_THAT(one.out, Catch::Contains("--backends: expected at least two backends"));
  const Run unknown = run_aoc(check + "--backends sim,gpu");
  CHECK(unknown.status == 1);
  CHECK_THAT(unknown.out, Catch::Contains("unknown backend \"gpu\"") && Catch::Contains("cpu, sim, cuda, cuda-f32"));
  CHECK_THAT(run_aoc(check + "--backends sim,cpu,").out, Catch::Contains("unknown backend \"\""));
  CHECK_THAT(run_aoc(check + "--backends sim,sim").out, Catch::Contains("\"sim\" is listed twice"));
  const Run reversed = run_aoc(check + "--backends cpu,sim --max-abs-error 1e-12");
  INFO(reversed.out);
  CHECK(reversed.status == 0);
  CHECK_THAT(reversed.out, Catch::Contains(": sim against cpu, simultaneous mode") && Catch::Contains("iterations differing     0"));
  const Run json = run_aoc(check + "--backends sim,cpu --json");
  CHECK(nlohmann::json::parse(json.out).at("reference") == "cpu");
}

TEST_CASE("cli: aoc bench says when the GPU reference is skipped") {
  const std::string why = cuda_unavailable();
  if (why.empty()) return;  // a device: the [cuda] bench test runs it
  const Run r = run_aoc("bench --batches 1 --iterations 5 --min-seconds 0 --no-program --no-reference --no-train");
  INFO(r.out);
  CHECK(r.status == 0);
  CHECK_THAT(r.out, Catch::Contains(why + ": GPU reference skipped"));
  const Run j = run_aoc("bench --batches 1 --iterations 5 --min-seconds 0 --no-program --no-reference --no-train --json");
  CHECK(nlohmann::json::parse(j.out).at("gpu").at("skipped") == why);
}

// ---- on a device ----

// float32 products round the operand and the matrix to 24 bits: 1e-5 is absolute for outputs up
// to 1 and relative to the largest output above (the trained models' logits reach about 20,
// where 1e-5 absolute would be a few float ulps).
TEST_CASE("cuda: cpu and cuda agree on every bundled model (f64 within 1e-12, f32 within 1e-5)", "[cuda]") {
  const auto cpu = make_backend("cpu"), f64 = make_backend("cuda"), f32 = make_backend("cuda-f32");
  for (const Compiled& m : bundled())
    for (const Mode mode : {Mode::Simultaneous, Mode::Sequential}) {
      BackendOptions o;
      o.mode = mode;
      const ProgramResult ref = cpu->run(m.p, m.inputs, o);
      const Difference d64 = difference(f64->run(m.p, m.inputs, o), ref), d32 = difference(f32->run(m.p, m.inputs, o), ref);
      INFO(m.name << (mode == Mode::Sequential ? " sequential" : " simultaneous") << ": largest output " << d64.scale << ", f64 "
                  << d64.max_abs << ", f32 " << d32.max_abs << ", f32 iteration counts differing " << d32.iterations_differ);
      CHECK(d64.max_abs <= 1e-12);
      CHECK(d64.iterations_differ == 0);
      CHECK(d32.max_abs <= 1e-5 * std::max(1.0, d32.scale));
    }
}

TEST_CASE("cuda: a MatMul by a weight, stored in x out, cut into tiles is the exact product", "[cuda]") {
  Program p;
  p.graph.name = "matmul";
  p.graph.inputs.push_back(decl("x", {0, 0, 12}, {"B", "L"}));
  p.graph.weights = {decl("M", {12, 10})};
  p.weights = {{"M", wave({12, 10}, 0.3, 0.5)}};
  p.graph.ops.push_back(make_op(OpKind::MatMul, {"x", "M"}, {"y"}, {}, "mm"));
  p.graph.outputs = {"y"};
  p.target = target_of(hw48(), "aoc-48", {});
  p.target.channels = 8;  // 2 x 2 tiles
  run_pipeline(p, {});
  REQUIRE(p.plan("mm"));
  REQUIRE(p.plan("mm")->aoc_layout);
  const std::map<std::string, Tensor> in{{"x", wave({3, 5, 12}, 1.0, 0.8)}};
  const std::string y = p.graph.outputs.at(0);  // the ADC's result
  const Tensor want = make_backend("cpu")->run(p, in, {}).values.at(y);
  CHECK(max_diff(make_backend("cuda")->run(p, in, {}).values.at(y), want) <= 1e-14);
  CHECK(max_diff(make_backend("cuda-f32")->run(p, in, {}).values.at(y), want) <= 1e-5);
}

TEST_CASE("cli: aoc check --backends sim,cpu,cuda,cuda-f32 checks each against cpu", "[cuda]") {
  CliProgram m;
  const Run r = run_aoc("check " + m.prog + " --inputs " + m.tokens + " --backends sim,cpu,cuda,cuda-f32 --ideal --max-abs-error 1e-5");
  INFO(r.out);
  CHECK(r.status == 0);
  CHECK_THAT(r.out, Catch::Contains(": sim against cpu") && Catch::Contains(": cuda against cpu") && Catch::Contains(": cuda-f32 against cpu") &&
                        Catch::Contains("within the tolerances"));
  const Run run = run_aoc("run " + m.prog + " --inputs " + m.tokens + " --backend cuda -o " + (m.dir / "cuda.h5").string());
  INFO(run.out);
  CHECK(run.status == 0);
}

TEST_CASE("cli: aoc bench times the GPU reference", "[cuda]") {
  const Run r = run_aoc("bench --batches 1 --iterations 5 --min-seconds 0 --no-program --no-reference --no-train --gpu-batches 1,64 --gpu-token-batches 1,4 --gpu-config " + tiny_mamba2());
  INFO(r.out);
  CHECK(r.status == 0);
  CHECK_THAT(r.out, Catch::Contains("GPU reference: ") && Catch::Contains("matrix work of"));
}
