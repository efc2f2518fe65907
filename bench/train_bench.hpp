// `aoc bench`'s training section: the trainer's step on the parity scenario (docs/bench.md,
// "Training"), against PyTorch's figure for the same model when one is given:
//   train bounded  an unrolled step (f(0), then damped steps, with full backpropagation);
//   train free     a gradient-free solve of solve_max steps (its tolerance out of reach, so that every
//                  step takes them all), then the phantom gradient's damped steps;
// each the median seconds of --train-steps steps after one untimed, on one thread (as aoc train
// trains), beside bench/torch_train_step.py's figures for the same model (--torch-step FILE, its
// JSON): the ratio to PyTorch's faster precision (target: at most 1, issue 20).
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace aoc {

struct TrainBenchOptions {
  std::string scenario;   // "": scenarios/train/parity-implicit.json
  std::string torch_step; // bench/torch_train_step.py's JSON, or "" (no comparison)
  int steps = 5;          // timed steps of each kind
};

constexpr double kTrainOverTorchTarget = 1.0;  // issue 20: no slower than PyTorch per step

struct TrainBench {
  TrainBenchOptions opt;
  std::string model, scenario_path, config_hash;
  long long parameters = 0;
  int batch = 0, length = 0, unroll = 0, solve_steps = 0, phantom = 0;
  double bounded_s = 0, free_s = 0;  // median seconds per step
  std::optional<nlohmann::json> torch;  // the script's record
  // PyTorch's seconds per step of a kind ("bounded", "free") at its faster precision, and which; 0 without a figure
  double torch_s(const std::string& kind, std::string* precision = nullptr) const;
};

TrainBench run_train_bench(const TrainBenchOptions& opt, bool progress);
nlohmann::json train_bench_json(const TrainBench& b);
std::string train_bench_table(const TrainBench& b);

}  // namespace aoc
