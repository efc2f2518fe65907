#include "models/train_scenario.hpp"

#include <limits>
#include <type_traits>

#include "models/tasks.hpp"
#include "sim/error.hpp"
#include "sim/json_reader.hpp"

namespace aoc::models {

TrainScenario read_train_scenario(const std::string& path) { return train_scenario_from(jsonr::parse_file(path), path); }

TrainScenario train_scenario_from(const nlohmann::ordered_json& j, const std::string& path) {
  const jsonr::Reader r(path);
  r.object(j, "");
  r.only_keys(j, "", {"format", "version", "name", "description", "task", "model", "train", "eval"});
  if (r.text(r.need(j, "", "format"), "format", true) != "aoc-train") r.fail("format", "expected \"aoc-train\"");
  if (r.integer(r.need(j, "", "version"), "version", 1, 1) != 1) r.fail("version", "expected 1");
  TrainScenario s;
  s.name = r.text(r.need(j, "", "name"), "name", true);
  s.train.task = r.text(r.need(j, "", "task"), "task", true);
  tasks::Task task;
  try {
    task = tasks::parse_task(s.train.task);
  } catch (const Error& e) {
    r.fail("task", e.what());
  }
  s.spec.vocab = task.vocab;
  const auto integer = [&](const jsonr::json& o, const std::string& f, const char* k, long long lo, long long hi, auto& out) {
    if (const jsonr::json* v = r.find(o, k)) out = static_cast<std::remove_reference_t<decltype(out)>>(r.integer(*v, jsonr::sub(f, k), lo, hi));
  };
  const auto number = [&](const jsonr::json& o, const std::string& f, const char* k, jsonr::Range range, double& out) {
    if (const jsonr::json* v = r.find(o, k)) out = r.number(*v, jsonr::sub(f, k), range);
  };
  const jsonr::json& m = r.need(j, "", "model");
  r.object(m, "model");
  if (const jsonr::json* k = r.find(m, "kind")) s.kind = r.choice(*k, "model.kind", {"mamba2", "aoc-ssm"});
  integer(m, "model", "seed", 0, std::numeric_limits<long long>::max(), s.model_seed);
  if (s.kind == "aoc-ssm") {
    r.only_keys(m, "model", {"kind", "d_model", "seed", "tol", "damping", "max_iter"});
    s.aoc.vocab = task.vocab;
    integer(m, "model", "d_model", 1, 4096, s.aoc.d_model);
    integer(m, "model", "max_iter", 1, 100000, s.aoc.max_iter);
    number(m, "model", "tol", jsonr::kPositive, s.aoc.tol);
    number(m, "model", "damping", {0, 1, false, true}, s.aoc.damping);
  } else {
    r.only_keys(m, "model", {"kind", "implicit", "d_model", "n_layer", "d_state", "expand", "headdim", "d_conv", "transition", "seed", "tol", "damping", "max_iter"});
    s.spec.implicit = r.boolean(r.need(m, "model", "implicit"), "model.implicit");
  }
  integer(m, "model", "d_model", 1, 4096, s.spec.d_model);
  integer(m, "model", "n_layer", 1, 64, s.spec.n_layer);
  integer(m, "model", "d_state", 1, 1024, s.spec.d_state);
  integer(m, "model", "expand", 1, 16, s.spec.expand);
  integer(m, "model", "headdim", 1, 4096, s.spec.headdim);
  integer(m, "model", "d_conv", 1, 64, s.spec.d_conv);
  if (const jsonr::json* tr = r.find(m, "transition")) s.spec.transition = r.choice(*tr, "model.transition", {"exp", "tanh"});
  integer(m, "model", "max_iter", 1, 100000, s.spec.max_iter);
  number(m, "model", "tol", jsonr::kPositive, s.spec.tol);
  number(m, "model", "damping", {0, 1, false, true}, s.spec.damping);
  if (s.kind == "mamba2" && s.spec.d_inner() % s.spec.headdim != 0) r.fail("model.headdim", "must divide expand x d_model = " + std::to_string(s.spec.d_inner()));
  const jsonr::json& t = r.need(j, "", "train");
  r.object(t, "train");
  r.only_keys(t, "train", {"length", "batch", "steps", "lr", "warmup", "clip", "weight_decay", "beta2", "bounded_fraction", "unroll",
                           "solve_max", "solve_tol", "solve_damping", "phantom", "tau", "average_last", "seed", "hardware_aware"});
  auto& o = s.train;
  integer(t, "train", "length", 1, 1 << 16, o.length);
  integer(t, "train", "batch", 1, 1 << 16, o.batch);
  integer(t, "train", "steps", 1, 1 << 24, o.steps);
  integer(t, "train", "unroll", 1, 64, o.unroll);
  integer(t, "train", "solve_max", 1, 4096, o.solve_max);
  integer(t, "train", "phantom", 1, 64, o.phantom);
  integer(t, "train", "average_last", 0, o.steps, o.average_last);
  integer(t, "train", "seed", 0, std::numeric_limits<long long>::max(), o.seed);
  number(t, "train", "lr", jsonr::kPositive, o.lr);
  number(t, "train", "warmup", {0, 1, true, true}, o.warmup);
  number(t, "train", "clip", jsonr::kPositive, o.clip);
  number(t, "train", "weight_decay", jsonr::kNonNegative, o.weight_decay);
  number(t, "train", "beta2", {0, 1, false, false}, o.beta2);
  number(t, "train", "bounded_fraction", {0, 1, true, true}, o.bounded_fraction);
  number(t, "train", "solve_tol", jsonr::kPositive, o.solve_tol);
  number(t, "train", "tau", {0, 1, false, true}, o.tau);
  number(t, "train", "solve_damping", {0, 1, false, true}, o.solve_damping);
  if (const jsonr::json* h = r.find(t, "hardware_aware")) {
    const std::string F = "train.hardware_aware";
    r.object(*h, F);
    r.only_keys(*h, F, {"slm_bits", "output_noise", "dac_bits", "adc_bits", "seed"});
    integer(*h, F, "slm_bits", 2, 24, o.hardware.slm_bits);
    integer(*h, F, "dac_bits", 2, 24, o.hardware.dac_bits);
    integer(*h, F, "adc_bits", 2, 24, o.hardware.adc_bits);
    number(*h, F, "output_noise", jsonr::kNonNegative, o.hardware.output_noise);
    integer(*h, F, "seed", 0, std::numeric_limits<long long>::max(), o.hardware.seed);
  }
  if (const jsonr::json* e = r.find(j, "eval")) {
    r.object(*e, "eval");
    r.only_keys(*e, "eval", {"lengths", "batch", "seed", "modes"});
    if (const jsonr::json* l = r.find(*e, "lengths")) {
      s.eval_lengths.clear();
      if (!l->is_array() || l->empty()) r.fail("eval.lengths", "expected a non-empty array of lengths");
      for (std::size_t i = 0; i < l->size(); ++i)
        s.eval_lengths.push_back(static_cast<int>(r.integer((*l)[i], "eval.lengths[" + std::to_string(i) + "]", 1, 1 << 20)));
    }
    integer(*e, "eval", "batch", 1, 1 << 16, s.eval_batch);
    integer(*e, "eval", "seed", 0, std::numeric_limits<long long>::max(), s.eval_seed);
    if (const jsonr::json* md = r.find(*e, "modes")) {
      s.eval_modes.clear();
      for (std::size_t i = 0; i < md->size(); ++i)
        s.eval_modes.push_back(r.choice((*md)[i], "eval.modes[" + std::to_string(i) + "]", {"sequential", "simultaneous"}));
    }
  }
  return s;
}

std::unique_ptr<SequenceModel> make_model(const TrainScenario& s) {
  if (s.kind == "aoc-ssm") return std::make_unique<AocSsmModel>(s.aoc, s.model_seed);
  return std::make_unique<Mamba2Model>(s.spec, s.model_seed);
}

std::unique_ptr<SequenceModel> make_model(const TrainScenario& s, const ir::WeightStore& weights) {
  if (s.kind == "aoc-ssm") return std::make_unique<AocSsmModel>(s.aoc, weights);
  return std::make_unique<Mamba2Model>(s.spec, weights);
}

}  // namespace aoc::models
