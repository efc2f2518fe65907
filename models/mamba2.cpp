#include "models/mamba2.hpp"

#include <cmath>
#include <filesystem>
#include <fstream>

#include "sim/error.hpp"
#include "sim/files.hpp"
#include "sim/json_reader.hpp"

namespace aoc::models {

using ad::Mat;
using ad::Tape;
using ad::Var;

nlohmann::ordered_json Mamba2Spec::config() const {
  nlohmann::ordered_json c;
  c["model_type"] = "implicit_mamba2";
  c["backbone_type"] = implicit ? "implicit" : "explicit";
  c["backbone_config"] = {{"block_type", "mamba2"},
                          {"d_model", d_model},
                          {"n_layer", n_layer},
                          {"d_inner", 0},
                          {"pre_norm", true},
                          {"rms_norm", true},
                          {"do_weight_norm", false},
                          {"block_cfg", {{"d_state", d_state}, {"expand", expand}, {"headdim", headdim}, {"d_conv", d_conv}}}};
  if (transition != "exp") c["backbone_config"]["block_cfg"]["transition"] = transition;
  c["vocab_size"] = vocab;
  c["pad_vocab"] = false;
  c["tie_embeddings"] = true;
  if (implicit)
    c["deq_params"] = {{"solver", {{"f_tol", tol}, {"f_max_iter", max_iter}, {"eval_f_max_iter", max_iter}, {"eval_factor", 1.0},
                                   {"aoc_rule", "relative"}}},  // the rule aoc trains with (models/train.cpp)
                       {"training", {{"tau", damping}}},
                       {"norm", {{"norm_type", "none"}}}};
  return c;
}

Mamba2Spec Mamba2Spec::from_config(const std::string& path) {
  const jsonr::json j = jsonr::parse_file(path);
  const jsonr::Reader r(path);
  r.object(j, "");
  Mamba2Spec s;
  const auto integer = [&](const jsonr::json& o, const std::string& f, const char* k) {
    return static_cast<int>(r.integer(r.need(o, f, k), jsonr::sub(f, k), 1, 1 << 20));
  };
  s.implicit = r.choice(r.need(j, "", "backbone_type"), "backbone_type", {"implicit", "explicit"}) == "implicit";
  s.vocab = integer(j, "", "vocab_size");
  const jsonr::json& bb = r.need(j, "", "backbone_config");
  s.d_model = integer(bb, "backbone_config", "d_model");
  s.n_layer = static_cast<int>(r.integer(r.need(bb, "backbone_config", "n_layer"), "backbone_config.n_layer", 1, 64));
  const jsonr::json& bc = r.need(bb, "backbone_config", "block_cfg");
  s.d_state = integer(bc, "backbone_config.block_cfg", "d_state");
  s.expand = integer(bc, "backbone_config.block_cfg", "expand");
  s.headdim = integer(bc, "backbone_config.block_cfg", "headdim");
  if (r.find(bc, "d_conv")) s.d_conv = integer(bc, "backbone_config.block_cfg", "d_conv");
  if (const jsonr::json* t = r.find(bc, "transition")) s.transition = r.choice(*t, "backbone_config.block_cfg.transition", {"exp", "tanh"});
  if (s.implicit) {
    const jsonr::json& sol = r.need(r.need(j, "", "deq_params"), "deq_params", "solver");
    s.tol = r.number(r.need(sol, "deq_params.solver", "f_tol"), "deq_params.solver.f_tol", jsonr::kPositive);
    s.max_iter = integer(sol, "deq_params.solver", "eval_f_max_iter");
    s.damping = r.number(r.need(r.need(r.need(j, "", "deq_params"), "deq_params", "training"), "deq_params.training", "tau"),
                         "deq_params.training.tau", {0, 1, false, true});
  }
  return s;
}

namespace {

// The importer reads configs from files: write the spec's config to a private temporary file.
ir::Imported import_spec(const Mamba2Spec& s, const ir::ImportOptions& o) {
  static int counter = 0;
  const auto dir = std::filesystem::temp_directory_path();
  const std::string path = (dir / ("aoc-model-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + ".json")).string();
  write_file_atomic(path, s.config().dump(1) + "\n");
  try {
    ir::Imported m = ir::import_config(path, o);
    std::filesystem::remove(path);
    m.graph.name = std::string(s.implicit ? "implicit" : "explicit") + "-mamba2-d" + std::to_string(s.d_model);
    return m;
  } catch (...) {
    std::filesystem::remove(path);
    throw;
  }
}

Mat matrix_of(const ir::Tensor& t) {
  if (t.shape.size() == 1) return Eigen::Map<const Mat>(t.data.data(), 1, t.shape[0]);
  return Eigen::Map<const Mat>(t.data.data(), t.shape[0], t.shape[1]);
}

}  // namespace

Mamba2Model::Mamba2Model(const Mamba2Spec& spec, std::uint64_t seed) : spec_(spec) {
  ir::ImportOptions o;
  o.seed = seed;
  init_from(import_spec(spec, o).weights);
}

Mamba2Model::Mamba2Model(const Mamba2Spec& spec, const ir::WeightStore& weights) : spec_(spec) { init_from(weights); }

void Mamba2Model::init_from(const ir::WeightStore& ws) {
  ir::ImportOptions o;
  o.weights = false;
  const ir::Imported shapes = import_spec(spec_, o);
  for (const ir::Value& v : shapes.graph.weights) {
    const auto it = ws.find(v.name);
    if (it == ws.end()) throw Error("model: weight '" + v.name + "' is missing");
    std::vector<std::int64_t>& shape = shapes_[v.name];
    for (const auto& d : v.type.shape) shape.push_back(d.size);
    if (it->second.shape != shape)
      throw Error("model: weight '" + v.name + "' has shape of " + std::to_string(it->second.data.size()) + " values, expected " +
                  ir::to_string(v.type));
    ad::Param p;
    p.name = v.name;
    p.value = matrix_of(it->second);
    if (v.name.size() > 2 && v.name.substr(v.name.size() - 2) == ".A") {  // trained as A = -exp(A_log): A stays negative
      p.name = v.name + "_log";
      p.value = (-p.value.array()).log().matrix();
    }
    p.grad = Mat::Zero(p.value.rows(), p.value.cols());
    p_[p.name] = std::move(p);
  }
  // D's 0/1 map from heads to their (h, p) columns.
  const int H = spec_.heads(), P = spec_.headdim;
  hp_rep_ = Mat::Zero(H, H * P);
  for (int k = 0; k < H * P; ++k) hp_rep_(k / P, k) = 1;
}

std::vector<ad::Param*> Mamba2Model::params() {
  std::vector<ad::Param*> v;
  for (auto& [name, p] : p_) v.push_back(&p);
  return v;
}

ir::WeightStore Mamba2Model::weights() const {
  ir::WeightStore out;
  for (const auto& [name, p] : p_) {
    ir::Tensor t;
    std::string n = name;
    Mat v = p.value;
    if (n.size() > 6 && n.substr(n.size() - 6) == ".A_log") n.resize(n.size() - 4), v = -v.array().exp();
    t.shape = shapes_.at(n);
    t.data.assign(v.data(), v.data() + v.size());
    out[n] = std::move(t);
  }
  return out;
}

ir::Imported Mamba2Model::export_graph() const {
  ir::ImportOptions o;
  o.weights = false;
  ir::Imported m = import_spec(spec_, o);
  m.weights = weights();
  return m;
}

Var Mamba2Model::w(Tape& t, const std::string& name) {
  const auto it = p_.find(name);
  if (it == p_.end()) throw Error("model: no parameter '" + name + "'");
  return t.leaf(it->second);
}

Var Mamba2Model::embed(Tape& t, const std::vector<int>& tokens) { return t.embedding(w(t, "embedding"), tokens); }

Var Mamba2Model::inject(Tape& t, Var e) {
  return t.add(t.linear(t.rmsnorm(e, w(t, "injection.norm")), w(t, "injection.W")), w(t, "injection.b"));
}

Var Mamba2Model::block(Tape& t, int layer, Var z, const Var* u, int L) {
  const int di = spec_.d_inner(), N = spec_.d_state, H = spec_.heads();
  const std::string l = "layer" + std::to_string(layer) + ".";
  const Var n = t.rmsnorm(z, w(t, l + "norm"));
  Var p = optical(t, n, l + "in_proj");
  if (u) p = t.add(p, *u);
  const Var g = t.slice_cols(p, 0, di), xbc = t.slice_cols(p, di, di + 2 * N), dt = t.slice_cols(p, 2 * di + 2 * N, H);
  const Var xbc_s = t.silu(t.add(t.conv1d_causal(xbc, w(t, l + "conv_w"), L), w(t, l + "conv_b")));
  const Var x = t.slice_cols(xbc_s, 0, di), Bm = t.slice_cols(xbc_s, di, N), Cm = t.slice_cols(xbc_s, di + N, N);
  const Var delta = t.softplus(t.add(dt, w(t, l + "dt_bias")));
  const Var A = t.neg(t.exp(w(t, l + "A_log")));
  const Var dA = t.mul(delta, A);
  const Var a = spec_.transition == "tanh" ? t.tanh(t.add(dA, w(t, l + "A_bias"))) : t.exp(dA);
  // h_t = a_t h_{t-1} + delta[h] x[h,p] B[n]; y[h,p] = sum_n C[n] h[h,p,n] + D[h] x[h,p]
  const Var yc = t.ssd(delta, a, x, Bm, Cm, L);
  const Var Dx = t.mul(x, t.matmul(w(t, l + "D"), t.constant(hp_rep_)));
  const Var y = t.add(yc, Dx);
  const Var yn = t.rmsnorm(t.mul(y, t.silu(g)), w(t, l + "gate_norm"));
  return t.add(z, optical(t, yn, l + "out_proj"));
}

Var Mamba2Model::body(Tape& t, Var z, Var u, int L) {
  for (int i = 0; i < spec_.n_layer; ++i) z = block(t, i, z, &u, L);
  return t.rmsnorm(z, w(t, "norm_f"));
}

Var Mamba2Model::explicit_forward(Tape& t, Var e, int L) {
  for (int i = 0; i < spec_.n_layer; ++i) e = block(t, i, e, nullptr, L);
  return t.rmsnorm(e, w(t, "norm_f"));
}

Var Mamba2Model::head(Tape& t, Var z) { return optical(t, z, "embedding"); }

Var Mamba2Model::optical(Tape& t, Var x, const std::string& weight) {
  return convert(t, SequenceModel::optical(t, convert(t, x, hw_.dac_bits), w(t, weight), weight), hw_.adc_bits);
}

}  // namespace aoc::models
