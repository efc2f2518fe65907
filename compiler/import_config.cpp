#include "compiler/import_config.hpp"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <utility>

#include "compiler/checkpoint_map.hpp"
#include "compiler/safetensors.hpp"
#include "sim/error.hpp"
#include "sim/json_reader.hpp"

namespace aoc::ir {

namespace {

using jsonr::json;

// What the importer takes from a config (Mamba2 or Llama; the other family's fields stay 0).
struct Mamba2Config {
  std::string name;
  bool implicit = true;
  bool llama = false;  // model_type implicit_llama3: attention + SwiGLU MLP blocks
  std::int64_t d_model = 0, n_layer = 0, vocab = 0;
  std::int64_t d_state = 0, expand = 0, headdim = 0, d_conv = 4;  // Mamba2
  // The scan's transition per head: "exp", exp(delta A) in (0, 1) as published; "tanh" (aoc's
  // block_cfg.transition), tanh(delta A + A_bias) in (-1, 1): a transition that can be negative,
  // which a diagonal SSM needs to track parity (Grazzi et al., ICLR 2025).
  std::string transition = "exp";
  std::int64_t n_head = 0, d_inner = 0;                           // Llama (d_inner: the MLP's nominal width)
  double tol = 0, damping = 1;
  std::string rule = "released";  // the FixedPoint's stop rule: the released code's, or aoc's own (aoc_rule)
  std::int64_t max_iter = 0;
  // How the implicit backbone's weights are normalised (torchdeq, deq_params.norm): only matters
  // when trained weights are read.
  bool do_weight_norm = true;            // backbone_config.do_weight_norm
  std::string norm_type = "weight_norm";  // weight_norm, spectral_norm or none
  bool norm_no_scale = false, norm_clip = false;
  double norm_target = 1;
};

std::string base_name(const std::string& path) {
  // ".../mamba2-130m-implicit/config.json" (also "DIR//config.json", "./config.json") ->
  // "mamba2-130m-implicit"; another file's name without ".json"
  namespace fs = std::filesystem;
  const fs::path p = fs::path(path).lexically_normal();
  if (p.filename() == "config.json") {
    fs::path dir = p.parent_path();
    if (dir.empty() || dir.filename() == "..") dir = fs::absolute(p).lexically_normal().parent_path();
    if (!dir.filename().empty()) return dir.filename().string();
  }
  return p.stem().string();
}

Mamba2Config parse(const std::string& path) {
  const json j = jsonr::parse_file(path);
  const jsonr::Reader r(path);
  r.object(j, "");
  auto integer = [&](const json& obj, const std::string& field, const std::string& key, long long lo, long long hi) {
    return static_cast<std::int64_t>(r.integer(r.need(obj, field, key), jsonr::sub(field, key), lo, hi));
  };
  const std::string model_type = r.text(r.need(j, "", "model_type"), "model_type", true);
  const bool llama = model_type == "implicit_llama3";
  if (!llama && model_type != "implicit_mamba2" && model_type != "mamba2")
    r.fail("model_type", "\"" + model_type + "\" is not one of implicit_mamba2, mamba2, implicit_llama3");

  Mamba2Config c;
  c.name = base_name(path);
  c.llama = llama;
  c.implicit = r.choice(r.need(j, "", "backbone_type"), "backbone_type", {"implicit", "explicit"}) == "implicit";
  const json& bb = r.need(j, "", "backbone_config");
  r.object(bb, "backbone_config");
  const std::string block_type = r.text(r.need(bb, "backbone_config", "block_type"), "backbone_config.block_type", true);
  const std::string want_block = llama ? "transformer" : "mamba2";
  if (block_type != want_block)
    r.fail("backbone_config.block_type", "\"" + block_type + "\" with model_type " + model_type + ": expected " + want_block);
  c.d_model = integer(bb, "backbone_config", "d_model", 1, 1 << 20);
  c.n_layer = integer(bb, "backbone_config", "n_layer", 1, 4096);
  if (llama) {
    c.d_inner = integer(bb, "backbone_config", "d_inner", 2, 1 << 24);
    if (const json* mt = r.find(bb, "mlp_type"); mt && r.text(*mt, "backbone_config.mlp_type", true) != "llama_mlp")
      r.fail("backbone_config.mlp_type", "only llama_mlp (SwiGLU) is supported");
  } else if (integer(bb, "backbone_config", "d_inner", 0, 1 << 24) != 0) {
    r.fail("backbone_config.d_inner", "an MLP after the Mamba2 mixer (d_inner > 0) is not supported yet");
  }
  if (const json* wn = r.find(bb, "do_weight_norm")) c.do_weight_norm = r.boolean(*wn, "backbone_config.do_weight_norm");
  if (const json* pn = r.find(bb, "pre_norm"); pn && !r.boolean(*pn, "backbone_config.pre_norm"))
    r.fail("backbone_config.pre_norm", "only pre-norm blocks (true) are supported");
  if (const json* rn = r.find(bb, "rms_norm"); rn && !r.boolean(*rn, "backbone_config.rms_norm"))
    r.fail("backbone_config.rms_norm", "only RMSNorm (true) is supported");
  const json& bc = r.need(bb, "backbone_config", "block_cfg");
  r.object(bc, "backbone_config.block_cfg");
  const std::string f = "backbone_config.block_cfg";
  if (llama) {
    c.n_head = integer(bc, f, "n_head", 1, 1 << 16);
    if (c.d_model % c.n_head != 0 || (c.d_model / c.n_head) % 2 != 0)
      r.fail(f + ".n_head", std::to_string(c.n_head) + " heads do not split d_model " + std::to_string(c.d_model) +
                                " into heads of an even size (RoPE rotates pairs)");
    if (r.find(bc, "n_kv_heads") && integer(bc, f, "n_kv_heads", 1, 1 << 16) != c.n_head)
      r.fail(f + ".n_kv_heads", "grouped-query attention (n_kv_heads != n_head) is not supported");
  } else {
    c.d_state = integer(bc, f, "d_state", 1, 1 << 16);
    c.expand = integer(bc, f, "expand", 1, 64);
    c.headdim = integer(bc, f, "headdim", 1, 1 << 16);
    if (r.find(bc, "d_conv")) c.d_conv = integer(bc, f, "d_conv", 1, 64);
    if (const jsonr::json* t = r.find(bc, "transition")) c.transition = r.choice(*t, f + ".transition", {"exp", "tanh"});
    if (r.find(bc, "ngroups") && integer(bc, f, "ngroups", 1, 1 << 16) != 1)
      r.fail(f + ".ngroups", "only ngroups 1 is supported");
    if ((c.expand * c.d_model) % c.headdim != 0)
      r.fail(f + ".headdim", std::to_string(c.headdim) + " does not divide d_inner = expand * d_model = " +
                                 std::to_string(c.expand * c.d_model));
  }

  // The released classes' vocabulary: Mamba2 reads n_tokens (aoc's own Mamba2 configs give
  // vocab_size only), Llama vocab_size before n_tokens.
  const bool n_tokens_first = !c.llama && r.find(j, "n_tokens");
  if (n_tokens_first || !r.find(j, "vocab_size")) c.vocab = integer(j, "", "n_tokens", 1, 1LL << 32);
  else c.vocab = integer(j, "", "vocab_size", 1, 1LL << 32);
  bool pad = false;
  if (const json* p = r.find(j, "pad_vocab")) pad = r.boolean(*p, "pad_vocab");
  if (pad) {
    const std::int64_t m = integer(j, "", "pad_vocab_size_multiple", 1, 1 << 20);
    c.vocab = (c.vocab + m - 1) / m * m;  // mamba_ssm pads the embedding to a multiple
  }
  // d_embed != d_model puts a projection after the embedding (and before the head): not modelled
  if (const json* de = r.find(j, "d_embed"); de && !de->is_null() && integer(j, "", "d_embed", 1, 1 << 20) != c.d_model)
    r.fail("d_embed", std::to_string(de->get<long long>()) + " differs from backbone_config.d_model " + std::to_string(c.d_model) +
                          ": the embedding projection is not supported");
  if (const json* t = r.find(j, "tie_embeddings"); t && !r.boolean(*t, "tie_embeddings"))
    r.fail("tie_embeddings", "untied output heads are not supported yet (all published configs tie them)");

  if (c.implicit) {
    const json& deq = r.need(j, "", "deq_params");
    r.object(deq, "deq_params");
    const json& s = r.need(deq, "deq_params", "solver");
    r.object(s, "deq_params.solver");
    const std::string sf = "deq_params.solver";
    c.tol = r.number(r.need(s, sf, "f_tol"), sf + ".f_tol", jsonr::kPositive);
    const std::int64_t f_max = integer(s, sf, "f_max_iter", 1, 1 << 30);
    const std::int64_t eval_max = integer(s, sf, "eval_f_max_iter", 0, 1 << 30);
    const double factor = r.number(r.need(s, sf, "eval_factor"), sf + ".eval_factor", jsonr::kNonNegative);
    // The evaluation cap (f_thres of the sequential loop, docs/research/implicit_ssm.md 1.6).
    const std::int64_t f_thres = eval_max > 0 ? eval_max : static_cast<std::int64_t>(static_cast<double>(f_max) * factor);
    // A model aoc trained names its own rule (aoc_rule); a released one solves with the released
    // loop: at most f_thres - 1 steps, then the final call.
    if (const json* a = r.find(s, "aoc_rule")) c.rule = r.choice(*a, sf + ".aoc_rule", {"relative", "released"});
    c.max_iter = c.rule == "released" ? f_thres - 1 : f_thres;
    if (c.max_iter < 1)
      r.fail(eval_max > 0 ? sf + ".eval_f_max_iter" : sf + ".eval_factor",
             "gives an evaluation cap f_thres of " + std::to_string(f_thres) + ": the loop needs at least " +
                 (c.rule == "released" ? "2 (f_thres - 1 steps, then the final call)" : std::string("1")));
    const json& t = r.need(deq, "deq_params", "training");
    r.object(t, "deq_params.training");
    c.damping = r.number(r.need(t, "deq_params.training", "tau"), "deq_params.training.tau", {0, 1, false, true});
    if (const json* nm = r.find(deq, "norm")) {
      r.object(*nm, "deq_params.norm");
      const std::string nf = "deq_params.norm";
      if (const json* x = r.find(*nm, "norm_type")) c.norm_type = r.choice(*x, nf + ".norm_type", {"weight_norm", "spectral_norm", "none"});
      if (const json* x = r.find(*nm, "norm_no_scale")) c.norm_no_scale = r.boolean(*x, nf + ".norm_no_scale");
      if (const json* x = r.find(*nm, "norm_clip")) c.norm_clip = r.boolean(*x, nf + ".norm_clip");
      if (const json* x = r.find(*nm, "norm_target_norm")) c.norm_target = r.number(*x, nf + ".norm_target_norm", jsonr::kPositive);
    }
  }
  return c;
}

Op mk(OpKind k, std::string name, std::vector<std::string> in, std::vector<std::string> out,
      std::map<std::string, Attr> attrs = {}) {
  return make_op(k, std::move(in), std::move(out), std::move(attrs), std::move(name));
}

Value fixed(const std::string& name, std::vector<std::int64_t> dims) {
  Value v{name, {}};
  for (auto d : dims) v.type.shape.push_back(Dim::fixed(d));
  return v;
}

// One Mamba2 block, z + Mixer(RMSNorm_1(z); u), appended to `ops`; returns the block's output.
// `u` empty: no injection (the explicit backbone).
std::string mamba2_block(std::vector<Op>& ops, const Mamba2Config& c, int i, const std::string& z, const std::string& u) {
  const std::int64_t di = c.expand * c.d_model, H = di / c.headdim, N = c.d_state;
  // (appended piecewise: "l" + std::to_string(i) trips a GCC 12 -Wrestrict false positive)
  std::string w = "layer", v = "l";
  w.append(std::to_string(i)).append(".");
  v.append(std::to_string(i)).append(".");
  ops.push_back(mk(OpKind::RMSNorm, v + "norm", {z, w + "norm"}, {v + "n"}, {{"eps", 1e-5}}));
  ops.push_back(mk(OpKind::Linear, v + "in_proj", {v + "n", w + "in_proj"}, {u.empty() ? v + "p" : v + "p0"}));
  if (!u.empty()) ops.push_back(mk(OpKind::Add, v + "inject", {v + "p0", u}, {v + "p"}));
  ops.push_back(mk(OpKind::Split, v + "split_in", {v + "p"}, {v + "g", v + "xbc", v + "dt"},
                   {{"sizes", std::vector<std::int64_t>{di, di + 2 * N, H}}, {"axis", std::int64_t{-1}}}));
  ops.push_back(mk(OpKind::Conv1dCausal, v + "conv", {v + "xbc", w + "conv_w", w + "conv_b"}, {v + "xbc_c"}));
  ops.push_back(mk(OpKind::SiLU, v + "conv_act", {v + "xbc_c"}, {v + "xbc_s"}));
  ops.push_back(mk(OpKind::Split, v + "split_xbc", {v + "xbc_s"}, {v + "x", v + "B", v + "C"},
                   {{"sizes", std::vector<std::int64_t>{di, N, N}}, {"axis", std::int64_t{-1}}}));
  ops.push_back(mk(OpKind::Add, v + "dt_bias", {v + "dt", w + "dt_bias"}, {v + "dt_b"}));
  ops.push_back(mk(OpKind::Softplus, v + "delta", {v + "dt_b"}, {v + "delta"}));
  ops.push_back(mk(OpKind::Mul, v + "delta_A", {v + "delta", w + "A"}, {v + "dA"}));
  if (c.transition == "tanh") {
    ops.push_back(mk(OpKind::Add, v + "A_bias", {v + "dA", w + "A_bias"}, {v + "dA_b"}));
    ops.push_back(mk(OpKind::Tanh, v + "decay", {v + "dA_b"}, {v + "a"}));
  } else {
    ops.push_back(mk(OpKind::Exp, v + "decay", {v + "dA"}, {v + "a"}));
  }
  ops.push_back(mk(OpKind::Reshape, v + "heads", {v + "x"}, {v + "xh"},
                   {{"shape", std::vector<std::int64_t>{0, 0, H, c.headdim}}}));
  ops.push_back(mk(OpKind::Einsum, v + "state_input", {v + "delta", v + "B", v + "xh"}, {v + "dBx"},
                   {{"spec", std::string("blh,bln,blhp->blhpn")}}));
  ops.push_back(mk(OpKind::Scan, v + "scan", {v + "a", v + "dBx"}, {v + "h"}));
  ops.push_back(mk(OpKind::Einsum, v + "readout", {v + "C", v + "h"}, {v + "yc"}, {{"spec", std::string("bln,blhpn->blhp")}}));
  ops.push_back(mk(OpKind::Einsum, v + "skip", {v + "xh", w + "D"}, {v + "Dx"}, {{"spec", std::string("blhp,h->blhp")}}));
  ops.push_back(mk(OpKind::Add, v + "y", {v + "yc", v + "Dx"}, {v + "yh"}));
  ops.push_back(mk(OpKind::Reshape, v + "merge_heads", {v + "yh"}, {v + "y"}, {{"shape", std::vector<std::int64_t>{0, 0, di}}}));
  ops.push_back(mk(OpKind::GatedRMSNorm, v + "gate_norm", {v + "y", v + "g", w + "gate_norm"}, {v + "yn"}, {{"eps", 1e-5}}));
  ops.push_back(mk(OpKind::Linear, v + "out_proj", {v + "yn", w + "out_proj"}, {v + "o"}));
  ops.push_back(mk(OpKind::Add, v + "residual", {z, v + "o"}, {v + "z"}));
  return v + "z";
}

// The SwiGLU MLP's hidden width: floor(2 d_inner / 3) (docs/research/implicit_ssm.md 1.3; no rounding to a multiple).
std::int64_t llama_hidden(const Mamba2Config& c) { return 2 * c.d_inner / 3; }

// One Llama block (docs/research/implicit_ssm.md 1.1, 1.3) appended to `ops`; returns its output. `u` empty: no
// injection (the explicit backbone); else the three injected parts u_q, u_k, u_v.
std::string llama_block(std::vector<Op>& ops, const Mamba2Config& c, int i, const std::string& z,
                        const std::vector<std::string>& u) {
  std::string w = "layer", v = "l";
  w.append(std::to_string(i)).append(".");
  v.append(std::to_string(i)).append(".");
  ops.push_back(mk(OpKind::RMSNorm, v + "norm", {z, w + "norm"}, {v + "n"}, {{"eps", 1e-5}}));
  const char* parts[3] = {"q", "k", "v"};
  for (int p = 0; p < 3; ++p) {
    const std::string x = parts[p];
    ops.push_back(mk(OpKind::Linear, v + x + "_proj", {v + "n", w + "w" + x}, {u.empty() ? v + x : v + x + "0"}));
    if (!u.empty()) ops.push_back(mk(OpKind::Add, v + "inject_" + x, {v + x + "0", u[p]}, {v + x}));
  }
  ops.push_back(mk(OpKind::CausalAttention, v + "attn", {v + "q", v + "k", v + "v"}, {v + "a"},
                   {{"heads", c.n_head}, {"rope_theta", 500000.0}}));
  ops.push_back(mk(OpKind::Linear, v + "o_proj", {v + "a", w + "wo"}, {v + "o"}));
  ops.push_back(mk(OpKind::Add, v + "residual", {z, v + "o"}, {v + "z1"}));
  ops.push_back(mk(OpKind::RMSNorm, v + "mlp_norm", {v + "z1", w + "mlp_norm"}, {v + "n2"}, {{"eps", 1e-5}}));
  ops.push_back(mk(OpKind::Linear, v + "w1", {v + "n2", w + "w1"}, {v + "h1"}));
  ops.push_back(mk(OpKind::SiLU, v + "act", {v + "h1"}, {v + "h1s"}));
  ops.push_back(mk(OpKind::Linear, v + "w3", {v + "n2", w + "w3"}, {v + "h3"}));
  ops.push_back(mk(OpKind::Mul, v + "gate", {v + "h1s", v + "h3"}, {v + "h"}));
  ops.push_back(mk(OpKind::Linear, v + "w2", {v + "h", w + "w2"}, {v + "m"}));
  ops.push_back(mk(OpKind::Add, v + "mlp_residual", {v + "z1", v + "m"}, {v + "z"}));
  return v + "z";
}

}  // namespace

Imported import_config(const std::string& config_path, const ImportOptions& options) {
  const Mamba2Config c = parse(config_path);
  const std::int64_t D = c.d_model, V = c.vocab, N = c.d_state, K = c.d_conv;
  const std::int64_t di = c.expand * D, H = c.llama ? 0 : di / c.headdim;
  const std::int64_t hid = llama_hidden(c);
  // the injection's width: layer 0's in-projection (Mamba2) or q, k, v (Llama)
  const std::int64_t d_in_proj = c.llama ? 3 * D : 2 * di + 2 * N + H, conv_dim = di + 2 * N;

  Imported out{};
  Graph& g = out.graph;
  g.name = c.name;
  g.inputs.push_back({"tokens", {DType::I64, {Dim::symbol("B"), Dim::symbol("L")}}});

  // Weights, in a fixed order (the random draws follow it).
  g.weights.push_back(fixed("embedding", {V, D}));
  if (c.implicit) {
    g.weights.push_back(fixed("injection.norm", {D}));
    g.weights.push_back(fixed("injection.W", {d_in_proj, D}));
    g.weights.push_back(fixed("injection.b", {d_in_proj}));
  }
  for (int i = 0; i < c.n_layer && c.llama; ++i) {
    const std::string w = "layer" + std::to_string(i) + ".";
    g.weights.push_back(fixed(w + "norm", {D}));
    for (const char* x : {"wq", "wk", "wv", "wo"}) g.weights.push_back(fixed(w + x, {D, D}));
    g.weights.push_back(fixed(w + "mlp_norm", {D}));
    g.weights.push_back(fixed(w + "w1", {hid, D}));
    g.weights.push_back(fixed(w + "w3", {hid, D}));
    g.weights.push_back(fixed(w + "w2", {D, hid}));
  }
  for (int i = 0; i < c.n_layer && !c.llama; ++i) {
    const std::string w = "layer" + std::to_string(i) + ".";
    g.weights.push_back(fixed(w + "norm", {D}));
    g.weights.push_back(fixed(w + "in_proj", {d_in_proj, D}));
    g.weights.push_back(fixed(w + "conv_w", {conv_dim, K}));
    g.weights.push_back(fixed(w + "conv_b", {conv_dim}));
    g.weights.push_back(fixed(w + "dt_bias", {H}));
    g.weights.push_back(fixed(w + "A", {H}));
    if (c.transition == "tanh") g.weights.push_back(fixed(w + "A_bias", {H}));
    g.weights.push_back(fixed(w + "D", {H}));
    g.weights.push_back(fixed(w + "gate_norm", {di}));
    g.weights.push_back(fixed(w + "out_proj", {D, di}));
  }
  g.weights.push_back(fixed("norm_f", {D}));

  out.parameter_count = 0;
  for (const auto& w : g.weights) {
    std::int64_t n = 1;
    for (const auto& d : w.type.shape) n *= d.size;
    out.parameter_count += n;
  }

  // The graph (docs/research/implicit_ssm.md 1.1, 1.2; Llama 1.3).
  g.ops.push_back(mk(OpKind::Embedding, "embed", {"tokens", "embedding"}, {"e"}));
  if (c.implicit && c.llama) {
    g.ops.push_back(mk(OpKind::RMSNorm, "injection.norm", {"e", "injection.norm"}, {"e_n"}, {{"eps", 1e-5}}));
    g.ops.push_back(mk(OpKind::Linear, "injection", {"e_n", "injection.W", "injection.b"}, {"u"}));
    g.ops.push_back(mk(OpKind::Split, "injection.split", {"u"}, {"u_q", "u_k", "u_v"},
                       {{"sizes", std::vector<std::int64_t>{D, D, D}}, {"axis", std::int64_t{-1}}}));
    Op fp = mk(OpKind::FixedPoint, "deq", {"u_q", "u_k", "u_v", "e"}, {"z_star"},
               {{"tol", c.tol}, {"max_iter", c.max_iter}, {"damping", c.damping}, {"rule", c.rule},
                {"like", std::string("e")}});
    fp.body = std::make_shared<Region>();
    fp.body->args = {"z", "uq_c", "uk_c", "uv_c", "e_c"};  // e_c only gives the iterate its type ("like")
    std::string z = "z";
    for (int i = 0; i < c.n_layer; ++i) z = llama_block(fp.body->ops, c, i, z, {"uq_c", "uk_c", "uv_c"});
    fp.body->ops.push_back(mk(OpKind::RMSNorm, "norm_f", {z, "norm_f"}, {"z_next"}, {{"eps", 1e-5}}));
    fp.body->results = {"z_next"};
    g.ops.push_back(std::move(fp));
  } else if (c.llama) {
    std::string z = "e";
    for (int i = 0; i < c.n_layer; ++i) z = llama_block(g.ops, c, i, z, {});
    g.ops.push_back(mk(OpKind::RMSNorm, "norm_f", {z, "norm_f"}, {"z_star"}, {{"eps", 1e-5}}));
  } else if (c.implicit) {
    g.ops.push_back(mk(OpKind::RMSNorm, "injection.norm", {"e", "injection.norm"}, {"e_n"}, {{"eps", 1e-5}}));
    g.ops.push_back(mk(OpKind::Linear, "injection", {"e_n", "injection.W", "injection.b"}, {"u"}));
    Op fp = mk(OpKind::FixedPoint, "deq", {"u", "e"}, {"z_star"},
               {{"tol", c.tol}, {"max_iter", c.max_iter}, {"damping", c.damping}, {"rule", c.rule},
                {"like", std::string("e")}});
    fp.body = std::make_shared<Region>();
    fp.body->args = {"z", "u_c", "e_c"};  // e_c only gives the iterate its type ("like")
    std::string z = "z";
    for (int i = 0; i < c.n_layer; ++i) z = mamba2_block(fp.body->ops, c, i, z, "u_c");
    fp.body->ops.push_back(mk(OpKind::RMSNorm, "norm_f", {z, "norm_f"}, {"z_next"}, {{"eps", 1e-5}}));
    fp.body->results = {"z_next"};
    g.ops.push_back(std::move(fp));
  } else {
    std::string z = "e";
    for (int i = 0; i < c.n_layer; ++i) z = mamba2_block(g.ops, c, i, z, "");
    g.ops.push_back(mk(OpKind::RMSNorm, "norm_f", {z, "norm_f"}, {"z_star"}, {{"eps", 1e-5}}));
  }
  g.ops.push_back(mk(OpKind::Linear, "lm_head", {"z_star", "embedding"}, {"logits"}));  // tied embeddings
  g.outputs = {"logits"};

  if (!options.weights) return out;
  if (!options.weights_path.empty()) {
    // Trained weights. torchdeq normalises the implicit backbone's linear and conv weights
    // (docs/research/implicit_ssm.md 1.4); only weight norm without clipping is folded here.
    const bool normed = c.implicit && c.do_weight_norm && c.norm_type != "none";
    if (normed && c.norm_type == "spectral_norm")
      throw Error(config_path + ": deq_params.norm.norm_type: reading spectral-normalised weights is not supported (weight_norm, none)");
    if (normed && c.norm_clip)
      throw Error(config_path + ": deq_params.norm.norm_clip: reading weights with clipped weight-norm scales is not supported");
    CheckpointForm form;
    form.llama = c.llama;
    form.implicit = c.implicit;
    form.n_layer = static_cast<int>(c.n_layer);
    form.weight_norm = normed;
    form.learn_scale = !c.norm_no_scale;
    form.target_norm = c.norm_target;
    MappedWeights m = map_checkpoint(g, form, read_safetensors(options.weights_path));
    out.weights = std::move(m.weights);
    out.unused_tensors = std::move(m.unused);
    out.folded = m.folded;
    return out;
  }
  if (!options.weight_sink && out.parameter_count > options.max_weights)
    throw Error(config_path + ": " + std::to_string(out.parameter_count) + " parameters is more than the " +
                std::to_string(options.max_weights) +
                " this importer generates random data for; use --shapes-only for the graph without weight data (estimates)");

  // Seeded random weights with the init of docs/research/implicit_ssm.md 1.2. (bits >> 11) * 2^-53 rather than
  // std::uniform_real_distribution, whose algorithm the standard leaves to the library.
  std::mt19937_64 rng(options.seed);
  auto uni = [&](double lo, double hi) { return lo + (hi - lo) * static_cast<double>(rng() >> 11) * 0x1.0p-53; };
  auto tensor = [&](const Value& w) -> Tensor& {
    Tensor& t = out.weights[w.name];
    for (const auto& d : w.type.shape) t.shape.push_back(d.size);
    t.data.assign(static_cast<std::size_t>(t.size()), 0.0);
    return t;
  };
  auto fill_uniform = [&](Tensor& t, double bound) {
    for (auto& x : t.data) x = uni(-bound, bound);
  };
  auto ends_with = [](const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  for (const auto& w : g.weights) {
    Tensor& t = tensor(w);
    const std::string& n = w.name;
    if (n == "embedding") fill_uniform(t, 0.01 * std::sqrt(3.0));  // std 0.01 (emb_init_std)
    else if (ends_with(n, "norm") || n == "norm_f") std::fill(t.data.begin(), t.data.end(), 1.0);  // gains 1
    else if (n == "injection.b") {}  // zeroed
    else if (n == "injection.W" || ends_with(n, ".in_proj")) fill_uniform(t, 1.0 / std::sqrt(static_cast<double>(D)));
    else if (ends_with(n, ".wq") || ends_with(n, ".wk") || ends_with(n, ".wv") || ends_with(n, ".wo") ||
             ends_with(n, ".w1") || ends_with(n, ".w2") || ends_with(n, ".w3"))
      fill_uniform(t, 1.0 / std::sqrt(static_cast<double>(t.shape[1])));  // U(+-1/sqrt(fan_in))
    else if (ends_with(n, ".out_proj")) fill_uniform(t, 1.0 / std::sqrt(static_cast<double>(di)));
    else if (ends_with(n, ".conv_w") || ends_with(n, ".conv_b")) fill_uniform(t, 1.0 / std::sqrt(static_cast<double>(K)));
    else if (ends_with(n, ".dt_bias")) {
      // dt ~ logU[1e-3, 1e-1], floored at 1e-4, stored as its inverse softplus
      for (auto& x : t.data) {
        const double dt = std::max(1e-4, std::exp(uni(std::log(1e-3), std::log(1e-1))));
        x = dt + std::log(-std::expm1(-dt));
      }
    } else if (ends_with(n, ".A")) {
      for (auto& x : t.data) x = -uni(1.0, 16.0);  // A = -exp(A_log), A_log = log U[1, 16]
    } else if (ends_with(n, ".A_bias")) {
      std::fill(t.data.begin(), t.data.end(), 2.0);  // transitions tanh(delta A + 2): near 1 at small delta, as exp's
    } else if (ends_with(n, ".D")) std::fill(t.data.begin(), t.data.end(), 1.0);
    else throw Error("import: internal: no init for weight " + n);
    if (options.weight_sink) {
      options.weight_sink(n, std::move(t));
      out.weights.erase(n);
    }
  }
  return out;
}

}  // namespace aoc::ir
