#include "models/aoc_ssm.hpp"

#include <cmath>

#include "compiler/graph_json.hpp"
#include "sim/error.hpp"
#include "sim/json_reader.hpp"
#include "sim/noise.hpp"

namespace aoc::models {

using ad::Mat;
using ad::Tape;
using ad::Var;

namespace {

// name -> [rows, cols] of the model's weights (d the width, v the vocabulary).
std::map<std::string, std::pair<int, int>> shapes(const AocSsmSpec& s) {
  return {{"embedding", {s.vocab, s.d_model}}, {"loop.W", {s.d_model, s.d_model}}, {"loop.V", {s.d_model, s.d_model}},
          {"head", {s.vocab, s.d_model}}};
}

// The graph, with the FixedPoint as the spec says. "like": u has the iterate's type.
std::string graph_json(const AocSsmSpec& s) {
  const std::string d = std::to_string(s.d_model), v = std::to_string(s.vocab);
  return R"({"format": "aoc-graph", "version": 1, "name": "aoc-ssm-d)" + d + R"(",
  "inputs": [{"name": "tokens", "dtype": "i64", "shape": ["B", "L"]}],
  "weights": [{"name": "embedding", "shape": [)" + v + ", " + d + R"(]}, {"name": "loop.W", "shape": [)" + d + ", " + d + R"(]},
              {"name": "loop.V", "shape": [)" + d + ", " + d + R"(]}, {"name": "head", "shape": [)" + v + ", " + d + R"(]}],
  "ops": [
    {"op": "Embedding", "name": "inject", "in": ["tokens", "embedding"], "out": ["u"]},
    )" + aoc_loop_op_json(s.tol, s.max_iter, s.damping) + R"(,
    {"op": "Linear", "name": "readout", "in": ["z", "head"], "out": ["logits"]}
  ],
  "outputs": ["logits"]})";
}

}  // namespace

std::string aoc_loop_op_json(double tol, int max_iter, double damping) {
  return R"({"op": "FixedPoint", "name": "loop", "in": ["u"], "out": ["z"],
     "attrs": {"tol": )" + jsonr::num(tol) + R"(, "max_iter": )" + std::to_string(max_iter) + R"(, "damping": )" + jsonr::num(damping) +
         R"(, "rule": "relative", "like": "u"},
     "body": {"args": ["zi", "uc"],
              "ops": [{"op": "Tanh", "name": "f", "in": ["zi"], "out": ["s"]},
                      {"op": "Linear", "name": "mix", "in": ["s", "loop.W"], "out": ["ws"]},
                      {"op": "Delay", "name": "state", "in": ["s"], "out": ["sp"]},
                      {"op": "Linear", "name": "carry", "in": ["sp", "loop.V"], "out": ["vs"]},
                      {"op": "Add", "name": "sum", "in": ["ws", "vs"], "out": ["a"]},
                      {"op": "Add", "name": "add_input", "in": ["a", "uc"], "out": ["zn"]}],
              "results": ["zn"]}})";
}

nlohmann::ordered_json AocSsmSpec::config() const {
  return {{"model_type", "aoc_ssm"}, {"vocab_size", vocab}, {"d_model", d_model}, {"tol", tol}, {"damping", damping}, {"max_iter", max_iter}};
}

AocSsmSpec AocSsmSpec::from_config(const std::string& path) {
  const jsonr::json j = jsonr::parse_file(path);
  const jsonr::Reader r(path);
  r.object(j, "");
  if (r.text(r.need(j, "", "model_type"), "model_type", true) != "aoc_ssm") r.fail("model_type", "expected \"aoc_ssm\"");
  AocSsmSpec s;
  s.vocab = static_cast<int>(r.integer(r.need(j, "", "vocab_size"), "vocab_size", 1, 1 << 20));
  s.d_model = static_cast<int>(r.integer(r.need(j, "", "d_model"), "d_model", 1, 1 << 16));
  s.tol = r.number(r.need(j, "", "tol"), "tol", jsonr::kPositive);
  s.damping = r.number(r.need(j, "", "damping"), "damping", {0, 1, false, true});
  s.max_iter = static_cast<int>(r.integer(r.need(j, "", "max_iter"), "max_iter", 1, 1 << 20));
  return s;
}

AocSsmModel::AocSsmModel(const AocSsmSpec& spec, std::uint64_t seed) : spec_(spec) {
  // Gaussian init (Philox, keyed by the seed and the weight's index): the loop matrix small enough
  // that W tanh(.) contracts at the start (spectral radius about 0.5), the rest unit-scale.
  int k = 0;
  for (const auto& [name, rc] : shapes(spec)) {
    const double scale = name == "embedding" ? 1.0 : name == "loop.W" ? 0.5 / std::sqrt(rc.second) : 1.0 / std::sqrt(rc.second);
    ad::Param p;
    p.name = name;
    p.value = Mat(rc.first, rc.second);
    for (int r = 0; r < rc.first; ++r)
      noise::normals(seed, noise::Source::Init, static_cast<std::uint32_t>(k), static_cast<std::uint32_t>(r), 0, rc.second,
                     p.value.row(r).data());
    p.value *= scale;
    p.grad = Mat::Zero(rc.first, rc.second);
    p_[name] = std::move(p);
    ++k;
  }
}

AocSsmModel::AocSsmModel(const AocSsmSpec& spec, const ir::WeightStore& ws) : spec_(spec) {
  for (const auto& [name, rc] : shapes(spec)) {
    const auto it = ws.find(name);
    if (it == ws.end()) throw Error("model: weight '" + name + "' is missing");
    if (it->second.shape != std::vector<std::int64_t>{rc.first, rc.second})
      throw Error("model: weight '" + name + "' must be [" + std::to_string(rc.first) + ", " + std::to_string(rc.second) + "]");
    ad::Param p;
    p.name = name;
    p.value = Eigen::Map<const Mat>(it->second.data.data(), rc.first, rc.second);
    p.grad = Mat::Zero(rc.first, rc.second);
    p_[name] = std::move(p);
  }
}

std::vector<ad::Param*> AocSsmModel::params() {
  std::vector<ad::Param*> v;
  for (auto& [name, p] : p_) v.push_back(&p);
  return v;
}

Var AocSsmModel::w(Tape& t, const std::string& name) { return t.leaf(p_.at(name)); }

Var AocSsmModel::embed(Tape& t, const std::vector<int>& tokens) { return t.embedding(w(t, "embedding"), tokens); }

Var AocSsmModel::inject(Tape& t, Var e) { return convert(t, e, hw_.dac_bits); }

Var AocSsmModel::body(Tape& t, Var z, Var u, int L) {
  const Var s = t.tanh(z);
  const Var carried = optical(t, t.shift_rows(s, L), w(t, "loop.V"), "loop.V");
  return t.add(t.add(optical(t, s, w(t, "loop.W"), "loop.W"), carried), u);
}

Var AocSsmModel::explicit_forward(Tape&, Var, int) { throw Error("model: the AOC-native SSM is implicit only"); }

Var AocSsmModel::head(Tape& t, Var z) { return convert(t, optical(t, z, w(t, "head"), "head"), hw_.adc_bits); }

ir::WeightStore AocSsmModel::weights() const {
  ir::WeightStore out;
  for (const auto& [name, p] : p_) {
    ir::Tensor& t = out[name];
    t.shape = {p.value.rows(), p.value.cols()};
    t.data.assign(p.value.data(), p.value.data() + p.value.size());
  }
  return out;
}

ir::Imported AocSsmModel::export_graph() const {
  ir::Imported m;
  m.graph = ir::parse_graph(graph_json(spec_), "aoc-ssm");
  m.weights = weights();
  m.parameter_count = 0;
  for (const auto& [name, p] : p_) m.parameter_count += p.value.size();
  return m;
}

}  // namespace aoc::models
