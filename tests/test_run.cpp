// `aoc run`: HDF5 input and output (runtime/io/h5io), and the command as a user meets it.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <sys/wait.h>

#include "compiler/graph_json.hpp"
#include "compiler/program_h5.hpp"
#include "runtime/io/h5io.hpp"
#include "runtime/io/output.hpp"
#include "runtime/run/loop_problem.hpp"
#include "runtime/io/progress.hpp"
#include "sim/core.hpp"
#include "sim/error.hpp"
#include "sim/solver.hpp"
#include "tests/support.hpp"

namespace fs = std::filesystem;

using aoc::test::Run;
using aoc::test::run_aoc;

namespace {

// A fresh, empty directory per test.
fs::path fresh_dir(const std::string& name) {
  const auto d = fs::temp_directory_path() / ("aoc-run-test-" + std::to_string(::getpid())) / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

bool one_line(const std::string& s) { return !s.empty() && s.find('\n') == s.size() - 1; }

std::string digest(const std::vector<double>& v) { return aoc::digest_hex(v.data(), sizeof(double) * v.size()); }

// The 16-hex-digit word after `label` in a command's output.
std::string word_after(const std::string& out, const std::string& label) {
  const auto at = out.find(label);
  return at == std::string::npos ? "" : out.substr(at + label.size(), 16);
}

aoc::H5Array arr(const std::string& name, std::vector<std::size_t> shape, double fill) {
  std::size_t n = 1;
  for (auto s : shape) n *= s;
  std::vector<double> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = fill * std::sin(1.0 + static_cast<double>(i));
  return {name, shape, v, false};
}

// A run on a bad input must fail with one line naming the file and the dataset, and leave the
// output directory empty (no output, no temporary file).
void check_bad_input(const fs::path& input, const std::string& dataset) {
  const fs::path outdir = input.parent_path() / "out";
  fs::create_directories(outdir);
  const Run r = run_aoc("run " + input.string() + " -o " + (outdir / "out.h5").string());
  INFO(r.out);
  CHECK(r.status != 0);
  CHECK(one_line(r.out));
  CHECK(r.out.find(input.string()) != std::string::npos);
  if (!dataset.empty()) CHECK(r.out.find(dataset) != std::string::npos);
  CHECK(fs::is_empty(outdir));
}

}  // namespace

TEST_CASE("run: an input file round trips bit for bit with its attributes") {
  const auto d = fresh_dir("roundtrip");
  const aoc::LoopProblem p = aoc::random_problem(12, 5, 7);
  const auto f = (d / "in.h5").string();
  aoc::write_run_input(f, p);
  const aoc::RunInput in = aoc::read_run_input(f);
  CHECK(in.problem.W == p.W);
  CHECK(in.problem.x == p.x);
  CHECK(in.problem.bias == p.bias);
  CHECK(in.problem.z0 == p.z0);
  CHECK(in.alpha.empty());
  CHECK(in.beta.empty());
  CHECK_FALSE(in.gamma);
  CHECK(std::distance(fs::directory_iterator(d), fs::directory_iterator()) == 1);  // no temporary left
}

TEST_CASE("run: optional bias and z0 default to zeros and attributes alpha beta gamma are read") {
  const auto f = (fresh_dir("attrs") / "in.h5").string();
  aoc::write_h5_arrays(f, {arr("W", {4, 4}, 0.3), arr("x", {3, 4}, 1.0)},
                       {{"alpha", {0.1, 0.2, 0.3, 0.4}}, {"beta", {2.0}}, {"gamma", {0.25}}});
  const aoc::RunInput in = aoc::read_run_input(f);
  CHECK(in.problem.bias.isZero());
  CHECK(in.problem.z0.rows() == 3);
  CHECK(in.problem.z0.isZero());
  CHECK(in.alpha == std::vector<double>{0.1, 0.2, 0.3, 0.4});
  CHECK(in.beta == std::vector<double>{2.0});
  CHECK(in.gamma == 0.25);
}

TEST_CASE("run: with noise and quantization off the fixed points are those of aoc loop bit for bit") {
  const auto d = fresh_dir("vs-loop");
  const auto in = (d / "in.h5").string(), out = (d / "out.h5").string();
  REQUIRE(run_aoc("run --example-input " + in + " --n 48 --batch 16 --seed 3").status == 0);
  const Run r = run_aoc("run " + in + " --hw aoc-48 -o " + out + " --precision f64");
  INFO(r.out);
  REQUIRE(r.status == 0);
  const Run l = run_aoc("loop --hw aoc-48 --batch 16 --seed 3 --precision f64");
  REQUIRE(l.status == 0);
  const std::string loop_digest = word_after(l.out, "digest of the fixed points ");
  CHECK(loop_digest.size() == 16);
  CHECK(digest(aoc::read_h5_array(out, "fixed_points").values) == loop_digest);
  CHECK(word_after(r.out, "(fixed points ") == loop_digest);
}

TEST_CASE("run: a noisy loop input's samples stop at their noise floor, marked in /at_floor, absent from a noise-free run") {
  const auto d = fresh_dir("at-floor");
  const auto in = (d / "in.h5").string(), noisy = (d / "noisy.h5").string(), clean = (d / "clean.h5").string();
  REQUIRE(run_aoc("run --example-input " + in + " --n 48 --batch 8 --seed 3").status == 0);
  const Run r = run_aoc("run " + in + " --hw aoc-48 --noise --quantize -o " + noisy);
  INFO(r.out);
  REQUIRE(r.status == 0);
  CHECK_THAT(r.out, Catch::Contains("stopped at the noise floor"));
  const std::vector<double> at = aoc::read_h5_array(noisy, "at_floor").values;
  REQUIRE(at.size() == 8);
  CHECK(std::count(at.begin(), at.end(), 1.0) > 0);
  REQUIRE(run_aoc("run " + in + " --hw aoc-48 -o " + clean).status == 0);
  CHECK_THROWS(aoc::read_h5_array(clean, "at_floor"));
}

TEST_CASE("run: the fixed points equal a direct OpticalCore solve with the input attributes applied") {
  const auto d = fresh_dir("vs-core");
  const auto in = (d / "in.h5").string(), out = (d / "out.h5").string();
  aoc::LoopProblem p = aoc::random_problem(48, 9, 11);
  aoc::write_h5_arrays(in, {{"W", {48, 48}, std::vector<double>(p.W.data(), p.W.data() + p.W.size())},
                            {"x", {9, 48}, std::vector<double>(p.x.data(), p.x.data() + p.x.size())},
                            {"bias", {48}, std::vector<double>(p.bias.data(), p.bias.data() + 48)}},
                       {{"alpha", {0.3}}});
  const Run r = run_aoc("run " + in + " -o " + out + " --mode all-off --rule relative --damping 0.8 --tol 1e-4 --max-iter 60");
  INFO(r.out);
  REQUIRE(r.status == 0);

  aoc::CoreConfig cfg = aoc::CoreConfig::twin_all_off(aoc::test::hw48());
  cfg.alpha = {0.3};
  aoc::OpticalCore<float> core(aoc::test::hw48(), cfg);
  core.load_weights(p.W, p.bias);
  const aoc::StepFn<float> f = [&core](const aoc::Batch<float>& z, const aoc::Batch<float>& inj, const aoc::Batch<float>* prev,
                                       aoc::Batch<float>& o, const auto&...) { core.step(z, inj, prev, o); };
  const aoc::SolveResult s = aoc::solve_fixed_point<float>(f, core.injection(aoc::Batch<float>::from(p.x)),
                                                           aoc::Batch<float>::from(p.z0), aoc::SolverOptions::relative(1e-4, 60, 0.8));
  const aoc::H5Array z = aoc::read_h5_array(out, "fixed_points");
  CHECK(z.shape == std::vector<std::size_t>{9, 48});
  CHECK(digest(z.values) == aoc::digest_hex(s.z.data(), sizeof(double) * s.z.size()));
  const aoc::H5Array it = aoc::read_h5_array(out, "iterations");
  CHECK(it.integer);
  CHECK(std::vector<int>(it.values.begin(), it.values.end()) == s.iterations);
}

TEST_CASE("run: the same input and seed give the same output digest with 1 and 2 threads") {
  const auto d = fresh_dir("threads");
  const auto in = (d / "in.h5").string();
  REQUIRE(run_aoc("run --example-input " + in + " --batch 150 --seed 5").status == 0);
  const Run a = run_aoc("run " + in + " -o " + (d / "a.h5").string() + " --threads 1 --seed 9 --rule relative");
  const Run b = run_aoc("run " + in + " -o " + (d / "b.h5").string() + " --threads 2 --seed 9 --rule relative");
  INFO(a.out + b.out);
  REQUIRE(a.status == 0);
  REQUIRE(b.status == 0);
  const std::string da = word_after(a.out, "digest of the output arrays ");
  CHECK(da.size() == 16);
  CHECK(da == word_after(b.out, "digest of the output arrays "));
  CHECK(aoc::read_h5_attr((d / "a.h5").string(), "output_digest") == da);
  CHECK(aoc::read_h5_attr((d / "b.h5").string(), "output_digest") == da);
  auto bytes = [](const fs::path& f) { std::ifstream in(f, std::ios::binary); return std::string(std::istreambuf_iterator<char>(in), {}); };
  CHECK(bytes(d / "a.h5") == bytes(d / "b.h5"));  // no timestamps, no thread count: the same bytes
}

TEST_CASE("run: a noisy, quantized run with the hardware readout gives the same digest with 1 and 2 threads", "[slow]") {
  const auto d = fresh_dir("threads-noise");
  const auto in = (d / "in.h5").string();
  REQUIRE(run_aoc("run --example-input " + in + " --batch 130 --seed 5").status == 0);
  const std::string common = " --seed 9 --noise --quantize --hardware-readout --rule relative --max-iter 30";
  const Run a = run_aoc("run " + in + " -o " + (d / "a.h5").string() + " --threads 1" + common);
  const Run b = run_aoc("run " + in + " -o " + (d / "b.h5").string() + " --threads 2" + common);
  const Run c = run_aoc("run " + in + " -o " + (d / "c.h5").string() + " --threads 2 --seed 10 --noise --quantize --hardware-readout --rule relative --max-iter 30");
  INFO(a.out + b.out + c.out);
  REQUIRE(a.status == 0);
  REQUIRE(b.status == 0);
  REQUIRE(c.status == 0);
  const std::string da = word_after(a.out, "digest of the output arrays ");
  CHECK(da == word_after(b.out, "digest of the output arrays "));
  CHECK(da != word_after(c.out, "digest of the output arrays "));  // another seed, other noise
}

TEST_CASE("run: the output file holds every result array and the root attributes") {
  const auto d = fresh_dir("attrs-out");
  const auto in = (d / "in.h5").string(), out = (d / "out.h5").string();
  REQUIRE(run_aoc("run --example-input " + in + " --n 16 --batch 4").status == 0);
  const Run r = run_aoc("run " + in + " --hw aoc-16 -o " + out + " --seed 42 --trace");
  INFO(r.out);
  REQUIRE(r.status == 0);
  CHECK(aoc::read_h5_array(out, "readout").shape == std::vector<std::size_t>{4, 16});
  CHECK(aoc::read_h5_array(out, "converged").integer);
  CHECK(aoc::read_h5_array(out, "residual").shape == std::vector<std::size_t>{4});
  const auto steps = aoc::read_h5_array(out, "max_residual_per_step").shape;
  REQUIRE(steps.size() == 1);
  CHECK(aoc::read_h5_array(out, "residual_trace").shape == std::vector<std::size_t>{steps[0], 4});
  CHECK(aoc::read_h5_attr(out, "version") == AOC_VERSION);
  CHECK(aoc::read_h5_attr(out, "seed") == "42");
  CHECK(aoc::read_h5_attr(out, "hardware") == "aoc-16");
  CHECK(aoc::read_h5_attr(out, "stop_rule") == "twin");
  CHECK(aoc::read_h5_attr(out, "precision") == "f32");
  CHECK(aoc::read_h5_attr(out, "mode") == "default");
  CHECK(aoc::read_h5_attr(out, "config_hash").size() == 16);
  CHECK_THROWS_AS(aoc::read_h5_array(out, "slm_codes"), aoc::Error);  // not quantized
  // The config hash follows the options: another tolerance, another hash.
  const auto out2 = (d / "out2.h5").string();
  REQUIRE(run_aoc("run " + in + " --hw aoc-16 -o " + out2 + " --seed 42 --trace --tol 1e-4").status == 0);
  CHECK(aoc::read_h5_attr(out2, "config_hash") != aoc::read_h5_attr(out, "config_hash"));
}

TEST_CASE("run: quantized output exposes integer codes of the right shape and range") {
  const auto d = fresh_dir("quantize");
  nlohmann::json hw;
  std::ifstream(aoc::resolve_hardware_path("aoc-48")) >> hw;
  if (!hw.contains("converters")) {
    auto q = [](double v, const char* unit) { return nlohmann::json{{"value", v}, {"unit", unit}, {"source", "test"}}; };
    hw["converters"] = {{"slm_bits", q(9, "bit")},  {"dac_bits", q(8, "bit")},  {"dac_min", q(-1.3, "V")}, {"dac_max", q(1.3, "V")},
                        {"adc_bits", q(10, "bit")}, {"adc_min", q(-2.0, "V")}, {"adc_max", q(2.0, "V")}};
  }
  const auto hwfile = (d / "hw.json").string();
  std::ofstream(hwfile) << hw.dump(1);
  const int slm_bits = hw["converters"]["slm_bits"]["value"], dac_bits = hw["converters"]["dac_bits"]["value"],
            adc_bits = hw["converters"]["adc_bits"]["value"];
  const auto in = (d / "in.h5").string(), out = (d / "out.h5").string();
  REQUIRE(run_aoc("run --example-input " + in + " --batch 8").status == 0);
  const Run r = run_aoc("run " + in + " --hw " + hwfile + " -o " + out + " --quantize");
  INFO(r.out);
  REQUIRE(r.status == 0);
  auto check_codes = [&](const std::string& name, std::vector<std::size_t> shape, double lo, double hi) {
    INFO(name);
    const aoc::H5Array a = aoc::read_h5_array(out, name);
    CHECK(a.integer);
    CHECK(a.shape == shape);
    CHECK(*std::min_element(a.values.begin(), a.values.end()) >= lo);
    CHECK(*std::max_element(a.values.begin(), a.values.end()) <= hi);
  };
  check_codes("slm_codes", {48, 48}, -std::ldexp(1.0, slm_bits - 1), std::ldexp(1.0, slm_bits - 1) - 1);
  check_codes("dac_codes", {8, 48}, 0, std::ldexp(1.0, dac_bits) - 1);
  check_codes("adc_codes", {8, 48}, 0, std::ldexp(1.0, adc_bits) - 1);
  CHECK(std::stod(aoc::read_h5_attr(out, "quantize")) == 1);
  // The largest weight maps to the largest code.
  const aoc::H5Array slm = aoc::read_h5_array(out, "slm_codes");
  const double top = std::ldexp(1.0, slm_bits - 1) - 1;
  CHECK(std::any_of(slm.values.begin(), slm.values.end(), [&](double v) { return std::abs(v) == top; }));
}

TEST_CASE("run: a missing input file is a one-line error naming the file and writes nothing") {
  check_bad_input(fresh_dir("missing") / "nope.h5", "");
}

TEST_CASE("run: a text file that is not HDF5 is a one-line error naming the file") {
  const auto f = fresh_dir("text") / "in.h5";
  std::ofstream(f) << "W = [[1, 2], [3, 4]]\n";
  check_bad_input(f, "");
  CHECK(run_aoc("run " + f.string() + " -o x.h5").out.find("not an HDF5 file") != std::string::npos);
}

TEST_CASE("run: a non-square W is a one-line error naming the file and /W") {
  const auto f = fresh_dir("nonsquare") / "in.h5";
  aoc::write_h5_arrays(f.string(), {arr("W", {4, 5}, 0.3), arr("x", {2, 4}, 1.0)});
  check_bad_input(f, "/W");
}

TEST_CASE("run: x with the wrong number of columns is a one-line error naming the file and /x") {
  const auto f = fresh_dir("xcols") / "in.h5";
  aoc::write_h5_arrays(f.string(), {arr("W", {4, 4}, 0.3), arr("x", {2, 5}, 1.0)});
  check_bad_input(f, "/x");
}

TEST_CASE("run: NaN in W is a one-line error naming the file and /W") {
  const auto f = fresh_dir("nan") / "in.h5";
  aoc::H5Array W = arr("W", {4, 4}, 0.3);
  W.values[6] = std::nan("");
  aoc::write_h5_arrays(f.string(), {W, arr("x", {2, 4}, 1.0)});
  check_bad_input(f, "/W");
}

TEST_CASE("run: a missing x and an integer W are one-line errors naming the dataset") {
  const auto d = fresh_dir("type");
  aoc::write_h5_arrays((d / "nox.h5").string(), {arr("W", {4, 4}, 0.3)});
  check_bad_input(d / "nox.h5", "/x: missing dataset");
  aoc::H5Array W = arr("W", {4, 4}, 3.0);
  W.integer = true;
  aoc::write_h5_arrays((d / "int.h5").string(), {W, arr("x", {2, 4}, 1.0)});
  check_bad_input(d / "int.h5", "/W: expected floating-point");
}

TEST_CASE("run: an output into a missing directory is a one-line error and leaves no file") {
  const auto d = fresh_dir("nodir");
  const auto in = (d / "in.h5").string();
  REQUIRE(run_aoc("run --example-input " + in + " --batch 2").status == 0);
  const Run r = run_aoc("run " + in + " -o " + (d / "missing" / "out.h5").string());
  INFO(r.out);
  CHECK(r.status != 0);
  CHECK(one_line(r.out));
  CHECK(r.out.find("out.h5") != std::string::npos);
  CHECK(std::distance(fs::directory_iterator(d), fs::directory_iterator()) == 1);
}

TEST_CASE("run: --help teaches with an example") {
  const Run r = run_aoc("run --help");
  CHECK(r.status == 0);
  CHECK(r.out.find("Example") != std::string::npos);
  CHECK(r.out.find("--example-input") != std::string::npos);
}

TEST_CASE("run: aoc loop's noisy fixed points over parts of 1, 3 and all samples with --first-sample are one run's") {
  auto fixed_points = [](const std::string& args) {
    const Run r = run_aoc("loop --noise --quantize --rule relative --json " + args);
    INFO(r.out);
    REQUIRE(r.status == 0);
    return nlohmann::json::parse(r.out).at("fixed_points").get<std::vector<std::vector<double>>>();
  };
  const auto whole = fixed_points("--batch 7");
  for (int size : {1, 3}) {
    for (int from = 0; from < 7; from += size) {
      const int n = std::min(size, 7 - from);
      const auto part = fixed_points("--batch " + std::to_string(n) + " --first-sample " + std::to_string(from));
      INFO("samples " << from << " .. " << from + n - 1);
      for (int i = 0; i < n; ++i) CHECK(part[i] == whole[from + i]);
    }
  }
}

TEST_CASE("run: aoc run of a loop input split over parts with --first-sample gives one run's noisy outputs") {
  const auto d = fresh_dir("split-loop");
  const aoc::LoopProblem p = aoc::random_problem(48, 7, 3);
  aoc::write_run_input((d / "all.h5").string(), p);
  auto readout = [&](const std::string& in, int first) {
    const std::string out = (d / ("out-" + std::to_string(first) + ".h5")).string();
    const Run r = run_aoc("run " + in + " --noise --quantize --rule relative --first-sample " + std::to_string(first) + " -o " + out);
    INFO(r.out);
    REQUIRE(r.status == 0);
    return aoc::read_h5_array(out, "readout").values;
  };
  const std::vector<double> whole = readout((d / "all.h5").string(), 0);
  for (const auto& [from, to] : std::vector<std::pair<int, int>>{{0, 1}, {1, 4}, {4, 7}}) {
    aoc::LoopProblem q = p;
    q.x = p.x.middleRows(from, to - from), q.z0 = p.z0.middleRows(from, to - from);
    const std::string in = (d / ("part-" + std::to_string(from) + ".h5")).string();
    aoc::write_run_input(in, q);
    const std::vector<double> part = readout(in, from);
    INFO("samples " << from << " .. " << to - 1);
    CHECK(std::equal(part.begin(), part.end(), whole.begin() + from * 48));
  }
}

namespace {

// The trained parity model (models/trained/parity-implicit) compiled for aoc-48, with seeded inputs
// of 2 sequences of 8 tokens: built once for the program tests below.
struct ParityProgram {
  fs::path dir;
  std::string prog, tokens;
};

const ParityProgram& parity_program() {
  static const ParityProgram p = [] {
    ParityProgram q;
    q.dir = fresh_dir("program");
    q.prog = (q.dir / "p.aocp.h5").string(), q.tokens = (q.dir / "tok.h5").string();
    const std::string model = std::string(AOC_SOURCE_DIR) + "/models/trained/parity-implicit";
    const std::string g = (q.dir / "g.json").string();
    REQUIRE(run_aoc("import " + model + "/config.json --shapes-only -o " + g).status == 0);
    REQUIRE(run_aoc("compile " + g + " --weights " + model + "/weights.h5 --hw aoc-48 -o " + q.prog).status == 0);
    REQUIRE(run_aoc("run " + q.prog + " --example-input " + q.tokens + " --batch 2 --length 8 --seed 4").status == 0);
    return q;
  }();
  return p;
}

// `aoc run` of the parity program with `options`, into `name`.h5; returns the output's path.
std::string run_program(const std::string& name, const std::string& options) {
  const ParityProgram& p = parity_program();
  const std::string out = (p.dir / (name + ".h5")).string();
  const Run r = run_aoc("run " + p.prog + " --inputs " + p.tokens + " -o " + out + " " + options);
  INFO(r.out);
  REQUIRE(r.status == 0);
  return out;
}

// A program command that must fail with one line naming `what`.
void check_refused(const std::string& args, const std::string& what) {
  const Run r = run_aoc(args);
  INFO(r.out);
  CHECK(r.status != 0);
  CHECK(one_line(r.out));
  CHECK(r.out.find(what) != std::string::npos);
}

}  // namespace

TEST_CASE("run: a program's run-time --set noise.thermal_sigma changes its outputs against the machine's noise") {
  const std::string a = run_program("noise-default", "--noise");
  const std::string b = run_program("noise-hot", "--noise --set noise.thermal_sigma=0.5");
  CHECK(aoc::read_h5_attr(a, "output_digest") != aoc::read_h5_attr(b, "output_digest"));
}

TEST_CASE("run: a program's noisy outputs over runs of parts with --first-sample are one run's, in both sequence modes", "[slow]") {
  const ParityProgram& p = parity_program();
  const std::string tokens = (p.dir / "tok5.h5").string();
  REQUIRE(run_aoc("run " + p.prog + " --example-input " + tokens + " --batch 5 --length 6 --seed 7").status == 0);
  const aoc::ir::Tensor all = aoc::ir::read_weights_h5(tokens).at("tokens");
  for (const std::string mode : {"simultaneous", "sequential"}) {
    auto run = [&](const std::string& name, const std::string& in, int first) {
      const std::string out = (p.dir / (name + "-" + mode + ".h5")).string();
      const Run r = run_aoc("run " + p.prog + " --inputs " + in + " --noise --quantize --sequence " + mode + " --first-sample " +
                            std::to_string(first) + " -o " + out);
      INFO(r.out);
      REQUIRE(r.status == 0);
      return aoc::ir::read_weights_h5(out).at("logits");
    };
    const aoc::ir::Tensor whole = run("whole", tokens, 0);
    const std::int64_t per = static_cast<std::int64_t>(whole.data.size()) / 5;
    for (const auto& [from, to] : std::vector<std::pair<int, int>>{{0, 1}, {1, 4}, {4, 5}}) {
      aoc::ir::Tensor part = all;
      part.shape[0] = to - from;
      part.data.assign(all.data.begin() + from * 6, all.data.begin() + to * 6);
      const std::string in = (p.dir / ("tok5-" + std::to_string(from) + ".h5")).string();
      aoc::ir::write_weights_h5(in, {{"tokens", part}});
      const aoc::ir::Tensor out = run("part" + std::to_string(from), in, from);
      INFO(mode << ": samples " << from << " .. " << to - 1);
      CHECK(std::equal(out.data.begin(), out.data.end(), whole.data.begin() + from * per));
    }
  }
}

TEST_CASE("run: a program run records its run-time --set, optics and precision beside the seed") {
  const std::string out = run_program("recorded", "--noise --set noise.thermal_sigma=0.5 --set timing.settle_ns=100 --precision f64");
  CHECK(aoc::read_h5_attr(out, "set") == "noise.thermal_sigma=0.5 timing.settle_ns=100");
  CHECK(aoc::read_h5_attr(out, "precision") == "f64");
  CHECK(aoc::read_h5_attr(out, "optics") == "1");
  CHECK(aoc::read_h5_attr(out, "seed") == "1");
  CHECK(aoc::read_h5_attr(out, "version") == AOC_VERSION);
}

TEST_CASE("run: --ideal-optics gives other outputs than the default calibrated optics", "[slow]") {
  const std::string measured = run_program("optics-default", "");
  const std::string ideal = run_program("optics-ideal", "--ideal-optics");
  CHECK(aoc::read_h5_attr(measured, "optics") == "1");
  CHECK(aoc::read_h5_attr(ideal, "optics") == "0");
  CHECK(aoc::read_h5_attr(measured, "output_digest") != aoc::read_h5_attr(ideal, "output_digest"));
}

TEST_CASE("run: --light-map f16 runs the program with half-precision light maps, recorded beside the precision") {
  const std::string f32 = run_program("map-f32", "--noise --light-map f32");
  const std::string f16 = run_program("map-f16", "--noise --light-map f16");
  CHECK(aoc::read_h5_attr(f32, "precision") == "f32");
  CHECK(aoc::read_h5_attr(f16, "precision") == "f32, f16 light maps");
  CHECK(aoc::read_h5_attr(f32, "output_digest") != aoc::read_h5_attr(f16, "output_digest"));
}

TEST_CASE("run: the automatic light map keeps a 48-channel machine's tiles in float") {
  const std::string automatic = run_program("map-auto", "--noise");
  const std::string f32 = run_program("map-f32-again", "--noise --light-map f32");
  CHECK(aoc::read_h5_attr(automatic, "precision") == "f32");
  CHECK(aoc::read_h5_attr(automatic, "output_digest") == aoc::read_h5_attr(f32, "output_digest"));
}

TEST_CASE("run: --light-map f16 with --precision f64 is an error naming both") {
  const ParityProgram& p = parity_program();
  check_refused("run " + p.prog + " --inputs " + p.tokens + " -o " + (p.dir / "never.h5").string() + " --light-map f16 --precision f64",
                "--light-map f16 needs --precision f32");
  CHECK_FALSE(fs::exists(p.dir / "never.h5"));
}

TEST_CASE("run: --trace writes a program's intermediate values beside its outputs") {
  const std::string out = run_program("traced", "--trace --backend cpu");
  const aoc::ir::Program p = aoc::ir::read_program_h5(parity_program().prog);
  const std::string inner = p.graph.ops.at(0).outputs.at(0);  // the first op's result, not an output
  REQUIRE(std::find(p.graph.outputs.begin(), p.graph.outputs.end(), inner) == p.graph.outputs.end());
  CHECK_FALSE(aoc::read_h5_array(out, inner).values.empty());
  CHECK(aoc::read_h5_attr(out, "trace") == "1");
}

TEST_CASE("run: --set converters.slm_bits=4 on a program is an error naming it and how to recompile") {
  const ParityProgram& p = parity_program();
  check_refused("run " + p.prog + " --inputs " + p.tokens + " -o " + (p.dir / "never.h5").string() + " --set converters.slm_bits=4",
                "run: --set converters.slm_bits=4: compiled into the program (its SLM codes); recompile with aoc compile");
  CHECK_FALSE(fs::exists(p.dir / "never.h5"));
}

TEST_CASE("run: a run-time --set of the converters' range or the architecture is an error naming it") {
  const ParityProgram& p = parity_program();
  const std::string run = "run " + p.prog + " --inputs " + p.tokens + " -o " + (p.dir / "never.h5").string();
  check_refused(run + " --set converters.adc_max=2", "--set converters.adc_max=2: compiled into the program");
  check_refused(run + " --set architecture.modules=2", "--set architecture.modules=2: compiled into the program");
  check_refused(run + " --set calibration.gain_pos=1", "--set calibration.gain_pos=1: the machine's measured calibration");
}

TEST_CASE("run: a loop option given with a program is an error naming it", "[slow]") {
  const ParityProgram& p = parity_program();
  const std::string run = "run " + p.prog + " --inputs " + p.tokens + " -o " + (p.dir / "never.h5").string();
  check_refused(run + " --mode all-off", "run: --mode does not apply to a program (its fixed points carry their own rule and tolerance");
  check_refused(run + " --tol 1e-6", "run: --tol does not apply to a program");
  check_refused(run + " --hw aoc-16", "run: --hw does not apply to a program");
  check_refused(run + " --bandwidth", "run: --bandwidth does not apply to a program");
}

TEST_CASE("run: a sim option with the cpu backend is an error naming it") {
  const ParityProgram& p = parity_program();
  check_refused("run " + p.prog + " --inputs " + p.tokens + " -o " + (p.dir / "never.h5").string() + " --backend cpu --ideal-optics",
                "run: --ideal-optics applies to the sim backend only");
}

TEST_CASE("run: a program option given with a loop input is an error naming it") {
  const auto d = fresh_dir("loop-refuses");
  const auto in = (d / "in.h5").string(), out = (d / "out.h5").string();
  REQUIRE(run_aoc("run --example-input " + in + " --n 16 --batch 2").status == 0);
  check_refused("run " + in + " --hw aoc-16 -o " + out + " --sequence sequential", "run: --sequence applies to a program only");
  check_refused("run " + in + " --hw aoc-16 -o " + out + " --ideal-optics", "run: --ideal-optics applies to a program only");
  check_refused("run " + in + " --hw aoc-16 -o " + out + " --light-map f16", "run: --light-map applies to a program only");
  check_refused("run " + in + " --hw aoc-16 -o " + out + " --backend cpu", "run: --backend cpu applies to a program only");
  check_refused("run " + in + " --hw aoc-16 -o " + out + " --batch 4", "run: --batch applies with --example-input only");
  CHECK_FALSE(fs::exists(out));
}

TEST_CASE("check: a run-time --set is accepted and recorded in the JSON record") {
  const ParityProgram& p = parity_program();
  const Run r = run_aoc("check " + p.prog + " --inputs " + p.tokens + " --no-quantize --set noise.thermal_sigma=0.05 --json --quiet");
  INFO(r.out);
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["set"] == nlohmann::json::array({"noise.thermal_sigma=0.05"}));
  CHECK(j["optics"] == true);
  CHECK(j["noise"] == true);
  CHECK(j["version"] == AOC_VERSION);
}

TEST_CASE("check: --set converters.slm_bits=4 is an error naming it") {
  const ParityProgram& p = parity_program();
  check_refused("check " + p.prog + " --inputs " + p.tokens + " --set converters.slm_bits=4", "check: --set converters.slm_bits=4: compiled into the program");
}

TEST_CASE("check: a sim option when --backends checks no simulator is an error naming it") {
  const ParityProgram& p = parity_program();
  check_refused("check " + p.prog + " --inputs " + p.tokens + " --backends cuda,cpu --noise", "check: --noise applies to the sim backend");
}

TEST_CASE("check: a sim option with --ideal is an error naming it") {
  const ParityProgram& p = parity_program();
  check_refused("check " + p.prog + " --inputs " + p.tokens + " --ideal --quantize", "check: --quantize does not apply with --ideal");
}

TEST_CASE("check: -o without --json is an error naming it") {
  const ParityProgram& p = parity_program();
  check_refused("check " + p.prog + " --inputs " + p.tokens + " -o " + (p.dir / "never.json").string(), "check: -o writes the JSON record");
}

namespace {

// A meter on a temporary file with a clock the test sets; `text()` is what it wrote.
struct Meter {
  double now = 0;
  std::FILE* f = std::tmpfile();
  aoc::Progress p;
  explicit Meter(bool tty) : p("tokens", true, f, tty, [this] { return now; }) { p.phase("run: sim"); }
  ~Meter() {
    p.finish();  // before the file closes
    std::fclose(f);
  }
  std::string text() {
    std::fflush(f);
    std::rewind(f);
    std::string s;
    for (int c; (c = std::fgetc(f)) != EOF;) s += static_cast<char>(c);
    return s;
  }
};

}  // namespace

TEST_CASE("progress: a run shorter than a second prints nothing") {
  Meter m(true);
  m.now = 0.5, m.p.update(5, 10);
  m.now = 0.9, m.p.update(10, 10);
  m.p.finish();
  CHECK(m.text().empty());
}

TEST_CASE("progress: on a terminal it redraws one line at most 5 times a second and ends with a newline") {
  Meter m(true);
  m.now = 1.0, m.p.update(2, 10);   // shown: 2 tokens/s, 4 s left
  m.now = 1.1, m.p.update(3, 10);   // too soon
  m.now = 1.3, m.p.update(4, 10);   // shown
  m.p.finish();                     // the last line and a newline
  const std::string t = m.text();
  INFO(t);
  CHECK(std::count(t.begin(), t.end(), '\r') == 3);
  CHECK(std::count(t.begin(), t.end(), '\n') == 1);
  CHECK(t.back() == '\n');
  CHECK(t.find("run: sim [####") != std::string::npos);
  CHECK(t.find("2/10 tokens  2 tokens/s  4 s left") != std::string::npos);
  CHECK(t.find("3/10") == std::string::npos);
}

TEST_CASE("progress: in a log it writes a line every 10 s and a last one") {
  Meter m(false);
  for (int s = 1; s <= 25; ++s) m.now = s, m.p.update(s, 100, true);
  m.p.finish();
  const std::string t = m.text();
  INFO(t);
  CHECK(t.find('\r') == std::string::npos);
  CHECK(std::count(t.begin(), t.end(), '\n') == 3);  // at 10 s, 20 s, and the last
  CHECK(t.find("10/100 tokens  1 tokens/s  at most 1 min 30 s left") != std::string::npos);
  CHECK(t.find("25/100 tokens") != std::string::npos);
}

TEST_CASE("progress: with several runs the time left covers the runs to come") {
  Meter m(true);
  m.p.phase("check: reference cpu", 0, 4);
  m.now = 1.0, m.p.update(10, 10);  // a quarter of the work in 1 s: 3 s left
  const std::string t = m.text();
  INFO(t);
  CHECK(t.find("3 s left") != std::string::npos);
}
