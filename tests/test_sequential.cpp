// The interpreter's sequential mode (docs/ir.md, "Sequential mode"): token by token it computes what
// simultaneous mode computes on the whole sequence, and on contractive implicit models it finds the
// same fixed points, one solve per token.
#include <catch2/catch.hpp>

#include "tests/graph_support.hpp"
#include "tests/support.hpp"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <unistd.h>

#include "compiler/import_config.hpp"
#include "compiler/interpret.hpp"
#include "compiler/verify.hpp"
#include "sim/error.hpp"

using namespace aoc::ir;
using namespace aoc::test;
using aoc::test::Run;
using aoc::test::run_aoc;

namespace {

InterpretResult run_mode(const Graph& g, const WeightStore& w, const std::map<std::string, Tensor>& in, Mode mode, int threads = 1) {
  InterpretOptions o;
  o.mode = mode;
  o.threads = threads;
  return interpret(g, w, in, o);
}

std::string error_of(const Graph& g, const WeightStore& w, const std::map<std::string, Tensor>& in) {
  try {
    run_mode(g, w, in, Mode::Sequential);
  } catch (const aoc::Error& e) {
    return e.what();
  }
  return "(no error)";
}

const Tensor kTokens = tensor({2, 6}, {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8});

// An imported model with the weights that read the iterate scaled by `factor`. At the importer's
// random init the body z -> RMSNorm_f(z + block(z; u)) is not a contraction for every input (seed 3
// of the Mamba2 has two fixed points for the first row of kTokens, see below). Reading z more weakly
// makes the iteration settle on one fixed point, which both modes must then find; the factors were
// found by trying (Mamba2 in_proj x0.25: the modes agree to 1e-12 on seeds 3 to 5; Llama x0.5: on
// seeds 3 to 7).
Imported weaker(Imported m, const std::vector<std::string>& names, double factor) {
  for (const auto& n : names)
    for (double& x : m.weights.at(n).data) x *= factor;
  return m;
}

// The largest |f(z) - z| of the model's FixedPoint body, run simultaneously on the iterate z and the
// captures of a traced run.
double body_residual(const Imported& m, const InterpretResult& traced) {
  const Op* fp = nullptr;
  for (const Op& op : m.graph.ops)
    if (op.kind == OpKind::FixedPoint) fp = &op;
  REQUIRE(fp);
  Graph body;
  body.ops = fp->body->ops;
  body.outputs = fp->body->results;
  std::map<std::string, Tensor> in;
  for (size_t i = 0; i < fp->body->args.size(); ++i) {
    const Tensor& t = traced.values.at(i == 0 ? fp->outputs[0] : fp->inputs[i - 1]);
    in[fp->body->args[i]] = t;
    body.inputs.push_back(decl(fp->body->args[i], t.shape));
  }
  return max_diff(interpret(body, m.weights, in).values.at(body.outputs[0]), in.at(fp->body->args[0]));
}

// Both modes on an imported model: the same logits within 1e-9, every solve converged, and in
// sequential mode one solve per token (B*L stats).
void same_fixed_points(const Imported& m) {
  const auto sim = run_mode(m.graph, m.weights, {{"tokens", kTokens}}, Mode::Simultaneous);
  const auto seq = run_mode(m.graph, m.weights, {{"tokens", kTokens}}, Mode::Sequential);
  CHECK(max_diff(sim.values.at("logits"), seq.values.at("logits")) < 1e-9);
  REQUIRE(sim.fixed_points.size() == 1);
  REQUIRE(seq.fixed_points.size() == 1);
  CHECK(sim.fixed_points[0].iterations.size() == 2);
  REQUIRE(seq.fixed_points[0].iterations.size() == 12);
  for (size_t i = 0; i < 2; ++i) CHECK(sim.fixed_points[0].converged[i] == 1);
  for (size_t i = 0; i < 12; ++i) {
    INFO("sample " << i / 6 << " token " << i % 6);
    CHECK(seq.fixed_points[0].converged[i] == 1);
    CHECK(seq.fixed_points[0].iterations[i] > 1);
  }
}

}  // namespace

TEST_CASE("sequential: without a FixedPoint, conv, scan from h0 and RoPE attention match simultaneous mode") {
  // x [B, L, 4] plus the embedding of i64 ids [B, L] plus a rank-1 input passed whole; then a causal
  // conv (K 3), a scan from h0 with input-dependent decay, and 2-head attention with RoPE.
  Graph g;
  g.name = "stateful";
  g.inputs = {decl("x", {2, 5, 4}, {"B", "L"}), decl("ids", {2, 5}, {"B", "L"}, DType::I64), decl("shift", {4})};
  g.weights = {decl("table", {7, 4}), decl("wc", {4, 3}), decl("bc", {4}), decl("Wa", {4, 4}), decl("h0", {2, 4}),
               decl("Wq", {4, 4}), decl("Wk", {4, 4}), decl("Wv", {4, 4})};
  g.ops = {make_op(OpKind::Embedding, {"ids", "table"}, {"e"}),
           make_op(OpKind::Add, {"x", "e"}, {"xe"}),
           make_op(OpKind::Add, {"xe", "shift"}, {"xs"}),
           make_op(OpKind::Conv1dCausal, {"xs", "wc", "bc"}, {"c"}, {}, "conv"),
           make_op(OpKind::Linear, {"xs", "Wa"}, {"al"}),
           make_op(OpKind::Sigmoid, {"al"}, {"a"}),
           make_op(OpKind::Scan, {"a", "c", "h0"}, {"h"}, {}, "scan"),
           make_op(OpKind::Linear, {"h", "Wq"}, {"q"}),
           make_op(OpKind::Linear, {"h", "Wk"}, {"k"}),
           make_op(OpKind::Linear, {"h", "Wv"}, {"v"}),
           make_op(OpKind::CausalAttention, {"q", "k", "v"}, {"y"}, {{"heads", std::int64_t{2}}, {"rope_theta", 10.0}}, "attn")};
  g.outputs = {"y", "h"};
  const WeightStore w{{"table", wave({7, 4}, 1)}, {"wc", wave({4, 3}, 2)}, {"bc", wave({4}, 3)}, {"Wa", wave({4, 4}, 4)},
                      {"h0", wave({2, 4}, 5, 3)}, {"Wq", wave({4, 4}, 6)}, {"Wk", wave({4, 4}, 7)}, {"Wv", wave({4, 4}, 8)}};
  const std::map<std::string, Tensor> in{
      {"x", wave({2, 5, 4}, 9)}, {"ids", tensor({2, 5}, {0, 6, 2, 2, 5, 1, 3, 4, 0, 6})}, {"shift", wave({4}, 10)}};
  const auto sim = run_mode(g, w, in, Mode::Simultaneous);
  const auto seq = run_mode(g, w, in, Mode::Sequential);
  CHECK(seq.values.at("y").shape == std::vector<std::int64_t>{2, 5, 4});
  CHECK(max_diff(sim.values.at("y"), seq.values.at("y")) < 1e-12);
  CHECK(max_diff(sim.values.at("h"), seq.values.at("h")) < 1e-12);
  CHECK(seq.fixed_points.empty());

  // trace concatenates the per-token values; the rank-1 input comes back whole
  InterpretOptions o;
  o.mode = Mode::Sequential;
  o.trace = true;
  const auto tr = interpret(g, w, in, o);
  o.mode = Mode::Simultaneous;
  CHECK(tr.values.at("c").data == interpret(g, w, in, o).values.at("c").data);  // the step is the kernel's last position, bit for bit
  CHECK(tr.values.at("shift").data == in.at("shift").data);
}

TEST_CASE("sequential: Delay gives the previous token, zeros first, in both modes") {
  Graph g;
  g.name = "delay";
  g.inputs = {decl("x", {2, 4, 3}, {"B", "L"})};
  g.ops = {make_op(OpKind::Delay, {"x"}, {"y"}, {}, "state")};
  g.outputs = {"y"};
  const Tensor x = wave({2, 4, 3}, 1);
  const auto sim = run_mode(g, {}, {{"x", x}}, Mode::Simultaneous);
  const Tensor& y = sim.values.at("y");
  for (std::int64_t b = 0; b < 2; ++b)
    for (std::int64_t t = 0; t < 4; ++t)
      for (std::int64_t c = 0; c < 3; ++c) CHECK(y.data[(b * 4 + t) * 3 + c] == (t == 0 ? 0.0 : x.data[(b * 4 + t - 1) * 3 + c]));
  CHECK(max_diff(run_mode(g, {}, {{"x", x}}, Mode::Sequential).values.at("y"), y) == 0);
  g.inputs = {decl("v", {3})};
  g.ops = {make_op(OpKind::Delay, {"v"}, {"y"}, {}, "state")};
  CHECK_THROWS_WITH(verify(g, nullptr), Catch::Contains("state") && Catch::Contains("rank"));
}

TEST_CASE("sequential: per-token FixedPoint stats are sample-major, one solve per token, shaped B x L") {
  // z = a z + c per element, relative tol 1e-3: a = 0.5 takes 10 steps, a = 0.25 takes 6
  Graph g;
  g.inputs = {decl("c", {2, 2, 1}, {"B", "L"}), decl("a", {2, 2, 1}, {"B", "L"})};
  auto body = std::make_shared<Region>();
  body->args = {"z", "cc", "aa"};
  body->ops = {make_op(OpKind::Mul, {"aa", "z"}, {"az"}), make_op(OpKind::Add, {"az", "cc"}, {"fz"})};
  body->results = {"fz"};
  Op fp = make_op(OpKind::FixedPoint, {"c", "a"}, {"zstar"},
                  {{"max_iter", std::int64_t{100}}, {"tol", 1e-3}, {"like", std::string("c")}}, "fp");
  fp.body = body;
  g.ops = {fp};
  g.outputs = {"zstar"};
  const std::map<std::string, Tensor> in{{"c", tensor({2, 2, 1}, {1, 2, 3, 4})}, {"a", tensor({2, 2, 1}, {0.5, 0.25, 0.25, 0.5})}};
  const auto r = run_mode(g, {}, in, Mode::Sequential);
  CHECK(r.fixed_points[0].op == "fp");
  CHECK(r.fixed_points[0].iterations == std::vector<int>{10, 6, 6, 10});  // b0 t0, b0 t1, b1 t0, b1 t1
  CHECK(r.fixed_points[0].converged == std::vector<std::uint8_t>{1, 1, 1, 1});
  CHECK(r.fixed_points[0].shape == std::vector<std::size_t>{2, 2});
  const Tensor& z = r.values.at("zstar");
  CHECK(z.shape == std::vector<std::int64_t>{2, 2, 1});
  CHECK(z.data[0] == Approx(2 - std::pow(2.0, -9)));
  CHECK(z.data[1] == Approx(2 * (1 - std::pow(0.25, 6)) / 0.75));
}

TEST_CASE("sequential: a contractive DEQ with conv, scan and tanh reaches the simultaneous fixed point") {
  // z = tanh(Wo Scan(sigmoid(Wa z), Wx conv(z)) + u), weights scaled down to make f contractive
  Graph g;
  g.inputs = {decl("x", {2, 7, 4}, {"B", "L"})};
  g.weights = {decl("Wu", {4, 4}), decl("wc", {4, 3}), decl("Wa", {4, 4}), decl("Wx", {4, 4}), decl("Wo", {4, 4})};
  auto body = std::make_shared<Region>();
  body->args = {"z", "uc"};
  body->ops = {make_op(OpKind::Conv1dCausal, {"z", "wc"}, {"cz"}, {}, "conv"),
               make_op(OpKind::Linear, {"z", "Wa"}, {"al"}),
               make_op(OpKind::Sigmoid, {"al"}, {"a"}),
               make_op(OpKind::Linear, {"cz", "Wx"}, {"sx"}),
               make_op(OpKind::Scan, {"a", "sx"}, {"h"}, {}, "scan"),
               make_op(OpKind::Linear, {"h", "Wo"}, {"o"}),
               make_op(OpKind::Add, {"o", "uc"}, {"pre"}),
               make_op(OpKind::Tanh, {"pre"}, {"zn"})};
  body->results = {"zn"};
  Op fp = make_op(OpKind::FixedPoint, {"u"}, {"zstar"},
                  {{"max_iter", std::int64_t{1000}}, {"tol", 1e-13}, {"like", std::string("u")}, {"damping", 0.9}}, "deq");
  fp.body = body;
  g.ops = {make_op(OpKind::Linear, {"x", "Wu"}, {"u"}), fp};
  g.outputs = {"zstar"};
  const WeightStore w{{"Wu", wave({4, 4}, 1)}, {"wc", wave({4, 3}, 2, 0.3)}, {"Wa", wave({4, 4}, 3)},
                      {"Wx", wave({4, 4}, 4, 0.3)}, {"Wo", wave({4, 4}, 5, 0.3)}};
  const std::map<std::string, Tensor> in{{"x", wave({2, 7, 4}, 6)}};
  const auto sim = run_mode(g, w, in, Mode::Simultaneous);
  const auto seq = run_mode(g, w, in, Mode::Sequential);
  CHECK(max_diff(sim.values.at("zstar"), seq.values.at("zstar")) < 1e-9);
  REQUIRE(seq.fixed_points[0].iterations.size() == 14);
  for (size_t i = 0; i < 14; ++i) CHECK(seq.fixed_points[0].converged[i] == 1);
  CHECK(sim.fixed_points[0].converged == std::vector<std::uint8_t>{1, 1});
}

TEST_CASE("sequential: an imported implicit Mamba2 made contractive reaches the simultaneous fixed points") {
  for (std::uint64_t seed : {3, 4}) {
    INFO("seed " << seed);
    same_fixed_points(weaker(import_config(tiny_mamba2(), {seed}), {"layer0.in_proj"}, 0.25));
  }
}

TEST_CASE("sequential: an imported implicit Llama3 made contractive reaches the simultaneous fixed points") {
  for (std::uint64_t seed : {3, 5}) {
    INFO("seed " << seed);
    same_fixed_points(weaker(import_config(tiny_llama(), {seed}), {"layer0.wq", "layer0.wk", "layer0.wv", "layer0.w1", "layer0.w3"}, 0.5));
  }
}

TEST_CASE("sequential: where the random model has several fixed points, each mode's is a fixed point of the body") {
  // Mamba2 seed 3 at init: from token 1 of the first row the modes converge to different fixed
  // points (the logits differ by about 0.1), both fixed points of the same body.
  const Imported m = import_config(tiny_mamba2(), {3});
  InterpretOptions o;
  o.trace = true;
  const auto sim = interpret(m.graph, m.weights, {{"tokens", kTokens}}, o);
  o.mode = Mode::Sequential;
  const auto seq = interpret(m.graph, m.weights, {{"tokens", kTokens}}, o);
  CHECK(max_diff(sim.values.at("logits"), seq.values.at("logits")) > 1e-3);
  CHECK(body_residual(m, sim) < 1e-10);
  CHECK(body_residual(m, seq) < 1e-10);
}

TEST_CASE("sequential: results do not depend on the thread count", "[slow]") {
  const Imported m = import_config(tiny_mamba2(), {3});
  const auto one = run_mode(m.graph, m.weights, {{"tokens", kTokens}}, Mode::Sequential, 1);
  const auto three = run_mode(m.graph, m.weights, {{"tokens", kTokens}}, Mode::Sequential, 3);
  CHECK(one.values.at("logits").data == three.values.at("logits").data);
  CHECK(one.fixed_points[0].iterations == three.fixed_points[0].iterations);
}

TEST_CASE("sequential: an imported Mamba2's selective-scan steps run fused, with the values of the ops as written", "[slow]") {
  const Imported m = import_config(tiny_mamba2(), {3});
  for (Mode mode : {Mode::Sequential, Mode::Simultaneous})
    for (int threads : {1, 3}) {
      INFO("sequential " << (mode == Mode::Sequential) << ", threads " << threads);
      InterpretOptions o;
      o.mode = mode, o.threads = threads;
      const auto fused = interpret(m.graph, m.weights, {{"tokens", kTokens}}, o);
      o.fuse = false;
      const auto written = interpret(m.graph, m.weights, {{"tokens", kTokens}}, o);
      CHECK(fused.fused_steps > 0);
      CHECK(written.fused_steps == 0);
      CHECK(fused.values.at("logits").data == written.values.at("logits").data);
      CHECK(fused.fixed_points[0].iterations == written.fixed_points[0].iterations);
    }
}

TEST_CASE("sequential: a selective-scan step with a start state, an odd head size and several tokens fuses exactly") {
  // y = C . scan(a, dt B x; h0) in a FixedPoint body (z* = y + 0 z): P = 11 (a block of 8 and a
  // tail of 3), N = 5, h0 given; and the same step whose intermediate is also read elsewhere (not fused)
  const std::int64_t B = 2, L = 3, H = 2, P = 11, N = 5;
  Graph g;
  g.name = "ssd";
  g.inputs = {decl("dt", {B, L, H}, {"B", "L"}), decl("Bm", {B, L, N}, {"B", "L"}), decl("x", {B, L, H, P}, {"B", "L"}),
              decl("a", {B, L, H}, {"B", "L"}), decl("C", {B, L, N}, {"B", "L"})};
  g.weights = {decl("h0", {B, H, P, N})};
  auto body_of = [&](bool extra_reader) {
    Region r;
    r.args = {"z", "dt_c", "B_c", "x_c", "a_c", "C_c"};
    r.ops.push_back(make_op(OpKind::Einsum, {"dt_c", "B_c", "x_c"}, {"dbx"}, {{"spec", std::string("blh, bln, blhp -> blhpn")}}, "in"));
    r.ops.push_back(make_op(OpKind::Scan, {"a_c", "dbx", "h0"}, {"h"}, {}, "scan"));
    r.ops.push_back(make_op(OpKind::Einsum, {"C_c", "h"}, {"y"}, {{"spec", std::string("bln,blhpn->blhp")}}, "out"));
    r.ops.push_back(make_op(OpKind::Mul, {"z", "zero"}, {"z0"}, {}, "z0"));
    r.ops.push_back(make_op(OpKind::Add, {"y", "z0"}, {"next"}, {}, "next"));
    if (extra_reader) r.ops.push_back(make_op(OpKind::Add, {"h", "zero"}, {"h_again"}, {}, "again"));
    r.results = {"next"};
    return r;
  };
  const WeightStore w{{"h0", wave({B, H, P, N}, 7, 0.5)}, {"zero", tensor({1}, {0.0})}};
  g.weights.push_back(decl("zero", {1}));
  const std::map<std::string, Tensor> in{{"dt", wave({B, L, H}, 1, 0.4)}, {"Bm", wave({B, L, N}, 2)}, {"x", wave({B, L, H, P}, 3)},
                                         {"a", wave({B, L, H}, 4, 0.9)}, {"C", wave({B, L, N}, 5)}};
  std::vector<Tensor> outs;
  for (bool extra_reader : {false, true}) {
    Op fp = make_op(OpKind::FixedPoint, {"dt", "Bm", "x", "a", "C"}, {"zstar"},
                    {{"like", std::string("x")}, {"tol", 1e-3}, {"max_iter", std::int64_t{2}}, {"rule", std::string("fixed")}}, "fp");
    fp.body = Body(std::make_shared<Region>(body_of(extra_reader)));
    g.ops = {fp};
    g.outputs = {"zstar"};
    for (Mode mode : {Mode::Simultaneous, Mode::Sequential}) {
      InterpretOptions o;
      o.mode = mode;
      const auto r = interpret(g, w, in, o);
      CHECK((r.fused_steps > 0) == !extra_reader);
      outs.push_back(r.values.at("zstar"));
    }
  }
  CHECK(outs[0].data == outs[2].data);  // simultaneous: fused == written
  CHECK(outs[1].data == outs[3].data);  // sequential
  CHECK(max_diff(outs[0], outs[1]) < 1e-12);
}

TEST_CASE("sequential: ops that mix the sequence axis are refused, naming the op") {
  Graph g;
  g.inputs = {decl("x", {1, 4, 2}, {"B", "L"})};
  g.weights = {decl("W", {2, 3})};
  g.outputs = {"y"};
  const WeightStore w{{"W", wave({2, 3}, 1)}};
  const std::map<std::string, Tensor> in{{"x", wave({1, 4, 2}, 2)}};
  auto refused = [&](Op op) {
    g.ops = {std::move(op)};
    return error_of(g, w, in);
  };
  CHECK(refused(make_op(OpKind::Split, {"x"}, {"y", "r"}, {{"sizes", std::vector<std::int64_t>{1, 3}}, {"axis", std::int64_t{1}}}, "cut")) ==
        "interpret: op #0 Split 'cut': splits along axis 1, the sequence axis of 'x'; sequential mode needs per-token ops");
  CHECK(refused(make_op(OpKind::Concat, {"x", "x"}, {"y"}, {{"axis", std::int64_t{-2}}}, "join")) ==
        "interpret: op #0 Concat 'join': concatenates along axis 1, the sequence axis of 'x'; sequential mode needs per-token ops");
  CHECK(refused(make_op(OpKind::Einsum, {"x"}, {"y"}, {{"spec", std::string("bld->bd")}}, "pool")) ==
        "interpret: op #0 Einsum 'pool': spec 'bld->bd' sums letter 'l', the sequence axis of 'x'; sequential mode needs per-token ops");
  CHECK(refused(make_op(OpKind::Reshape, {"x"}, {"y"}, {{"shape", std::vector<std::int64_t>{0, -1}}}, "flat")) ==
        "interpret: op #0 Reshape 'flat': result 'y' is [1, 2] at one token, not [B, 1, ...]: the op moves the sequence axis; "
        "sequential mode needs per-token ops");
  // per-token ops pass: an Einsum contracting a weight's axis 1, a Split along the channels
  CHECK(refused(make_op(OpKind::Einsum, {"x", "W"}, {"y"}, {{"spec", std::string("bld,de->ble")}})) == "(no error)");
  CHECK(refused(make_op(OpKind::Split, {"x"}, {"y", "r"}, {{"sizes", std::vector<std::int64_t>{1, 1}}})) == "(no error)");
}

TEST_CASE("sequential: an output without a sequence axis and inputs of different lengths are refused") {
  Graph g;
  g.name = "g";
  g.inputs = {decl("x", {1, 3, 2}, {"B", "L"}), decl("s", {2})};
  g.ops = {make_op(OpKind::Neg, {"x"}, {"nx"}), make_op(OpKind::Neg, {"s"}, {"ns"})};
  g.outputs = {"nx", "ns"};
  const std::map<std::string, Tensor> in{{"x", wave({1, 3, 2}, 1)}, {"s", wave({2}, 2)}};
  CHECK(error_of(g, {}, in) ==
        "interpret: output 'ns' has no sequence axis (it depends on no input of rank >= 2); sequential mode returns per-token outputs");
  g.outputs = {"nx"};
  CHECK(error_of(g, {}, in) == "(no error)");

  g.inputs.push_back(decl("t", {1, 2}, {"B"}));
  CHECK(error_of(g, {}, {{"x", wave({1, 3, 2}, 1)}, {"s", wave({2}, 2)}, {"t", wave({1, 2}, 3)}}) ==
        "interpret: sequential mode: input 'x' has 3 tokens along axis 1, input 't' has 2");
  g.inputs = {decl("s", {2})};
  g.outputs = {"ns"};
  g.ops.erase(g.ops.begin());
  CHECK(error_of(g, {}, {{"s", wave({2}, 2)}}) ==
        "interpret: sequential mode needs an input with a sequence axis (rank >= 2, axis 1); graph 'g' has none");
}

TEST_CASE("sequential: aoc interpret --sequence sequential prints the iterations per token") {
  const auto dir = temp_dir();
  const std::string graph = (dir / "m.json").string(), weights = (dir / "m.h5").string();
  REQUIRE(run_aoc("import " + tiny_mamba2() + " -o " + graph + " --seed 3").status == 0);
  const Run r = run_aoc("interpret " + graph + " --weights " + weights + " --tokens 3,1,4 --sequence sequential");
  INFO(r.out);
  REQUIRE(r.status == 0);
  CHECK(r.out.find("sequential mode") != std::string::npos);
  CHECK(r.out.find("FixedPoint 'deq' sample 0 iterations per token: ") != std::string::npos);
  CHECK(r.out.find(", all converged") != std::string::npos);
  const Run j = run_aoc("interpret " + graph + " --weights " + weights + " --tokens 3,1,4 --sequence sequential --json");
  REQUIRE(j.status == 0);
  const auto rec = nlohmann::json::parse(j.out);
  CHECK(rec["mode"] == "sequential");
  CHECK(rec["fixed_points"][0]["iterations"].size() == 3);
  CHECK(run_aoc("interpret " + graph + " --weights " + weights + " --tokens 3 --sequence parallel").status != 0);
}
