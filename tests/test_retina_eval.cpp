// Evaluation of retina models on a machine (runtime/retina/retina_eval.hpp, aoc retina eval): the compiled
// graph on the digital reference is the trained model, the simulated machine without its
// non-idealities is the reference, its noise is seeded, and what does not fit is refused by name.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "compiler/graph_json.hpp"
#include "models/retina_model.hpp"
#include "runtime/io/output.hpp"
#include "runtime/retina/retina_eval.hpp"
#include "runtime/retina/retina_stimulus.hpp"
#include "sim/error.hpp"
#include "support.hpp"
#include "tests/graph_support.hpp"

namespace {

using namespace aoc::retina;
namespace fs = std::filesystem;
namespace ir = aoc::ir;

fs::path scratch(const std::string& name) { return aoc::test::temp_dir() / ("retina-eval-" + name); }

// Small frames, few cells: each evaluation below takes well under a second.
const Dataset& data() {
  static const Dataset d = [] {
    SynthConfig c;
    c.height = c.width = 20, c.cells = 3;
    c.train_frames = 400, c.test_frames = 160, c.repeats = 3;
    c.images = 2, c.image_size = 64, c.rf_region = 6;
    c.seed = 5;
    return synthesize(c);
  }();
  return d;
}

ModelSpec spec(const std::string& kind) {
  ModelSpec s;
  s.kind = kind, s.height = s.width = 20, s.cells = 3, s.taps = 10;
  s.conv1 = 2, s.kernel1 = 7, s.conv2 = 2, s.kernel2 = 5;
  s.state = 12, s.filters = 3;
  s.tol = 1e-9, s.max_iter = 400;  // the graph's solve as tight as predict()'s
  return s;
}

// A seeded (untrained) model written as aoc retina train writes its folder.
aoc::RetinaModelFiles folder(const Model& m, const std::string& name) {
  const fs::path dir = scratch(name);
  fs::create_directories(dir);
  aoc::write_file_atomic((dir / "graph.json").string(), m.graph_json());
  ir::write_weights_h5((dir / "weights.h5").string(), m.weights());
  return aoc::read_retina_model(dir.string());
}

aoc::RetinaEvalSettings cpu() {
  aoc::RetinaEvalSettings s;
  s.backend = "cpu";
  s.skip = 10;
  return s;
}

aoc::RetinaEvalSettings machine(bool noise) {
  aoc::RetinaEvalSettings s;
  s.backend = "sim";
  s.skip = 10;
  s.calibration_frames = 200;
  s.run.sequence = "sequential";
  s.run.quantize = s.run.noise = noise;
  s.run.ideal_optics = !noise;
  s.run.precision = "f64";
  return s;
}

// The search's machine: the simulated aoc-48 with its converters, noise and ideal optics.
aoc::RetinaEvalSettings machine_settings() {
  aoc::RetinaEvalSettings s = machine(true);
  s.run.ideal_optics = true;
  return s;
}

}  // namespace

TEST_CASE("retina eval: on the digital reference the compiled LN model is the trained model") {
  Model m(spec("ln"), 3);
  const aoc::RetinaEval r = aoc::evaluate_retina(folder(m, "ln"), data(), cpu());
  CHECK((r.pred - m.predict(data().test)).cwiseAbs().maxCoeff() < 1e-12);
  const Scores s = score(data().test, m.predict(data().test), 10);
  CHECK(r.scores.cc_mean == Approx(s.cc_mean).epsilon(1e-12));
}

TEST_CASE("retina eval: on the digital reference the compiled CNN is the trained model") {
  Model m(spec("cnn"), 3);
  const aoc::RetinaEval r = aoc::evaluate_retina(folder(m, "cnn"), data(), cpu());
  CHECK((r.pred - m.predict(data().test)).cwiseAbs().maxCoeff() < 1e-12);
}

TEST_CASE("retina eval: the implicit model solved frame by frame is the trained model") {
  Model m(spec("implicit"), 3);
  aoc::RetinaEvalSettings s = cpu();
  s.run.sequence = "sequential";
  const aoc::RetinaEval r = aoc::evaluate_retina(folder(m, "implicit"), data(), s);
  CHECK((r.pred - m.predict(data().test)).cwiseAbs().maxCoeff() < 1e-6);
  REQUIRE(r.iterations.solves == data().test.frames);  // one solve per frame
  CHECK(r.iterations.converged == r.iterations.solves);
}

TEST_CASE("retina eval: the simulated machine with ideal optics, no noise and no converters is the reference") {
  Model m(spec("cnn"), 4);
  const aoc::RetinaModelFiles f = folder(m, "cnn-sim");
  const aoc::RetinaEval ref = aoc::evaluate_retina(f, data(), cpu());
  const aoc::RetinaEval sim = aoc::evaluate_retina(f, data(), machine(false));
  CHECK((sim.pred - ref.pred).cwiseAbs().maxCoeff() < 1e-9);
}

TEST_CASE("retina eval: the machine's noise is seeded: a seed repeats its predictions bit for bit, another changes them") {
  Model m(spec("ln"), 5);
  const aoc::RetinaModelFiles f = folder(m, "ln-noise");
  aoc::RetinaEvalSettings s = machine(true);
  const aoc::RetinaEval a = aoc::evaluate_retina(f, data(), s), b = aoc::evaluate_retina(f, data(), s);
  s.run.seed = 2;
  const aoc::RetinaEval c = aoc::evaluate_retina(f, data(), s);
  CHECK(a.pred == b.pred);
  CHECK(a.pred != c.pred);
  CHECK(a.calibrated_ranges > 0);
  const aoc::RetinaEval ref = aoc::evaluate_retina(f, data(), cpu());
  CHECK(a.pred != ref.pred);
}

TEST_CASE("retina eval: the estimate counts a frame as a token, with the fixed point's measured iterations") {
  Model m(spec("implicit"), 3);
  aoc::RetinaEvalSettings s = cpu();
  s.run.sequence = "sequential";
  const aoc::RetinaEval r = aoc::evaluate_retina(folder(m, "implicit-est"), data(), s);
  REQUIRE(r.estimate.loops.size() == 1);
  CHECK(r.estimate.loops[0].iterations == Approx(r.iterations.mean));
  CHECK_FALSE(r.estimate.loops[0].upper_bound);
  CHECK(r.estimate.token.total_joules.typ > 0);
  CHECK(r.estimate.token.total_seconds > 0);
}

TEST_CASE("retina eval: a model of another frame size is refused naming its graph") {
  ModelSpec other = spec("ln");
  other.height = other.width = 16;
  Model m(other, 3);
  const aoc::RetinaModelFiles f = folder(m, "ln16");
  CHECK_THROWS_WITH(aoc::evaluate_retina(f, data(), cpu()), Catch::Contains("graph.json: inputs: stimulus frames are 16x16 px, the data's 20x20"));
}

TEST_CASE("retina eval: a folder without weights is refused naming the file") {
  const fs::path dir = scratch("no-weights");
  fs::create_directories(dir);
  aoc::write_file_atomic((dir / "graph.json").string(), Model(spec("ln"), 1).graph_json());
  CHECK_THROWS_WITH(aoc::read_retina_model(dir.string()), Catch::Contains("weights.h5: missing"));
}

TEST_CASE("retina eval: aoc retina eval writes predictions that aoc retina score scores the same") {
  const fs::path d = scratch("cli.h5"), pred = scratch("cli-pred.h5"), csv = scratch("cli.csv");
  aoc::retina::write_dataset(d.string(), data());
  Model m(spec("ln"), 3);
  const aoc::RetinaModelFiles f = folder(m, "cli-ln");
  const aoc::test::Run r = aoc::test::run_aoc("retina eval --model " + f.dir + " --data " + d.string() + " --skip 10 --json --quiet -o " + pred.string() +
                                              " --csv " + csv.string());
  INFO(r.out);
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["synthetic"] == true);
  CHECK(j["backend"] == "sim");
  CHECK(j["settings"]["noise"] == true);
  CHECK(j["per_frame"]["energy_j"]["typ"].get<double>() > 0);
  const aoc::test::Run s = aoc::test::run_aoc("retina score --data " + d.string() + " --pred " + pred.string() + " --skip 10 --json");
  INFO(s.out);
  REQUIRE(s.status == 0);
  CHECK(nlohmann::json::parse(s.out)["scores"]["cc_mean"].get<double>() == Approx(j["scores"]["cc_mean"].get<double>()).epsilon(1e-12));
  std::ifstream in(csv);
  std::string header;
  std::getline(in, header);
  CHECK(header == "frame,cell,pred,rate,true_rate");
}

TEST_CASE("retina eval: --set changes the machine the model runs on and is recorded") {
  const fs::path d = scratch("cli-set.h5");
  aoc::retina::write_dataset(d.string(), data());
  Model m(spec("ln"), 3);
  const aoc::RetinaModelFiles f = folder(m, "cli-set-ln");
  const std::string cmd = "retina eval --model " + f.dir + " --data " + d.string() + " --skip 10 --json --quiet";
  const aoc::test::Run plain = aoc::test::run_aoc(cmd), noisy = aoc::test::run_aoc(cmd + " --set noise.thermal_sigma=0.5");
  INFO(plain.out << noisy.out);
  REQUIRE(plain.status == 0);
  REQUIRE(noisy.status == 0);
  const auto a = nlohmann::json::parse(plain.out), b = nlohmann::json::parse(noisy.out);
  CHECK(b["set"] == nlohmann::json::array({"noise.thermal_sigma=0.5"}));
  CHECK(b["scores"]["cc_mean"].get<double>() != a["scores"]["cc_mean"].get<double>());
}

TEST_CASE("retina eval: the sim's flags are refused on the digital reference") {
  const aoc::test::Run r = aoc::test::run_aoc("retina eval --model x --data y --backend cpu --noise");
  CHECK(r.status != 0);
  CHECK(r.out.find("retina eval: --noise applies only with --backend sim") != std::string::npos);
}

TEST_CASE("retina eval: fewer frames run the movie's first frames and score them alone") {
  Model m(spec("ln"), 3);
  const aoc::RetinaModelFiles f = folder(m, "ln-frames");
  aoc::RetinaEvalSettings s = cpu();
  const aoc::RetinaEval all = aoc::evaluate_retina(f, data(), s);
  s.frames = 100;
  const aoc::RetinaEval head = aoc::evaluate_retina(f, data(), s);
  REQUIRE(head.pred.cols() == 100);
  CHECK(head.pred == all.pred.leftCols(100));  // causal filters: the first frames do not see the rest
  const Split first = slice(data().test, 0, 100);
  CHECK(first.repeats[0].cols() == 100);
  CHECK(head.scores.cc_mean == score(first, all.pred.leftCols(100), 10).cc_mean);
}

TEST_CASE("retina eval: the IB-GP on the machine without its non-idealities is the trained model, its posterior and movie beside") {
  SynthConfig c;
  c.height = c.width = 22, c.cells = 2;
  c.train_frames = 300, c.test_frames = 80, c.repeats = 2;
  c.images = 2, c.image_size = 64, c.rf_region = 6;
  const Dataset d = synthesize(c);
  ModelSpec sp = spec("ibgp");
  sp.height = sp.width = 22, sp.cells = 2, sp.taps = 4;
  sp.latent = 3, sp.enc1 = 4, sp.enc2 = 4, sp.enc3 = 2, sp.dec0 = 2, sp.dec1 = 3, sp.dec2 = 3;
  Model m(sp, 6);
  aoc::RetinaEvalSettings s = machine(false);
  s.skip = sp.skip();
  const aoc::RetinaEval r = aoc::evaluate_retina(folder(m, "ibgp"), d, s);
  CHECK((r.pred - m.predict(d.test)).cwiseAbs().maxCoeff() < 1e-9);
  CHECK(r.result.values.at("synth").shape == std::vector<std::int64_t>{1, 80, 22, 22, 1});  // an analog output, by the graph's name
  CHECK(r.result.values.at("latent").shape == std::vector<std::int64_t>{1, 80, 3});
}

TEST_CASE("retina eval: the model's training record says how many frames its scores skip") {
  Model m(spec("cnn"), 3);
  aoc::RetinaModelFiles f = folder(m, "cnn-skip");
  CHECK(f.skip == kDefaultSkip);
  const fs::path record = fs::path(f.dir) / "train.json";
  aoc::write_file_atomic(record.string(), R"({"test_skip": 25})");
  f = aoc::read_retina_model(f.dir);
  CHECK(f.skip == 25);
  aoc::RetinaEvalSettings s = cpu();
  s.skip = -1;  // the model's
  CHECK(aoc::evaluate_retina(f, data(), s).skip == 25);
  aoc::write_file_atomic(record.string(), R"({"test_skip": -3})");
  CHECK_THROWS_WITH(aoc::read_retina_model(f.dir), Catch::Contains("train.json: test_skip"));
}

namespace {

// A seeded model's folder with its training record's spec, as the search reads it.
aoc::RetinaModelFiles folder_with_spec(const Model& m, const std::string& name) {
  aoc::RetinaModelFiles f = folder(m, name);
  aoc::write_file_atomic((fs::path(f.dir) / "train.json").string(), nlohmann::ordered_json{{"model", m.spec().json()}}.dump());
  return aoc::read_retina_model(f.dir);  // the folder as read with its record
}

aoc::StimulusSearchSettings search(int steps) {
  aoc::StimulusSearchSettings s;
  s.frames = 100, s.block = 4, s.steps = steps, s.lr = 0.1;
  return s;
}

}  // namespace

TEST_CASE("retina stimulus: the search brings the machine's responses closer to the natural movie's than block averages do") {
  const aoc::RetinaModelFiles f = folder_with_spec(Model(spec("ln"), 3), "ln-stim");
  Model digital = aoc::read_retina_digital(f);
  const aoc::RetinaMachine machine = aoc::compile_retina(f, data(), aoc::load_hardware(aoc::resolve_hardware_path("aoc-48")), machine_settings());
  const aoc::StimulusSearch r = aoc::search_stimulus(machine, digital, data().test, 10, 1, search(30));
  REQUIRE(r.curve.size() == 31);
  CHECK(r.coarse.cols() == 25);  // 20 x 20 px in 4 x 4 blocks
  // Judged by the correlation: one read's MSE is dominated by its drift and 1/f offsets (the
  // receiver's, at the LED drivers' honest modulation), which move it 10x from seed to seed.
  CHECK(r.final_fresh.cc > r.downsampled.cc + 0.2);
  // every found frame is made of 4 x 4 blocks of equal pixels
  for (int y = 0; y < 20; ++y) CHECK(r.stimulus[static_cast<std::size_t>(50 * 400 + y * 20 + 1)] == r.stimulus[static_cast<std::size_t>(50 * 400 + (y / 4) * 4 * 20)]);
}

TEST_CASE("retina stimulus: the same seed finds the same movie, bit for bit") {
  const aoc::RetinaModelFiles f = folder_with_spec(Model(spec("ln"), 3), "ln-stim2");
  Model a = aoc::read_retina_digital(f), b = aoc::read_retina_digital(f);
  const aoc::RetinaMachine machine = aoc::compile_retina(f, data(), aoc::load_hardware(aoc::resolve_hardware_path("aoc-48")), machine_settings());
  CHECK(aoc::search_stimulus(machine, a, data().test, 10, 7, search(5)).stimulus == aoc::search_stimulus(machine, b, data().test, 10, 7, search(5)).stimulus);
}

TEST_CASE("retina stimulus: a block that does not divide the frame is refused") {
  const aoc::RetinaModelFiles f = folder_with_spec(Model(spec("ln"), 3), "ln-stim3");
  Model digital = aoc::read_retina_digital(f);
  const aoc::RetinaMachine machine = aoc::compile_retina(f, data(), aoc::load_hardware(aoc::resolve_hardware_path("aoc-48")), machine_settings());
  aoc::StimulusSearchSettings s = search(1);
  s.block = 3;
  CHECK_THROWS_WITH(aoc::search_stimulus(machine, digital, data().test, 10, 1, s), "block: 3 does not divide the 20x20 frame");
}

TEST_CASE("retina stimulus: a model folder without its training record is refused naming the file") {
  const aoc::RetinaModelFiles f = folder(Model(spec("ln"), 3), "ln-no-record");
  CHECK_THROWS_WITH(aoc::read_retina_digital(f), Catch::Contains("train.json: missing"));
}

TEST_CASE("retina train: a run stopped after an epoch goes on with --resume to the unbroken run's weights, and only with its options") {
  const fs::path dir = scratch("train-resume");
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string d = (dir / "r.h5").string(), whole = (dir / "whole").string(), cut = (dir / "cut").string();
  REQUIRE(aoc::test::run_aoc("retina data -o " + d + " --train-frames 600 --test-frames 100 --repeats 2 --cells 2").status == 0);
  const std::string cmd = "retina train --data " + d + " --model ln --epochs 3 --chunk 100 --quiet -o ";
  REQUIRE(aoc::test::run_aoc(cmd + whole).status == 0);
  const aoc::test::Run stop = aoc::test::run_aoc(cmd + cut + " --stop-after 1");
  INFO(stop.out);
  REQUIRE(stop.status == 0);
  CHECK_THAT(stop.out, Catch::Contains("stopped after epoch 1 of 3"));
  CHECK(fs::exists(fs::path(cut) / "checkpoint.h5"));
  CHECK(!fs::exists(fs::path(cut) / "weights.h5"));
  const aoc::test::Run again = aoc::test::run_aoc(cmd + cut);
  CHECK(again.status != 0);
  CHECK_THAT(again.out, Catch::Contains("the checkpoint of an unfinished run; --resume continues it"));
  const aoc::test::Run other = aoc::test::run_aoc(cmd + cut + " --resume --lr 0.01");
  CHECK(other.status != 0);
  CHECK_THAT(other.out, Catch::Contains("a checkpoint of another scenario or other options"));
  const aoc::test::Run resumed = aoc::test::run_aoc(cmd + cut + " --resume");
  REQUIRE(resumed.status == 0);
  CHECK(!fs::exists(fs::path(cut) / "checkpoint.h5"));
  const ir::WeightStore a = ir::read_weights_h5(whole + "/weights.h5"), b = ir::read_weights_h5(cut + "/weights.h5");
  for (const auto& [name, t] : a) {
    INFO(name);
    CHECK(b.at(name).data == t.data);
  }
}

TEST_CASE("retina train: --from goes on from a trained folder's weights, with its kind and sizes, and refuses others") {
  const fs::path dir = scratch("train-from");
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string d = (dir / "r.h5").string(), first = (dir / "first").string(), on = (dir / "on").string();
  REQUIRE(aoc::test::run_aoc("retina data -o " + d + " --train-frames 600 --test-frames 100 --repeats 2 --cells 2").status == 0);
  REQUIRE(aoc::test::run_aoc("retina train --data " + d + " --model ln --taps 20 --epochs 2 --chunk 100 --quiet -o " + first).status == 0);
  // A step too small to move anything: the result is the folder's weights, not a seeded start (nor
  // its readout reset to the mean rates).
  const aoc::test::Run still = aoc::test::run_aoc("retina train --data " + d + " --from " + first + " --epochs 1 --chunk 100 --lr 1e-30 --quiet -o " + on);
  INFO(still.out);
  REQUIRE(still.status == 0);
  const ir::WeightStore a = ir::read_weights_h5(first + "/weights.h5"), b = ir::read_weights_h5(on + "/weights.h5");
  REQUIRE(a.size() == b.size());
  for (const auto& [name, t] : a) {
    INFO(name);
    CHECK(b.at(name).shape == t.shape);  // --taps 20, not the default 40: the folder's sizes
    CHECK(b.at(name).data == t.data);
  }
  const nlohmann::json rec = nlohmann::json::parse(std::ifstream(on + "/train.json"));
  CHECK(rec["train"]["from"] == first);
  CHECK(rec["model"]["taps"] == 20);
  const aoc::test::Run sized = aoc::test::run_aoc("retina train --data " + d + " --from " + first + " --taps 10 --epochs 1 --chunk 100 --quiet -o " +
                                                  (dir / "x").string());
  CHECK(sized.status != 0);
  CHECK_THAT(sized.out, Catch::Contains("--from " + first + " trains that model on"));
  CHECK(!fs::exists(dir / "x"));
  fs::remove(fs::path(first) / "train.json");
  const aoc::test::Run bare = aoc::test::run_aoc("retina train --data " + d + " --from " + first + " --epochs 1 --chunk 100 --quiet -o " + (dir / "y").string());
  CHECK(bare.status != 0);
  CHECK_THAT(bare.out, Catch::Contains("train.json: missing"));
}
