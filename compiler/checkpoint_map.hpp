// Which tensor of a trained checkpoint of the implicit language models (microsoft/implicit_languagemodels)
// becomes which weight of the imported graph, and how (docs/ir.md, "Trained weights").
//
// The checkpoint names are the PyTorch state-dict names of ImplicitMambaForCausalLM /
// ImplicitLlamaForCausalLM: `word_emb.emb.weight`, `backbone.injection.weight`,
// `backbone.layers.<i>.mixer.in_proj.weight`, ... In the implicit backbone torchdeq's weight norm
// replaces every nn.Linear / nn.Conv1d `weight` by `weight_g` (one scale per output row) and
// `weight_v`; the graph holds the effective weight W = V * (g / ||V||_row), folded here once. The
// other transforms: A = -exp(A_log), the depthwise conv weight [C, 1, K] -> [C, K], and the tied
// head (the embedding may be stored under the head's name instead).
#pragma once
#include <string>
#include <vector>

#include "compiler/ir.hpp"
#include "compiler/safetensors.hpp"

namespace aoc::ir {

// What the config says about the checkpoint's layout.
struct CheckpointForm {
  bool llama = false;        // Llama3 blocks (else Mamba2)
  bool implicit = true;      // an injection (else the explicit backbone)
  int n_layer = 0;
  bool weight_norm = true;   // linear and conv weights stored as weight_g / weight_v (implicit, norm_type weight_norm)
  bool learn_scale = true;   // weight_g stored; false (norm_no_scale): W = target_norm * V / ||V||_row
  double target_norm = 1.0;
};

enum class WeightTransform {
  Copy,        // the tensor as stored
  Linear,      // weight norm folded when stored as weight_g / weight_v; a plain `weight` is taken as is
  Conv,        // as Linear, then [C, 1, K] -> [C, K]
  NegExp,      // A = -exp(A_log)
  Tied,        // the embedding, stored as word_emb.emb.weight or as the tied head criterion.decoder.weight
};

struct WeightSource {
  std::string graph;       // "layer0.in_proj"
  std::string checkpoint;  // "backbone.layers.0.mixer.in_proj.weight" (before weight norm's _g / _v)
  WeightTransform transform;
};

// The table for a model of this form, in the graph's weight order.
std::vector<WeightSource> checkpoint_sources(const CheckpointForm& form);

struct MappedWeights {
  WeightStore weights;              // every weight of the graph, of its declared shape
  std::vector<std::string> unused;  // checkpoint tensors no graph weight came from, sorted
  int folded = 0;                   // weights whose weight norm was folded
};

// Fills every weight of g from the checkpoint (its tensors are moved out). A graph weight without
// its tensor, or of another shape, is one aoc::Error line naming the checkpoint file, the tensor and
// the graph weight:
//   model.safetensors: tensor 'backbone.norm_f.weight': missing (graph weight 'norm_f')
MappedWeights map_checkpoint(const Graph& g, const CheckpointForm& form, Checkpoint&& checkpoint);

}  // namespace aoc::ir
