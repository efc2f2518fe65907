// The importer for the published implicit language models (microsoft/implicit_languagemodels):
// reads a Hugging Face config.json and builds the model's graph (docs/ir.md, "Importing implicit
// Mamba2 configs"), with seeded random weights of the true shapes or the trained weights of a
// safetensors checkpoint (options.weights_path; names and folding in compiler/checkpoint_map.hpp).
//
// Supported: the Mamba2 family (model_type implicit_mamba2, or mamba2 with the same fields) and
// the Llama3 family (implicit_llama3: CausalAttention with RoPE + SwiGLU MLP), implicit (a FixedPoint
// over the backbone) and explicit (the backbone once). Every problem with the config is one
// aoc::Error line naming the file and the field:
//   config.json: backbone_config.block_cfg.d_state: missing required field
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <optional>
#include <vector>

#include "compiler/ir.hpp"

namespace aoc::ir {

struct ImportOptions {
  std::uint64_t seed = 0;
  bool weights = true;                    // false: the graph only (shapes, for estimates)
  std::int64_t max_weights = 50'000'000;  // more parameters than this with random weights: an error
  // Trained weights: a .safetensors file or a sharded checkpoint's index .json (compiler/safetensors.hpp).
  // Empty: seeded random weights. With it there is no max_weights limit; the checkpoint is read
  // into memory whole (as doubles).
  std::string weights_path = {};
  // Seeded random weights handed over one tensor at a time as they are drawn (the same values and
  // order), not kept in Imported::weights: any model size (max_weights does not apply), one tensor
  // in memory at a time. aoc import writes them straight to the weights file this way.
  std::function<void(const std::string& name, Tensor&& t)> weight_sink = {};
  // Every FixedPoint's tol instead of the config's f_tol (aoc import --tol; models::import_model_config
  // applies it and refuses a model without a fixed point).
  std::optional<double> tol = {};
};

struct Imported {
  Graph graph;
  WeightStore weights;            // empty when !options.weights
  std::int64_t parameter_count;   // the elements of every declared weight, always computed
  // From a checkpoint (weights_path) only:
  std::vector<std::string> unused_tensors;  // the checkpoint's tensors no graph weight came from, sorted
  int folded = 0;                           // linear / conv weights whose weight norm was folded
  std::optional<double> config_tol;         // the config's own tol where options.tol replaced it
};

Imported import_config(const std::string& config_path, const ImportOptions& options = {});

}  // namespace aoc::ir
