// The lowering passes and the backends that run their programs (docs/program.md): each pass does its
// one job and leaves a program the verifier accepts; a compiled model run on the CPU reference is
// the interpreter's result within 1e-9, tiled or not; the simulator is the reference when its
// converters and noise are off.
#include <algorithm>
#include <catch2/catch.hpp>
#include <limits>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "compiler/graph_json.hpp"
#include "compiler/import_config.hpp"
#include "compiler/interpret.hpp"
#include "compiler/passes.hpp"
#include "compiler/program_h5.hpp"
#include "compiler/verify.hpp"
#include "runtime/backend/backend.hpp"
#include "runtime/io/h5io.hpp"
#include "compiler/report.hpp"
#include "sim/error.hpp"
#include "tests/graph_support.hpp"
#include "tests/support.hpp"

using namespace aoc;
using namespace aoc::ir;
using namespace aoc::test;

namespace {

// The 48-variable machine as a compiler target, with a core of `channels` and `modules` modules so
// that small matrices tile.
Target small_target(int channels = 8, int modules = 3) {
  Target t = target_of(hw48(), "aoc-48", {});
  t.channels = channels;
  t.modules = modules;
  return t;
}

// x[B, L, 12] -> u = x U^T + b (digital: it has a bias) -> z* = tanh(z W^T + u) (a native loop)
// -> y = z* V^T (optical, top level). W is scaled to a contraction.
Program deq(const Target& t) {
  Program p;
  Graph& g = p.graph;
  g.name = "deq";
  g.inputs.push_back(decl("x", {0, 0, 12}, {"B", "L"}));
  g.weights = {decl("U", {20, 12}), decl("b", {20}), decl("W", {20, 20}), decl("V", {6, 20})};
  p.weights = {{"U", wave({20, 12}, 0.1, 0.3)}, {"b", wave({20}, 0.2, 0.1)}, {"W", wave({20, 20}, 0.3, 0.04)}, {"V", wave({6, 20}, 0.4, 0.2)}};
  g.ops.push_back(make_op(OpKind::Linear, {"x", "U", "b"}, {"u"}, {}, "inj"));
  auto body = std::make_shared<Region>();
  body->args = {"z", "uc"};
  body->ops = {make_op(OpKind::Linear, {"z", "W"}, {"wz"}, {}, "mix"), make_op(OpKind::Add, {"wz", "uc"}, {"pre"}),
               make_op(OpKind::Tanh, {"pre"}, {"zn"})};
  body->results = {"zn"};
  Op fp = make_op(OpKind::FixedPoint, {"u"}, {"zs"}, {{"tol", 1e-13}, {"max_iter", std::int64_t{400}}, {"like", std::string("u")}}, "deq");
  fp.body = body;
  g.ops.push_back(fp);
  g.ops.push_back(make_op(OpKind::Linear, {"zs", "V"}, {"y"}, {}, "head"));
  g.outputs = {"y"};
  p.target = t;
  return p;
}

// A body with digital ops between the products: n = RMSNorm(z); a = n Wa^T, c = n Wc^T (one input:
// gathered); h = SiLU(a) * c; z' = tanh(h Wo^T + u).
Program assisted(const Target& t) {
  Program p;
  Graph& g = p.graph;
  g.name = "assisted";
  g.inputs.push_back(decl("u", {0, 0, 10}, {"B", "L"}));
  g.weights = {decl("gain", {10}), decl("Wa", {9, 10}), decl("Wc", {9, 10}), decl("Wo", {10, 9})};
  p.weights = {{"gain", wave({10}, 0.5, 0.1)}, {"Wa", wave({9, 10}, 0.6, 0.3)}, {"Wc", wave({9, 10}, 0.7, 0.3)}, {"Wo", wave({10, 9}, 0.8, 0.2)}};
  for (double& v : p.weights["gain"].data) v += 1.0;
  auto body = std::make_shared<Region>();
  body->args = {"z", "uc"};
  body->ops = {make_op(OpKind::RMSNorm, {"z", "gain"}, {"n"}), make_op(OpKind::Linear, {"n", "Wa"}, {"a"}, {}, "a_proj"),
               make_op(OpKind::Linear, {"n", "Wc"}, {"c"}, {}, "c_proj"), make_op(OpKind::SiLU, {"a"}, {"sa"}),
               make_op(OpKind::Mul, {"sa", "c"}, {"h"}), make_op(OpKind::Linear, {"h", "Wo"}, {"o"}, {}, "o_proj"),
               make_op(OpKind::Add, {"o", "uc"}, {"pre"}), make_op(OpKind::Tanh, {"pre"}, {"zn"})};
  body->results = {"zn"};
  Op fp = make_op(OpKind::FixedPoint, {"u"}, {"zs"}, {{"tol", 1e-13}, {"max_iter", std::int64_t{400}}, {"like", std::string("u")}}, "loop");
  fp.body = body;
  g.ops.push_back(fp);
  g.outputs = {"zs"};
  p.target = t;
  return p;
}

Program compiled(Program p, PassOptions o = {}) {
  run_pipeline(p, o);
  return p;
}

ProgramResult run_on(const std::string& backend, const Program& p, const std::map<std::string, Tensor>& in, BackendOptions o = {}) {
  return make_backend(backend, &hw48())->run(p, in, o);
}

std::vector<const Op*> ops_of(const std::vector<Op>& ops, OpKind k) {
  std::vector<const Op*> v;
  for (const Op& o : ops)
    if (o.kind == k) v.push_back(&o);
  return v;
}

const Op& the_loop(const Program& p) { return *ops_of(p.graph.ops, OpKind::FixedPoint).at(0); }

std::string compile_error(Program p, PassOptions o = {}) {
  try {
    run_pipeline(p, o);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

const Tensor kX = wave({2, 3, 12}, 1.0, 0.8);
const Tensor kU = wave({2, 3, 10}, 2.0, 0.8);

}  // namespace

TEST_CASE("compile: the pipeline runs its passes in order and the verifier accepts each result") {
  Program p = deq(small_target());
  std::vector<std::string> seen;
  run_pipeline(p, {}, [&](const NamedPass& pass, const Program& q, const PassStats&) {
    seen.push_back(pass.name);
    CHECK_NOTHROW(verify_program(q));
  });
  CHECK(seen == std::vector<std::string>{"name-ops", "gather-linear", "loop-form", "partition", "tile", "quantize"});
  CHECK(p.passes == seen);
}

TEST_CASE("compile: gather-linear stacks the Linears that read one value into one matrix and a Split") {
  Program p = assisted(small_target());
  PassStats names, stats;
  pass_name_ops(p, {}, names);
  pass_gather_linear(p, {}, stats);
  CHECK(stats.text() == "gathers 1, linears gathered 2");
  const Region& body = *the_loop(p).body;
  CHECK(ops_of(body.ops, OpKind::Linear).size() == 2);  // a_proj + c_proj stacked, o_proj alone
  const auto splits = ops_of(body.ops, OpKind::Split);
  REQUIRE(splits.size() == 1);
  CHECK(splits[0]->outputs == std::vector<std::string>{"a", "c"});
  CHECK(p.weights.count("Wa") == 0);
  CHECK(p.weights.at("stacked.a_proj").shape == std::vector<std::int64_t>{18, 10});
  const Program original = assisted(small_target());
  const auto before = interpret(original.graph, original.weights, {{"u", kU}}).values.at("zs");
  const auto after = interpret(p.graph, p.weights, {{"u", kU}}).values.at("zs");
  CHECK(max_diff(before, after) < 1e-12);
}

TEST_CASE("compile: a tanh loop is native and converts nothing inside it") {
  const Program p = compiled(deq(small_target()));
  const Op& loop = the_loop(p);
  CHECK(attr_string(loop, "layout") == "native");
  CHECK(ops_of(loop.body->ops, OpKind::Convert).empty());
  for (const Op& o : loop.body->ops) CHECK(place(o) != Place::Digital);
  // the injection is converted once, before the loop; the fixed point once, after it
  const auto top = ops_of(p.graph.ops, OpKind::Convert);
  REQUIRE(top.size() >= 2);
  CHECK(attr_string(*top[0], "to") == "analog");
  CHECK(loop.inputs[0] == top[0]->outputs[0]);
}

// deq's loop with a leak: z' = tanh(alpha z + z W^T + u), alpha a gain per channel (a weight of rank 1),
// or, with signal_product, alpha z replaced by z * z (a product of two signals).
Program leaky(const Target& t, bool signal_product = false) {
  Program p = deq(t);
  p.graph.weights.push_back(decl("alpha", {20}));
  p.weights["alpha"] = wave({20}, 0.9, 0.2);
  Region& body = *p.graph.ops[1].body;
  body.ops = {make_op(OpKind::Linear, {"z", "W"}, {"wz"}, {}, "mix"),
              make_op(OpKind::Mul, {"z", signal_product ? "z" : "alpha"}, {"lz"}, {}, "leak"),
              make_op(OpKind::Add, {"wz", "lz"}, {"s"}), make_op(OpKind::Add, {"s", "uc"}, {"pre"}), make_op(OpKind::Tanh, {"pre"}, {"zn"})};
  return p;
}

TEST_CASE("compile: the leak alpha z is the loop electronics' own, so a loop with one stays native") {
  const Program p = compiled(leaky(small_target()));
  const Op& loop = the_loop(p);
  CHECK(attr_string(loop, "layout") == "native");
  CHECK(ops_of(loop.body->ops, OpKind::Convert).empty());
  for (const Op* m : ops_of(loop.body->ops, OpKind::Mul)) CHECK(place(*m) == Place::Analog);
  BackendOptions ideal;
  ideal.noise = false, ideal.quantize = false, ideal.optics = false, ideal.f64 = true;
  CHECK(max_diff(run_on("sim", p, {{"x", kX}}, ideal).values.at(p.graph.outputs[0]),
                 run_on("cpu", p, {{"x", kX}}).values.at(p.graph.outputs[0])) < 1e-12);
  // a product of two signals is no leak: the loop is assisted, the product digital
  const Program q = compiled(leaky(small_target(), true));
  CHECK(attr_string(the_loop(q), "layout") == "assisted");
  for (const Op* m : ops_of(the_loop(q).body->ops, OpKind::Mul)) CHECK(place(*m) == Place::Digital);
}

TEST_CASE("compile: a biased product in a loop is its product on the optics and its bias in the electronics") {
  Program p = deq(small_target());
  Region& body = *p.graph.ops[1].body;
  body.ops[0].inputs.push_back("b");  // mix = z W^T + b, then + u
  const Program c = compiled(p);
  const Op& loop = the_loop(c);
  CHECK(attr_string(loop, "layout") == "native");
  const auto mix = std::find_if(loop.body->ops.begin(), loop.body->ops.end(), [](const Op& o) { return o.name == "mix"; });
  REQUIRE(mix != loop.body->ops.end());
  CHECK(place(*mix) == Place::Optical);
  CHECK(mix->inputs.size() == 2);
  const auto bias = std::find_if(loop.body->ops.begin(), loop.body->ops.end(), [](const Op& o) { return o.name == "mix.bias"; });
  REQUIRE(bias != loop.body->ops.end());
  CHECK(place(*bias) == Place::Analog);
  BackendOptions ideal;
  ideal.noise = false, ideal.quantize = false, ideal.optics = false, ideal.f64 = true;
  CHECK(max_diff(run_on("sim", c, {{"x", kX}}, ideal).values.at(c.graph.outputs[0]),
                 run_on("cpu", c, {{"x", kX}}).values.at(c.graph.outputs[0])) < 1e-12);
  CHECK(mapping_report(c)["loops"][0]["digital"].empty());
}

TEST_CASE("compile: the mapping report says what stayed digital in a loop, and why") {
  const auto digital = mapping_report(compiled(assisted(small_target())))["loops"][0]["digital"];
  std::map<std::string, std::string> why;
  for (const auto& d : digital) why[d["op"].get<std::string>()] = d["why"].get<std::string>();
  CHECK(why["RMSNorm"] == "not an analog function of aoc-48");
  CHECK(why["SiLU"] == "not an analog function of aoc-48");
  CHECK(why.count("Tanh") == 0);  // in the electronics
}

TEST_CASE("compile: an assisted loop converts at every crossing between analog and digital ops") {
  const Program p = compiled(assisted(small_target()));
  const Op& loop = the_loop(p);
  CHECK(attr_string(loop, "layout") == "assisted");
  std::map<std::string, int> to;
  for (const Op* c : ops_of(loop.body->ops, OpKind::Convert)) ++to[attr_string(*c, "to")];
  // DAC: n into the stacked product, h into o_proj; ADC: the stacked product's result, the result of
  // tanh back to the digital iterate
  CHECK(to["analog"] == 2);
  CHECK(to["digital"] == 2);
  for (const Op& o : loop.body->ops) {
    if (o.kind == OpKind::RMSNorm || o.kind == OpKind::SiLU || o.kind == OpKind::Mul) CHECK(place(o) == Place::Digital);
    if (o.kind == OpKind::Tanh) CHECK(place(o) == Place::Analog);
  }
}

TEST_CASE("compile: tiles cover each matrix once, a core at most, dealt over modules then passes") {
  const Program p = compiled(deq(small_target(8, 3)));
  const OpticalPlan* mix = p.plan("mix");
  REQUIRE(mix);
  CHECK(mix->loop == "deq");
  CHECK(mix->tiles.size() == 9);  // 20 x 20 on 8 x 8 cores: 3 x 3
  std::int64_t area = 0;
  int max_pass = 0;
  for (const Tile& t : mix->tiles) {
    CHECK(t.rows <= 8);
    CHECK(t.cols <= 8);
    CHECK(t.module < 3);
    area += t.rows * t.cols, max_pass = std::max(max_pass, t.pass);
  }
  CHECK(area == 400);
  CHECK(max_pass >= 2);
  const Program untiled = compiled(deq(small_target(8, 3)), {.tile = false});
  CHECK(untiled.plan("mix")->tiles.size() == 1);
}

TEST_CASE("program: a code step that is negative, NaN or infinite is refused, naming the plan and tile") {
  for (const double bad : {-1.0, std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity()}) {
    Program p = compiled(deq(small_target()));
    p.plan("mix")->code_step[1] = bad;
    CHECK_THROWS_WITH(verify_program(p), Catch::Contains("'mix'") && Catch::Contains("tile 1: code step") && Catch::Contains("is not a finite number >= 0"));
  }
}

TEST_CASE("compile: quantize gives every tile SLM codes within the machine's bits") {
  const Program p = compiled(deq(small_target()));
  const OpticalPlan* mix = p.plan("mix");
  REQUIRE(mix);
  CHECK(mix->slm_bits == hw48().converters->slm_bits);
  REQUIRE(mix->codes.size() == 400);
  REQUIRE(mix->code_step.size() == mix->tiles.size());
  const std::int32_t top = (1 << (mix->slm_bits - 1)) - 1;
  CHECK(*std::max_element(mix->codes.begin(), mix->codes.end()) <= top);
  // each tile's largest weight is the largest code
  const Tile& t = mix->tiles[0];
  std::int32_t m = 0;
  for (std::int64_t r = 0; r < t.rows; ++r)
    for (std::int64_t c = 0; c < t.cols; ++c) m = std::max(m, std::abs(mix->codes[static_cast<size_t>(r * 20 + c)]));
  CHECK(m == top);
}

TEST_CASE("run: compiled models on the CPU reference match the interpreter within 1e-9") {
  for (auto make : {deq, assisted}) {
    const Program source = make(small_target());
    const Program p = compiled(source);
    const std::string in = source.graph.inputs[0].name;
    const Tensor& x = in == "x" ? kX : kU;
    const auto want = interpret(source.graph, source.weights, {{in, x}});
    const auto got = run_on("cpu", p, {{in, x}});
    const std::string out = source.graph.outputs[0];
    INFO(source.graph.name);
    CHECK(max_diff(want.values.at(out), got.values.at(p.graph.outputs[0])) < 1e-9);
    CHECK(want.fixed_points[0].iterations == got.fixed_points[0].iterations);
  }
}

TEST_CASE("run: an imported implicit Mamba2 and Llama3, compiled and tiled, match the interpreter within 1e-9") {
  for (const std::string& cfg : {tiny_mamba2(), tiny_llama()}) {
    Imported m = import_config(cfg, {});
    for (Op& o : m.graph.ops)  // a fixed number of steps: the comparison is per step, converged or not
      if (o.kind == OpKind::FixedPoint) o.attrs["rule"] = std::string("fixed"), o.attrs["max_iter"] = std::int64_t{6};
    Program p;
    p.graph = m.graph, p.weights = m.weights, p.target = small_target(8, 4);
    run_pipeline(p, {});
    const Tensor tokens = tensor({2, 5}, {3, 1, 4, 1, 5, 9, 2, 6, 5, 3});
    const auto want = interpret(m.graph, m.weights, {{"tokens", tokens}});
    const auto got = run_on("cpu", p, {{"tokens", tokens}});
    INFO(cfg);
    CHECK(max_diff(want.values.at("logits"), got.values.at(p.graph.outputs[0])) < 1e-9);
  }
}

TEST_CASE("run: on the CPU reference a tiled program gives the untiled one's values, bit for bit") {
  const Program tiled = compiled(assisted(small_target(4, 2)));
  const Program whole = compiled(assisted(small_target(4, 2)), {.tile = false});
  CHECK(tiled.plan("o_proj")->tiles.size() > 1);
  CHECK(run_on("cpu", tiled, {{"u", kU}}).values.at("zs").data == run_on("cpu", whole, {{"u", kU}}).values.at("zs").data);
}

TEST_CASE("run: the simulator without converters and noise is the CPU reference") {
  const Program p = compiled(deq(small_target()));
  BackendOptions ideal;
  ideal.noise = false, ideal.quantize = false, ideal.optics = false, ideal.f64 = true;
  CHECK(max_diff(run_on("sim", p, {{"x", kX}}, ideal).values.at(p.graph.outputs[0]),
                 run_on("cpu", p, {{"x", kX}}).values.at(p.graph.outputs[0])) < 1e-12);
}

TEST_CASE("run: the simulator's converters and noise change the result, the same for a seed and any thread count") {
  const Program p = compiled(deq(small_target()));
  const std::string y = p.graph.outputs[0];
  const auto ref = run_on("cpu", p, {{"x", kX}}).values.at(y);
  BackendOptions o;
  o.seed = 7;
  const ProgramResult a = run_on("sim", p, {{"x", kX}}, o);
  o.threads = 2;
  const ProgramResult b = run_on("sim", p, {{"x", kX}}, o);
  o.seed = 8;
  const ProgramResult c = run_on("sim", p, {{"x", kX}}, o);
  CHECK(max_diff(a.values.at(y), ref) > 1e-6);
  CHECK(a.values.at(y).data == b.values.at(y).data);
  CHECK(a.values.at(y).data != c.values.at(y).data);
  CHECK(a.counters.dac > 0);
  CHECK(a.counters.adc > 0);
}

TEST_CASE("run: a token at a time through many small tiles, the simulator gives the same values with 1 and 3 threads") {
  const Program p = compiled(deq(small_target(4, 3)));  // W 20 x 20 on 4-channel cores: 25 tiles
  REQUIRE(p.plan("mix")->tiles.size() >= 12);
  const std::string y = p.graph.outputs[0];
  BackendOptions o;
  o.seed = 3, o.mode = Mode::Sequential;  // one token of 2 samples per read: fewer rows than threads
  const ProgramResult one = run_on("sim", p, {{"x", kX}}, o);
  o.threads = 3;
  const ProgramResult three = run_on("sim", p, {{"x", kX}}, o);
  CHECK(one.values.at(y).data == three.values.at(y).data);
  CHECK(one.counters.adc == three.counters.adc);
}

TEST_CASE("run: sequential and simultaneous modes reach the same fixed points on a compiled contractive model") {
  const Program p = compiled(assisted(small_target()));
  BackendOptions seq;
  seq.mode = Mode::Sequential;
  const auto a = run_on("cpu", p, {{"u", kU}});
  const auto b = run_on("cpu", p, {{"u", kU}}, seq);
  CHECK(max_diff(a.values.at(p.graph.outputs[0]), b.values.at(p.graph.outputs[0])) < 1e-9);
  CHECK(b.fixed_points[0].iterations.size() == 6);  // one solve per token
}

TEST_CASE("program: the HDF5 file gives back the program and its results") {
  const Program p = compiled(assisted(small_target()));
  const auto path = temp_dir() / "assisted.aocp.h5";
  write_program_h5(path.string(), p);
  const Program q = read_program_h5(path.string());
  CHECK(print_program(q) == print_program(p));
  CHECK(q.plan("o_proj")->codes == p.plan("o_proj")->codes);
  CHECK(run_on("cpu", q, {{"u", kU}}).values.at(q.graph.outputs[0]).data == run_on("cpu", p, {{"u", kU}}).values.at(p.graph.outputs[0]).data);
}

TEST_CASE("program: a file that is not a program is one error naming it") {
  const auto path = temp_dir() / "not-a-program.h5";
  write_weights_h5(path.string(), {{"W", tensor({1}, {1.0})}});
  REQUIRE_THROWS_WITH(read_program_h5(path.string()), Catch::Contains("not-a-program.h5: /program: missing"));
}

TEST_CASE("compile: a target without converters cannot quantize, and says how to compile without") {
  Target t = small_target();
  t.slm_bits = 0;
  CHECK_THAT(compile_error(deq(t)), Catch::Contains("quantize") && Catch::Contains("--no-quantize"));
  CHECK(compile_error(deq(t), {.quantize = false}) == "(no error)");
}

TEST_CASE("compile: malformed graphs stop before the first pass with the verifier's message") {
  Program p = deq(small_target());
  p.weights["W"].data[3] = std::nan("");
  CHECK_THAT(compile_error(p), Catch::Contains("the input graph") && Catch::Contains("NaN"));
  Program q = deq(small_target());
  q.graph.ops[2].inputs[0] = "nowhere";
  CHECK_THAT(compile_error(q), Catch::Contains("undefined value 'nowhere'"));
}

TEST_CASE("compile: a placement the core cannot run is refused by the verifier") {
  Program p = compiled(deq(small_target()));
  for (Op& o : p.graph.ops)
    if (o.name == "inj") o.attrs[kPlaceAttr] = std::string("optical");  // a Linear with a bias
  CHECK_THROWS_WITH(verify_program(p), Catch::Contains("'inj'") && Catch::Contains("only a Linear without bias"));
}

TEST_CASE("run: calibrated converter ranges bring the simulator closer to the reference") {
  Program p = compiled(assisted(small_target()));
  BackendOptions q;
  q.noise = false;
  q.optics = false;  // the converters alone (the raw chain's distortion would swamp them)
  const std::string y = p.graph.outputs[0];
  const auto ref = run_on("cpu", p, {{"u", kU}}).values.at(y);
  const double before = max_diff(run_on("sim", p, {{"u", kU}}, q).values.at(y), ref);
  CHECK(calibrate_converters(p, {{"u", kU}}) > 0);
  CHECK_NOTHROW(verify_program(p));
  const double after = max_diff(run_on("sim", p, {{"u", kU}}, q).values.at(y), ref);
  CHECK(after < before);
}

TEST_CASE("run: calibration sets each split matrix's partial-sum ADC range from its largest tile sum, kept by the program's files") {
  Program p = compiled(assisted(small_target()));
  Program wide = p;
  calibrate_converters(p, {{"u", kU}}, 1.0);
  calibrate_converters(wide, {{"u", kU}}, 1.5);
  int split = 0;
  for (std::size_t k = 0; k < p.optical.size(); ++k) {
    if (p.optical[k].column_blocks() < 2) {
      CHECK(p.optical[k].sum_range == 0);
      continue;
    }
    ++split;
    CHECK(p.optical[k].sum_range > 0);
    CHECK(wide.optical[k].sum_range == Approx(1.5 * p.optical[k].sum_range));
  }
  REQUIRE(split > 0);  // 10 columns over 8 channels
  const auto path = (temp_dir() / "sums.aocp.h5").string();
  write_program_h5(path, p);
  const Program back = read_program_h5(path);
  Program exact = compiled(assisted(small_target()), {.quantize = false});  // the printed form has no SLM codes
  calibrate_converters(exact, {{"u", kU}}, 1.0);
  const Program printed = parse_program(print_program(exact, true));
  for (std::size_t k = 0; k < p.optical.size(); ++k) {
    CHECK(back.optical[k].sum_range == p.optical[k].sum_range);
    CHECK(printed.optical[k].sum_range == exact.optical[k].sum_range);
  }
  // with headroom, the simulator's partial sums of the calibration inputs then fit their ADCs
  BackendOptions q;
  q.noise = false, q.quantize = true, q.optics = false;
  const RunCounters c = run_on("sim", wide, {{"u", kU}}, q).counters;
  CHECK(c.adc > 0);
  CHECK(c.adc_clipped == 0);
}

namespace {

// assisted() with a weight two products read: Wt after the loop (its own DAC) and on the input u
// (whose DAC the loop's injection shares, so not a DAC of products alone).
Program shared_weight(const Target& t) {
  Program p = assisted(t);
  p.graph.weights.push_back(decl("Wt", {4, 10}));
  p.weights["Wt"] = wave({4, 10}, 0.9, 0.4);
  p.graph.ops.push_back(make_op(OpKind::Linear, {"zs", "Wt"}, {"y1"}, {}, "after"));
  p.graph.ops.push_back(make_op(OpKind::Linear, {"u", "Wt"}, {"y2"}, {}, "beside"));
  p.graph.outputs = {"zs", "y1", "y2"};
  return p;
}

PassOptions balanced(double alpha) {
  PassOptions o;
  o.balance = alpha;
  o.channel_largest = [](const Program& q) { return converter_channel_largest(q, {{"u", kU}}); };
  return o;
}

}  // namespace

TEST_CASE("compile: balance moves a scale per DAC channel into the products' weights and keeps every product") {
  const Program plain = compiled(shared_weight(small_target()), {.quantize = false});
  Program p = shared_weight(small_target());
  PassOptions o = balanced(1.0);
  o.quantize = false;
  long long converters = -1;
  run_pipeline(p, o, [&](const NamedPass& pass, const Program&, const PassStats& stats) {
    if (pass.name == std::string("balance")) converters = stats.get("converters balanced");
  });
  CHECK(converters == 3);  // the loop's two DACs and the one after it; u's feeds the loop too
  // Wt stays as the input's product reads it; the product after the loop reads its own copy.
  CHECK(p.weights.at("Wt").data == plain.weights.at("Wt").data);
  REQUIRE(p.weights.count("Wt.balanced"));
  CHECK(p.weights.at("Wt.balanced").data != plain.weights.at("Wt").data);
  const auto a = run_on("cpu", plain, {{"u", kU}}), b = run_on("cpu", p, {{"u", kU}});
  for (const std::string& y : plain.graph.outputs) CHECK(max_diff(a.values.at(y), b.values.at(y)) < 1e-12);
  // alpha 1: every channel of a balanced DAC reaches the DAC's largest value on the sample inputs
  const auto seen = converter_channel_largest(p, {{"u", kU}});
  int checked = 0;
  walk(p.graph.ops, [&](const Op& op, int) {
    if (op.kind != OpKind::Convert || op.name.find(".balance") != std::string::npos) return;
    const auto& in = op.inputs[0];
    if (in.size() < 9 || in.substr(in.size() - 9) != ".balanced") return;
    const std::vector<double>& m = seen.at(op.name);
    const double top = *std::max_element(m.begin(), m.end());
    for (double v : m) CHECK(v == Approx(top).epsilon(1e-12));
    ++checked;
  });
  CHECK(checked == 3);
  // the program's files keep the scales: the same outputs read back
  const auto path = (temp_dir() / "balanced.aocp.h5").string();
  write_program_h5(path, p);
  const Program back = read_program_h5(path);
  CHECK(run_on("cpu", back, {{"u", kU}}).values.at("y1").data == b.values.at("y1").data);
  CHECK(print_program(parse_program(print_program(p, true))) == print_program(p));
}

TEST_CASE("compile: balance needs sample inputs and a strength above 0 and at most 1") {
  PassOptions o;
  o.balance = 0.5;
  CHECK_THAT(compile_error(assisted(small_target()), o), Catch::Contains("balance") && Catch::Contains("--calibrate"));
  CHECK_THAT(compile_error(assisted(small_target()), balanced(1.5)), Catch::Contains("(0, 1]"));
}

TEST_CASE("run: balanced DAC channels bring a quantized loop closer to the reference") {
  // a loop whose RMSNorm gains span 30x: its DAC's channels use few codes where the gain is small
  const auto spread = [](Program p) {
    for (std::size_t c = 0; c < 10; ++c) p.weights["gain"].data[c] = std::pow(30.0, c / 9.0) / 30.0;
    return p;
  };
  PassOptions without;
  without.calibrate = [](Program& q) { return calibrate_converters(q, {{"u", kU}}); };
  const Program p = compiled(spread(assisted(small_target())), without);
  BackendOptions o;
  o.noise = false, o.optics = false;  // the converters and SLM codes alone
  const auto ref = run_on("cpu", p, {{"u", kU}}).values.at("zs");
  const double plain = max_diff(run_on("sim", p, {{"u", kU}}, o).values.at("zs"), ref);
  for (double alpha : {0.5, 1.0}) {
    PassOptions with = balanced(alpha);
    with.calibrate = without.calibrate;
    const double err = max_diff(run_on("sim", compiled(spread(assisted(small_target())), with), {{"u", kU}}, o).values.at("zs"), ref);
    INFO("alpha " << alpha << ": " << err << " against " << plain);
    CHECK(err < 0.8 * plain);
  }
}

namespace {

// A tiny implicit Mamba2 imported, compiled for aoc-48 and given seeded inputs, through the CLI.
struct CliModel {
  std::filesystem::path dir = temp_dir() / "cli";
  std::string graph = (dir / "m.json").string(), weights = (dir / "m.h5").string(), prog = (dir / "m.aocp.h5").string(),
              tokens = (dir / "tok.h5").string();
  CliModel() {
    std::filesystem::create_directories(dir);
    REQUIRE(run_aoc("import " + tiny_mamba2() + " -o " + graph).status == 0);
  }
};

}  // namespace

TEST_CASE("cli: aoc compile writes a program and prints where each op runs") {
  CliModel m;
  const Run r = run_aoc("compile " + m.graph + " --weights " + m.weights + " --hw aoc-48 -o " + m.prog);
  INFO(r.out);
  REQUIRE(r.status == 0);
  CHECK_THAT(r.out, Catch::Contains("loop 'deq' (assisted") && Catch::Contains("DAC") && Catch::Contains("tiles") &&
                        Catch::Contains("wrote " + m.prog));
  CHECK(is_program_h5(m.prog));
  const Run all = run_aoc("compile " + m.graph + " --weights " + m.weights + " --print-after-all");
  CHECK_THAT(all.out, Catch::Contains("----- after partition -----") && Catch::Contains("----- after quantize -----") &&
                          Catch::Contains("Convert("));
}

TEST_CASE("cli: aoc compile of a graph with weights but none given or beside it says what to pass") {
  CliModel m;
  const std::string prog = (m.dir / "never.aocp.h5").string(), alone = (m.dir / "alone.json").string();
  std::filesystem::copy_file(m.graph, alone, std::filesystem::copy_options::overwrite_existing);  // no alone.h5
  const Run r = run_aoc("compile " + alone + " --hw aoc-48 -o " + prog);
  CHECK(r.status != 0);
  CHECK_THAT(r.out, Catch::Contains("--weights") && Catch::Contains("--shapes-only"));
  CHECK_FALSE(std::filesystem::exists(prog));
}

TEST_CASE("cli: aoc compile --balance prints its pass, and without --calibrate is one error that writes nothing") {
  CliModel m;
  const std::string prog = (m.dir / "balanced.aocp.h5").string();
  REQUIRE(run_aoc("compile " + m.graph + " --weights " + m.weights + " -o " + m.prog).status == 0);
  REQUIRE(run_aoc("run " + m.prog + " --example-input " + m.tokens + " --batch 2 --length 4").status == 0);
  const Run bad = run_aoc("compile " + m.graph + " --weights " + m.weights + " --balance 0.5 -o " + prog);
  CHECK(bad.status != 0);
  CHECK_THAT(bad.out, Catch::Contains("--balance needs --calibrate"));
  CHECK_FALSE(std::filesystem::exists(prog));
  const Run nan = run_aoc("compile " + m.graph + " --weights " + m.weights + " --calibrate " + m.tokens + " --balance nan -o " + prog);
  CHECK(nan.status != 0);
  CHECK_THAT(nan.out, Catch::Contains("--balance: expected a finite number"));
  CHECK_FALSE(std::filesystem::exists(prog));
  const Run r = run_aoc("compile " + m.graph + " --weights " + m.weights + " --calibrate " + m.tokens + " --balance 0.5 --quiet --print-after-all -o " + prog);
  INFO(r.out);
  REQUIRE(r.status == 0);
  CHECK_THAT(r.out, Catch::Contains("----- after balance {alpha = 0.5} -----") && Catch::Contains("converters balanced"));
  CHECK(is_program_h5(prog));
}

TEST_CASE("cli: aoc run says which noisy solves stopped at their noise floor, and records them") {
  CliModel m;
  REQUIRE(run_aoc("compile " + m.graph + " --weights " + m.weights + " -o " + m.prog).status == 0);
  REQUIRE(run_aoc("run " + m.prog + " --example-input " + m.tokens + " --batch 2 --length 4").status == 0);
  const std::string quiet = (m.dir / "quiet.h5").string(), loud = (m.dir / "loud.h5").string();
  // the file's noise, and a receiver fifty times louder: a residual made of noise never meets the tolerance
  const Run a = run_aoc("run " + m.prog + " --inputs " + m.tokens + " --backend sim --quantize --noise -o " + quiet);
  const Run b = run_aoc("run " + m.prog + " --inputs " + m.tokens + " --backend sim --quantize --noise --set noise.thermal_sigma=0.05 -o " + loud);
  INFO(a.out << b.out);
  REQUIRE((a.status == 0 && b.status == 0));
  CHECK_THAT(b.out, Catch::Contains("stopped at the noise floor"));
  const std::vector<double> floor = aoc::read_h5_array(loud, "deq.at_floor").values;
  CHECK(std::count(floor.begin(), floor.end(), 1.0) > 0);
  const Run j = run_aoc("run " + m.prog + " --inputs " + m.tokens + " --backend sim --quantize --noise --set noise.thermal_sigma=0.05 --json -o " + loud);
  REQUIRE(j.status == 0);
  CHECK(nlohmann::json::parse(j.out).at("noise_floor_stops").get<long long>() == std::count(floor.begin(), floor.end(), 1.0));
  // the reference never stops at a floor: no such dataset
  const std::string cpu = (m.dir / "cpu-floor.h5").string();
  REQUIRE(run_aoc("run " + m.prog + " --inputs " + m.tokens + " --backend cpu -o " + cpu).status == 0);
  CHECK_THROWS(aoc::read_h5_array(cpu, "deq.at_floor"));
}

TEST_CASE("cli: aoc run runs a program on both backends and aoc check compares them") {
  CliModel m;
  REQUIRE(run_aoc("compile " + m.graph + " --weights " + m.weights + " -o " + m.prog).status == 0);
  REQUIRE(run_aoc("run " + m.prog + " --example-input " + m.tokens + " --batch 2 --length 4").status == 0);
  const Run cpu = run_aoc("run " + m.prog + " --inputs " + m.tokens + " --backend cpu -o " + (m.dir / "cpu.h5").string());
  INFO(cpu.out);
  REQUIRE(cpu.status == 0);
  CHECK_THAT(cpu.out, Catch::Contains("fixed points converged"));
  const Run sim = run_aoc("run " + m.prog + " --inputs " + m.tokens + " --backend sim --quantize --noise -o " + (m.dir / "sim.h5").string());
  INFO(sim.out);
  REQUIRE(sim.status == 0);
  CHECK_THAT(sim.out, Catch::Contains("conversions:"));
  const Run exact = run_aoc("check " + m.prog + " --inputs " + m.tokens + " --ideal --max-abs-error 1e-12");
  INFO(exact.out);
  CHECK(exact.status == 0);
  CHECK_THAT(exact.out, Catch::Contains("within the tolerances"));
  const Run noisy = run_aoc("check " + m.prog + " --inputs " + m.tokens + " --quantize --noise --seeds 2 --max-abs-error 1e-12");
  INFO(noisy.out);
  CHECK(noisy.status == 1);
  CHECK_THAT(noisy.out, Catch::Contains("FAIL: max abs error"));
}

TEST_CASE("cli: aoc check scores a language model on the next token: cross-entropy and perplexity for every backend") {
  CliModel m;
  REQUIRE(run_aoc("compile " + m.graph + " --weights " + m.weights + " -o " + m.prog).status == 0);
  REQUIRE(run_aoc("run " + m.prog + " --example-input " + m.tokens + " --batch 2 --length 4").status == 0);
  const Run r = run_aoc("check " + m.prog + " --inputs " + m.tokens + " --ideal --json");
  INFO(r.out);
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  const double ref = j["reference_cross_entropy_nats"].get<double>();
  CHECK(ref > 0);
  CHECK(j["reference_perplexity"].get<double>() == Approx(std::exp(ref)));
  // --ideal: the simulator is the reference to float64 rounding, so are its scores
  CHECK(j["cross_entropy_nats"]["mean"].get<double>() == Approx(ref).epsilon(1e-12));
  const Run text = run_aoc("check " + m.prog + " --inputs " + m.tokens + " --ideal");
  CHECK_THAT(text.out, Catch::Contains("cross-entropy (nats)") && Catch::Contains("perplexity"));
}

TEST_CASE("cli: aoc check warns with counts when conversions clip, naming --calibrate for an uncalibrated program") {
  const auto dir = temp_dir() / "clip";
  std::filesystem::create_directories(dir);
  const std::string g = (dir / "st.json").string(), prog = (dir / "st.aocp.h5").string(), tok = (dir / "tok.h5").string();
  REQUIRE(run_aoc("import " + aoc::test::kStateTracking + " -o " + g).status == 0);
  REQUIRE(run_aoc("compile " + g + " --hw aoc-48 -o " + prog).status == 0);
  REQUIRE(run_aoc("run " + prog + " --example-input " + tok + " --batch 1 --length 2").status == 0);
  const Run r = run_aoc("check " + prog + " --inputs " + tok + " --quantize");
  INFO(r.out);
  REQUIRE(r.status == 0);
  CHECK_THAT(r.out, Catch::Contains("check: warning: sim clipped ") && Catch::Contains(" DAC and ") &&
                        Catch::Contains("not calibrated: aoc compile ... --calibrate"));
  const Run exact = run_aoc("check " + prog + " --inputs " + tok + " --ideal");
  CHECK(exact.out.find("clipped") == std::string::npos);  // no converters, nothing clips
}

TEST_CASE("cli: an unknown command is a one-line error suggesting the closest, else listing them") {
  const Run typo = run_aoc("estimat --hw aoc-48");
  CHECK(typo.status == 1);
  CHECK(typo.out == "aoc: error: unknown command 'estimat' (did you mean estimate?); aoc --help says what each does\n");
  const Run far = run_aoc("nonsense");
  CHECK(far.status == 1);
  CHECK(far.out.rfind("aoc: error: unknown command 'nonsense'; the commands: hw, verify-dt, loop, run, ", 0) == 0);
  CHECK(far.out.find("report; aoc --help says what each does\n") != std::string::npos);
  CHECK(std::count(far.out.begin(), far.out.end(), '\n') == 1);
}

TEST_CASE("cli: aoc hw list names every bundled machine with its channels and modules") {
  const Run r = run_aoc("hw list");
  INFO(r.out);
  REQUIRE(r.status == 0);
  for (const char* m : {"aoc-16 ", "aoc-48 ", "aoc-scale "}) CHECK_THAT(r.out, Catch::Contains(m));
  CHECK_THAT(r.out, Catch::Contains("2048       25"));
}

TEST_CASE("cli: aoc list names the bundled machines, trained models, scenarios and published configs") {
  const Run r = run_aoc("list");
  INFO(r.out);
  REQUIRE(r.status == 0);
  for (const char* s : {"aoc-48 ", "parity-implicit ", "s3-implicit-long-solve ", "parity-implicit.json", "demo.json",
                        "mamba2-1.3b-analytic.json", "mamba2-130m-implicit", "sweep scenarios: aoc sweep FILE", "retina models (SYNTHETIC retina)",
                        "  implicit                 implicit"})
    CHECK_THAT(r.out, Catch::Contains(s));
  CHECK_THAT(r.out, Catch::Contains("parity   ") && Catch::Contains("1.000 at L 32"));  // the model's task and accuracy
}

TEST_CASE("cli: aoc run of a program with an input missing names the file and the dataset") {
  CliModel m;
  REQUIRE(run_aoc("compile " + m.graph + " --weights " + m.weights + " -o " + m.prog).status == 0);
  const std::string bad = (m.dir / "bad.h5").string();
  write_weights_h5(bad, {{"tokenz", tensor({1, 2}, {1, 2})}});
  const Run r = run_aoc("run " + m.prog + " --inputs " + bad + " -o " + (m.dir / "out.h5").string());
  CHECK(r.status != 0);
  CHECK_THAT(r.out, Catch::Contains("bad.h5: /tokens: missing"));
}

TEST_CASE("run: the calibrated optical chain perturbs each tile, the same on every run") {
  const Program p = compiled(assisted(small_target(8, 3)));
  const std::string y = p.graph.outputs[0];
  const auto ref = run_on("cpu", p, {{"u", kU}}).values.at(y);
  BackendOptions o;
  o.noise = false, o.quantize = false, o.optics = true;
  const auto a = run_on("sim", p, {{"u", kU}}, o).values.at(y);
  const auto b = run_on("sim", p, {{"u", kU}}, o).values.at(y);
  CHECK(a.data == b.data);
  CHECK(max_diff(a, ref) > 1e-6);
  for (double v : a.data) CHECK(std::isfinite(v));
}

TEST_CASE("run: the calibrated optical chain refuses tiles larger than the machine's core") {
  Target t16 = target_of(hw16(), "aoc-16", {});
  const Program fits = compiled(assisted(t16), {.tile = false});  // 18 x 10 and 10 x 9 on 16 channels
  const Program big = compiled(deq(t16), {.tile = false});       // 20 x 20
  BackendOptions o;
  o.noise = false, o.quantize = false, o.optics = true;
  CHECK_THROWS_WITH(make_backend("sim", &hw16())->run(big, {{"x", kX}}, o), Catch::Contains("does not fit the 16 channels"));
  CHECK_THROWS_WITH(make_backend("sim", &hw16())->run(fits, {{"u", kU}}, o), Catch::Contains("18 x 10"));
  const Program tiled = compiled(deq(t16));
  CHECK_NOTHROW(make_backend("sim", &hw16())->run(tiled, {{"x", kX}}, o));
}

TEST_CASE("compile: tiles of a matrix that overlap are refused, naming the first pair") {
  Program p = compiled(deq(small_target(8, 3)));  // mix: 20 x 20 in 3 x 3 tiles of 8, 8, 4
  std::vector<Tile>& tiles = p.plan("mix")->tiles;
  CHECK_NOTHROW(verify_program(p));
  // the 4 x 4 corner tile moved onto the first one: the same area, a gap where it was
  const auto corner = std::find_if(tiles.begin(), tiles.end(), [](const Tile& t) { return t.row0 == 16 && t.col0 == 16; });
  REQUIRE(corner != tiles.end());
  REQUIRE(tiles[0].row0 == 0);
  REQUIRE(tiles[0].col0 == 0);
  corner->row0 = 2, corner->col0 = 3;
  CHECK_THROWS_WITH(verify_program(p), Catch::Contains("tiles 0 and " + std::to_string(corner - tiles.begin()) + " overlap"));
}

TEST_CASE("compile: small matrices share a core block-diagonally, and overlapping tiles are refused") {
  Program p = compiled(deq(target_of(hw48(), "aoc-48", {})));  // 20 x 20 and 6 x 20 on 48 channels
  REQUIRE(p.plan("mix"));
  REQUIRE(p.plan("head"));
  const Tile &mix = p.plan("mix")->tiles.at(0), &head = p.plan("head")->tiles.at(0);
  CHECK(head.module == mix.module);
  CHECK(head.pass == mix.pass);
  CHECK(head.core_row0 >= mix.core_row0 + mix.rows);
  CHECK(head.core_col0 >= mix.core_col0 + mix.cols);
  CHECK(max_diff(run_on("cpu", p, {{"x", kX}}).values.at(p.graph.outputs[0]),
                 interpret(deq(small_target()).graph, deq(small_target()).weights, {{"x", kX}}).values.at("y")) < 1e-9);
  p.plan("head")->tiles[0].core_col0 = mix.core_col0;  // now both read LED channels 0..19
  CHECK_THROWS_WITH(verify_program(p), Catch::Contains("shares detector rows or LED channels"));
}
