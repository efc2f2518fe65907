// The retina models (models/retina_model.hpp): the tape's forward pass is what the exported graph
// computes (the interpreter), the exported weights read back, training lowers the held-out Poisson
// NLL and is deterministic, and the CNN beats the LN baseline where the cells have subunits.
#include <catch2/catch.hpp>

#include <array>
#include <cmath>

#include "compiler/graph_json.hpp"
#include "compiler/interpret.hpp"
#include "models/retina_model.hpp"
#include "runtime/train/train_checkpoint.hpp"
#include "sim/error.hpp"
#include "tests/graph_support.hpp"

namespace {

using namespace aoc::retina;
namespace ir = aoc::ir;

// Small frames and few cells: every test below runs in well under a second or two.
SynthConfig tiny(int train_frames = 3000) {
  SynthConfig c;
  c.height = c.width = 20, c.cells = 3;
  c.train_frames = train_frames, c.test_frames = 200, c.repeats = 3;
  c.images = 2, c.image_size = 64, c.rf_region = 6;
  c.seed = 11;
  return c;
}

const Dataset& data() {
  static const Dataset d = synthesize(tiny());
  return d;
}

// IB-GP's decoder lands on sides of 2 mod 4: 22 x 22 frames.
const Dataset& data22() {
  static const Dataset d = [] {
    SynthConfig c = tiny(2000);
    c.height = c.width = 22;
    return synthesize(c);
  }();
  return d;
}

ModelSpec ibgp_spec() {
  ModelSpec s;
  s.kind = "ibgp", s.height = s.width = 22, s.cells = 3, s.taps = 6;
  s.conv1 = 2, s.kernel1 = 7, s.conv2 = 2, s.kernel2 = 5;
  s.latent = 3, s.enc1 = 4, s.enc2 = 4, s.enc3 = 2, s.dec0 = 2, s.dec1 = 3, s.dec2 = 3;
  return s;
}

ModelSpec spec(const std::string& kind) {
  ModelSpec s;
  s.kind = kind, s.height = s.width = 20, s.cells = 3, s.taps = 10;
  s.conv1 = 2, s.kernel1 = 7, s.conv2 = 2, s.kernel2 = 5;
  return s;
}

// The model's graph interpreted on the split's movie ([1, T, H, W, 1]): [cells, T].
Eigen::MatrixXd interpreted(const Model& m, const Split& s, ir::InterpretResult* all = nullptr) {
  const ir::Graph g = ir::parse_graph(m.graph_json(), "retina");
  ir::Tensor x;
  x.shape = {1, s.frames, s.height, s.width, 1};
  x.data.assign(s.stimulus.begin(), s.stimulus.end());
  ir::InterpretResult out = ir::interpret(g, m.weights(), {{"stimulus", x}});
  if (all) *all = out;
  const ir::Tensor& r = out.values.at("rate");
  REQUIRE(r.shape == std::vector<std::int64_t>{1, s.frames, s.cells()});
  return Eigen::Map<const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(r.data.data(), s.frames, s.cells()).transpose();
}

}  // namespace

TEST_CASE("retina model: the LN model's tape forward is what its graph computes") {
  Model m(spec("ln"), 3);
  const Split& s = data().test;
  CHECK((m.predict(s) - interpreted(m, s)).cwiseAbs().maxCoeff() < 1e-12);
}

TEST_CASE("retina model: the CNN's tape forward is what its graph computes") {
  Model m(spec("cnn"), 3);
  const Split& s = data().test;
  const Eigen::MatrixXd a = m.predict(s);
  CHECK(a.minCoeff() > 0);  // softplus rates
  CHECK((a - interpreted(m, s)).cwiseAbs().maxCoeff() < 1e-12);
}

TEST_CASE("retina model: exported weights rebuild the same model") {
  Model m(spec("cnn"), 4);
  Model back(spec("cnn"), m.weights());
  CHECK(back.predict(data().test) == m.predict(data().test));
}

TEST_CASE("retina model: a weight of the wrong shape is refused by name") {
  Model m(spec("ln"), 4);
  ir::WeightStore w = m.weights();
  w.at("temporal").shape = {3, 9};
  REQUIRE_THROWS_AS(Model(spec("ln"), w), aoc::Error);
  try {
    Model(spec("ln"), w);
  } catch (const aoc::Error& e) {
    CHECK(std::string(e.what()).find("'temporal'") != std::string::npos);
  }
}

TEST_CASE("retina model: kernels that do not fit the frame are refused") {
  ModelSpec s = spec("cnn");
  s.kernel1 = 15, s.kernel2 = 7;
  CHECK_THROWS_AS(s.check(), aoc::Error);
}

TEST_CASE("retina model: the spec reads back from its JSON") {
  const ModelSpec s = spec("cnn");
  const ModelSpec back = ModelSpec::from_json(s.json(), "train.json");
  CHECK(back.json() == s.json());
  CHECK(ModelSpec::from_json(ibgp_spec().json(), "train.json").json() == ibgp_spec().json());
  nlohmann::json bad = s.json();
  bad["kind"] = "transformer";
  CHECK_THROWS_AS(ModelSpec::from_json(bad, "train.json"), aoc::Error);
}

TEST_CASE("retina model: training lowers the held-out Poisson NLL and keeps the best epoch", "[slow]") {
  Model m(spec("ln"), 1);
  TrainOptions o;
  o.epochs = 12, o.chunk = 60, o.batch = 2, o.lr = 1e-2;
  const TrainResult r = train(m, data(), o);
  REQUIRE(r.epochs.size() == 12);
  double best = r.epochs[0].val_nll;
  for (const EpochRecord& e : r.epochs) best = std::min(best, e.val_nll);
  CHECK(r.epochs[static_cast<std::size_t>(r.best_epoch - 1)].val_nll == best);
  CHECK(best < r.epochs[0].val_nll);
  CHECK(r.epochs.back().val_cc > 0.2);
}

TEST_CASE("retina model: training is deterministic for a seed", "[slow]") {
  TrainOptions o;
  o.epochs = 2, o.chunk = 60, o.batch = 4;
  Model a(spec("cnn"), 1), b(spec("cnn"), 1);
  train(a, data(), o);
  train(b, data(), o);
  CHECK(a.predict(data().test) == b.predict(data().test));
}

TEST_CASE("retina model: training reports each step of each epoch to its progress callback, in order") {
  Model m(spec("ln"), 1);
  TrainOptions o;
  o.epochs = 2, o.chunk = 60, o.batch = 2;
  std::vector<std::array<int, 3>> seen;
  o.progress = [&](int epoch, int done, int steps) { seen.push_back({epoch, done, steps}); };
  train(m, data(), o);
  REQUIRE(!seen.empty());
  const int steps = seen[0][2];
  REQUIRE(seen.size() == static_cast<std::size_t>(2 * steps));
  for (std::size_t i = 0; i < seen.size(); ++i)
    CHECK(seen[i] == std::array<int, 3>{static_cast<int>(i) / steps + 1, static_cast<int>(i) % steps + 1, steps});
}

TEST_CASE("retina model: training refuses data of another frame size") {
  ModelSpec s = spec("ln");
  s.height = 24;
  Model m(s, 1);
  CHECK_THROWS_AS(train(m, data(), TrainOptions{}), aoc::Error);
}

TEST_CASE("retina model: the implicit model's fixed point is what its graph finds frame by frame") {
  ModelSpec s = spec("implicit");
  s.state = 6, s.tol = 1e-9, s.max_iter = 500;
  Model m(s, 3);
  const Split& d = data().test;
  const ir::Graph g = ir::parse_graph(m.graph_json(), "retina");
  ir::Tensor x;
  x.shape = {1, d.frames, d.height, d.width, 1};
  x.data.assign(d.stimulus.begin(), d.stimulus.end());
  ir::InterpretOptions io;
  io.mode = ir::Mode::Sequential;
  const ir::InterpretResult out = ir::interpret(g, m.weights(), {{"stimulus", x}}, io);
  const ir::Tensor& r = out.values.at("rate");
  const Eigen::MatrixXd a = m.predict(d);
  double worst = 0;
  for (int t = 0; t < d.frames; ++t)
    for (int c = 0; c < d.cells(); ++c) worst = std::max(worst, std::abs(a(c, t) - r.data[static_cast<std::size_t>(t) * d.cells() + c]));
  CHECK(worst < 1e-7);
}

TEST_CASE("retina model: training the implicit model lowers the held-out NLL", "[slow]") {
  ModelSpec s = spec("implicit");
  s.state = 6, s.unroll = 8;
  Model m(s, 2);
  TrainOptions o;
  o.epochs = 3, o.chunk = 60, o.batch = 2, o.lr = 1e-2;
  const TrainResult r = train(m, data(), o);
  CHECK(r.epochs[static_cast<std::size_t>(r.best_epoch - 1)].val_nll < r.epochs[0].val_nll);
}

TEST_CASE("retina model: training keeps the implicit loop a contraction") {
  ModelSpec s = spec("implicit");
  s.state = 6, s.unroll = 4;
  Model m(s, 2);
  TrainOptions o;
  o.epochs = 2, o.chunk = 60, o.batch = 2, o.lr = 0.2;  // a rate that would blow the loop up
  train(m, data(), o);
  const aoc::ir::WeightStore w = m.weights();
  const auto norm = [&](const char* name) {
    const auto& t = w.at(name);
    return Eigen::Map<const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(t.data.data(), t.shape[0], t.shape[1])
        .jacobiSvd()
        .singularValues()(0);
  };
  CHECK(norm("loop.W") + norm("loop.V") <= Model::kLoopBound + 1e-12);
}

TEST_CASE("retina model: the IB-GP's tape forward is what its graph computes, posterior and synthesised movie included") {
  Model m(ibgp_spec(), 5);
  const Split& s = data22().test;
  ir::InterpretResult out;
  const Eigen::MatrixXd rate = interpreted(m, s, &out);
  CHECK((m.predict(s) - rate).cwiseAbs().maxCoeff() < 1e-12);
  aoc::ad::Tape t(false);
  aoc::ad::Mat x(s.frames, 22 * 22);
  for (int f = 0; f < s.frames; ++f)
    for (int i = 0; i < 22 * 22; ++i) x(f, i) = s.stimulus[static_cast<std::size_t>(f) * 22 * 22 + i];
  const Model::Bottleneck b = m.bottleneck(t, t.constant(x), s.frames);
  const auto same = [&](aoc::ad::Var v, const char* name) {
    const ir::Tensor& g = out.values.at(name);
    INFO(name);
    REQUIRE(static_cast<Eigen::Index>(g.data.size()) == t.value(v).size());
    double worst = 0;
    for (Eigen::Index k = 0; k < t.value(v).size(); ++k) worst = std::max(worst, std::abs(t.value(v).data()[k] - g.data[static_cast<std::size_t>(k)]));
    CHECK(worst < 1e-12);
  };
  same(b.mean, "latent");
  same(b.logvar, "latent_logvar");
  same(b.synth, "synth");
  CHECK(out.values.at("synth").shape == std::vector<std::int64_t>{1, s.frames, 22, 22, 1});
}

TEST_CASE("retina model: IB-GP frames the decoder cannot land on are refused") {
  ModelSpec s = ibgp_spec();
  s.height = s.width = 20;
  s.kernel1 = 5;
  CHECK_THROWS_AS(s.check(), aoc::Error);
  s.height = s.width = 26;
  CHECK_NOTHROW(s.check());
}

TEST_CASE("retina model: the IB-GP's warm-up is its three temporal filters'") {
  CHECK(ibgp_spec().warmup() == 15);
  CHECK(spec("cnn").warmup() == 9);
  ModelSpec big = ibgp_spec();
  big.taps = 40;
  CHECK(big.skip() == 117);
  CHECK(spec("cnn").skip() == kDefaultSkip);
}

TEST_CASE("retina model: training the IB-GP from a trained CNN lowers the held-out NLL deterministically", "[slow]") {
  ModelSpec c = ibgp_spec();
  c.kind = "cnn";
  Model cnn(c, 1);
  TrainOptions oc;
  oc.epochs = 12, oc.chunk = 60, oc.batch = 2, oc.lr = 1e-2;
  train(cnn, data22(), oc);
  TrainOptions o;
  o.epochs = 4, o.chunk = 60, o.batch = 2, o.lr = 2e-3;
  Model a(ibgp_spec(), 2), b(ibgp_spec(), 2);
  a.take_forward(cnn.weights()), b.take_forward(cnn.weights());
  const TrainResult r = train(a, data22(), o);
  train(b, data22(), o);
  CHECK(r.epochs[static_cast<std::size_t>(r.best_epoch - 1)].val_nll < r.epochs[0].val_nll);
  CHECK(a.predict(data22().test) == b.predict(data22().test));
}

TEST_CASE("retina model: the IB-GP takes a trained CNN's weights as its forward model") {
  ModelSpec c = ibgp_spec();
  c.kind = "cnn";
  const Model cnn(c, 7);
  Model m(ibgp_spec(), 5);
  m.take_forward(cnn.weights());
  CHECK(m.forward_taken());
  const ir::WeightStore w = m.weights();
  for (const char* name : {"conv1", "temporal", "conv2", "readout", "readout_bias"}) CHECK(w.at(name).data == cnn.weights().at(name).data);
  ir::WeightStore wrong = cnn.weights();
  wrong.at("readout").shape = {1, 1};
  CHECK_THROWS_AS(m.take_forward(wrong), aoc::Error);
}

TEST_CASE("retina model: an IB-GP run stopped after an epoch and resumed from its checkpoint ends with the unbroken run's weights") {
  ModelSpec c = ibgp_spec();
  c.kind = "cnn";
  const Model cnn(c, 3);
  TrainOptions o;
  o.epochs = 3, o.chunk = 40, o.batch = 4, o.lr = 2e-3;
  Model whole(ibgp_spec(), 2);
  whole.take_forward(cnn.weights());
  const TrainResult want = train(whole, data22(), o);

  const std::string path = (aoc::test::temp_dir() / "retina-checkpoint.h5").string();
  struct Stop {};
  {
    Model first(ibgp_spec(), 2);
    first.take_forward(cnn.weights());
    TrainState st;
    CHECK_THROWS_AS(train(first, data22(), o, [&](const EpochRecord&) {
      aoc::write_retina_checkpoint(path, first, st, "hash");
      throw Stop{};
    }, &st), Stop);
    CHECK(st.epoch == 1);
  }
  Model resumed(ibgp_spec(), 2);
  resumed.take_forward(cnn.weights());
  TrainState st;
  CHECK_THROWS_WITH(aoc::read_retina_checkpoint(path, resumed, st, "other"), Catch::Contains("a checkpoint of another scenario or other options"));
  aoc::read_retina_checkpoint(path, resumed, st, "hash");
  REQUIRE(st.epoch == 1);
  const TrainResult got = train(resumed, data22(), o, {}, &st);
  REQUIRE(got.epochs.size() == 3);
  CHECK(got.best_epoch == want.best_epoch);
  for (std::size_t e = 0; e < 3; ++e) CHECK(got.epochs[e].val_nll == want.epochs[e].val_nll);
  const ir::WeightStore a = whole.weights(), b = resumed.weights();
  for (const auto& [name, t] : a) {
    INFO(name);
    CHECK(b.at(name).data == t.data);
  }
}
