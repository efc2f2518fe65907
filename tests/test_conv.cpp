// The image ops of a retina CNN (docs/ir.md): Conv2d (on the optics, Linear's product on im2col's
// patches: one vector per output position through one programmed matrix), Relu, AvgPool2d,
// MaxPool2d, Upsample2d, and Conv1dCausal over x[B, L, ..., C]. Each against a direct loop, through
// the compiler onto aoc-48 and its sim backend, the estimate, and the retina fixture end to end.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <random>
#include <string>

#include "compiler/graph_json.hpp"
#include "compiler/interpret.hpp"
#include "compiler/op_def.hpp"
#include "compiler/passes.hpp"
#include "compiler/program.hpp"
#include "compiler/report.hpp"
#include "compiler/verify.hpp"
#include "runtime/backend/backend.hpp"
#include "runtime/estimate/program_estimate.hpp"
#include "sim/error.hpp"
#include "tests/graph_support.hpp"
#include "tests/support.hpp"

using namespace aoc;
using namespace aoc::ir;
using namespace aoc::test;
using Catch::Matchers::Contains;

namespace {

Tensor random_tensor(std::vector<std::int64_t> shape, unsigned seed, double scale = 1.0) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-scale, scale);
  Tensor t = wave(std::move(shape), 0.0);
  for (double& v : t.data) v = u(rng);
  return t;
}

// y[n, i, j, o] = b[o] + sum_{p,q,c} W[o,p,q,c] x[n, i*s+p, j*s+q, c], for x [N, H, W, C]: the definition, looped.
Tensor direct_conv(const Tensor& x, const Tensor& W, const Tensor* b, std::int64_t s) {
  const std::int64_t N = x.shape[0], H = x.shape[1], Wd = x.shape[2], C = x.shape[3];
  const std::int64_t O = W.shape[0], kh = W.shape[1], kw = W.shape[2];
  const std::int64_t Ho = (H - kh) / s + 1, Wo = (Wd - kw) / s + 1;
  Tensor y = wave({N, Ho, Wo, O}, 0.0, 0.0);
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t i = 0; i < Ho; ++i)
      for (std::int64_t j = 0; j < Wo; ++j)
        for (std::int64_t o = 0; o < O; ++o) {
          double acc = b ? b->data[o] : 0.0;
          for (std::int64_t p = 0; p < kh; ++p)
            for (std::int64_t q = 0; q < kw; ++q)
              for (std::int64_t c = 0; c < C; ++c)
                acc += W.data[((o * kh + p) * kw + q) * C + c] * x.data[((n * H + i * s + p) * Wd + j * s + q) * C + c];
          y.data[((n * Ho + i) * Wo + j) * O + o] = acc;
        }
  return y;
}

// One op on input x (declared with `syms` naming its leading dims) and weights; its result.
struct OneOp {
  Graph g;
  WeightStore w;
  OneOp(OpKind k, const Value& x, std::vector<std::pair<Value, Tensor>> weights, std::map<std::string, Attr> attrs = {}) {
    g.name = "one";
    g.inputs.push_back(x);
    std::vector<std::string> in{x.name};
    for (auto& [v, t] : weights) g.weights.push_back(v), in.push_back(v.name), w[v.name] = t;
    g.ops.push_back(make_op(k, in, {"y"}, std::move(attrs), "op"));
    g.outputs = {"y"};
  }
  Tensor run(const Tensor& x, Mode mode = Mode::Simultaneous) const {
    InterpretOptions o;
    o.mode = mode;
    return interpret(g, w, {{g.inputs[0].name, x}}, o).values.at("y");
  }
  std::string verify_error() const {
    try {
      verify(g, &w);
    } catch (const Error& e) {
      return e.what();
    }
    return "(no error)";
  }
};

Value fixed(const std::string& name, const Tensor& t) { return decl(name, t.shape); }

// x[B, L, 8, 8, 2] -> Conv2d by W [4, 5, 5, 2] (no bias: optical; 50 columns, 2 tiles on aoc-48's
// 48 channels) -> y[B, L, 4, 4, 4], compiled for aoc-48.
Program conv_program(bool quantize = true) {
  Program p;
  p.graph.name = "conv";
  p.graph.inputs.push_back(decl("x", {0, 0, 8, 8, 2}, {"B", "L"}));
  p.graph.weights.push_back(decl("W", {4, 5, 5, 2}));
  p.weights["W"] = random_tensor({4, 5, 5, 2}, 11, 0.2);
  p.graph.ops.push_back(make_op(OpKind::Conv2d, {"x", "W"}, {"y"}, {}, "conv"));
  p.graph.outputs = {"y"};
  p.target = target_of(hw48(), "aoc-48", {});
  PassOptions o;
  o.quantize = quantize;
  run_pipeline(p, o);
  return p;
}

const Tensor kImages = random_tensor({2, 3, 8, 8, 2}, 5);

ProgramResult sim(const Program& p, const std::map<std::string, Tensor>& in, BackendOptions o) {
  return make_backend("sim", &hw48())->run(p, in, o);
}

BackendOptions ideal() {
  BackendOptions o;
  o.noise = false, o.quantize = false, o.optics = false, o.f64 = true;
  return o;
}

// Samples [from, from + n) of x (axis 0).
Tensor samples(const Tensor& x, std::int64_t from, std::int64_t n) {
  Tensor t = x;
  const std::int64_t per = static_cast<std::int64_t>(x.data.size()) / x.shape[0];
  t.shape[0] = n;
  t.data.assign(x.data.begin() + from * per, x.data.begin() + (from + n) * per);
  return t;
}

}  // namespace

TEST_CASE("conv: Conv2d equals the direct convolution, stride 1 and 2, with and without a bias") {
  const Tensor x = random_tensor({2, 7, 6, 3}, 1), W = random_tensor({4, 3, 2, 3}, 2), b = random_tensor({4}, 3);
  for (const std::int64_t s : {1, 2}) {
    const OneOp with_b(OpKind::Conv2d, fixed("x", x), {{fixed("W", W), W}, {fixed("b", b), b}}, {{"stride", s}});
    const OneOp no_b(OpKind::Conv2d, fixed("x", x), {{fixed("W", W), W}}, {{"stride", s}});
    const Tensor y = with_b.run(x);
    CHECK(y.shape == std::vector<std::int64_t>{2, (7 - 3) / s + 1, (6 - 2) / s + 1, 4});
    CHECK(max_diff(y, direct_conv(x, W, &b, s)) < 1e-12);
    CHECK(max_diff(no_b.run(x), direct_conv(x, W, nullptr, s)) < 1e-12);
    CHECK(verify(with_b.g).at("y").shape == Shape{Dim::fixed(2), Dim::fixed((7 - 3) / s + 1), Dim::fixed((6 - 2) / s + 1), Dim::fixed(4)});
  }
}

TEST_CASE("conv: Conv2d's verifier errors name the op and the operand at fault") {
  const Tensor x = random_tensor({2, 7, 6, 3}, 1);
  const Tensor W2 = random_tensor({4, 3, 3, 2}, 2), big = random_tensor({4, 8, 3, 3}, 2), W = random_tensor({4, 3, 3, 3}, 2);
  CHECK_THAT(OneOp(OpKind::Conv2d, fixed("x", x), {{fixed("W", W2), W2}}).verify_error(),
             Contains("Conv2d 'op'") && Contains("W 'W'") && Contains("has 2 input channels") && Contains("has 3"));
  CHECK_THAT(OneOp(OpKind::Conv2d, fixed("x", x), {{fixed("W", big), big}}).verify_error(),
             Contains("Conv2d 'op'") && Contains("kernel 8 x 3") && Contains("does not fit x's 7 x 6"));
  CHECK_THAT(OneOp(OpKind::Conv2d, fixed("x", x), {{fixed("W", W), W}}, {{"stride", std::int64_t{0}}}).verify_error(),
             Contains("stride must be >= 1"));
  const Tensor b = random_tensor({5}, 3);
  CHECK_THAT(OneOp(OpKind::Conv2d, fixed("x", x), {{fixed("W", W), W}, {fixed("b", b), b}}).verify_error(),
             Contains("bias b 'b'") && Contains("W's 4 output channels"));
  CHECK_THAT(OneOp(OpKind::Conv2d, decl("x", {2, 7, 6, 3}, {"B", "H"}), {{fixed("W", W), W}}).verify_error(),
             Contains("fixed sizes for H, W and C"));
}

TEST_CASE("conv: Conv2d in sequential mode refuses x of rank 4, whose axis 1 is the sequence") {
  const Tensor x = random_tensor({2, 7, 6, 3}, 1), W = random_tensor({4, 3, 3, 3}, 2);
  const OneOp op(OpKind::Conv2d, fixed("x", x), {{fixed("W", W), W}});
  CHECK_THROWS_WITH(op.run(x, Mode::Sequential), Contains("Conv2d 'op'") && Contains("sequential mode needs x[B, L, H, W, C]"));
}

TEST_CASE("conv: Conv2d on an image sequence x (B, L, H, W, C) in sequential mode is the whole sequence's, token by token") {
  const Tensor x = random_tensor({2, 3, 6, 5, 2}, 4), W = random_tensor({3, 2, 2, 2}, 5), b = random_tensor({3}, 6);
  const OneOp op(OpKind::Conv2d, fixed("x", x), {{fixed("W", W), W}, {fixed("b", b), b}});
  CHECK(op.run(x, Mode::Sequential).data == op.run(x).data);
}

TEST_CASE("conv: Conv2d compiled onto aoc-48 is one plan of Cout rows and kh*kw*Cin columns in two tiles") {
  const Program p = conv_program();
  REQUIRE(p.optical.size() == 1);
  const OpticalPlan& plan = p.optical[0];
  CHECK(plan.rows == 4);
  CHECK(plan.cols == 50);
  CHECK(plan.tiles.size() == 2);
  CHECK_FALSE(plan.aoc_layout);
  CHECK(plan.codes.size() == 200);
  Op conv = p.graph.ops[0];
  for (const Op& o : p.graph.ops)
    if (o.kind == OpKind::Conv2d) conv = o;
  CHECK(place(conv) == Place::Optical);
}

TEST_CASE("conv: a Conv2d with a bias stays digital, as a Linear with one") {
  Program p;
  p.graph.name = "conv";
  p.graph.inputs.push_back(decl("x", {0, 0, 8, 8, 2}, {"B", "L"}));
  p.graph.weights = {decl("W", {4, 5, 5, 2}), decl("b", {4})};
  p.weights = {{"W", random_tensor({4, 5, 5, 2}, 11)}, {"b", random_tensor({4}, 12)}};
  p.graph.ops.push_back(make_op(OpKind::Conv2d, {"x", "W", "b"}, {"y"}, {}, "conv"));
  p.graph.outputs = {"y"};
  p.target = target_of(hw48(), "aoc-48", {});
  run_pipeline(p, {});
  CHECK(p.optical.empty());
  CHECK(place(p.graph.ops[0]) == Place::Digital);
  p.graph.ops[0].attrs[kPlaceAttr] = std::string("optical");
  CHECK_THROWS_WITH(verify_program(p), Contains("a Conv2d without bias"));
}

TEST_CASE("conv: Conv2d on the sim backend without noise or quantization is the interpreter within 1e-9, and the cpu backend exactly") {
  const Program p = conv_program();
  const std::string y = p.graph.outputs[0];
  const Tensor ref = interpret(p.graph, p.weights, {{"x", kImages}}).values.at(y);
  CHECK(max_diff(sim(p, {{"x", kImages}}, ideal()).values.at(y), ref) < 1e-9);
  CHECK(make_backend("cpu")->run(p, {{"x", kImages}}, {}).values.at(y).data == ref.data);
  BackendOptions seq = ideal();
  seq.mode = Mode::Sequential;
  CHECK(max_diff(sim(p, {{"x", kImages}}, seq).values.at(y), ref) < 1e-9);
}

TEST_CASE("conv: Conv2d's noise on the sim backend is the same for 1 and 2 threads and for any batch split") {
  const Program p = conv_program();
  const std::string y = p.graph.outputs[0];
  BackendOptions o;
  o.seed = 9, o.noise = true, o.quantize = true;
  const Tensor one = sim(p, {{"x", kImages}}, o).values.at(y);
  CHECK(max_diff(one, sim(p, {{"x", kImages}}, ideal()).values.at(y)) > 1e-6);
  o.threads = 2;
  CHECK(sim(p, {{"x", kImages}}, o).values.at(y).data == one.data);
  o.threads = 1;
  for (std::int64_t s = 0; s < 2; ++s) {
    o.first_sample = static_cast<int>(s);
    CHECK(sim(p, {{"x", samples(kImages, s, 1)}}, o).values.at(y).data == samples(one, s, 1).data);
  }
}

TEST_CASE("conv: the estimate counts Ho x Wo products per token through a Conv2d's tiles, each tile programmed once per token") {
  // aoc-48 has one module: the two tiles (4 x 47 and 4 x 3: its LED channel 8 is dark) are two
  // programmings, each used by every position before the next is loaded
  const Program p = conv_program(false);
  const ProgramEstimate e = estimate_program(p, hw48());
  REQUIRE(e.optical_ops.size() == 1);
  CHECK(e.optical_ops[0].products == 16);  // 4 x 4 output positions
  CHECK(e.optical_ops[0].per_token == 16);
  CHECK(e.optical_ops[0].programmings == 2);
  CHECK(e.tile_runs == 16 * 2);
  CHECK(*e.work.analog_macs == 16 * 4 * 50);
  CHECK(e.initial_writes == 4 * 47);
  CHECK(e.work.weight_reloads == 2);  // per token, not per position
  CHECK(e.work.weight_writes == 4 * 50);
  CHECK(e.partial_sum_adc == 16 * 4);  // at each position the second column tile's 4 outputs read out and added
  const auto report = mapping_report(p);
  CHECK(report["plans"][0]["products_per_token"].get<double>() == 16);
  CHECK(report["plans"][0]["programmings"].get<int>() == 2);
  CHECK_THAT(mapping_report_text(report), Contains("weights reused: 'conv' [4 x 50], 16 products per token") && Contains("programmings 2"));
}

TEST_CASE("conv: the estimate charges a digital Conv2d kh x kw x Cin per output element and its bias") {
  Program p;
  p.graph.name = "conv";
  p.graph.inputs.push_back(decl("x", {0, 0, 8, 8, 2}, {"B", "L"}));
  p.graph.weights = {decl("W", {4, 5, 5, 2}), decl("b", {4})};
  p.graph.ops.push_back(make_op(OpKind::Conv2d, {"x", "W", "b"}, {"y"}, {}, "conv"));
  p.graph.outputs = {"y"};
  const ProgramEstimate e = estimate_program(compile_for_estimate(p.graph, hw48(), "aoc-48", {}), hw48());
  CHECK(e.digital.at("Conv2d").ops == 4 * 4 * 4 * (50 + 1));
}

TEST_CASE("conv: Relu is max(x, 0) elementwise") {
  const Tensor x = tensor({2, 3}, {-1.5, 0.0, 2.0, -0.0, 3.25, -7.0});
  const OneOp op(OpKind::Relu, fixed("x", x), {});
  CHECK(op.run(x).data == std::vector<double>{0.0, 0.0, 2.0, 0.0, 3.25, 0.0});
  CHECK(verify(op.g).at("y") == Type{DType::F64, {Dim::fixed(2), Dim::fixed(3)}});
}

TEST_CASE("conv: AvgPool2d and MaxPool2d take each size x size window, the remainder dropped") {
  // x[1, 5, 4, 2]: channel 0 is 10 i + j, channel 1 its negative
  Tensor x = wave({1, 5, 4, 2}, 0.0, 0.0);
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 4; ++j) x.data[(i * 4 + j) * 2] = 10 * i + j, x.data[(i * 4 + j) * 2 + 1] = -(10 * i + j);
  const OneOp avg(OpKind::AvgPool2d, fixed("x", x), {}, {{"size", std::int64_t{2}}});
  const OneOp mx(OpKind::MaxPool2d, fixed("x", x), {}, {{"size", std::int64_t{2}}});
  const Tensor a = avg.run(x), m = mx.run(x);
  CHECK(a.shape == std::vector<std::int64_t>{1, 2, 2, 2});
  CHECK(a.data == std::vector<double>{5.5, -5.5, 7.5, -7.5, 25.5, -25.5, 27.5, -27.5});
  CHECK(m.data == std::vector<double>{11, 0, 13, -2, 31, -20, 33, -22});
}

TEST_CASE("conv: a pooling window larger than the input or a missing size is a verifier error naming the op") {
  const Tensor x = random_tensor({1, 3, 4, 2}, 1);
  CHECK_THAT(OneOp(OpKind::MaxPool2d, fixed("x", x), {}, {{"size", std::int64_t{4}}}).verify_error(),
             Contains("MaxPool2d 'op'") && Contains("the window 4 x 4 does not fit"));
  CHECK_THAT(OneOp(OpKind::AvgPool2d, fixed("x", x), {}).verify_error(), Contains("AvgPool2d 'op'") && Contains("missing attribute size"));
  CHECK_THAT(OneOp(OpKind::Upsample2d, fixed("x", x), {}, {{"scale", std::int64_t{0}}}).verify_error(), Contains("scale must be >= 1"));
}

TEST_CASE("conv: Upsample2d repeats each pixel scale x scale times") {
  const Tensor x = tensor({1, 2, 2, 1}, {1, 2, 3, 4});
  const OneOp op(OpKind::Upsample2d, fixed("x", x), {}, {{"scale", std::int64_t{2}}});
  const Tensor y = op.run(x);
  CHECK(y.shape == std::vector<std::int64_t>{1, 4, 4, 1});
  CHECK(y.data == std::vector<double>{1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4});
}

TEST_CASE("conv: the spatial ops in sequential mode refuse x of rank 4 and run an image sequence x (B, L, H, W, C) token by token") {
  const Tensor x4 = random_tensor({2, 4, 4, 2}, 1), x5 = random_tensor({2, 3, 4, 4, 2}, 2);
  for (const OpKind k : {OpKind::AvgPool2d, OpKind::MaxPool2d, OpKind::Upsample2d}) {
    const std::map<std::string, Attr> a{{k == OpKind::Upsample2d ? "scale" : "size", std::int64_t{2}}};
    CHECK_THROWS_WITH(OneOp(k, fixed("x", x4), {}, a).run(x4, Mode::Sequential), Contains("sequential mode needs x[B, L, H, W, C]"));
    const OneOp op(k, fixed("x", x5), {}, a);
    CHECK(op.run(x5, Mode::Sequential).data == op.run(x5).data);
  }
}

TEST_CASE("conv: Conv1dCausal on an image sequence x (B, L, H, W, C) is the rank-3 op at every position") {
  const Tensor x = random_tensor({2, 5, 3, 2, 4}, 1), w = random_tensor({4, 3}, 2), b = random_tensor({4}, 3);
  const OneOp op(OpKind::Conv1dCausal, fixed("x", x), {{fixed("w", w), w}, {fixed("b", b), b}});
  const Tensor y = op.run(x);
  REQUIRE(y.shape == x.shape);
  const Tensor pos = random_tensor({2, 5, 4}, 0);
  const OneOp rank3(OpKind::Conv1dCausal, fixed("x", pos), {{fixed("w", w), w}, {fixed("b", b), b}});
  for (std::int64_t m = 0; m < 6; ++m) {  // the position (h, w) = (m / 2, m % 2)
    Tensor xm = pos;
    for (std::int64_t bt = 0; bt < 10; ++bt)
      for (std::int64_t c = 0; c < 4; ++c) xm.data[bt * 4 + c] = x.data[(bt * 6 + m) * 4 + c];
    const Tensor ym = rank3.run(xm);
    for (std::int64_t bt = 0; bt < 10; ++bt)
      for (std::int64_t c = 0; c < 4; ++c) CHECK(ym.data[bt * 4 + c] == y.data[(bt * 6 + m) * 4 + c]);
  }
  CHECK_THAT(OneOp(OpKind::Conv1dCausal, fixed("x", x), {{fixed("w", b), b}}).verify_error(), Contains("Conv1dCausal 'op'") && Contains("rank 2"));
}

TEST_CASE("conv: Conv1dCausal on an image sequence x (B, L, H, W, C) token by token is the whole sequence's") {
  const Tensor x = random_tensor({2, 6, 3, 2, 4}, 1), w = random_tensor({4, 4}, 2), b = random_tensor({4}, 3);
  const OneOp op(OpKind::Conv1dCausal, fixed("x", x), {{fixed("w", w), w}, {fixed("b", b), b}});
  CHECK(op.run(x, Mode::Sequential).data == op.run(x).data);
}

TEST_CASE("conv: the new ops' JSON and printed forms read back") {
  const Graph g = read_graph(AOC_TEST_DATA "/retina/retina.json");
  CHECK(write_graph(parse_graph(write_graph(g))) == write_graph(g));
  Program p;
  p.graph = g;
  p.graph.ops.insert(p.graph.ops.begin() + 1, make_op(OpKind::MaxPool2d, {"s"}, {"s2"}, {{"size", std::int64_t{1}}}, "pool"));
  p.graph.ops.insert(p.graph.ops.begin() + 2, make_op(OpKind::Upsample2d, {"s2"}, {"s3"}, {{"scale", std::int64_t{1}}}, "up"));
  p.graph.ops.insert(p.graph.ops.begin() + 3, make_op(OpKind::AvgPool2d, {"s3"}, {"s4"}, {{"size", std::int64_t{1}}}, "avg"));
  p.graph.ops[4].inputs[0] = "s4";
  p.graph.ops[0].attrs["stride"] = std::int64_t{1};
  p.target = target_of(hw48(), "aoc-48", {});
  PassOptions o;
  o.quantize = false;
  run_pipeline(p, o);
  const std::string text = print_program(p, true);
  CHECK_THAT(text, Contains("Conv2d(") && Contains("MaxPool2d(") && Contains("Upsample2d(") && Contains("AvgPool2d(") && Contains("Relu("));
  CHECK(print_program(parse_program(text), true) == text);
}

TEST_CASE("conv: the retina graph compiles for aoc-48 and runs 1 sample x 3 tokens on sim as the interpreter", "[slow]") {
  const std::filesystem::path dir = temp_dir() / "retina";
  std::filesystem::create_directories(dir);
  const std::string graph = AOC_TEST_DATA "/retina/retina.json", weights = (dir / "retina.h5").string(),
                    prog = (dir / "retina.aocp.h5").string(), inputs = (dir / "in.h5").string(), out = (dir / "out.h5").string();
  const Graph g = read_graph(graph);
  WeightStore w;
  unsigned seed = 1;
  for (const Value& v : g.weights) {
    std::vector<std::int64_t> shape;
    std::int64_t fan_in = 1;
    for (std::size_t i = 0; i < v.type.shape.size(); ++i) shape.push_back(v.type.shape[i].size), fan_in *= i ? v.type.shape[i].size : 1;
    w[v.name] = random_tensor(shape, seed++, 1.0 / std::sqrt(static_cast<double>(fan_in)));
  }
  write_weights_h5(weights, w);
  const Tensor stimulus = random_tensor({1, 3, 50, 50, 1}, 99);
  write_weights_h5(inputs, WeightStore{{"stimulus", stimulus}});
  const Run c = run_aoc("compile " + graph + " --weights " + weights + " --hw aoc-48 -o " + prog);
  INFO(c.out);
  REQUIRE(c.status == 0);
  CHECK_THAT(c.out, Contains("weights reused: 'spatial' [4 x 441], 900 products per token"));
  const Tensor ref = interpret(g, w, {{"stimulus", stimulus}}).values.at("rate");
  for (const std::string mode : {"simultaneous", "sequential"}) {
    const Run r = run_aoc("run " + prog + " --inputs " + inputs + " --backend sim --ideal-optics --precision f64 --sequence " + mode + " -o " + out);
    INFO(r.out);
    REQUIRE(r.status == 0);
    CHECK(max_diff(read_weights_h5(out).at("rate"), ref) < 1e-9);
  }
}
