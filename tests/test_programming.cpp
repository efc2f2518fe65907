// Programming tiles for the machine's measured optical chain (sim/programming.hpp) and the
// compiler's compensate pass: the chain's product of the programmed block is the intended block to
// the code grid's resolution, the residual is what is left, and a compiled program runs on the
// machine as measured as it does with ideal optics.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <omp.h>

#include "compiler/passes.hpp"
#include "compiler/program_h5.hpp"
#include "runtime/backend/backend.hpp"
#include "sim/programming.hpp"
#include "sim/tile.hpp"
#include "tests/graph_support.hpp"
#include "tests/support.hpp"

using namespace aoc;
using namespace aoc::ir;
using namespace aoc::test;

namespace {

// A seeded block with weights of both signs and magnitudes spread over the SLM's range.
MatrixXdR block(int K, int M, double seed) {
  MatrixXdR W(K, M);
  for (int i = 0; i < K; ++i)
    for (int j = 0; j < M; ++j) W(i, j) = std::sin(seed + 1.7 * i + 0.61 * j * j) * (0.3 + 0.7 * std::fabs(std::cos(0.37 * i - j)));
  return W;
}

// What a tile programmed with W at (in0, out0) reads for the value rows x: x Weff + c (behind the
// detector gains `gain` where given; with `noise`, each row a fresh draw).
MatrixXdR read_tile(const Hardware& hw, const MatrixXdR& W, int in0, int out0, const MatrixXdR& x, const Eigen::VectorXd* gain = nullptr,
                    const TileNoise* noise = nullptr) {
  OpticalTile<double> tile(hw, program_chain(hw), Optics::Calibrated);
  if (noise) tile.set_noise(*noise);
  tile.program(W, in0, out0, 0, gain);
  const int rows = static_cast<int>(x.rows());
  AlignedVector<double> in(static_cast<size_t>(rows) * tile.ld_in(), 0.0), out(static_cast<size_t>(rows) * tile.ld_out(), 0.0),
      scratch(tile.scratch_size(rows));
  for (int r = 0; r < rows; ++r)
    for (int i = 0; i < x.cols(); ++i) in[static_cast<size_t>(r) * tile.ld_in() + i] = x(r, i);
  std::vector<int> slots(static_cast<size_t>(rows), 0);
  for (int r = 0; r < rows; ++r) slots[static_cast<size_t>(r)] = r;
  tile.read(in.data(), rows, StepContext{0, slots.data()}, 0, kern::Epilogue<double>{}, out.data(), scratch.data());
  MatrixXdR y(rows, W.cols());
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < W.cols(); ++j) y(r, j) = out[static_cast<size_t>(r) * tile.ld_out() + j];
  return y;
}

// x[B, L, 12] -> y = x V^T (one optical product, top level).
Program one_product(int rows, int cols) {
  Program p;
  Graph& g = p.graph;
  g.name = "one-product";
  g.inputs.push_back(decl("x", {0, 0, cols}, {"B", "L"}));
  g.weights = {decl("V", {rows, cols})};
  p.weights = {{"V", wave({rows, cols}, 0.4, 0.2)}};
  g.ops.push_back(make_op(OpKind::Linear, {"x", "V"}, {"y"}, {}, "head"));
  g.outputs = {"y"};
  p.target = target_of(hw48(), "aoc-48", {});
  return p;
}

// p written to a fresh folder `name` under the temporary directory, with seeded inputs of 3 samples
// of 2 tokens beside it (aoc run --example-input).
struct Written {
  std::filesystem::path dir;
  std::string prog, in;
};
Written write_with_inputs(const Program& p, const std::string& name) {
  Written w{std::filesystem::temp_directory_path() / name, "", ""};
  std::filesystem::create_directories(w.dir);
  w.prog = (w.dir / "p.h5").string(), w.in = (w.dir / "x.h5").string();
  write_program_h5(w.prog, p);
  REQUIRE(run_aoc("run " + w.prog + " --example-input " + w.in + " --batch 3 --length 2 --seed 1").status == 0);
  return w;
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  double m = 0;
  for (std::size_t i = 0; i < a.data.size(); ++i) m = std::max(m, std::fabs(a.data[i] - b.data[i]));
  return m;
}

}  // namespace

TEST_CASE("programming: the measured chain's product of the programmed block is the intended block") {
  const Hardware& hw = hw48();
  const MatrixXdR target = block(12, 10, 0.3);
  const int in0 = 9, out0 = 20;  // past aoc-48's dark LED (channel 8)
  const CoreConfig chain = program_chain(hw);
  const ChainProgramming g = program_for_chain(hw, chain, target, drive_calibration(hw, chain), {in0, out0, hw.channels});
  // The chain distorts the block as it is: programmed raw, it reads far from x target.
  MatrixXdR x(5, 12);
  for (int r = 0; r < 5; ++r)
    for (int i = 0; i < 12; ++i) x(r, i) = std::cos(0.9 * r + 0.4 * i);
  const MatrixXdR want = x * target;
  const MatrixXdR raw = read_tile(hw, target, in0, out0, x);
  const MatrixXdR fixed = read_tile(hw, g.W, in0, out0, x).rowwise() - g.offset.transpose();
  const double scale = want.cwiseAbs().maxCoeff();
  CHECK((raw - want).cwiseAbs().maxCoeff() > 0.05 * scale);
  // Dark SLM pixels cannot be corrected: every other weight is, so the product's error is what the
  // reported residual and dark weights allow (the dark weights' share bounded by their values).
  CHECK(g.rounds > 1);
  CHECK(g.residual >= g.rms_residual);
  const double err = (fixed - want).cwiseAbs().maxCoeff();
  INFO("dark " << g.dark << ", residual " << g.residual << ", rms " << g.rms_residual << ", rounds " << g.rounds << ", raw error "
               << (raw - want).cwiseAbs().maxCoeff() << ", scale " << scale);
  // What is left is the LED drivers' even-order residual (one drive cannot straighten both paths'
  // light), each weight's share of it at most its value times the drivers' nonlinearity.
  const double led = led_response(hw, chain.led).nonlinearity();
  CHECK(led > 0);
  CHECK(led < 0.01);
  const double reach = target.cwiseAbs().colwise().sum().maxCoeff() * led;
  INFO("LED nonlinearity " << led << ", its reach " << reach);
  if (g.dark == 0) {
    CHECK(g.residual < 1e-3);
    CHECK(err < 1e-3 * scale * 12 + reach);
  }
  CHECK(err < 0.2 * (raw - want).cwiseAbs().maxCoeff());
  // On the dark LED the row cannot be reached: its weights are reported dark.
  const ChainProgramming on_dark = program_for_chain(hw, chain, target, drive_calibration(hw, chain), {8, out0, hw.channels});
  CHECK(on_dark.dark >= 9);
  CHECK(on_dark.residual > 0.1);
  // Dark is against the block's own median gain: a module whose every gain is 20 times lower (its
  // TIAs) darkens no weight and is programmed as well (an absolute floor had left it all dark).
  Hardware dim = hw;
  for (double& g : dim.gain_pos) g *= 0.05;
  for (double& g : dim.gain_neg) g *= 0.05;
  const ChainProgramming on_dim = program_for_chain(dim, program_chain(dim), target, DriveCalibration{}, {in0, out0, dim.channels});
  INFO("dim module: dark " << on_dim.dark << ", residual " << on_dim.residual);
  CHECK(on_dim.dark == g.dark);
  CHECK(on_dim.residual < std::max(1e-3, 2 * g.residual));
}

TEST_CASE("programming: detector trims put each column on the code range, the product stays the block, its noise drops") {
  const Hardware& hw = hw48();
  const int in0 = 9, out0 = 20;
  MatrixXdR target = block(12, 10, 0.7);
  target.col(3) *= 0.2;  // a column of small weights: a fifth of the code range untrimmed
  const CoreConfig chain = program_chain(hw);
  const DriveCalibration cal = drive_calibration(hw, chain);
  const ChainProgramming flat = program_for_chain(hw, chain, target, cal, {in0, out0, hw.channels});
  const ChainProgramming trim = program_for_chain(hw, chain, target, cal, {in0, out0, hw.channels}, 40, kDetectorTrimRange);
  CHECK((flat.gain.array() == 1).all());
  REQUIRE(trim.gain.size() == 10);
  CHECK((trim.gain.array() > 0).all());
  CHECK((trim.gain.array() <= 1).all());
  CHECK(trim.gain.minCoeff() >= 1 / kDetectorTrimRange - 1e-12);
  CHECK(trim.gain(3) < 0.3);  // the small column: turned down about five times, programmed as bright
  CHECK(trim.rounds > flat.rounds);  // the second programming's reads are counted
  // Every column on (nearly) the whole range: its largest |value| within the trim's bound of the
  // block's largest, where untrimmed the small column sat at about a fifth.
  const auto spread = [](const MatrixXdR& W) {
    const Eigen::VectorXd c = W.cwiseAbs().colwise().maxCoeff().transpose();
    return c.minCoeff() / c.maxCoeff();
  };
  INFO("column spread untrimmed " << spread(flat.W) << ", trimmed " << spread(trim.W) << ", gains " << trim.gain.transpose());
  CHECK(spread(flat.W) < 0.3);
  CHECK(spread(trim.W) > 0.9);
  // The product through the trimmed detectors is the block, as well as untrimmed.
  MatrixXdR x(5, 12);
  for (int r = 0; r < 5; ++r)
    for (int i = 0; i < 12; ++i) x(r, i) = std::cos(0.9 * r + 0.4 * i);
  const MatrixXdR want = x * target;
  const double scale = want.cwiseAbs().maxCoeff();
  const double err_flat = (read_tile(hw, flat.W, in0, out0, x).rowwise() - flat.offset.transpose() - want).cwiseAbs().maxCoeff();
  const double err_trim = (read_tile(hw, trim.W, in0, out0, x, &trim.gain).rowwise() - trim.offset.transpose() - want).cwiseAbs().maxCoeff();
  INFO("error untrimmed " << err_flat << ", trimmed " << err_trim << ", scale " << scale << ", residual " << trim.residual);
  CHECK(err_trim < 2 * err_flat + 1e-3 * scale);
  CHECK(trim.residual < 1e-3);
  // Shot noise only: the small column's light is five times brighter behind a gain five times
  // lower, so its noise in the output's units falls by about sqrt(5) (the variance by the trim).
  TileNoise n;
  n.spec.photons_per_sample = 1e4;
  n.spec.led_bias = 0.06;
  n.seed = 3;
  const MatrixXdR same = x.row(0).replicate(400, 1);
  const auto sd = [&](const MatrixXdR& W, const Eigen::VectorXd* gain, int j) {
    const MatrixXdR y = read_tile(hw, W, in0, out0, same, gain, &n);
    const Eigen::VectorXd c = y.col(j);
    return std::sqrt((c.array() - c.mean()).square().mean());
  };
  const double sd_flat = sd(flat.W, nullptr, 3), sd_trim = sd(trim.W, &trim.gain, 3);
  INFO("small column's noise: untrimmed " << sd_flat << ", trimmed " << sd_trim << ", gain " << trim.gain(3));
  CHECK(sd_trim < 0.7 * sd_flat);
  CHECK(sd_trim > 0.2 * sd_flat);
}

TEST_CASE("programming: a chain without distortion is left as it is, bad blocks are refused") {
  const Hardware& hw = hw48();
  CoreConfig ideal = program_chain(hw);
  ideal.switches = Switches{false, false, false, false, false, false};
  ideal.closed_loop = false, ideal.led = LedModel::Linear, ideal.beta = {1.0};
  const MatrixXdR target = block(6, 6, 1.1);
  const ChainProgramming g = program_for_chain(hw, ideal, target, DriveCalibration{}, {0, 0, hw.channels});
  CHECK(g.residual < 1e-9);
  CHECK(g.dark == 0);
  CHECK((g.W - target).cwiseAbs().maxCoeff() < 1e-6);
  CHECK_THROWS_WITH(program_for_chain(hw, ideal, target, DriveCalibration{}, {45, 0, hw.channels}), Catch::Contains("does not fit a core of 48"));
  MatrixXdR bad = target;
  bad(0, 0) = std::nan("");
  CHECK_THROWS_WITH(program_for_chain(hw, ideal, bad, DriveCalibration{}), Catch::Contains("NaN"));
}

TEST_CASE("compensate: a compiled product on the machine as measured runs as with ideal optics, to the code grid") {
  Program p = one_product(30, 40);  // 1 tile on aoc-48
  PassOptions o;
  o.compensate = &hw48();
  Program comp = p, raw = p;
  run_pipeline(comp, o);
  run_pipeline(raw, {});
  REQUIRE(comp.optical.at(0).compensated());
  REQUIRE_FALSE(raw.optical.at(0).compensated());
  const Tensor x = wave({2, 3, 40}, 1.0, 0.8);
  const std::map<std::string, Tensor> in{{"x", x}};
  BackendOptions exact;
  exact.quantize = false;
  BackendOptions ideal = exact;
  ideal.optics = false;
  BackendOptions q;
  q.quantize = true;
  BackendOptions q_ideal = q;
  q_ideal.optics = false;
  const auto sim = make_backend("sim", &hw48());
  const Tensor want = sim->run(comp, in, ideal).values.at("y");
  const double scale = [&] {
    double m = 0;
    for (double v : want.data) m = std::max(m, std::fabs(v));
    return m;
  }();
  const double err_raw = max_abs_diff(sim->run(raw, in, exact).values.at("y"), want);
  const double err_comp = max_abs_diff(sim->run(comp, in, exact).values.at("y"), want);
  INFO("raw " << err_raw << ", compensated " << err_comp << ", scale " << scale << ", residual " << comp.optical[0].compensation[0].residual);
  CHECK(err_raw > 0.05 * scale);
  CHECK(err_comp < 0.1 * err_raw);
  // With SLM codes: the compensated codes through the chain against the weights' codes with ideal
  // optics differ by about the code grid (9 bits: a step of max|w| / 255 per weight, 40 inputs).
  const double err_q = max_abs_diff(sim->run(comp, in, q).values.at("y"), sim->run(comp, in, q_ideal).values.at("y"));
  INFO("quantized: " << err_q);
  CHECK(err_q < 0.1 * err_raw);
  // Ideal optics runs the weights (or their codes) whatever the compensation.
  CHECK(max_abs_diff(sim->run(comp, in, q_ideal).values.at("y"), sim->run(raw, in, q_ideal).values.at("y")) == 0);
  // Small values (most of a model's, far inside the drivers' range) come out as x W to about the
  // compensation's residual and the drivers' even-order terms: the light at value 0 is the offset
  // taken out (linearised through +-1 instead, the even terms left a constant error at every output).
  const Tensor small = wave({2, 3, 40}, 0.02, 0.8);
  const std::map<std::string, Tensor> in_small{{"x", small}};
  const Tensor want_small = sim->run(comp, in_small, ideal).values.at("y");
  double small_scale = 0;
  for (double v : want_small.data) small_scale = std::max(small_scale, std::fabs(v));
  const double err_small = max_abs_diff(sim->run(comp, in_small, exact).values.at("y"), want_small);
  INFO("small inputs: error " << err_small << " of outputs up to " << small_scale);
  CHECK(err_small < 0.01 * small_scale);
}

TEST_CASE("compensate: statistics, the printed program, the file and the thread count") {
  Program p = one_product(60, 50);  // 4 tiles on aoc-48
  PassOptions o;
  o.compensate = &hw48();
  PassStats seen;
  Program a = p;
  omp_set_num_threads(1);
  run_pipeline(a, o, [&](const NamedPass& pass, const Program&, const PassStats& s) {
    if (pass.name == std::string("compensate")) seen = s;
  });
  omp_set_num_threads(2);
  Program b = p;
  run_pipeline(b, o);
  CHECK(seen.get("tiles compensated") == 4);
  CHECK(seen.get("program-and-verify reads") > 4);
  REQUIRE(a.optical.size() == 1);
  CHECK(a.optical[0].programmed == b.optical[0].programmed);  // bit for bit
  CHECK(a.optical[0].codes == b.optical[0].codes);
  const std::string text = print_program(a);
  CHECK(text.find(", compensated (worst residual ") != std::string::npos);
  CHECK(text.find("detector gains trimmed)") != std::string::npos);
  CHECK(text.find("dark, trims to 1/") != std::string::npos);
  CHECK_THROWS_WITH(parse_program(text), Catch::Contains("codes"));
  const auto dir = std::filesystem::temp_directory_path() / "aoc_test_programming";
  std::filesystem::create_directories(dir);
  const std::string f = (dir / "p.h5").string();
  write_program_h5(f, a);
  const Program r = read_program_h5(f);
  REQUIRE(r.optical[0].compensated());
  CHECK(r.optical[0].programmed == a.optical[0].programmed);
  for (std::size_t k = 0; k < a.optical[0].tiles.size(); ++k) {
    CHECK(r.optical[0].compensation[k].offset == a.optical[0].compensation[k].offset);
    CHECK(r.optical[0].compensation[k].residual == a.optical[0].compensation[k].residual);
    CHECK(r.optical[0].compensation[k].dark == a.optical[0].compensation[k].dark);
    CHECK(r.optical[0].compensation[k].gain == a.optical[0].compensation[k].gain);
  }
  std::filesystem::remove_all(dir);
  // The verifier refuses a compensation that does not match the tiles.
  Program bad = a;
  bad.optical[0].compensation[1].offset.pop_back();
  CHECK_THROWS_WITH(verify_program(bad), Catch::Contains("47 offsets for 48 outputs"));
  bad = a;
  bad.optical[0].compensation[0].gain[2] = 1.5;
  CHECK_THROWS_WITH(verify_program(bad), Catch::Contains("detector gain 1.5 is not in (0, 1]"));
}

TEST_CASE("check --budget: each stage of the machine against the reference, one line each, with ideal optics too") {
  Program p = one_product(30, 40);
  PassOptions o;
  o.compensate = &hw48();
  run_pipeline(p, o);
  const auto [dir, prog, in] = write_with_inputs(p, "aoc_test_budget");
  const Run r = run_aoc("check " + prog + " --inputs " + in + " --budget --json --quiet");
  INFO(r.out);
  REQUIRE(r.status == 0);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  const auto& b = j["budget"];
  // the lowering, the chain, the converters, each of aoc-48's six noise sources alone, all of them
  REQUIRE(b.size() == 3 + 6 + 1);
  CHECK(b[0]["optics"] == false);
  CHECK(b[0]["max_abs_error"].get<double>() < 1e-4);  // f32 products
  CHECK(b[1]["optics"] == true);
  CHECK(b[1]["quantize"] == false);
  // the compensated chain: what is left is the LED drivers' even-order residual (the example input
  // runs past the uncalibrated drive range, where it grows), well below the raw
  // chain's error (the same program uncompensated)
  Program raw = one_product(30, 40);
  run_pipeline(raw, PassOptions{});
  const std::string raw_prog = (dir / "raw.h5").string();
  write_program_h5(raw_prog, raw);
  const Run rr = run_aoc("check " + raw_prog + " --inputs " + in + " --budget --json --quiet");
  REQUIRE(rr.status == 0);
  const double raw_chain = nlohmann::json::parse(rr.out)["budget"][1]["max_abs_error"].get<double>();
  INFO("raw chain " << raw_chain);
  CHECK(b[1]["max_abs_error"].get<double>() < 0.5 * raw_chain);
  CHECK(b[2]["quantize"] == true);
  CHECK(b[4]["set"].size() == 5);  // one source alone: the other five off
  CHECK(b[9]["noise"] == true);
  CHECK(j["compensated"] == true);
  // with ideal optics: the same stages without the chain's row, every one with ideal optics
  const Run ri = run_aoc("check " + prog + " --inputs " + in + " --budget --ideal-optics --json --quiet");
  REQUIRE(ri.status == 0);
  const nlohmann::json ji = nlohmann::json::parse(ri.out);
  CHECK(ji["ideal_optics"] == true);
  REQUIRE(ji["budget"].size() == b.size() - 1);
  for (const auto& row : ji["budget"]) CHECK(row["optics"] == false);
  CHECK(ji["budget"][1]["stage"] == b[2]["stage"]);
  CHECK(ji["budget"].back()["noise"] == true);
  CHECK(ji["budget"][1]["max_abs_error"].get<double>() != b[2]["max_abs_error"].get<double>());
  const Run bad = run_aoc("check " + prog + " --inputs " + in + " --budget --ideal");
  CHECK(bad.status != 0);
  CHECK_THAT(bad.out, Catch::Contains("does not apply with --budget"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("check: outputs that overflow on the machine from finite inputs fail the check, whatever the tolerances") {
  Program p = one_product(30, 40);
  for (double& w : p.weights["V"].data) w *= 1e300;  // beyond float: the f32 products overflow, the f64 reference does not
  run_pipeline(p, PassOptions{});
  const auto [dir, prog, in] = write_with_inputs(p, "aoc_test_overflow");
  const Run r = run_aoc("check " + prog + " --inputs " + in + " --no-noise --no-quantize");
  INFO(r.out);
  CHECK(r.status == 1);
  CHECK_THAT(r.out, Catch::Contains("FAIL: ") && Catch::Contains("not finite (an overflow from finite inputs)"));
  std::filesystem::remove_all(dir);
}
