// Trained weights: the safetensors reader converts every dtype exactly and names each malformed file's
// problem in one line; a checkpoint under the upstream PyTorch names (weight norm, A_log, [C, 1, K]
// conv, tied head) imports to exactly the weights and logits it was made from, for both families.
#include <catch2/catch.hpp>

#include "tests/graph_support.hpp"
#include "tests/support.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <unistd.h>
#include <vector>

#include "compiler/graph_json.hpp"
#include "compiler/import_config.hpp"
#include "compiler/interpret.hpp"
#include "compiler/safetensors.hpp"
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


std::string tmp(const std::string& name) { return (temp_dir() / name).string(); }

// ---------------------------------------------------------------------------------------------
// Hand-made files: a header text and raw little-endian bytes.

struct Bytes {
  std::vector<unsigned char> b;
  Bytes& le(std::uint64_t v, int n) {
    for (int i = 0; i < n; ++i) b.push_back(static_cast<unsigned char>(v >> (8 * i)));
    return *this;
  }
  Bytes& f32(float f) {
    std::uint32_t u;
    std::memcpy(&u, &f, 4);
    return le(u, 4);
  }
};

// header_len < 0: the header's true length.
std::string raw_file(const std::string& name, const std::string& header, const Bytes& data, long long header_len = -1) {
  const std::string p = tmp(name);
  Bytes all;
  all.le(header_len < 0 ? header.size() : static_cast<std::uint64_t>(header_len), 8);
  std::ofstream out(p, std::ios::binary);
  out.write(reinterpret_cast<const char*>(all.b.data()), 8);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  out.write(reinterpret_cast<const char*>(data.b.data()), static_cast<std::streamsize>(data.b.size()));
  return p;
}

std::string error_of(const std::string& path) {
  try {
    read_safetensors(path);
  } catch (const aoc::Error& e) {
    return e.what();
  }
  return "no error";
}

// ---------------------------------------------------------------------------------------------
// Fake checkpoints under the upstream names, written out by hand here (not taken from
// compiler/checkpoint_map.cpp) so that the test pins the mapping: the names of
// ImplicitMambaForCausalLM / ImplicitLlamaForCausalLM's state dict, with each transform inverted.

// A linear or conv weight as torchdeq's weight norm stores it: V = W scaled by a per-row factor (so
// that the fold has to use both g and ||V||), g = ||W_row|| of shape [out, 1(, 1)].
void weight_normed(WeightStore& ck, const std::string& name, const Tensor& w, bool conv) {
  const std::int64_t rows = w.shape[0], per_row = w.size() / rows;
  Tensor v = w, g;
  if (conv) v.shape = {w.shape[0], 1, w.shape[1]};
  g.shape = conv ? std::vector<std::int64_t>{rows, 1, 1} : std::vector<std::int64_t>{rows, 1};
  for (std::int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (std::int64_t k = 0; k < per_row; ++k) ss += w.data[r * per_row + k] * w.data[r * per_row + k];
    g.data.push_back(std::sqrt(ss));
    for (std::int64_t k = 0; k < per_row; ++k) v.data[r * per_row + k] *= 1.5 + 0.25 * static_cast<double>(r % 5);
  }
  ck[name + "_v"] = v;
  ck[name + "_g"] = g;
}

// `normed`: linear and conv weights as weight_g / weight_v (the implicit backbone), else plain.
WeightStore upstream_checkpoint(const WeightStore& w, bool llama, bool implicit, int n_layer, bool normed) {
  WeightStore ck;
  auto linear = [&](const std::string& name, const std::string& graph) {
    if (normed) weight_normed(ck, name, w.at(graph), false);
    else ck[name] = w.at(graph);
  };
  ck["word_emb.emb.weight"] = w.at("embedding");
  if (implicit) {
    ck["backbone.injection_norm.weight"] = w.at("injection.norm");
    linear("backbone.injection.weight", "injection.W");
    ck["backbone.injection.bias"] = w.at("injection.b");
  }
  for (int i = 0; i < n_layer; ++i) {
    const std::string c = "backbone.layers." + std::to_string(i) + ".", g = "layer" + std::to_string(i) + ".";
    ck[c + "norm.weight"] = w.at(g + "norm");
    if (llama) {
      linear(c + "mixer.wq.weight", g + "wq");
      linear(c + "mixer.wk.weight", g + "wk");
      linear(c + "mixer.wv.weight", g + "wv");
      linear(c + "mixer.out_proj.weight", g + "wo");
      ck[c + "norm2.weight"] = w.at(g + "mlp_norm");
      linear(c + "mlp.w1.weight", g + "w1");
      linear(c + "mlp.w3.weight", g + "w3");
      linear(c + "mlp.fc2.weight", g + "w2");
      continue;
    }
    linear(c + "mixer.in_proj.weight", g + "in_proj");
    if (normed) weight_normed(ck, c + "mixer.conv1d.weight", w.at(g + "conv_w"), true);
    else {
      Tensor conv = w.at(g + "conv_w");
      conv.shape = {conv.shape[0], 1, conv.shape[1]};
      ck[c + "mixer.conv1d.weight"] = conv;
    }
    ck[c + "mixer.conv1d.bias"] = w.at(g + "conv_b");
    ck[c + "mixer.dt_bias"] = w.at(g + "dt_bias");
    Tensor a_log = w.at(g + "A");
    for (double& x : a_log.data) x = std::log(-x);
    ck[c + "mixer.A_log"] = a_log;
    ck[c + "mixer.D"] = w.at(g + "D");
    ck[c + "mixer.norm.weight"] = w.at(g + "gate_norm");
    linear(c + "mixer.out_proj.weight", g + "out_proj");
  }
  ck["backbone.norm_f.weight"] = w.at("norm_f");
  return ck;
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape == b.shape);
  double m = 0;
  for (std::size_t i = 0; i < a.data.size(); ++i) m = std::max(m, std::fabs(a.data[i] - b.data[i]));
  return m;
}

void check_same_weights(const WeightStore& got, const WeightStore& want, double tol) {
  REQUIRE(got.size() == want.size());
  for (const auto& [name, t] : want) {
    INFO(name);
    REQUIRE(got.count(name) == 1);
    CHECK(max_abs_diff(got.at(name), t) <= tol);
  }
}

Tensor run_logits(const Imported& m, const std::vector<double>& tokens) {
  Tensor t;
  t.shape = {1, static_cast<std::int64_t>(tokens.size())};
  t.data = tokens;
  return interpret(m.graph, m.weights, {{"tokens", t}}).values.at("logits");
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

std::string write_json(const nlohmann::json& j, const std::string& name) {
  const std::string p = tmp(name);
  std::ofstream(p) << j.dump(2);
  return p;
}

// The llama3-130m config shrunk: d_model 16, 2 heads of 8, d_inner 48 (SwiGLU hidden 32), vocab 12,
// two layers (so that the layer index in the names is exercised).
std::string tiny_llama_config() {
  nlohmann::json j = read_json(kLlama);
  j["backbone_config"]["d_model"] = 16;
  j["backbone_config"]["n_layer"] = 2;
  j["backbone_config"]["d_inner"] = 48;
  j["backbone_config"]["block_cfg"] = {{"n_head", 2}};
  j["d_embed"] = 16;
  j["vocab_size"] = 12;
  return write_json(j, "tiny-llama.json");
}

// The state-tracking config shrunk: d_model 16, d_state 4, expand 2, headdim 8, vocab 12, one layer.
std::string tiny_mamba2_config(bool implicit = true) {
  nlohmann::json j = read_json(kStateTracking);
  j["backbone_config"]["d_model"] = 16;
  j["backbone_config"]["block_cfg"] = {{"d_state", 4}, {"expand", 2}, {"headdim", 8}};
  j["d_embed"] = 16;
  j["vocab_size"] = 12;
  j["n_tokens"] = 12;
  j["pad_vocab"] = false;
  if (!implicit) {
    j["backbone_type"] = "explicit";
    j.erase("deq_params");
  }
  return write_json(j, implicit ? "tiny-mamba2.json" : "tiny-mamba2-explicit.json");
}

ImportOptions from(const std::string& checkpoint) {
  ImportOptions o;
  o.weights_path = checkpoint;
  return o;
}

std::string import_error(const std::string& config, const std::string& checkpoint) {
  try {
    import_config(config, from(checkpoint));
  } catch (const aoc::Error& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// The reader

TEST_CASE("safetensors: F64 and F32 files round trip through the writer exactly") {
  WeightStore s;
  s["a.weight"] = {{2, 3}, {1.0 / 3.0, -M_PI, 1e-300, 6.02214076e23, -0.0, 5e-324}};
  s["b"] = {{}, {42.5}};      // a scalar
  s["empty"] = {{0, 4}, {}};  // no elements, no bytes
  const std::string f64 = tmp("rt64.safetensors");
  write_safetensors(f64, s, SafetensorsDType::F64, {{"format", "pt"}});
  const Checkpoint c = read_safetensors(f64);
  CHECK(c.path == f64);
  CHECK(c.metadata == std::map<std::string, std::string>{{"format", "pt"}});
  REQUIRE(c.tensors.size() == 3);
  for (const auto& [name, t] : s) {
    INFO(name);
    CHECK(c.tensors.at(name).shape == t.shape);
    CHECK(c.tensors.at(name).data == t.data);  // bit for bit
  }
  CHECK(std::signbit(c.tensors.at("a.weight").data[4]));

  // F32: every value comes back as the float nearest to it, exactly
  const std::string f32 = tmp("rt32.safetensors");
  write_safetensors(f32, s, SafetensorsDType::F32);
  const Checkpoint d = read_safetensors(f32);
  const std::vector<double>& a = d.tensors.at("a.weight").data;
  REQUIRE(a.size() == 6);
  CHECK(a[0] == static_cast<double>(1.0f / 3.0f));
  CHECK(a[1] == static_cast<double>(static_cast<float>(-M_PI)));
  CHECK(a[2] == 0.0);  // below float's range: rounds to zero
  CHECK(a[3] == static_cast<double>(6.02214076e23f));
  CHECK(d.tensors.at("b").data == std::vector<double>{42.5});
  // the data start 8-byte aligned, as the reference writer leaves them
  std::ifstream in(f32, std::ios::binary);
  unsigned char len[8];
  in.read(reinterpret_cast<char*>(len), 8);
  CHECK(len[0] % 8 == 0);
}

TEST_CASE("safetensors: F16, BF16, I32 and I64 convert to the exact doubles") {
  Bytes d;
  // F16: 1, -2, 65504 (largest), 2^-24 (smallest subnormal), 2^-14 (smallest normal), 0x3555, -0
  for (std::uint16_t h : {0x3C00, 0xC000, 0x7BFF, 0x0001, 0x0400, 0x3555, 0x8000}) d.le(h, 2);
  // BF16: 1, -3, the largest, the smallest subnormal 2^-133, 0x3EAB
  for (std::uint16_t h : {0x3F80, 0xC040, 0x7F7F, 0x0001, 0x3EAB}) d.le(h, 2);
  d.le(static_cast<std::uint32_t>(-7), 4).le(2147483647, 4);                          // I32
  d.le(static_cast<std::uint64_t>(-(1LL << 53)), 8).le(123456789012345, 8);           // I64
  const std::string header =
      R"({"h":{"dtype":"F16","shape":[7],"data_offsets":[0,14]},)"
      R"("b":{"dtype":"BF16","shape":[5],"data_offsets":[14,24]},)"
      R"("i":{"dtype":"I32","shape":[2],"data_offsets":[24,32]},)"
      R"("l":{"dtype":"I64","shape":[2],"data_offsets":[32,48]}})";
  const Checkpoint c = read_safetensors(raw_file("dtypes.safetensors", header, d));
  CHECK(c.tensors.at("h").data ==
        std::vector<double>{1.0, -2.0, 65504.0, std::ldexp(1.0, -24), std::ldexp(1.0, -14), 0.333251953125, -0.0});
  CHECK(std::signbit(c.tensors.at("h").data[6]));
  CHECK(c.tensors.at("b").data ==
        std::vector<double>{1.0, -3.0, 3.3895313892515355e38, std::ldexp(1.0, -133), 0.333984375});
  CHECK(c.tensors.at("i").data == std::vector<double>{-7.0, 2147483647.0});
  CHECK(c.tensors.at("l").data == std::vector<double>{-9007199254740992.0, 123456789012345.0});

  Bytes big;
  big.le((1ULL << 53) + 1, 8);
  const std::string p = raw_file("i64-big.safetensors", R"({"l":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})", big);
  CHECK(error_of(p) == p + ": tensor 'l': element 0 = 9007199254740993 is not exactly representable as a double");
}

TEST_CASE("safetensors: a truncated file or header is one line naming the file") {
  Bytes five;
  five.le(0, 5);
  const std::string p = tmp("five.safetensors");
  std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(five.b.data()), 5);
  CHECK(error_of(p) == p + ": truncated: 5 bytes, less than the 8-byte header length");

  const std::string header = R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  Bytes one;
  one.f32(1.0f);
  const std::string q = raw_file("long-header.safetensors", header, one, 1000);
  CHECK(error_of(q) == q + ": header length 1000 runs past the end of the " + std::to_string(8 + header.size() + 4) +
                           "-byte file (truncated?)");

  // the data cut short: the tensor's offsets end past what is left of the buffer
  const std::string r = raw_file("cut.safetensors", header, Bytes{{0, 0}});
  CHECK(error_of(r) == r + ": tensor 'w': data_offsets [0, 4] end past the 2-byte buffer");

  const std::string m = raw_file("bad-json.safetensors", "{\"w\": ", Bytes{});
  CHECK_THAT(error_of(m), Catch::StartsWith(m + ": header: line 1, column 7: malformed JSON: "));
  CHECK(error_of(tmp("absent.safetensors")) == tmp("absent.safetensors") + ": cannot open the file");
}

TEST_CASE("safetensors: offsets that overlap, leave a gap or disagree with the shape are named") {
  Bytes three;
  three.f32(1).f32(2).f32(3);
  const std::string size = raw_file("size.safetensors", R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,12]}})", three);
  CHECK(error_of(size) == size + ": tensor 'w': data_offsets [0, 12] hold 12 bytes, shape [2] of F32 needs 8");

  const std::string overlap = raw_file(
      "overlap.safetensors",
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", three);
  CHECK(error_of(overlap) == overlap + ": tensor 'b': data_offsets [4, 12] overlap those of tensor 'a', [0, 8]");

  const std::string gap = raw_file(
      "gap.safetensors",
      R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})", three);
  CHECK(error_of(gap) == gap + ": buffer bytes [4, 8) belong to no tensor");

  const std::string back = raw_file("backwards.safetensors", R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[8,4]}})", three);
  CHECK(error_of(back) == back + ": tensor 'w': data_offsets [8, 4] end before they begin");

  const std::string noshape = raw_file("no-shape.safetensors", R"({"w":{"dtype":"F32","data_offsets":[0,12]}})", three);
  CHECK(error_of(noshape) == noshape + ": tensor 'w': shape: missing required field");
}

TEST_CASE("safetensors: an unknown dtype is named with the supported ones") {
  Bytes one;
  one.le(0, 4);
  const std::string p = raw_file("q4.safetensors", R"({"w":{"dtype":"Q4","shape":[8],"data_offsets":[0,4]}})", one);
  CHECK(error_of(p) == p + ": tensor 'w': dtype \"Q4\" is not one of F64, F32, F16, BF16, I64, I32");
}

TEST_CASE("safetensors: NaN and infinite values are refused with their position") {
  Bytes d;
  d.f32(1.0f).f32(std::nanf(""));
  const std::string p = raw_file("nan.safetensors", R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", d);
  CHECK(error_of(p) == p + ": tensor 'w': element 1 is NaN");
  Bytes h;
  h.le(0x3C00, 2).le(0x3C00, 2).le(0x7C00, 2);  // F16 +inf
  const std::string q = raw_file("inf.safetensors", R"({"w":{"dtype":"F16","shape":[3],"data_offsets":[0,6]}})", h);
  CHECK(error_of(q) == q + ": tensor 'w': element 2 is infinite");

  // the writer refuses them too, and leaves no file
  WeightStore s;
  s["w"] = {{2}, {1.0, std::nan("")}};
  const std::string out = tmp("nan-out.safetensors");
  CHECK_THROWS_WITH(write_safetensors(out, s, SafetensorsDType::F64), out + ": tensor 'w': element 1 = nan cannot be stored as F64");
  CHECK_FALSE(std::filesystem::exists(out));
}

TEST_CASE("safetensors: a sharded checkpoint is read through its index") {
  WeightStore s1, s2;
  s1["a"] = {{2}, {1.0, 2.0}};
  s2["b"] = {{1, 2}, {3.0, 4.0}};
  s2["c"] = {{}, {5.0}};
  write_safetensors(tmp("model-00001-of-00002.safetensors"), s1, SafetensorsDType::F64);
  write_safetensors(tmp("model-00002-of-00002.safetensors"), s2, SafetensorsDType::F64);
  nlohmann::json index = {{"metadata", {{"total_size", 40}}},
                          {"weight_map",
                           {{"a", "model-00001-of-00002.safetensors"},
                            {"b", "model-00002-of-00002.safetensors"},
                            {"c", "model-00002-of-00002.safetensors"}}}};
  const std::string p = write_json(index, "model.safetensors.index.json");
  const Checkpoint c = read_safetensors(p);
  CHECK(c.path == p);
  REQUIRE(c.tensors.size() == 3);
  CHECK(c.tensors.at("a").data == s1["a"].data);
  CHECK(c.tensors.at("b").shape == std::vector<std::int64_t>{1, 2});
  CHECK(c.tensors.at("c").data == std::vector<double>{5.0});
  CHECK(c.metadata.at("total_size") == "40");

  index["weight_map"]["b"] = "model-00001-of-00002.safetensors";
  const std::string q = write_json(index, "wrong.safetensors.index.json");
  CHECK(error_of(q) == q + ": weight_map.b: tensor 'b' is not in " + tmp("model-00001-of-00002.safetensors"));
  const std::string r = write_json(nlohmann::json{{"metadata", {}}}, "no-map.index.json");
  CHECK_THAT(error_of(r), Catch::StartsWith(r + ": weight_map: missing required field"));
}

// ---------------------------------------------------------------------------------------------
// Import with trained weights

TEST_CASE("safetensors: an implicit Mamba2 checkpoint under the upstream names gives back its weights and logits") {
  // the full state-tracking model (1.5M parameters), random weights standing in for trained ones
  const Imported ref = import_config(kStateTracking, {11});
  const std::string ck = tmp("mamba2-st.safetensors");
  WeightStore store = upstream_checkpoint(ref.weights, false, true, 1, true);
  store["criterion.decoder.weight"] = ref.weights.at("embedding");  // torch.save keeps both names of the tied head
  write_safetensors(ck, store, SafetensorsDType::F64);

  const Imported m = import_config(kStateTracking, from(ck));
  REQUIRE_NOTHROW(verify(m.graph, &m.weights));
  CHECK(m.parameter_count == ref.parameter_count);
  CHECK(m.folded == 4);  // injection, in_proj, conv1d, out_proj
  CHECK(m.unused_tensors.empty());
  CHECK(m.weights.at("layer0.conv_w").shape == std::vector<std::int64_t>{1280, 4});
  check_same_weights(m.weights, ref.weights, 1e-12);

  const Tensor a = run_logits(ref, {3, 1, 4}), b = run_logits(m, {3, 1, 4});
  CHECK(a.shape == std::vector<std::int64_t>{1, 3, 240});
  CHECK(max_abs_diff(a, b) <= 1e-9);
}

TEST_CASE("safetensors: the weight-norm fold of V ~ 1e200 or 1e-200 gives the weights, not zeros", "[slow]") {
  const Imported ref = import_config(kStateTracking, {11});
  WeightStore store = upstream_checkpoint(ref.weights, false, true, 1, true);
  store["criterion.decoder.weight"] = ref.weights.at("embedding");
  for (double scale : {1e200, 1e-200}) {
    WeightStore scaled = store;
    for (double& x : scaled.at("backbone.injection.weight_v").data) x *= scale;  // the fold divides the scale out
    const std::string ck = tmp("mamba2-st-scaled.safetensors");
    write_safetensors(ck, scaled, SafetensorsDType::F64);
    const Imported m = import_config(kStateTracking, from(ck));
    INFO("V scaled by " << scale);
    check_same_weights(m.weights, ref.weights, 1e-12);
  }
}

TEST_CASE("safetensors: an implicit Llama checkpoint under the upstream names gives back its weights and logits") {
  const std::string config = tiny_llama_config();
  const Imported ref = import_config(config, {12});
  WeightStore store = upstream_checkpoint(ref.weights, true, true, 2, true);
  store["backbone.layers.1.mixer.rotary_emb.inv_freq"] = {{4}, {1.0, 0.1, 0.01, 0.001}};  // not a graph weight
  const std::string ck = tmp("llama.safetensors");
  write_safetensors(ck, store, SafetensorsDType::F64);

  const Imported m = import_config(config, from(ck));
  REQUIRE_NOTHROW(verify(m.graph, &m.weights));
  CHECK(m.folded == 1 + 2 * 7);  // the injection; per layer q, k, v, o, w1, w3, fc2
  CHECK(m.unused_tensors == std::vector<std::string>{"backbone.layers.1.mixer.rotary_emb.inv_freq"});
  check_same_weights(m.weights, ref.weights, 1e-12);
  const Tensor a = run_logits(ref, {3, 1, 4, 1, 5}), b = run_logits(m, {3, 1, 4, 1, 5});
  CHECK(max_abs_diff(a, b) <= 1e-9);
}

TEST_CASE("safetensors: an explicit Mamba2 checkpoint in F32 with plain weights and only the head's name") {
  const std::string config = tiny_mamba2_config(false);
  Imported ref = import_config(config, {13});
  for (auto& [name, t] : ref.weights)
    for (double& x : t.data) x = static_cast<float>(x);  // what an F32 file can hold
  WeightStore store = upstream_checkpoint(ref.weights, false, false, 1, false);
  store["criterion.decoder.weight"] = store.at("word_emb.emb.weight");  // the tied head's name only
  store.erase("word_emb.emb.weight");
  // A_log round trip through F32: A = -exp(log(-A)) is no longer exact, so compare loosely below
  const std::string ck = tmp("explicit.safetensors");
  write_safetensors(ck, store, SafetensorsDType::F32);

  const Imported m = import_config(config, from(ck));
  REQUIRE_NOTHROW(verify(m.graph, &m.weights));
  CHECK(m.folded == 0);
  CHECK(m.unused_tensors.empty());
  for (const auto& [name, t] : ref.weights) {
    INFO(name);
    if (name == "layer0.A") CHECK(max_abs_diff(m.weights.at(name), t) <= 1e-5);
    else CHECK(m.weights.at(name).data == t.data);
  }
}

TEST_CASE("safetensors: a missing tensor and a wrong shape name the file, the tensor and the graph weight") {
  const std::string config = tiny_mamba2_config();
  const Imported ref = import_config(config, {14});
  const WeightStore good = upstream_checkpoint(ref.weights, false, true, 1, true);

  WeightStore s = good;
  s.erase("backbone.layers.0.mixer.A_log");
  const std::string p = tmp("no-alog.safetensors");
  write_safetensors(p, s, SafetensorsDType::F64);
  CHECK(import_error(config, p) == p + ": tensor 'backbone.layers.0.mixer.A_log': missing (graph weight 'layer0.A')");

  s = good;
  s["backbone.norm_f.weight"] = {{15}, std::vector<double>(15, 1.0)};
  const std::string q = tmp("bad-norm.safetensors");
  write_safetensors(q, s, SafetensorsDType::F64);
  CHECK(import_error(config, q) == q + ": tensor 'backbone.norm_f.weight': shape [15] does not match graph weight 'norm_f' [16]");

  s = good;
  s.erase("backbone.injection.weight_g");
  const std::string r = tmp("no-g.safetensors");
  write_safetensors(r, s, SafetensorsDType::F64);
  CHECK(import_error(config, r) == r + ": tensor 'backbone.injection.weight_g': missing (graph weight 'injection.W'; "
                                       "weight norm's scales for 'backbone.injection.weight_v')");

  s = good;
  s.erase("backbone.layers.0.mixer.conv1d.weight_v");
  const std::string t = tmp("no-conv.safetensors");
  write_safetensors(t, s, SafetensorsDType::F64);
  CHECK(import_error(config, t) == t + ": tensor 'backbone.layers.0.mixer.conv1d.weight_v': missing (graph weight 'layer0.conv_w'; "
                                       "weight norm stores 'backbone.layers.0.mixer.conv1d.weight_g' and "
                                       "'backbone.layers.0.mixer.conv1d.weight_v', a folded weight 'backbone.layers.0.mixer.conv1d.weight')");

  s = good;
  s["backbone.layers.0.mixer.conv1d.weight_v"].shape = {40, 4, 1};
  const std::string u = tmp("conv-shape.safetensors");
  write_safetensors(u, s, SafetensorsDType::F64);
  CHECK(import_error(config, u) == u + ": tensor 'backbone.layers.0.mixer.conv1d.weight_v': shape [40, 4, 1] does not match graph "
                                       "weight 'layer0.conv_w' [40, 4] (stored as [40, 1, 4])");

  s = good;
  s["criterion.decoder.weight"] = s.at("word_emb.emb.weight");
  s["criterion.decoder.weight"].data[0] += 1;
  const std::string v = tmp("untied.safetensors");
  write_safetensors(v, s, SafetensorsDType::F64);
  CHECK(import_error(config, v) ==
        v + ": tensor 'criterion.decoder.weight': differs from 'word_emb.emb.weight': an untied output head is not supported");
}

TEST_CASE("safetensors: aoc import --weights writes the trained weights and warns about unused tensors") {
  const std::string config = tiny_mamba2_config();
  const Imported ref = import_config(config, {15});
  WeightStore store = upstream_checkpoint(ref.weights, false, true, 1, true);
  store["extra.buffer"] = {{1}, {0.0}};
  const std::string ck = tmp("cli.safetensors");
  write_safetensors(ck, store, SafetensorsDType::F64);
  const std::string graph = tmp("cli.json"), h5 = tmp("cli-weights.h5");

  const Run r = run_aoc("import " + config + " --weights " + ck + " -o " + graph + " --weights-out " + h5);
  INFO(r.out);
  REQUIRE(r.status == 0);
  CHECK(r.out.find("import: warning: " + ck + ": 1 tensor(s) not used by the graph: extra.buffer\n") != std::string::npos);
  CHECK(r.out.find("and " + h5 + " (trained weights from " + ck + ", 14 tensors, 4 weight norm(s) folded)") != std::string::npos);
  check_same_weights(read_weights_h5(h5), ref.weights, 1e-12);

  const Run s = run_aoc("import " + config + " --weights " + ck + " --seed 3 -o " + graph);
  CHECK(s.status == 1);
  CHECK(s.out == "aoc: error: --seed: only for random weights, not with --weights\n");
  const Run t = run_aoc("import " + config + " --weights " + tmp("absent.safetensors") + " -o " + graph);
  CHECK(t.status == 1);
  CHECK(t.out == "aoc: error: " + tmp("absent.safetensors") + ": cannot open the file\n");
}
