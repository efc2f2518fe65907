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
#include "models/train.hpp"
#include "models/train_scenario.hpp"
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

int run(const Opts& o) {
  const models::TrainScenario s = models::read_train_scenario(o.scenario);
  if (o.output.empty()) throw Error("train: no output folder (-o DIR)");
  const std::unique_ptr<models::SequenceModel> model = models::make_model(s);
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
  c->add_option("--threads", o.threads, "threads for the evaluation (training runs on one: its weights do not depend on the machine)")->check(CLI::PositiveNumber)->capture_default_str();
  c->add_flag("--quiet", o.quiet, "no progress lines");
  c->footer(
      "The model folder is what aoc import reads (config.json) with its weights (weights.h5):\n"
      "  aoc import DIR/config.json --shapes-only -o g.json && aoc compile g.json --weights DIR/weights.h5 ...\n"
      "Example:\n  aoc train scenarios/train/parity-implicit.json -o models/trained/parity-implicit");
  c->callback([] { exit_status() = run(o); });
}

}  // namespace aoc::cli
