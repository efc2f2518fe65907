// aoc train SCENARIO.json -o DIR: trains a state-tracking model (models/train.hpp) and writes it as
// a model directory: config.json (the importer's format), weights.h5, train.json (the scenario, the
// loss curve, the evaluations, seed, version and config hash). docs/models.md.
#include <chrono>
#include <cmath>
#include <ctime>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "compiler/graph_json.hpp"
#include "models/aoc_ssm.hpp"
#include "models/mamba2.hpp"
#include "models/tasks.hpp"
#include "models/train.hpp"
#include "runtime/cli/commands.hpp"
#include "runtime/output.hpp"
#include "sim/error.hpp"
#include "sim/json_reader.hpp"

namespace aoc::cli {

namespace {

struct Opts {
  std::string scenario, output;
  int threads = 1;
  bool quiet = false;
};

struct Scenario {
  std::string name;
  std::string kind = "mamba2";  // model.kind
  models::Mamba2Spec spec;
  models::AocSsmSpec aoc;
  std::uint64_t model_seed = 0;
  models::TrainOptions train;
  std::vector<int> eval_lengths{32};
  int eval_batch = 128;
  std::uint64_t eval_seed = 1000;
  std::vector<std::string> eval_modes{"sequential"};
};

Scenario read_scenario(const std::string& path) {
  const jsonr::json j = jsonr::parse_file(path);
  const jsonr::Reader r(path);
  r.object(j, "");
  r.only_keys(j, "", {"format", "version", "name", "description", "task", "model", "train", "eval"});
  if (r.text(r.need(j, "", "format"), "format", true) != "aoc-train") r.fail("format", "expected \"aoc-train\"");
  if (r.integer(r.need(j, "", "version"), "version", 1, 1) != 1) r.fail("version", "expected 1");
  Scenario s;
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
    r.only_keys(m, "model", {"kind", "implicit", "d_model", "d_state", "expand", "headdim", "d_conv", "seed", "tol", "damping", "max_iter"});
    s.spec.implicit = r.boolean(r.need(m, "model", "implicit"), "model.implicit");
  }
  integer(m, "model", "d_model", 1, 4096, s.spec.d_model);
  integer(m, "model", "d_state", 1, 1024, s.spec.d_state);
  integer(m, "model", "expand", 1, 16, s.spec.expand);
  integer(m, "model", "headdim", 1, 4096, s.spec.headdim);
  integer(m, "model", "d_conv", 1, 64, s.spec.d_conv);
  integer(m, "model", "max_iter", 1, 100000, s.spec.max_iter);
  number(m, "model", "tol", jsonr::kPositive, s.spec.tol);
  number(m, "model", "damping", {0, 1, false, true}, s.spec.damping);
  if (s.kind == "mamba2" && s.spec.d_inner() % s.spec.headdim != 0) r.fail("model.headdim", "must divide expand x d_model = " + std::to_string(s.spec.d_inner()));
  const jsonr::json& t = r.need(j, "", "train");
  r.object(t, "train");
  r.only_keys(t, "train", {"length", "batch", "steps", "lr", "warmup", "clip", "weight_decay", "beta2", "bounded_fraction", "unroll",
                           "solve_max", "solve_tol", "solve_damping", "phantom", "tau", "seed", "hardware_aware"});
  auto& o = s.train;
  integer(t, "train", "length", 1, 1 << 16, o.length);
  integer(t, "train", "batch", 1, 1 << 16, o.batch);
  integer(t, "train", "steps", 1, 1 << 24, o.steps);
  integer(t, "train", "unroll", 1, 64, o.unroll);
  integer(t, "train", "solve_max", 1, 4096, o.solve_max);
  integer(t, "train", "phantom", 1, 64, o.phantom);
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

int run(const Opts& o) {
  const Scenario s = read_scenario(o.scenario);
  if (o.output.empty()) throw Error("train: no output folder (-o DIR)");
  std::unique_ptr<models::SequenceModel> model;
  if (s.kind == "aoc-ssm") model = std::make_unique<models::AocSsmModel>(s.aoc, s.model_seed);
  else model = std::make_unique<models::Mamba2Model>(s.spec, s.model_seed);
  models::SequenceModel& m = *model;
  std::printf("train: %s: %s %s %s, %lld parameters, task %s, L %d, batch %d, %d steps\n", s.name.c_str(),
              m.implicit() ? "implicit" : "explicit", (std::to_string(m.width()) + "-wide").c_str(),
              s.kind == "aoc-ssm" ? "AOC-native SSM" : "Mamba2", static_cast<long long>(m.parameter_count()), s.train.task.c_str(),
              s.train.length, s.train.batch, s.train.steps);
  const auto start = std::chrono::steady_clock::now();
  const std::clock_t cpu_start = std::clock();  // process CPU time: what the run costs on an unloaded machine
  double train_seconds = 0;
  nlohmann::ordered_json curve = nlohmann::ordered_json::array();
  const int every = std::max(1, s.train.steps / 20);
  models::train(m, s.train, [&](const models::TrainStep& st) {
    curve.push_back({st.step, st.loss, st.solve_iterations});
    train_seconds = st.seconds;
    if (!o.quiet && (st.step % every == 0 || st.step + 1 == s.train.steps)) {
      const double left = st.seconds / (st.step + 1) * (s.train.steps - st.step - 1);
      std::printf("  step %5d/%d  loss %.4g  lr %.3g  |grad| %.3g  solve %2d  %.0f s, ~%.0f s left\n", st.step + 1, s.train.steps, st.loss,
                  st.lr, st.grad_norm, st.solve_iterations, st.seconds, left);
      std::fflush(stdout);
    }
  });
  nlohmann::ordered_json evals = nlohmann::ordered_json::array();
  for (const std::string& mode : s.eval_modes)
    for (int L : s.eval_lengths) {
      models::EvalOptions eo;
      eo.task = s.train.task, eo.length = L, eo.batch = s.eval_batch, eo.seed = s.eval_seed, eo.threads = o.threads;
      eo.mode = mode == "sequential" ? ir::Mode::Sequential : ir::Mode::Simultaneous;
      const auto t0 = std::chrono::steady_clock::now();
      const models::EvalResult e = models::evaluate(m, eo);
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::printf("  eval %s L %4d: accuracy %.4f (last 10: %.4f), iterations %.2f per %s, %lld of %lld converged, %.1f s\n",
                  mode.c_str(), L, e.accuracy, e.last10, e.mean_iterations, mode == "sequential" ? "token" : "sequence", e.converged,
                  e.solves, secs);
      evals.push_back({{"mode", mode}, {"length", L}, {"batch", s.eval_batch}, {"seed", s.eval_seed}, {"seconds", secs}, {"accuracy", e.accuracy},
                       {"last10", e.last10}, {"mean_iterations", e.mean_iterations}, {"solves", e.solves}, {"converged", e.converged}});
    }
  // Diverged weights (a learning rate too large) are not a model: nothing is written.
  const ir::WeightStore weights = m.weights();
  for (const auto& [name, t] : weights)
    for (std::size_t i = 0; i < t.data.size(); ++i)
      if (!std::isfinite(t.data[i]))
        throw Error("train: weight '" + name + "' diverged to NaN or inf during training (element " + std::to_string(i) +
                    "): nothing written; lower train.lr or train.clip in " + o.scenario);
  std::filesystem::create_directories(o.output);
  const std::string cfg = m.config().dump(1) + "\n";
  const std::string scenario_text = jsonr::parse_file(o.scenario).dump();
  nlohmann::ordered_json log{{"tool", "aoc train"}, {"version", AOC_VERSION}, {"scenario", jsonr::parse_file(o.scenario)},
                             {"config_hash", digest_hex(scenario_text.data(), scenario_text.size())},
                             {"model_seed", s.model_seed}, {"data_seed", s.train.seed}, {"parameters", m.parameter_count()},
                             {"train_seconds", train_seconds},
                             {"total_seconds", std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()},
                             {"cpu_seconds", static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC},
                             {"loss_curve_columns", {"step", "loss", "solve_iterations"}}, {"loss_curve", curve}, {"eval", evals}};
  ir::write_weights_h5((std::filesystem::path(o.output) / "weights.h5").string(), weights);
  write_file_atomic((std::filesystem::path(o.output) / "config.json").string(), cfg);
  write_file_atomic((std::filesystem::path(o.output) / "train.json").string(), log.dump(1) + "\n");
  std::printf("wrote %s/{config.json, weights.h5, train.json}\n", o.output.c_str());
  return 0;
}

}  // namespace

void add_train(CLI::App& app) {
  static Opts o;
  auto* c = app.add_subcommand("train", "Train a state-tracking model from a scenario file; write config.json, weights.h5, train.json");
  c->add_option("scenario", o.scenario, "the training scenario (JSON, docs/models.md)")->required()->check(CLI::ExistingFile);
  c->add_option("-o,--output", o.output, "the model folder to write")->required();
  c->add_option("--threads", o.threads, "threads for the evaluation")->check(CLI::PositiveNumber)->capture_default_str();
  c->add_flag("--quiet", o.quiet, "no progress lines");
  c->footer(
      "The model folder is what aoc import reads (config.json) with its weights (weights.h5):\n"
      "  aoc import DIR/config.json --shapes-only -o g.json && aoc compile g.json --weights DIR/weights.h5 ...\n"
      "Example:\n  aoc train scenarios/train/parity-implicit.json -o models/trained/parity-implicit");
  c->callback([] { exit_status() = run(o); });
}

}  // namespace aoc::cli
