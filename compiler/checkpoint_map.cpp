#include "compiler/checkpoint_map.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <set>

#include "sim/error.hpp"
#include "sim/json_reader.hpp"

namespace aoc::ir {

namespace {

using T = WeightTransform;

// One block's weights: graph name after "layer<i>.", checkpoint name after "backbone.layers.<i>.".
// Names from implicit_llm/modules/{block,mamba2,attention,mlp}.py (Block.norm / norm2 / mixer / mlp).
struct LayerEntry {
  const char* graph;
  const char* checkpoint;
  T transform;
};
constexpr LayerEntry kMamba2Layer[] = {
    {"norm", "norm.weight", T::Copy},                 // Block.norm (RMSNorm)
    {"in_proj", "mixer.in_proj.weight", T::Linear},   // [d_in_proj, D], no bias
    {"conv_w", "mixer.conv1d.weight", T::Conv},       // depthwise nn.Conv1d [conv_dim, 1, K]
    {"conv_b", "mixer.conv1d.bias", T::Copy},
    {"dt_bias", "mixer.dt_bias", T::Copy},
    {"A", "mixer.A_log", T::NegExp},
    {"D", "mixer.D", T::Copy},
    {"gate_norm", "mixer.norm.weight", T::Copy},      // RMSNormGated
    {"out_proj", "mixer.out_proj.weight", T::Linear},
};
constexpr LayerEntry kLlamaLayer[] = {
    {"norm", "norm.weight", T::Copy},
    {"wq", "mixer.wq.weight", T::Linear},
    {"wk", "mixer.wk.weight", T::Linear},
    {"wv", "mixer.wv.weight", T::Linear},
    {"wo", "mixer.out_proj.weight", T::Linear},
    {"mlp_norm", "norm2.weight", T::Copy},
    {"w1", "mlp.w1.weight", T::Linear},
    {"w3", "mlp.w3.weight", T::Linear},
    {"w2", "mlp.fc2.weight", T::Linear},              // LlamaMLP names its down projection fc2
};

constexpr const char* kHead = "criterion.decoder.weight";  // PartialCrossEntropyHead, tied to the embedding

std::vector<std::int64_t> declared_shape(const Value& w) {
  std::vector<std::int64_t> s;
  for (const auto& d : w.type.shape) s.push_back(d.size);
  return s;
}

class Mapper {
 public:
  Mapper(const CheckpointForm& form, Checkpoint&& c) : form_(form), c_(std::move(c)) {}

  Tensor build(const WeightSource& s, const std::vector<std::int64_t>& want) {
    switch (s.transform) {
      case T::Copy: return take(s.checkpoint, s.graph, want);
      case T::NegExp: {
        Tensor t = take(s.checkpoint, s.graph, want);
        for (double& x : t.data) x = -std::exp(x);
        for (std::size_t i = 0; i < t.data.size(); ++i)
          if (!std::isfinite(t.data[i]))
            fail(s.checkpoint, "element " + std::to_string(i) + ": A = -exp(A_log) overflows (graph weight '" + s.graph + "')");
        return t;
      }
      case T::Tied: return tied(s, want);
      case T::Linear: return normed(s, want, "");
      case T::Conv: {
        // nn.Conv1d keeps a singleton in-channel axis per group: [C, 1, K]
        if (want.size() != 2) fail(s.checkpoint, "internal: graph weight '" + s.graph + "' is not [C, K]");
        const std::vector<std::int64_t> stored{want[0], 1, want[1]};
        Tensor t = normed(s, stored, "graph weight '" + s.graph + "' " + shape_text(want) + " (stored as " + shape_text(stored) + ")");
        t.shape = want;
        return t;
      }
    }
    return {};
  }

  std::vector<std::string> unused() const {
    std::vector<std::string> u;
    for (const auto& [name, t] : c_.tensors)
      if (!used_.count(name)) u.push_back(name);
    return u;
  }
  int folded() const { return folded_; }

 private:
  [[noreturn]] void fail(const std::string& tensor, const std::string& what) const {
    throw Error(jsonr::one_line(c_.path + ": tensor '" + tensor + "': " + what));
  }
  bool has(const std::string& name) const { return c_.tensors.count(name) != 0; }

  // The tensor, moved out of the checkpoint, checked against the shape it must have there (`what`
  // says what that shape is, for the message; by default the graph weight's own).
  Tensor take(const std::string& name, const std::string& graph, const std::vector<std::int64_t>& want,
              const std::string& missing_note = "", std::string what = "") {
    const auto it = c_.tensors.find(name);
    if (it == c_.tensors.end()) fail(name, "missing (graph weight '" + graph + "'" + missing_note + ")");
    if (what.empty()) what = "graph weight '" + graph + "' " + shape_text(want);
    if (it->second.shape != want) fail(name, "shape " + shape_text(it->second.shape) + " does not match " + what);
    used_.insert(name);
    return std::move(it->second);
  }

  Tensor tied(const WeightSource& s, const std::vector<std::int64_t>& want) {
    if (!has(s.checkpoint) && has(kHead)) return take(kHead, s.graph, want);
    Tensor e = take(s.checkpoint, s.graph, want, "; nor the tied head '" + std::string(kHead) + "'");
    if (has(kHead)) {
      // both saved (torch.save keeps both names of a shared tensor): they must be the same tensor
      const Tensor& h = c_.tensors.at(kHead);
      if (h.shape != e.shape || h.data != e.data)
        fail(kHead, "differs from '" + s.checkpoint + "': an untied output head is not supported");
      used_.insert(kHead);
    }
    return e;
  }

  // A linear or conv weight: weight_v (and weight_g) folded, or a plain weight. `stored` is the
  // weight's shape in the checkpoint (`what` describes it for messages when it is not the graph's).
  Tensor normed(const WeightSource& s, const std::vector<std::int64_t>& stored, const std::string& what) {
    const std::string v_name = s.checkpoint + "_v", g_name = s.checkpoint + "_g";
    if (!has(v_name) && has(s.checkpoint)) return take(s.checkpoint, s.graph, stored, "", what);  // saved without weight norm
    if (!has(v_name)) {
      if (form_.weight_norm)
        fail(v_name, "missing (graph weight '" + s.graph + "'; weight norm stores '" + (form_.learn_scale ? g_name + "' and '" : "") +
                         v_name + "', a folded weight '" + s.checkpoint + "')");
      fail(s.checkpoint, "missing (graph weight '" + s.graph + "'; nor weight norm's '" + v_name + "')");
    }
    Tensor v = take(v_name, s.graph, stored, "", what);
    const std::int64_t rows = stored[0];
    const std::int64_t per_row = rows == 0 ? 0 : v.size() / rows;
    std::vector<double> scale(static_cast<std::size_t>(rows), form_.target_norm);
    if (form_.learn_scale || has(g_name)) {
      // torchdeq keeps g with v's rank: [out, 1] for a linear, [C, 1, 1] for a conv
      std::vector<std::int64_t> g_shape(stored.size(), 1);
      g_shape[0] = rows;
      const Tensor g = take(g_name, s.graph, g_shape, "; weight norm's scales for '" + v_name + "'",
                            "the " + shape_text(g_shape) + " weight-norm scales of graph weight '" + s.graph + "'");
      scale = g.data;
    }
    // torchdeq's WeightNorm (dim 0): W = V * (g / ||V||), the norm over all but the output axis
    for (std::int64_t r = 0; r < rows; ++r) {
      const double* row = v.data.data() + r * per_row;
      double ss = 0;
      for (std::int64_t k = 0; k < per_row; ++k) ss += row[k] * row[k];
      double norm = std::sqrt(ss);
      if (!std::isfinite(norm) || norm < 1e-140) {  // the squares over- or underflow (|V| ~ 1e200, 1e-200): scale by the largest first
        double m = 0;
        for (std::int64_t k = 0; k < per_row; ++k) m = std::max(m, std::abs(row[k]));
        double scaled = 0;
        for (std::int64_t k = 0; k < per_row; ++k) scaled += (row[k] / m) * (row[k] / m);
        norm = m > 0 ? m * std::sqrt(scaled) : 0;
      }
      if (!(norm > 0))
        fail(v_name, "row " + std::to_string(r) + " has norm 0: the weight-norm fold V * g / ||V|| is undefined");
      const double factor = scale[static_cast<std::size_t>(r)] / norm;
      for (std::int64_t k = 0; k < per_row; ++k) v.data[r * per_row + k] *= factor;
    }
    ++folded_;
    return v;
  }

  const CheckpointForm& form_;
  Checkpoint c_;
  std::set<std::string> used_;
  int folded_ = 0;
};

}  // namespace

std::vector<WeightSource> checkpoint_sources(const CheckpointForm& form) {
  // Top-level names from implicit_llm/{implicit_mamba2/modeling_mamba2,implicit_llama/modeling_llama,backbones}.py:
  // word_emb (Embedding.emb), backbone (ImplicitModel / ExplicitModel: injection, injection_norm,
  // layers, norm_f).
  std::vector<WeightSource> s{{"embedding", "word_emb.emb.weight", T::Tied}};
  if (form.implicit) {
    s.push_back({"injection.norm", "backbone.injection_norm.weight", T::Copy});
    s.push_back({"injection.W", "backbone.injection.weight", T::Linear});
    s.push_back({"injection.b", "backbone.injection.bias", T::Copy});
  }
  for (int i = 0; i < form.n_layer; ++i) {
    const std::string g = "layer" + std::to_string(i) + ".", c = "backbone.layers." + std::to_string(i) + ".";
    if (form.llama)
      for (const auto& e : kLlamaLayer) s.push_back({g + e.graph, c + e.checkpoint, e.transform});
    else
      for (const auto& e : kMamba2Layer) s.push_back({g + e.graph, c + e.checkpoint, e.transform});
  }
  s.push_back({"norm_f", "backbone.norm_f.weight", T::Copy});
  return s;
}

MappedWeights map_checkpoint(const Graph& g, const CheckpointForm& form, Checkpoint&& checkpoint) {
  std::map<std::string, WeightSource> by_graph;
  for (auto& s : checkpoint_sources(form)) by_graph.emplace(s.graph, s);
  const std::string path = checkpoint.path;
  Mapper m(form, std::move(checkpoint));
  MappedWeights out;
  for (const Value& w : g.weights) {
    const auto it = by_graph.find(w.name);
    if (it == by_graph.end()) throw Error(path + ": internal: no checkpoint tensor is mapped to graph weight '" + w.name + "'");
    out.weights[w.name] = m.build(it->second, declared_shape(w));
  }
  out.unused = m.unused();
  out.folded = m.folded();
  return out;
}

}  // namespace aoc::ir
