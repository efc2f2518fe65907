// A training scenario (docs/models.md, "aoc train"): the model, the task, the training options and
// the evaluations, read from its JSON file; every field checked, an error naming the file and field.
#pragma once
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "models/aoc_ssm.hpp"
#include "models/mamba2.hpp"
#include "models/train.hpp"

namespace aoc::models {

struct TrainScenario {
  std::string name;
  std::string kind = "mamba2";  // model.kind
  Mamba2Spec spec;
  AocSsmSpec aoc;
  std::uint64_t model_seed = 0;
  TrainOptions train;
  std::vector<int> eval_lengths{32};
  int eval_batch = 128;
  std::uint64_t eval_seed = 1000;
  std::vector<std::string> eval_modes{"sequential"};
};

TrainScenario read_train_scenario(const std::string& path);
// The same from a parsed scenario (a model folder's train.json holds the one it was trained from);
// errors name `path`.
TrainScenario train_scenario_from(const nlohmann::ordered_json& scenario, const std::string& path);

// The scenario's model with its seeded initial weights, or with trained ones (checked by name and
// shape against the model).
std::unique_ptr<SequenceModel> make_model(const TrainScenario& s);
std::unique_ptr<SequenceModel> make_model(const TrainScenario& s, const ir::WeightStore& weights);

}  // namespace aoc::models
