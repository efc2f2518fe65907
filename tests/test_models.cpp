// The trainable implicit Mamba2 (models/mamba2.hpp) is the importer's graph: its tape forward gives
// the interpreter's logits, its gradients are finite differences', and a tiny one learns parity.
#include <catch2/catch.hpp>

#include <filesystem>
#include <omp.h>

#include "compiler/graph_json.hpp"
#include "compiler/interpret.hpp"
#include "models/mamba2.hpp"
#include "models/tasks.hpp"
#include "models/train.hpp"
#include "sim/error.hpp"
#include "sim/files.hpp"
#include "sim/json_reader.hpp"
#include "tests/graph_support.hpp"
#include "tests/support.hpp"

using namespace aoc;
using namespace aoc::models;
using aoc::test::max_diff;
using aoc::test::Run;
using aoc::test::run_aoc;
using aoc::test::temp_dir;

namespace {

Mamba2Spec tiny(bool implicit, int vocab = 6) {
  Mamba2Spec s;
  s.vocab = vocab, s.d_model = 8, s.d_state = 4, s.expand = 2, s.headdim = 4, s.implicit = implicit;
  return s;
}

const std::vector<int> kTokens = {3, 1, 4, 1, 5, 0, 2, 5, 3, 1};  // B = 2, L = 5

ir::Tensor tokens_tensor() {
  ir::Tensor t;
  t.shape = {2, 5};
  t.data.assign(kTokens.begin(), kTokens.end());
  return t;
}

ir::Tensor as_tensor(const ad::Mat& m) {
  ir::Tensor t;
  t.shape = {2, 5, m.cols()};
  t.data.assign(m.data(), m.data() + m.size());
  return t;
}

// A fresh folder under the tests' temporary one, holding scenario.json with the given text.
std::filesystem::path scenario_folder(const std::string& name, const std::string& scenario) {
  const auto dir = temp_dir() / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  aoc::write_file_atomic((dir / "scenario.json").string(), scenario);
  return dir;
}

// The exported graph with its FixedPoint set to `steps` undamped steps.
ir::Imported fixed_steps(const Mamba2Model& m, int steps) {
  ir::Imported g = m.export_graph();
  for (ir::Op& o : g.graph.ops)
    if (o.kind == ir::OpKind::FixedPoint)
      o.attrs["rule"] = std::string("fixed"), o.attrs["max_iter"] = std::int64_t{steps}, o.attrs["damping"] = 1.0;
  return g;
}

}  // namespace

TEST_CASE("models: the implicit Mamba2 on the tape computes the interpreter's logits") {
  Mamba2Model m(tiny(true), 3);
  for (int steps : {1, 3}) {
    ad::Tape t;
    const ad::Var u = m.inject(t, m.embed(t, kTokens));
    ad::Var z = t.constant(ad::Mat::Zero(10, 8));
    for (int k = 0; k < steps; ++k) z = m.body(t, z, u, 5);
    const ir::Imported g = fixed_steps(m, steps);
    const auto want = ir::interpret(g.graph, g.weights, {{"tokens", tokens_tensor()}}).values.at("logits");
    INFO(steps << " steps");
    CHECK(max_diff(as_tensor(t.value(m.head(t, z))), want) < 1e-10);
  }
}

TEST_CASE("models: the explicit Mamba2 on the tape computes the interpreter's logits") {
  Mamba2Model m(tiny(false), 4);
  ad::Tape t;
  const ad::Var logits = m.head(t, m.explicit_forward(t, m.embed(t, kTokens), 5));
  const ir::Imported g = m.export_graph();
  CHECK(max_diff(as_tensor(t.value(logits)), ir::interpret(g.graph, g.weights, {{"tokens", tokens_tensor()}}).values.at("logits")) < 1e-10);
}

TEST_CASE("models: Mamba2 of two and three layers on the tape computes the interpreter's logits, and reads its config back") {
  for (const bool implicit : {false, true})
    for (const int layers : {2, 3}) {
      INFO((implicit ? "implicit " : "explicit ") << layers << " layers");
      Mamba2Spec s = tiny(implicit);
      s.n_layer = layers;
      Mamba2Model m(s, 5);
      ad::Tape t;
      ad::Var z;
      if (implicit) {
        const ad::Var u = m.inject(t, m.embed(t, kTokens));
        z = m.body(t, t.constant(ad::Mat::Zero(10, 8)), u, 5);
      } else {
        z = m.explicit_forward(t, m.embed(t, kTokens), 5);
      }
      const ir::Imported g = implicit ? fixed_steps(m, 1) : m.export_graph();
      // every layer has its own weights, and the graph uses all of them
      CHECK(g.weights.count("layer" + std::to_string(layers - 1) + ".in_proj") == 1);
      CHECK(g.weights.count("layer" + std::to_string(layers) + ".in_proj") == 0);
      const auto want = ir::interpret(g.graph, g.weights, {{"tokens", tokens_tensor()}}).values.at("logits");
      CHECK(max_diff(as_tensor(t.value(m.head(t, z))), want) < 1e-10);
      const auto dir = temp_dir() / "model-layers";
      std::filesystem::create_directories(dir);
      const std::string cfg = (dir / "config.json").string();
      aoc::write_file_atomic(cfg, m.spec().config().dump(1));
      CHECK(Mamba2Spec::from_config(cfg).n_layer == layers);
    }
}

TEST_CASE("models: the explicit Mamba2 with tanh transitions on the tape computes the interpreter's logits, and its transitions can be negative") {
  Mamba2Spec s = tiny(false);
  s.transition = "tanh";
  Mamba2Model m(s, 4);
  // a bias of -3 makes every transition tanh(delta A - 3) < 0: the graph must read the trained bias
  for (ad::Param* p : m.params())
    if (p->name == "layer0.A_bias") p->value.setConstant(-3.0);
  ad::Tape t;
  const ad::Var logits = m.head(t, m.explicit_forward(t, m.embed(t, kTokens), 5));
  const ir::Imported g = m.export_graph();
  ir::InterpretOptions io;
  io.trace = true;
  const ir::InterpretResult r = ir::interpret(g.graph, g.weights, {{"tokens", tokens_tensor()}}, io);
  CHECK(max_diff(as_tensor(t.value(logits)), r.values.at("logits")) < 1e-10);
  for (double a : r.values.at("l0.a").data) CHECK((a < 0 && a > -1));
  CHECK(m.spec().config()["backbone_config"]["block_cfg"]["transition"] == "tanh");
}

TEST_CASE("models: the gradients of the implicit model's loss are finite differences'") {
  Mamba2Spec s = tiny(true, 2);
  s.d_model = 4, s.d_state = 2, s.headdim = 4;
  Mamba2Model m(s, 5);
  const std::vector<int> tokens = {1, 0, 1, 1, 0, 1}, targets = {1, 1, 0, 1, 1, 0};
  const auto loss = [&](ad::Tape& t) {
    const ad::Var u = m.inject(t, m.embed(t, tokens));
    ad::Var z = m.body(t, t.constant(ad::Mat::Zero(6, 4)), u, 3);
    z = t.add(t.scale(z, 0.2), t.scale(m.body(t, z, u, 3), 0.8));
    return t.cross_entropy(m.head(t, z), targets);
  };
  // Central differences of a loss of 1e-2 .. 1 through two iterations of the body carry ~1e-5
  // relative noise where the gradients are small (the init's embedding has std 0.01); a wrong
  // backward shows up at O(1).
  for (ad::Param* p : m.params()) {
    INFO(p->name);
    CHECK(ad::grad_check(loss, {p}, 1e-4) < 1e-4);
  }
}

TEST_CASE("models: the gradients through tanh transitions are finite differences'") {
  Mamba2Spec s = tiny(false, 2);
  s.d_model = 4, s.d_state = 2, s.headdim = 4, s.transition = "tanh";
  Mamba2Model m(s, 5);
  const std::vector<int> tokens = {1, 0, 1, 1, 0, 1}, targets = {1, 1, 0, 1, 1, 0};
  const auto loss = [&](ad::Tape& t) { return t.cross_entropy(m.head(t, m.explicit_forward(t, m.embed(t, tokens), 3)), targets); };
  // The embedding's init has std 0.01 and goes straight into an RMSNorm, where a step of 1e-4 is a
  // 1 % change: central differences are off by up to 3e-3 there (with the exp transition too); a
  // wrong backward shows up at O(1).
  for (ad::Param* p : m.params()) {
    INFO(p->name);
    CHECK(ad::grad_check(loss, {p}, 1e-4) < 1e-2);
  }
}

TEST_CASE("models: the exported weights and config give the same model back") {
  for (const std::string transition : {"exp", "tanh"}) {
    INFO(transition);
    Mamba2Spec s = tiny(true);
    s.transition = transition;
    Mamba2Model m(s, 6);
    const auto dir = temp_dir() / "model-roundtrip";
    std::filesystem::create_directories(dir);
    const std::string cfg = (dir / "config.json").string(), w = (dir / "weights.h5").string();
    aoc::write_file_atomic(cfg, m.spec().config().dump(1));
    ir::write_weights_h5(w, m.weights());
    const Mamba2Model back(Mamba2Spec::from_config(cfg), ir::read_weights_h5(w));
    CHECK(back.spec().transition == transition);
    const ir::Imported a = m.export_graph(), b = back.export_graph();
    CHECK(ir::write_graph(a.graph) == ir::write_graph(b.graph));
    for (const auto& [name, t] : a.weights) CHECK(b.weights.at(name).data == t.data);
  }
}

TEST_CASE("models: a tiny implicit model learns parity and keeps it at four times the length", "[slow]") {
  Mamba2Spec s;
  s.vocab = 2, s.d_model = 16, s.d_state = 4, s.expand = 2, s.headdim = 8;
  Mamba2Model m(s, 0);
  TrainOptions o;
  o.task = "parity", o.length = 16, o.batch = 32, o.steps = 250, o.lr = 5e-3;
  double last = 0;
  train(m, o, [&](const TrainStep& st) { last = st.loss; });
  EvalOptions e;
  e.task = "parity", e.batch = 32;
  e.length = 16;
  const EvalResult at16 = evaluate(m, e);
  e.length = 64;
  const EvalResult at64 = evaluate(m, e);
  INFO("final loss " << last << ", accuracy " << at16.accuracy << " at 16, " << at64.accuracy << " at 64");
  CHECK(at16.accuracy > 0.99);
  CHECK(at64.accuracy > 0.95);
  CHECK(at16.mean_iterations > 1);
}

TEST_CASE("models: training gives the same weights bit for bit whatever OpenMP's thread count around it") {
  Mamba2Spec s;
  s.vocab = 2, s.d_model = 16, s.d_state = 4, s.expand = 2, s.headdim = 8;
  TrainOptions o;
  o.task = "parity", o.length = 8, o.batch = 64, o.steps = 4, o.bounded_fraction = 0.5;
  const int saved = omp_get_max_threads();
  std::vector<ir::WeightStore> got;
  for (int threads : {1, 3}) {
    omp_set_num_threads(threads);
    Mamba2Model m(s, 0);
    train(m, o);
    got.push_back(m.weights());
  }
  omp_set_num_threads(saved);
  for (const auto& [name, t] : got[0]) {
    INFO(name);
    CHECK(got[1].at(name).data == t.data);
  }
}

TEST_CASE("models: average_last ends the run with the mean of its last steps' weights") {
  Mamba2Spec s;
  s.vocab = 2, s.d_model = 8, s.d_state = 2, s.expand = 2, s.headdim = 8;
  TrainOptions o;
  o.task = "parity", o.length = 8, o.batch = 8, o.steps = 6, o.bounded_fraction = 0.5;
  Mamba2Model plain(s, 0);
  std::vector<std::vector<ad::Mat>> after;  // each step's weights, after its update
  train(plain, o, [&](const TrainStep&) {
    std::vector<ad::Mat> w;
    for (ad::Param* p : plain.params()) w.push_back(p->value);
    after.push_back(w);
  });
  REQUIRE(after.size() == 6);
  o.average_last = 3;
  Mamba2Model averaged(s, 0);
  train(averaged, o);
  const std::vector<ad::Param*> ps = averaged.params();
  double moved = 0;
  for (std::size_t i = 0; i < ps.size(); ++i) {
    INFO(ps[i]->name);
    const ad::Mat mean = (after[3][i] + after[4][i] + after[5][i]) / 3.0;
    CHECK((ps[i]->value - mean).cwiseAbs().maxCoeff() < 1e-12);
    moved = std::max(moved, (ps[i]->value - after[5][i]).cwiseAbs().maxCoeff());
  }
  CHECK(moved > 1e-6);  // not the last step's weights
  o.average_last = 7;
  Mamba2Model too_many(s, 0);
  CHECK_THROWS_WITH(train(too_many, o), Catch::Contains("average_last 7 is not between 0 and the 6 steps"));
}

TEST_CASE("models: position scores count the last position, whole sequences and the first error apart from the mean") {
  // 3 sequences of 4: all right; wrong at positions 2 and 3; wrong at the last position only
  const std::vector<int> targets{0, 1, 1, 0, 1, 1, 0, 0, 0, 0, 0, 1};
  const std::vector<std::int64_t> guesses{0, 1, 1, 0, 1, 1, 1, 1, 0, 0, 0, 0};
  const PositionScores s = score_positions(guesses, targets, 3, 4);
  CHECK(s.accuracy == Approx(9.0 / 12));
  CHECK(s.last == Approx(1.0 / 3));
  CHECK(s.last10 == Approx(9.0 / 12));  // L < 10: every position
  CHECK(s.whole == Approx(1.0 / 3));
  CHECK(s.first_error == Approx((2.0 + 3.0) / 2));
  const PositionScores all = score_positions(std::vector<std::int64_t>(targets.begin(), targets.end()), targets, 3, 4);
  CHECK(all.whole == 1.0);
  CHECK(all.first_error == -1.0);
  CHECK_THROWS_WITH(score_positions(guesses, targets, 2, 4), Catch::Contains("12 guesses and 12 labels for 2 sequences of 4"));
}

TEST_CASE("cli: aoc train writes a model folder the importer reads, and names a bad scenario field") {
  const auto dir = temp_dir() / "train-cli";
  std::filesystem::create_directories(dir);
  const std::string scen = (dir / "tiny.json").string();
  aoc::write_file_atomic(scen, aoc::test::kTinyTrainScenario);
  const std::string out = (dir / "model").string();
  const Run r = run_aoc("train " + scen + " -o " + out);
  INFO(r.out);
  REQUIRE(r.status == 0);
  CHECK_THAT(r.out, Catch::Contains("eval sequential L    8: last position "));
  CHECK_THAT(r.out, Catch::Contains(", whole sequences "));
  CHECK(std::filesystem::exists(dir / "model" / "weights.h5"));
  CHECK(std::filesystem::exists(dir / "model" / "train.json"));
  const Run imp = run_aoc("import " + out + "/config.json --shapes-only -o " + (dir / "g.json").string());
  CHECK(imp.status == 0);
  aoc::write_file_atomic(scen, R"({"format": "aoc-train", "version": 1, "name": "tiny", "task": "parity",
    "model": {"implicit": true, "d_modle": 8}, "train": {}})");
  const Run bad = run_aoc("train " + scen + " -o " + out);
  CHECK(bad.status != 0);
  CHECK_THAT(bad.out, Catch::Contains("tiny.json: model.d_modle: unknown key"));
}

TEST_CASE("cli: aoc train --from without --hw goes on training on the reference, at a new length") {
  const auto dir = temp_dir() / "train-continue";
  std::filesystem::create_directories(dir);
  const std::string scen = (dir / "tiny.json").string();
  aoc::write_file_atomic(scen, aoc::test::kTinyTrainScenario);
  const std::string first = (dir / "first").string(), more = (dir / "more").string();
  REQUIRE(run_aoc("train " + scen + " -o " + first + " --quiet").status == 0);
  const Run bad = run_aoc("train --from " + first + " --steps 3 --train-set solve_maks=3 -o " + more);
  CHECK(bad.status != 0);
  CHECK_THAT(bad.out, Catch::Contains("train.solve_maks: unknown key"));
  const Run r = run_aoc("train --from " + first + " --steps 3 --length 12 --lr 0.001 --train-set solve_max=5 -o " + more);
  INFO(r.out);
  REQUIRE(r.status == 0);
  CHECK_THAT(r.out, Catch::Contains("L 12, batch"));
  CHECK_THAT(r.out, !Catch::Contains("for aoc"));
  const auto log = aoc::jsonr::parse_file(more + "/train.json");
  const auto& t = log.at("scenario").at("train");
  CHECK(t.at("length").get<int>() == 12);
  CHECK(t.at("steps").get<int>() == 3);
  CHECK(t.at("lr").get<double>() == 0.001);
  CHECK(t.at("solve_max").get<int>() == 5);
  CHECK(log.at("from").at("train_set").at(0) == "solve_max=5");
  CHECK_THAT(log.at("scenario").at("description").get<std::string>(), Catch::Contains("trained further from " + first));
  CHECK(!log.contains("machine"));
  CHECK(log.at("from").at("folder") == first);
  CHECK(log.at("from").at("length") == 12);
  // the weights moved from the first model's
  const ir::WeightStore a = ir::read_weights_h5(first + "/weights.h5"), b = ir::read_weights_h5(more + "/weights.h5");
  CHECK(a.at("layer0.in_proj").data != b.at("layer0.in_proj").data);
  // a model continued again keeps its name's one suffix
  const std::string name = log.at("scenario").at("name").get<std::string>();
  CHECK_THAT(name, Catch::EndsWith("-continued"));
  REQUIRE(run_aoc("train --from " + more + " --steps 1 --quiet -o " + more + "-again").status == 0);
  CHECK(aoc::jsonr::parse_file(more + "-again/train.json").at("scenario").at("name") == name);
}

TEST_CASE("cli: aoc train stopped and resumed from its checkpoint gives the weights of an unbroken run, bit for bit") {
  // 6 steps, 2 in the unrolled phase: the stop at step 3 falls in the solve phase (and, averaging
  // the last 4, inside the average)
  const std::string average = GENERATE(as<std::string>{}, "", ", \"average_last\": 4");
  INFO("train" << average);
  const auto dir = scenario_folder("train-resume", R"({"format": "aoc-train", "version": 1, "name": "tiny", "task": "parity",
    "model": {"implicit": true, "d_model": 8, "d_state": 2, "expand": 2, "headdim": 8},
    "train": {"length": 8, "batch": 4, "steps": 6, "bounded_fraction": 0.34)" + average + R"(}, "eval": {"lengths": [8], "batch": 4}})");
  const std::string scen = (dir / "scenario.json").string();
  const std::string whole = (dir / "whole").string(), parts = (dir / "parts").string();
  REQUIRE(run_aoc("train " + scen + " -o " + whole + " --quiet").status == 0);
  const Run stop = run_aoc("train " + scen + " -o " + parts + " --stop-after 3");
  INFO(stop.out);
  REQUIRE(stop.status == 0);
  CHECK_THAT(stop.out, Catch::Contains("stopped after step 3 of 6"));
  CHECK(std::filesystem::exists(dir / "parts" / "checkpoint.h5"));
  CHECK(!std::filesystem::exists(dir / "parts" / "weights.h5"));
  const Run again = run_aoc("train " + scen + " -o " + parts);
  CHECK(again.status != 0);
  CHECK_THAT(again.out, Catch::Contains("checkpoint.h5: the checkpoint of an unfinished run; --resume continues it"));
  const Run resumed = run_aoc("train " + scen + " -o " + parts + " --resume");
  INFO(resumed.out);
  REQUIRE(resumed.status == 0);
  CHECK_THAT(resumed.out, Catch::Contains("resumed from") && Catch::Contains("at step 3 of 6"));
  CHECK(!std::filesystem::exists(dir / "parts" / "checkpoint.h5"));
  const ir::WeightStore a = ir::read_weights_h5((dir / "whole" / "weights.h5").string()),
                        b = ir::read_weights_h5((dir / "parts" / "weights.h5").string());
  REQUIRE(a.size() == b.size());
  for (const auto& [name, t] : a) {
    INFO(name);
    CHECK(b.at(name).data == t.data);
  }
  const auto curve = [](const std::filesystem::path& p) { return aoc::jsonr::parse_file(p.string()).at("loss_curve"); };
  CHECK(curve(dir / "whole" / "train.json") == curve(dir / "parts" / "train.json"));
}

TEST_CASE("cli: aoc train checkpoints a run whose loss curve is longer than an HDF5 attribute holds, and resumes it") {
  // 3000 steps: the curve's JSON is over 64 KiB, the most an attribute holds (it is a dataset)
  const auto dir = scenario_folder("train-long", R"({"format": "aoc-train", "version": 1, "name": "long", "task": "parity",
    "model": {"implicit": false, "d_model": 8, "d_state": 2, "expand": 2, "headdim": 8},
    "train": {"length": 4, "batch": 2, "steps": 3000}, "eval": {"lengths": [4], "batch": 2}})");
  const std::string scen = (dir / "scenario.json").string();
  const std::string out = (dir / "m").string();
  const Run stop = run_aoc("train " + scen + " -o " + out + " --stop-after 2999 --quiet");
  INFO(stop.out);
  REQUIRE(stop.status == 0);
  const Run resumed = run_aoc("train " + scen + " -o " + out + " --resume --quiet");
  INFO(resumed.out);
  REQUIRE(resumed.status == 0);
  const auto curve = aoc::jsonr::parse_file((dir / "m" / "train.json").string()).at("loss_curve");
  REQUIRE(curve.size() == 3000);
  CHECK(curve[2998][0] == 2998);
  CHECK(curve[2999][0] == 2999);
}

TEST_CASE("cli: aoc train refuses to resume another scenario's checkpoint or a folder without one") {
  const auto dir = temp_dir() / "train-resume-bad";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string scen = (dir / "tiny.json").string(), out = (dir / "m").string();
  const std::string body = R"("model": {"implicit": true, "d_model": 8, "d_state": 2, "expand": 2, "headdim": 8},
    "eval": {"lengths": [8], "batch": 4}, "train": {"length": 8, "batch": 4, "steps": )";
  aoc::write_file_atomic(scen, R"({"format": "aoc-train", "version": 1, "name": "tiny", "task": "parity", )" + body + "4}}");
  const Run none = run_aoc("train " + scen + " -o " + out + " --resume");
  CHECK(none.status != 0);
  CHECK_THAT(none.out, Catch::Contains("no checkpoint to continue"));
  REQUIRE(run_aoc("train " + scen + " -o " + out + " --stop-after 2").status == 0);
  aoc::write_file_atomic(scen, R"({"format": "aoc-train", "version": 1, "name": "tiny", "task": "parity", )" + body + "5}}");
  const Run other = run_aoc("train " + scen + " -o " + out + " --resume");
  CHECK(other.status != 0);
  CHECK_THAT(other.out, Catch::Contains("checkpoint.h5: a checkpoint of another scenario"));
}

TEST_CASE("models: hardware-aware training sees quantized weights and fresh noise, and passes the gradient through") {
  Mamba2Model m(tiny(false), 8);
  const auto logits = [&](HardwareAware h) {
    m.set_hardware_aware(h);
    ad::Tape t;
    const ad::Var y = m.head(t, m.explicit_forward(t, m.embed(t, kTokens), 5));
    return ad::Mat(t.value(y));
  };
  const ad::Mat exact = logits({});
  const ad::Mat q = logits({.slm_bits = 3}), q2 = logits({.slm_bits = 3});
  CHECK((q - exact).cwiseAbs().maxCoeff() > 1e-6);  // 3-bit weights change the result
  CHECK(q == q2);
  const ad::Mat n1 = logits({.output_noise = 0.1, .seed = 1}), n2 = logits({.output_noise = 0.1, .seed = 1});
  CHECK(n1 != n2);                                   // fresh noise per draw
  CHECK((n1 - exact).cwiseAbs().maxCoeff() < 1.0);
  const ad::Mat c = logits({.dac_bits = 4, .adc_bits = 4});
  CHECK((c - exact).cwiseAbs().maxCoeff() > 1e-6);  // the converters of the crossings too
  m.set_hardware_aware({.slm_bits = 3, .dac_bits = 4, .adc_bits = 4});
  for (ad::Param* p : m.params()) p->zero_grad();
  ad::Tape t;
  t.backward(t.cross_entropy(m.head(t, m.explicit_forward(t, m.embed(t, kTokens), 5)), kTokens));
  double g = 0;
  for (ad::Param* p : m.params())
    if (p->name == "layer0.in_proj") g = p->grad.cwiseAbs().maxCoeff();
  CHECK(g > 0);  // the straight-through estimator reaches the float weights
}
