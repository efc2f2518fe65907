// The AOC-native implicit SSM (models/aoc_ssm.hpp): its tape forward is its exported graph's, its
// gradients are finite differences', its loop compiles native where the machine holds the state in
// analog, and a tiny one learns parity.
#include <catch2/catch.hpp>

#include <filesystem>

#include "compiler/graph_json.hpp"
#include "compiler/interpret.hpp"
#include "compiler/passes.hpp"
#include "compiler/verify.hpp"
#include "models/aoc_ssm.hpp"
#include "models/train.hpp"
#include "runtime/backend/backend.hpp"
#include "sim/files.hpp"
#include "tests/graph_support.hpp"
#include "tests/support.hpp"

using namespace aoc;
using namespace aoc::models;
using aoc::test::max_diff;

namespace {

const std::vector<int> kTokens = {1, 0, 1, 1, 0, 0, 1, 1, 1, 0};  // B = 2, L = 5

ir::Tensor tokens() {
  ir::Tensor t;
  t.shape = {2, 5};
  t.data.assign(kTokens.begin(), kTokens.end());
  return t;
}

AocSsmSpec tiny() {
  AocSsmSpec s;
  s.vocab = 2, s.d_model = 6, s.tol = 1e-12, s.max_iter = 400, s.damping = 0.5;
  return s;
}

ir::Tensor logits_of(const ad::Mat& m) {
  ir::Tensor t;
  t.shape = {2, 5, m.cols()};
  t.data.assign(m.data(), m.data() + m.size());
  return t;
}

}  // namespace

TEST_CASE("aoc-ssm: the tape's fixed point gives the exported graph's logits, simultaneous and token by token") {
  AocSsmModel m(tiny(), 1);
  ad::Tape t;
  const ad::Var u = m.inject(t, m.embed(t, kTokens));
  ad::Var z = t.constant(ad::Mat::Zero(10, 6));
  for (int k = 0; k < 300; ++k) z = t.add(t.scale(z, 0.5), t.scale(m.body(t, z, u, 5), 0.5));
  const ir::Tensor want = logits_of(t.value(m.head(t, z)));
  const ir::Imported g = m.export_graph();
  for (const ir::Mode mode : {ir::Mode::Simultaneous, ir::Mode::Sequential}) {
    ir::InterpretOptions o;
    o.mode = mode;
    CHECK(max_diff(ir::interpret(g.graph, g.weights, {{"tokens", tokens()}}, o).values.at("logits"), want) < 1e-9);
  }
}

TEST_CASE("aoc-ssm: the gradients of its loss are finite differences'") {
  AocSsmModel m(tiny(), 2);
  const std::vector<int> targets = {1, 1, 0, 1, 1, 0, 1, 0, 1, 1};
  const auto loss = [&](ad::Tape& t) {
    const ad::Var u = m.inject(t, m.embed(t, kTokens));
    ad::Var z = m.body(t, t.constant(ad::Mat::Zero(10, 6)), u, 5);
    for (int k = 0; k < 3; ++k) z = t.add(t.scale(z, 0.5), t.scale(m.body(t, z, u, 5), 0.5));
    return t.cross_entropy(m.head(t, z), targets);
  };
  for (ad::Param* p : m.params()) {
    INFO(p->name);
    CHECK(ad::grad_check(loss, {p}, 1e-5) < 1e-5);
  }
}

TEST_CASE("aoc-ssm: its loop is native where the state memory is analog, assisted where the host keeps it") {
  const ir::Imported g = AocSsmModel(tiny(), 3).export_graph();
  for (const bool analog : {true, false}) {
    ir::Program p;
    p.graph = g.graph, p.weights = g.weights;
    p.target = ir::target_of(test::hw48(), "aoc-48", {});
    p.target.analog_state_memory = analog;
    ir::PassOptions po;
    po.quantize = false;
    ir::run_pipeline(p, po);
    const ir::Op& loop = *std::find_if(p.graph.ops.begin(), p.graph.ops.end(), [](const ir::Op& o) { return o.kind == ir::OpKind::FixedPoint; });
    INFO("analog state memory " << analog);
    CHECK(ir::attr_string(loop, "layout") == (analog ? "native" : "assisted"));
    const auto converts = std::count_if(loop.body->ops.begin(), loop.body->ops.end(), [](const ir::Op& o) { return o.kind == ir::OpKind::Convert; });
    CHECK((converts == 0) == analog);
    // and the compiled program computes the model (the digital reference)
    BackendOptions bo;
    bo.mode = ir::Mode::Sequential;
    const auto want = ir::interpret(g.graph, g.weights, {{"tokens", tokens()}}).values.at("logits");
    const ProgramResult r = make_backend("cpu")->run(p, {{"tokens", tokens()}}, bo);
    REQUIRE(r.values.size() == 1);  // the logits, renamed by their ADC
    CHECK(max_diff(r.values.begin()->second, want) < 1e-9);
  }
}

TEST_CASE("aoc-ssm: the injection DAC and the readout ADC quantize in hardware-aware training, with gradients through") {
  AocSsmModel m(tiny(), 4);
  const auto logits = [&](HardwareAware h) {
    m.set_hardware_aware(h);
    ad::Tape t;
    const ad::Var u = m.inject(t, m.embed(t, kTokens));
    return ad::Mat(t.value(m.head(t, m.body(t, u, u, 5))));
  };
  const ad::Mat exact = logits({});
  CHECK((logits({.dac_bits = 3}) - exact).cwiseAbs().maxCoeff() > 1e-6);
  CHECK((logits({.adc_bits = 3}) - exact).cwiseAbs().maxCoeff() > 1e-6);
  m.set_hardware_aware({.slm_bits = 3, .dac_bits = 3, .adc_bits = 3});
  for (ad::Param* p : m.params()) p->zero_grad();
  ad::Tape t;
  const ad::Var u = m.inject(t, m.embed(t, kTokens));
  t.backward(t.cross_entropy(m.head(t, m.body(t, u, u, 5)), kTokens));
  for (ad::Param* p : m.params()) {
    INFO(p->name);
    CHECK(p->grad.cwiseAbs().maxCoeff() > 0);
  }
}

TEST_CASE("aoc-ssm: a tiny one learns parity and keeps it at four times the length", "[slow]") {
  AocSsmSpec s;
  s.vocab = 2, s.d_model = 8, s.tol = 0.01, s.damping = 0.5;
  AocSsmModel m(s, 0);
  TrainOptions o;
  o.task = "parity", o.length = 16, o.batch = 32, o.steps = 300, o.lr = 1e-2, o.unroll = 8;
  o.solve_max = 50, o.solve_tol = 0.01, o.solve_damping = 0.5, o.tau = 0.5, o.phantom = 6;
  train(m, o);
  EvalOptions e;
  e.task = "parity", e.batch = 32, e.length = 16;
  const EvalResult at16 = evaluate(m, e);
  e.length = 64;
  const EvalResult at64 = evaluate(m, e);
  INFO("accuracy " << at16.accuracy << " at 16, " << at64.accuracy << " at 64");
  CHECK(at16.accuracy > 0.99);
  CHECK(at64.accuracy > 0.95);
}

TEST_CASE("aoc-ssm: a model folder's config imports as its graph, and a checkpoint for it is an error") {
  const auto dir = test::temp_dir() / "aoc-ssm-import";
  std::filesystem::create_directories(dir);
  const std::string cfg = (dir / "config.json").string();
  write_file_atomic(cfg, tiny().config().dump());
  const auto r = test::run_aoc("import " + cfg + " -o " + (dir / "g.json").string());
  INFO(r.out);
  CHECK(r.status == 0);
  CHECK_THAT(r.out, Catch::Contains("aoc-ssm-d6"));
  const auto bad = test::run_aoc("import " + cfg + " --weights " + cfg + " -o " + (dir / "h.json").string());
  CHECK(bad.status != 0);
  CHECK_THAT(bad.out, Catch::Contains("config.json: model_type"));
}

TEST_CASE("cli: aoc task writes tokens and labels, and aoc check --labels scores both backends against them") {
  const auto dir = test::temp_dir() / "task-labels";
  std::filesystem::create_directories(dir);
  const auto path = [&](const char* f) { return (dir / f).string(); };
  write_file_atomic(path("config.json"), tiny().config().dump());
  REQUIRE(test::run_aoc("import " + path("config.json") + " -o " + path("g.json")).status == 0);
  REQUIRE(test::run_aoc("compile " + path("g.json") + " --weights " + path("g.h5") + " -o " + path("p.h5")).status == 0);
  const auto task = test::run_aoc("task parity --batch 4 --length 8 --seed 3 --tokens " + path("tok.h5") + " --labels " + path("lab.h5"));
  INFO(task.out);
  REQUIRE(task.status == 0);
  const ir::WeightStore labels = ir::read_weights_h5(path("lab.h5"));
  CHECK(labels.at("labels").shape == std::vector<std::int64_t>{4, 8});
  const auto check = test::run_aoc("check " + path("p.h5") + " --inputs " + path("tok.h5") + " --labels " + path("lab.h5") +
                                   " --sequence sequential --ideal --json");
  INFO(check.out);
  REQUIRE(check.status == 0);
  const auto j = nlohmann::json::parse(check.out);
  const double ref = j["reference_accuracy"];
  CHECK(ref >= 0.0);
  CHECK(ref <= 1.0);
  CHECK(j["accuracy"]["mean"].get<double>() == Approx(ref));  // the ideal lowering decides as the reference
  // the last position's accuracy: each sequence's decision at t = 7 against its label, from the reference's logits
  REQUIRE(test::run_aoc("run " + path("p.h5") + " --inputs " + path("tok.h5") + " --backend cpu --sequence sequential -o " + path("ref.h5")).status == 0);
  const ir::WeightStore out = ir::read_weights_h5(path("ref.h5"));
  const ir::Tensor* logits = nullptr;
  for (const auto& [name, t] : out)
    if (name.rfind("logits", 0) == 0) logits = &t;
  REQUIRE(logits != nullptr);
  const std::vector<std::int64_t> guess = ir::argmax_last(*logits);
  REQUIRE(guess.size() == 32);
  double right = 0;
  for (int b = 0; b < 4; ++b) right += guess[b * 8 + 7] == static_cast<std::int64_t>(labels.at("labels").data[b * 8 + 7]);
  CHECK(j["reference_accuracy_last"].get<double>() == Approx(right / 4));
  CHECK(j["accuracy_last"]["mean"].get<double>() == Approx(right / 4));
  const auto bad = test::run_aoc("check " + path("p.h5") + " --inputs " + path("tok.h5") + " --labels " + path("tok.h5") + " --ideal");
  CHECK(bad.status != 0);
  CHECK_THAT(bad.out, Catch::Contains("tok.h5: /labels: missing"));
}
