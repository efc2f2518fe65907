// aoc import: the published implicit Mamba2 and Llama3 configs become verified graphs with the right
// number of parameters; tiny variants run in the interpreter and their fixed points converge.
#include <catch2/catch.hpp>

#include "tests/graph_support.hpp"
#include "tests/support.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <unistd.h>

#include "compiler/graph_json.hpp"
#include "compiler/import_config.hpp"
#include "compiler/interpret.hpp"
#include "compiler/verify.hpp"
#include "sim/error.hpp"

using namespace aoc::ir;
using aoc::test::Run;
using aoc::test::run_aoc;
using aoc::test::kData;
using aoc::test::kLlama;
using aoc::test::kStateTracking;
using aoc::test::temp_dir;

namespace {

const std::string k130m = kData + "mamba2-130m-implicit/config.json";


nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

std::string write_json(const nlohmann::json& j, const std::string& name) {
  const auto p = temp_dir() / name;
  std::ofstream(p) << j.dump(2);
  return p.string();
}

// The state-tracking config shrunk: d_model 16, d_state 4, expand 2, headdim 8 (2 heads), vocab 12,
// one layer.
std::string tiny_config() {
  nlohmann::json j = read_json(kStateTracking);
  j["backbone_config"]["d_model"] = 16;
  j["backbone_config"]["n_layer"] = 1;
  j["backbone_config"]["block_cfg"] = {{"d_state", 4}, {"expand", 2}, {"headdim", 8}};
  j["d_embed"] = 16;
  j["vocab_size"] = 12;
  j["n_tokens"] = 12;
  j["pad_vocab"] = false;
  return write_json(j, "tiny-config.json");
}

// The parameters of an implicit Mamba2 model by hand (implicit_ssm.md 1.1, 1.2; ngroups 1, K = 4,
// tied embeddings, no biases in in/out projections):
//   embedding V*D + injection (norm D + W D*d_in_proj + bias d_in_proj)
//   + n_layer * (norm D + in_proj D*d_in_proj + conv (d_inner + 2N)*(K + 1) + dt_bias, A, D: 3H
//                + gated norm d_inner + out_proj d_inner*D)
//   + final norm D,
// with d_inner = expand*D, H = d_inner/headdim, d_in_proj = 2 d_inner + 2N + H.
long long mamba2_params(long long V, long long D, long long n_layer, long long N, long long expand, long long headdim) {
  const long long di = expand * D, H = di / headdim, d_in_proj = 2 * di + 2 * N + H, K = 4;
  const long long layer = D + D * d_in_proj + (di + 2 * N) * (K + 1) + 3 * H + di + di * D;
  return V * D + (D + D * d_in_proj + d_in_proj) + n_layer * layer + D;
}

// The parameters of an implicit Llama3 model by hand (implicit_ssm.md 1.1, 1.3; no biases except the
// injection's, tied embeddings, n_kv_heads = n_head):
//   embedding V*D + injection (norm D + W D*3D + bias 3D)
//   + n_layer * (2 norms 2D + q, k, v, o 4 D^2 + SwiGLU w1, w3, w2 3 D*hidden) + final norm D,
// with hidden = floor(2 d_inner / 3). The explicit model has no injection.
long long llama_params(long long V, long long D, long long n_layer, long long d_inner, bool implicit = true) {
  const long long hidden = 2 * d_inner / 3;
  return V * D + (implicit ? D + D * 3 * D + 3 * D : 0) + n_layer * (2 * D + 4 * D * D + 3 * D * hidden) + D;
}

// The Llama config shrunk: d_model 16, 2 heads of 8, d_inner 48 (SwiGLU hidden 32), vocab 12, one layer.
std::string tiny_llama_config() {
  nlohmann::json j = read_json(kLlama);
  j["backbone_config"]["d_model"] = 16;
  j["backbone_config"]["n_layer"] = 1;
  j["backbone_config"]["d_inner"] = 48;
  j["backbone_config"]["block_cfg"] = {{"n_head", 2}};
  j["d_embed"] = 16;
  j["vocab_size"] = 12;
  return write_json(j, "tiny-llama.json");
}

}  // namespace

TEST_CASE("import: the state-tracking config verifies with its parameter count") {
  const Imported m = import_config(kStateTracking, {});
  REQUIRE_NOTHROW(verify(m.graph, &m.weights));
  // V 240, D 256, 1 layer, N 128, expand 4, headdim 64: d_inner 1024, 16 heads, d_in_proj 2320
  CHECK(m.parameter_count == mamba2_params(240, 256, 1, 128, 4, 64));
  CHECK(m.parameter_count == 1521984);
  CHECK(m.graph.name == "mamba2-state-tracking-implicit");
  const Op& fp = m.graph.ops.at(3);
  REQUIRE(fp.kind == OpKind::FixedPoint);
  CHECK(attr_number(fp, "tol") == 0.05);
  CHECK(attr_int(fp, "max_iter") == 2047);  // eval_f_max_iter (f_thres) - 1 steps, then the final call
  CHECK(attr_string(fp, "rule") == "released");
  CHECK(attr_number(fp, "damping") == 0.8);
  CHECK(attr_string(fp, "like") == "e");
  // A is stored negative, D is 1, the injection bias is zero
  for (double a : m.weights.at("layer0.A").data) CHECK((a <= -1.0 && a >= -16.0));
  for (double d : m.weights.at("layer0.D").data) CHECK(d == 1.0);
  for (double b : m.weights.at("injection.b").data) CHECK(b == 0.0);
}

TEST_CASE("import: the same seed gives the same weights, another seed others") {
  const Imported a = import_config(kStateTracking, {7});
  const Imported b = import_config(kStateTracking, {7});
  const Imported c = import_config(kStateTracking, {8});
  CHECK(a.weights.at("layer0.in_proj").data == b.weights.at("layer0.in_proj").data);
  CHECK(a.weights.at("layer0.in_proj").data != c.weights.at("layer0.in_proj").data);
}

TEST_CASE("import: mamba2-130m shapes only has about 130M parameters") {
  ImportOptions o;
  o.weights = false;
  const Imported m = import_config(k130m, o);
  REQUIRE_NOTHROW(verify(m.graph));
  CHECK(m.weights.empty());
  // vocab 50277 padded to a multiple of 16: 50288; D 768, 24 layers, N 128, expand 2, headdim 64
  CHECK(m.parameter_count == mamba2_params(50288, 768, 24, 128, 2, 64));
  CHECK(m.parameter_count == 131568088);
  const Op& fp = m.graph.ops.at(3);
  CHECK(attr_int(fp, "max_iter") == 95);  // f_thres = int(f_max_iter 24 * eval_factor 4), less the final call
}

TEST_CASE("import: mamba2-130m with weights is refused above max_weights and names --shapes-only") {
  try {
    import_config(k130m, {});
    FAIL("no error");
  } catch (const aoc::Error& e) {
    const std::string msg = e.what();
    CHECK(msg.find("131568088 parameters") != std::string::npos);
    CHECK(msg.find("--shapes-only") != std::string::npos);
  }
}

TEST_CASE("import: a tiny variant interprets and its FixedPoint converges") {
  const Imported m = import_config(tiny_config(), {3});
  REQUIRE_NOTHROW(verify(m.graph, &m.weights));
  CHECK(m.parameter_count == mamba2_params(12, 16, 1, 4, 2, 8));
  Tensor tokens;
  tokens.shape = {2, 5};
  tokens.data = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3};
  const InterpretResult r = interpret(m.graph, m.weights, {{"tokens", tokens}});
  const Tensor& logits = r.values.at("logits");
  CHECK(logits.shape == std::vector<std::int64_t>{2, 5, 12});
  REQUIRE(r.fixed_points.size() == 1);
  for (std::size_t s = 0; s < 2; ++s) {
    CHECK(r.fixed_points[0].converged[s] == 1);
    CHECK(r.fixed_points[0].iterations[s] < 2048);
  }
}

TEST_CASE("import: the explicit backbone has no FixedPoint and runs the blocks once") {
  nlohmann::json j = read_json(tiny_config());
  j["backbone_type"] = "explicit";
  j["deq_params"] = nlohmann::json::object();
  const Imported m = import_config(write_json(j, "tiny-explicit.json"), {});
  REQUIRE_NOTHROW(verify(m.graph, &m.weights));
  for (const auto& op : m.graph.ops) CHECK(op.kind != OpKind::FixedPoint);
  // no injection: its norm, weight and bias are not counted
  const long long d_in_proj = 2 * 32 + 2 * 4 + 4;
  CHECK(m.parameter_count == mamba2_params(12, 16, 1, 4, 2, 8) - (16 + 16 * d_in_proj + d_in_proj));
  Tensor tokens;
  tokens.shape = {1, 3};
  tokens.data = {1, 2, 3};
  CHECK(interpret(m.graph, m.weights, {{"tokens", tokens}}).values.at("logits").shape == std::vector<std::int64_t>{1, 3, 12});
}

TEST_CASE("import: llama3-130m imports shapes-only with the formula's parameter count") {
  ImportOptions o;
  o.weights = false;
  const Imported m = import_config(kLlama, o);
  REQUIRE_NOTHROW(verify(m.graph));
  CHECK(m.weights.empty());
  // V 50277 (not padded), D 768, 12 layers, d_inner 3072: SwiGLU hidden 2048
  CHECK(m.parameter_count == llama_params(50277, 768, 12, 3072));
  CHECK(m.parameter_count == 125339136);
  CHECK(m.graph.name == "llama3-130m-implicit");
  // embed, injection norm, injection, split into u_q, u_k, u_v, deq, lm_head
  REQUIRE(m.graph.ops.size() == 6);
  const Op& split = m.graph.ops.at(3);
  CHECK(split.kind == OpKind::Split);
  CHECK(split.outputs == std::vector<std::string>{"u_q", "u_k", "u_v"});
  const Op& fp = m.graph.ops.at(4);
  REQUIRE(fp.kind == OpKind::FixedPoint);
  CHECK(fp.inputs == std::vector<std::string>{"u_q", "u_k", "u_v", "e"});
  CHECK(attr_number(fp, "tol") == 0.05);
  CHECK(attr_int(fp, "max_iter") == 127);  // f_thres = int(f_max_iter 32 * eval_factor 4), less the final call
  CHECK(attr_number(fp, "damping") == 0.8);
  int attention = 0;
  for (const Op& op : fp.body->ops)
    if (op.kind == OpKind::CausalAttention) {
      ++attention;
      CHECK(attr_int(op, "heads") == 12);
      CHECK(attr_number(op, "rope_theta") == 500000.0);
    }
  CHECK(attention == 12);
  CHECK(fp.body->ops.back().name == "norm_f");  // the final norm inside the loop
}

TEST_CASE("import: a tiny Llama variant imports with weights, interprets and its FixedPoint converges") {
  const Imported m = import_config(tiny_llama_config(), {5});
  REQUIRE_NOTHROW(verify(m.graph, &m.weights));
  CHECK(m.parameter_count == llama_params(12, 16, 1, 48));
  CHECK(m.parameter_count == 3632);
  CHECK(m.weights.at("layer0.w1").shape == std::vector<std::int64_t>{32, 16});
  CHECK(m.weights.at("layer0.w2").shape == std::vector<std::int64_t>{16, 32});
  CHECK(m.weights.at("injection.W").shape == std::vector<std::int64_t>{48, 16});
  for (double b : m.weights.at("injection.b").data) CHECK(b == 0.0);
  Tensor tokens;
  tokens.shape = {2, 5};
  tokens.data = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3};
  const InterpretResult r = interpret(m.graph, m.weights, {{"tokens", tokens}});
  CHECK(r.values.at("logits").shape == std::vector<std::int64_t>{2, 5, 12});
  REQUIRE(r.fixed_points.size() == 1);
  for (std::size_t s = 0; s < 2; ++s) {
    CHECK(r.fixed_points[0].converged[s] == 1);
    CHECK(r.fixed_points[0].iterations[s] < 128);
  }
}

TEST_CASE("import: the explicit Llama backbone has no FixedPoint and no injection") {
  nlohmann::json j = read_json(tiny_llama_config());
  j["backbone_type"] = "explicit";
  j.erase("deq_params");
  const Imported m = import_config(write_json(j, "tiny-llama-explicit.json"), {});
  REQUIRE_NOTHROW(verify(m.graph, &m.weights));
  for (const auto& op : m.graph.ops) CHECK(op.kind != OpKind::FixedPoint);
  CHECK(m.parameter_count == llama_params(12, 16, 1, 48, false));
  CHECK(m.parameter_count == 3632 - (16 + 16 * 48 + 48));
  Tensor tokens;
  tokens.shape = {1, 3};
  tokens.data = {1, 2, 3};
  CHECK(interpret(m.graph, m.weights, {{"tokens", tokens}}).values.at("logits").shape == std::vector<std::int64_t>{1, 3, 12});
}

TEST_CASE("import: a Llama config with heads not dividing d_model is named") {
  nlohmann::json j = read_json(tiny_llama_config());
  j["backbone_config"]["block_cfg"]["n_head"] = 3;
  const std::string p = write_json(j, "bad-heads.json");
  CHECK_THROWS_WITH(import_config(p, {}), Catch::StartsWith(p + ": backbone_config.block_cfg.n_head: 3 heads do not split d_model 16"));
}

TEST_CASE("import: a d_embed other than d_model is named (no embedding projection)") {
  nlohmann::json j = read_json(tiny_config());
  j["d_embed"] = 8;
  const std::string p = write_json(j, "bad-d-embed.json");
  CHECK_THROWS_WITH(import_config(p, {}),
                    p + ": d_embed: 8 differs from backbone_config.d_model 16: the embedding projection is not supported");
}

TEST_CASE("import: a missing field is named with its path") {
  nlohmann::json j = read_json(tiny_config());
  j["backbone_config"]["block_cfg"].erase("d_state");
  const std::string p = write_json(j, "no-d-state.json");
  try {
    import_config(p, {});
    FAIL("no error");
  } catch (const aoc::Error& e) {
    CHECK(std::string(e.what()) == p + ": backbone_config.block_cfg.d_state: missing required field");
  }
}

TEST_CASE("import: a wrong type and an unknown model_type are named") {
  nlohmann::json j = read_json(tiny_config());
  j["backbone_config"]["d_model"] = "16";
  const std::string p = write_json(j, "bad-type.json");
  CHECK_THROWS_WITH(import_config(p, {}), p + ": backbone_config.d_model: expected an integer, got the string \"16\"");
  j = read_json(tiny_config());
  j["model_type"] = "gpt2";
  const std::string q = write_json(j, "bad-model.json");
  CHECK_THROWS_WITH(import_config(q, {}), Catch::Contains(q + ": model_type: \"gpt2\" is not one of"));
}

TEST_CASE("import: aoc import and aoc interpret run end to end on the tiny config") {
  const auto dir = temp_dir();
  const std::string graph = (dir / "tiny.json").string(), weights = (dir / "tiny.h5").string();
  const Run r = run_aoc("import " + tiny_config() + " -o " + graph + " --seed 3");
  INFO(r.out);
  REQUIRE(r.status == 0);
  CHECK(std::filesystem::exists(graph));
  CHECK(std::filesystem::exists(weights));
  CHECK(r.out.find("tol 0.05, max_iter 2047, damping 0.8, rule released") != std::string::npos);
  const Run i = run_aoc("interpret " + graph + " --weights " + weights + " --tokens 3,1,4,1,5");
  INFO(i.out);
  REQUIRE(i.status == 0);
  CHECK(i.out.find("argmax of logits per token:") != std::string::npos);
  CHECK(i.out.find("sample 0:") != std::string::npos);
  CHECK(i.out.find(", converged") != std::string::npos);
  const Run j = run_aoc("interpret " + graph + " --weights " + weights + " --tokens 3,1,4 --json");
  REQUIRE(j.status == 0);
  const auto rec = nlohmann::json::parse(j.out);
  CHECK(rec["argmax"].size() == 3);
  CHECK(rec["fixed_points"][0]["converged"][0] == 1);
}

TEST_CASE("import: aoc import errors are one line with exit 1") {
  const auto dir = temp_dir();
  const Run ls = run_aoc("import " + kLlama + " --shapes-only -o " + (dir / "llama.json").string());
  INFO(ls.out);
  CHECK(ls.status == 0);
  CHECK(ls.out.find("12 layer(s), d_model 768, 125339136 parameters") != std::string::npos);
  CHECK(ls.out.find("tol 0.05, max_iter 127, damping 0.8, rule released") != std::string::npos);
  const Run w = run_aoc("import " + kStateTracking + " --weights " + kStateTracking + " --shapes-only -o " + (dir / "st.json").string());
  CHECK(w.status == 1);
  CHECK(w.out == "aoc: error: --weights: a checkpoint and --shapes-only exclude each other\n");
  const Run s = run_aoc("import " + k130m + " --shapes-only -o " + (dir / "m130.json").string());
  INFO(s.out);
  CHECK(s.status == 0);
  CHECK(s.out.find("131568088 parameters") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir / "m130.h5"));
}

TEST_CASE("import: seeded weights handed over one tensor at a time are the ones kept in memory, in the same order, at any size") {
  ImportOptions streamed;
  std::vector<std::string> order;
  WeightStore got;
  streamed.weight_sink = [&](const std::string& name, Tensor&& t) { order.push_back(name), got[name] = std::move(t); };
  const Imported s = import_config(kStateTracking, streamed);
  CHECK(s.weights.empty());
  const Imported m = import_config(kStateTracking);
  REQUIRE(got.size() == m.weights.size());
  for (const auto& [name, t] : m.weights) {
    INFO(name);
    REQUIRE(got.count(name));
    CHECK(got.at(name).shape == t.shape);
    CHECK(got.at(name).data == t.data);
  }
  std::vector<std::string> declared;  // drawn in the graph's declaration order
  for (const auto& w : m.graph.weights) declared.push_back(w.name);
  CHECK(order == declared);
  // kept in memory, a model past max_weights is refused; streamed, the limit does not apply
  ImportOptions small;
  small.max_weights = 1000;
  CHECK_THROWS_WITH(import_config(kStateTracking, small), Catch::Contains("parameters is more than the 1000 this importer generates"));
  small.weight_sink = [](const std::string&, Tensor&&) {};
  CHECK_NOTHROW(import_config(kStateTracking, small));
}

// ---------------------------------------------------------------------------------------------
// Import that cannot lose a model

namespace {
const std::string kTrained = std::string(AOC_SOURCE_DIR) + "/models/trained/parity-implicit";
}  // namespace

TEST_CASE("import: a trained aoc model folder's weights.h5 is picked up without naming it") {
  const auto dir = temp_dir();
  const std::string graph = (dir / "picked.json").string();
  const Run r = run_aoc("import " + kTrained + "/config.json -o " + graph);
  INFO(r.out);
  REQUIRE(r.status == 0);
  CHECK_THAT(r.out, Catch::Contains("trained weights from " + kTrained + "/weights.h5, found next to the config"));
  const WeightStore got = read_weights_h5((dir / "picked.h5").string()), shipped = read_weights_h5(kTrained + "/weights.h5");
  REQUIRE(got.size() == shipped.size());
  for (const auto& [name, t] : shipped) {
    INFO(name);
    REQUIRE(got.count(name));
    CHECK(got.at(name).shape == t.shape);
    CHECK(got.at(name).data == t.data);
  }
}

TEST_CASE("import: --seed draws random weights even where the folder holds trained ones") {
  const auto dir = temp_dir();
  const Run r = run_aoc("import " + kTrained + "/config.json -o " + (dir / "random.json").string() + " --seed 5");
  INFO(r.out);
  REQUIRE(r.status == 0);
  CHECK_THAT(r.out, Catch::Contains("seeded random weights, seed 5"));
  CHECK(read_weights_h5((dir / "random.h5").string()).at("embedding").data != read_weights_h5(kTrained + "/weights.h5").at("embedding").data);
}

TEST_CASE("import: --weights takes an aoc weights HDF5 by its content, whatever its name") {
  const auto dir = temp_dir();
  const std::string renamed = (dir / "trained.bin").string();
  std::filesystem::copy_file(kTrained + "/weights.h5", renamed, std::filesystem::copy_options::overwrite_existing);
  const Run r = run_aoc("import " + kTrained + "/config.json --weights " + renamed + " -o " + (dir / "named.json").string());
  INFO(r.out);
  REQUIRE(r.status == 0);
  CHECK(read_weights_h5((dir / "named.h5").string()).at("embedding").data == read_weights_h5(kTrained + "/weights.h5").at("embedding").data);
}

TEST_CASE("import: weights of another model are a one-line error naming the tensor and both shapes") {
  const auto dir = temp_dir();
  const Run r = run_aoc("import " + kStateTracking + " --weights " + kTrained + "/weights.h5 -o " + (dir / "wrong.json").string());
  CHECK(r.status == 1);
  CHECK_THAT(r.out, Catch::Contains(kTrained + "/weights.h5: tensor 'embedding': shape [2, 32], the graph of"));
  CHECK_THAT(r.out, Catch::Contains("declares [240, 256]"));
  CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 1);
  CHECK_FALSE(std::filesystem::exists(dir / "wrong.json"));
}

TEST_CASE("import: a --weights file that is neither HDF5 nor safetensors is named") {
  const auto dir = temp_dir();
  const std::string junk = (dir / "junk.h5").string();
  std::ofstream(junk) << "not weights at all";
  const Run r = run_aoc("import " + kTrained + "/config.json --weights " + junk + " -o " + (dir / "junk-graph.json").string());
  CHECK(r.status == 1);
  CHECK(r.out == "aoc: error: " + junk + ": not a weights file: neither HDF5 (an aoc weights.h5) nor safetensors (a checkpoint or its index .json)\n");
}

TEST_CASE("import: the Mamba2 vocabulary is the released class's n_tokens, Llama's vocab_size") {
  nlohmann::json m = read_json(tiny_config());
  m["n_tokens"] = 10;
  m["vocab_size"] = 12;
  const Imported mi = import_config(write_json(m, "tiny-n-tokens.json"), {0, false});
  nlohmann::json l = read_json(tiny_llama_config());
  l["n_tokens"] = 10;
  l["vocab_size"] = 12;
  const Imported li = import_config(write_json(l, "tiny-llama-n-tokens.json"), {0, false});
  auto rows = [](const Imported& x) {
    for (const auto& w : x.graph.weights)
      if (w.name == "embedding") return w.type.shape[0].size;
    return std::int64_t{-1};
  };
  CHECK(rows(mi) == 10);
  CHECK(rows(li) == 12);
}

TEST_CASE("import: aoc compile takes the weights aoc import wrote next to the graph") {
  const auto dir = temp_dir();
  const std::string graph = (dir / "beside.json").string(), prog = (dir / "beside.aocp.h5").string();
  REQUIRE(run_aoc("import " + kTrained + "/config.json -o " + graph).status == 0);
  const Run c = run_aoc("compile " + graph + " --hw aoc-48 -o " + prog);
  INFO(c.out);
  REQUIRE(c.status == 0);
  CHECK_THAT(c.out, Catch::Contains("with the weights of " + (dir / "beside.h5").string()));
  std::filesystem::remove(dir / "beside.h5");
  const Run none = run_aoc("compile " + graph + " --hw aoc-48 -o " + prog);
  CHECK(none.status == 1);
  CHECK_THAT(none.out, Catch::Contains("give them with --weights W.h5"));
}

TEST_CASE("import: the model is named after its folder however the path to config.json is written") {
  for (const std::string& p : {kData + "mamba2-state-tracking-implicit/config.json", kData + "/mamba2-state-tracking-implicit//config.json",
                               kData + "mamba2-state-tracking-implicit/./config.json"}) {
    INFO(p);
    CHECK(import_config(p, {0, false}).graph.name == "mamba2-state-tracking-implicit");
  }
}

TEST_CASE("import: a model aoc trained keeps the rule it was trained with, its eval_f_max_iter the step cap") {
  const Imported m = import_config(kTrained + "/config.json", {0, false});
  const Op* fp = nullptr;
  for (const Op& op : m.graph.ops)
    if (op.kind == OpKind::FixedPoint) fp = &op;
  REQUIRE(fp);
  CHECK(attr_string(*fp, "rule") == "relative");
  CHECK(attr_int(*fp, "max_iter") == 200);
}
