// aoc train SCENARIO.json -o DIR: trains a state-tracking model (models/train.hpp) and writes it as
// a model directory: config.json (the importer's format), weights.h5, train.json (the scenario, the
// loss curve, the evaluations, seed, version and config hash). docs/models.md. While it trains it
// keeps DIR/checkpoint.h5 (runtime/train/train_checkpoint.hpp); --resume continues a killed run from it.
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
#include "runtime/io/output.hpp"
#include "runtime/train/train_checkpoint.hpp"
#include "runtime/train/train_machine.hpp"
#include "sim/error.hpp"
#include "sim/json_reader.hpp"

namespace aoc::cli {

namespace {

struct Opts {
  std::string scenario, output;
  int threads = 1, checkpoint_every = 0, stop_after = 0;
  bool quiet = false, resume = false;
  // Fine-tuning a trained model for a machine (--from DIR --hw NAME).
  std::string from, hw;
  std::vector<std::string> set;
  int steps = 300, length = 0;  // 0: the model's training length
  std::vector<std::string> train_set;  // --train-set KEY=VALUE: the scenario's train.KEY
  double lr = 0;  // 0: a tenth of the scenario's
  std::uint64_t seed = 0;
  bool no_noise = false, ideal_optics = false;
  double balance = 0;
};

// The scenario as this run trains it: the file given, or (--from) the model folder's scenario with
// the fine-tuning's steps, learning rate and data (the solve phase from the first step: the model
// already solves its fixed point), and the machine it is fine-tuned for.
nlohmann::ordered_json scenario_of(const Opts& o, std::string& label) {
  if (o.from.empty()) {
    label = o.scenario;
    return jsonr::parse_file(o.scenario);
  }
  label = (std::filesystem::path(o.from) / "train.json").string();
  const jsonr::json log = jsonr::parse_file(label);
  if (!log.is_object() || !log.contains("scenario")) throw Error(label + ": scenario: missing (is " + o.from + " a model folder aoc train wrote?)");
  nlohmann::ordered_json sc = log["scenario"];
  if (!sc.is_object() || !sc.contains("train") || !sc["train"].is_object()) throw Error(label + ": scenario.train: missing");
  nlohmann::ordered_json& t = sc["train"];
  const double lr = o.lr > 0 ? o.lr : 0.1 * t.value("lr", 3e-3);
  t["steps"] = o.steps;
  if (o.length > 0) t["length"] = o.length;
  t["lr"] = lr;
  t["bounded_fraction"] = 0.0;
  t["seed"] = t.value("seed", 0) + 1;  // batches the first training did not start from
  t.erase("hardware_aware");
  // last, so that it can set any field (lr, seed, bounded_fraction too)
  for (const std::string& kv : o.train_set) {
    const auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) throw Error("train: --train-set " + kv + ": expected KEY=VALUE (e.g. solve_max=64)");
    const std::string key = kv.substr(0, eq), text = kv.substr(eq + 1);
    // a number or true/false as JSON, anything else as a string; the scenario's reader checks it
    const nlohmann::ordered_json v = nlohmann::ordered_json::parse(text, nullptr, false);
    t[key] = v.is_discarded() ? nlohmann::ordered_json(text) : v;
  }
  // a suffix once: a model fine-tuned again keeps its name's length
  const auto named = [&](const std::string& suffix) {
    const std::string name = sc.value("name", std::string("model"));
    return name.ends_with(suffix) ? name : name + suffix;
  };
  if (o.hw.empty()) {
    sc["name"] = named("-continued");
    sc["description"] = "trained further from " + o.from + " on the digital reference (new batches)";
  } else {
    sc["name"] = named("-" + std::filesystem::path(o.hw).stem().string());
    sc["description"] = "fine-tuned for " + o.hw + " from " + o.from;
  }
  return sc;
}

// Time left from the current phase's recent steps: the unrolled phase's steps are several times
// faster than the solve phase's, so a mean over the whole run says too little early on; before the
// solve phase has run a step, its time is not guessed.
struct TimeLeft {
  std::vector<double> at;  // the run's seconds after each step of the current phase
  int phase = -1;
  std::string update(int step, int steps, int bounded, double seconds) {
    const int ph = step < bounded ? 0 : 1;
    if (ph != phase) at.clear(), phase = ph;
    at.push_back(seconds);
    const std::size_t w = std::min<std::size_t>(at.size() - 1, 50);
    if (w == 0) return "";
    const double per = (at.back() - at[at.size() - 1 - w]) / static_cast<double>(w);
    char buf[160];
    if (ph == 0)
      std::snprintf(buf, sizeof buf, ", ~%.0f s left in the unrolled phase, then %d solve steps (slower)", per * (bounded - step - 1),
                    steps - bounded);
    else
      std::snprintf(buf, sizeof buf, ", ~%.0f s left (%.3g s a step), then the evaluations", per * (steps - step - 1), per);
    return buf;
  }
};

int run(const Opts& o) {
  if (o.from.empty() == o.scenario.empty()) throw Error("train: give a scenario, or --from a model folder (not both)");
  if (o.hw.empty() && (!o.set.empty() || o.no_noise || o.ideal_optics || o.seed || o.balance > 0))
    throw Error("train: --set, --no-noise, --ideal-optics, --noise-seed and --balance change the machine of --hw: name one (--hw aoc-48)");
  std::string label;
  const nlohmann::ordered_json scenario = scenario_of(o, label);
  models::TrainScenario s = models::train_scenario_from(scenario, label);
  if (o.output.empty()) throw Error("train: no output folder (-o DIR)");
  std::unique_ptr<models::SequenceModel> model;
  if (o.from.empty()) {
    model = models::make_model(s);
  } else {
    const std::string weights = (std::filesystem::path(o.from) / "weights.h5").string();
    const ir::WeightStore w = ir::read_weights_h5(weights);
    try {
      model = models::make_model(s, w);
    } catch (const Error& e) {
      throw Error(weights + ": " + e.what() + " (the weights of another model than " + label + "'s?)");
    }
  }
  models::SequenceModel& m = *model;
  std::unique_ptr<CompiledMachine> machine;
  if (!o.hw.empty()) {
    if (s.train.hardware.slm_bits || s.train.hardware.dac_bits || s.train.hardware.adc_bits || s.train.hardware.output_noise > 0)
      throw Error(label + ": train.hardware_aware: the machine of --hw sets the bits and the noise (leave hardware_aware out)");
    MachineTraining mt;
    mt.hardware = o.hw, mt.overrides = o.set, mt.noise = !o.no_noise, mt.optics = !o.ideal_optics, mt.seed = o.seed;
    mt.balance = o.balance;
    machine = std::make_unique<CompiledMachine>(mt, m, tasks::parse_task(s.train.task), s.train.length, s.train.seed);
    s.train.hardware.machine = machine.get();
  }
  std::printf("train: %s: %s %s %s, %lld parameters, task %s, L %d, batch %d, %d steps\n", s.name.c_str(),
              m.implicit() ? "implicit" : "explicit", (std::to_string(m.width()) + "-wide").c_str(),
              s.kind == "aoc-ssm" ? "AOC-native SSM" : "Mamba2", static_cast<long long>(m.parameter_count()), s.train.task.c_str(),
              s.train.length, s.train.batch, s.train.steps);
  char balanced[64] = "";
  if (o.balance > 0) std::snprintf(balanced, sizeof balanced, ", DAC channels balanced (alpha %g)", o.balance);
  if (machine)
    std::printf("  for %s: %s%s, each step's weights compiled for it (compensated, SLM codes per tile, converters calibrated%s)\n",
                machine->hardware().name.c_str(), o.ideal_optics ? "ideal optics" : "the machine as measured",
                o.no_noise ? ", no noise" : ", every noise source of the file",
                balanced);
  // The machine trained for, as train.json records it; part of what the config hash covers.
  nlohmann::ordered_json machine_record;
  if (machine)
    machine_record = {{"from", o.from}, {"hardware", machine->hardware().name}, {"hardware_file", machine->hardware().path}, {"set", o.set},
                      {"noise", !o.no_noise}, {"optics", o.ideal_optics ? "ideal" : "measured"}, {"noise_seed", o.seed}};
  if (machine && o.balance > 0) machine_record["balance"] = o.balance;  // absent when off: earlier runs keep their hash
  nlohmann::ordered_json hashed = scenario;
  if (machine) hashed["machine"] = machine_record;
  const std::string scenario_text = hashed.dump();
  const std::string config_hash = digest_hex(scenario_text.data(), scenario_text.size());
  const std::string checkpoint = (std::filesystem::path(o.output) / "checkpoint.h5").string();
  const auto start = std::chrono::steady_clock::now();
  const std::clock_t cpu_start = std::clock();  // process CPU time: what the run costs on an unloaded machine
  // Seconds of the run's earlier processes (a resumed run adds them up).
  double before_train = 0, before_total = 0, before_cpu = 0, train_seconds = 0;
  nlohmann::ordered_json curve = nlohmann::ordered_json::array();
  models::TrainState state;
  if (o.resume) {
    if (!std::filesystem::exists(checkpoint)) throw Error("train: --resume: " + checkpoint + ": no checkpoint to continue (train without --resume)");
    const nlohmann::ordered_json log = read_train_checkpoint(checkpoint, m, state, config_hash);
    if (state.step < 1 || state.step >= s.train.steps)
      throw Error(checkpoint + ": attribute state: step " + std::to_string(state.step) + " is not a step inside this scenario's " +
                  std::to_string(s.train.steps));
    curve = log.at("loss_curve");
    before_train = log.at("train_seconds").get<double>(), before_total = log.at("total_seconds").get<double>();
    before_cpu = log.at("cpu_seconds").get<double>();
    std::printf("  resumed from %s at step %d of %d (%.0f s of training before)\n", checkpoint.c_str(), state.step, s.train.steps,
                before_train);
  } else if (std::filesystem::exists(checkpoint)) {
    throw Error("train: " + checkpoint + ": the checkpoint of an unfinished run; --resume continues it (delete it to start afresh)");
  }
  const auto log_so_far = [&](double seconds) {
    return nlohmann::ordered_json{{"loss_curve", curve},
                                  {"train_seconds", before_train + seconds},
                                  {"total_seconds", before_total + std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()},
                                  {"cpu_seconds", before_cpu + static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC}};
  };
  const bool had_folder = std::filesystem::exists(o.output);
  std::filesystem::create_directories(o.output);
  const int every = std::max(1, s.train.steps / 20);
  const int save_every = o.checkpoint_every > 0 ? o.checkpoint_every : every;
  const int bounded = m.implicit() ? models::bounded_steps(s.train) : 0;  // an explicit model has one phase
  TimeLeft left;
  struct Stop {};
  try {
    models::train(
      m, s.train,
      [&](const models::TrainStep& st) {
        curve.push_back({st.step, st.loss, st.solve_iterations});
        train_seconds = st.seconds;
        const std::string eta = left.update(st.step, s.train.steps, bounded, st.seconds);
        if (!o.quiet && (st.step % every == 0 || st.step + 1 == s.train.steps)) {
          std::printf("  step %5d/%d  loss %.4g  lr %.3g  |grad| %.3g  solve %2d  %.0f s%s\n", st.step + 1, s.train.steps, st.loss, st.lr,
                      st.grad_norm, st.solve_iterations, before_train + st.seconds, eta.c_str());
          std::fflush(stdout);
        }
        if (state.step == s.train.steps) return;  // the model folder follows: no checkpoint
        const bool stop = state.step == o.stop_after;
        if (state.step % save_every == 0 || stop) write_train_checkpoint(checkpoint, m, state, config_hash, log_so_far(st.seconds));
        if (stop) throw Stop{};
      },
      &state);
  } catch (const Error&) {
    // A run that diverged is nothing to resume: a fresh run leaves nothing behind (a resumed one
    // keeps its last checkpoint, written while the loss was still finite).
    if (!o.resume) {
      std::error_code ec;
      std::filesystem::remove(checkpoint, ec);
      if (!had_folder) std::filesystem::remove(o.output, ec);  // only if empty
    }
    throw;
  } catch (const Stop&) {
    std::printf("stopped after step %d of %d: %s holds the run; the same aoc train command with --resume goes on\n", o.stop_after,
                s.train.steps, checkpoint.c_str());
    return 0;
  }
  nlohmann::ordered_json evals = nlohmann::ordered_json::array();
  for (const std::string& mode : s.eval_modes)
    for (int L : s.eval_lengths) {
      models::EvalOptions eo;
      eo.task = s.train.task, eo.length = L, eo.batch = s.eval_batch, eo.seed = s.eval_seed, eo.threads = o.threads;
      eo.mode = mode == "sequential" ? ir::Mode::Sequential : ir::Mode::Simultaneous;
      const auto t0 = std::chrono::steady_clock::now();
      const models::EvalResult e = models::evaluate(m, eo);
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      // the last position first: state tracking is judged at the end of the sequence
      std::printf("  eval %s L %4d: last position %.4f, every position %.4f (last 10: %.4f), whole sequences %.4f, iterations %.2f per %s, "
                  "%lld of %lld converged, %.1f s\n",
                  mode.c_str(), L, e.last, e.accuracy, e.last10, e.whole, e.mean_iterations, mode == "sequential" ? "token" : "sequence",
                  e.converged, e.solves, secs);
      evals.push_back({{"mode", mode}, {"length", L}, {"batch", s.eval_batch}, {"seed", s.eval_seed}, {"seconds", secs}, {"accuracy", e.accuracy},
                       {"last10", e.last10}, {"last", e.last}, {"whole_sequences", e.whole}, {"first_error", e.first_error},
                       {"mean_iterations", e.mean_iterations}, {"solves", e.solves}, {"converged", e.converged}});
    }
  // Diverged weights (a learning rate too large) are not a model: nothing is written.
  const ir::WeightStore weights = m.weights();
  for (const auto& [name, t] : weights)
    for (std::size_t i = 0; i < t.data.size(); ++i)
      if (!std::isfinite(t.data[i]))
        throw Error("train: weight '" + name + "' diverged to NaN or inf during training (element " + std::to_string(i) +
                    "): nothing written; lower train.lr or train.clip in " + label);
  const std::string cfg = m.config().dump(1) + "\n";
  const nlohmann::ordered_json so_far = log_so_far(train_seconds);
  nlohmann::ordered_json log{{"tool", "aoc train"}, {"version", AOC_VERSION}, {"scenario", scenario},
                             {"config_hash", config_hash},
                             {"model_seed", s.model_seed}, {"data_seed", s.train.seed}, {"parameters", m.parameter_count()},
                             {"train_seconds", so_far["train_seconds"]}, {"total_seconds", so_far["total_seconds"]},
                             {"cpu_seconds", so_far["cpu_seconds"]}, {"resumed", o.resume},
                             {"loss_curve_columns", {"step", "loss", "solve_iterations"}}, {"loss_curve", curve}, {"eval", evals}};
  if (machine) log["machine"] = machine_record;
  else if (!o.from.empty())
    log["from"] = {{"folder", o.from}, {"length", o.length > 0 ? nlohmann::ordered_json(o.length) : nlohmann::ordered_json()},
                   {"train_set", o.train_set}};
  ir::write_weights_h5((std::filesystem::path(o.output) / "weights.h5").string(), weights);
  write_file_atomic((std::filesystem::path(o.output) / "config.json").string(), cfg);
  write_file_atomic((std::filesystem::path(o.output) / "train.json").string(), log.dump(1) + "\n");
  std::filesystem::remove(checkpoint);  // the model is whole: nothing left to resume
  std::printf("wrote %s/{config.json, weights.h5, train.json}\n", o.output.c_str());
  return 0;
}

}  // namespace

void add_train(CLI::App& app) {
  static Opts o;
  auto* c = app.add_subcommand("train", "Train a state-tracking model from a scenario file; write config.json, weights.h5, train.json");
  c->add_option("scenario", o.scenario, "the training scenario (JSON, docs/models.md); or --from")->check(CLI::ExistingFile);
  c->add_option("--from", o.from, "go on training this model folder (its train.json and weights.h5): for the machine of --hw, else on the digital reference")
      ->check(CLI::ExistingDirectory);
  c->add_option("--hw", o.hw, "train for this machine (bundled name or hardware file): every product on its simulated tiles as a "
                              "compiled program runs them");
  c->add_option("--set", o.set, "override a hardware field for the machine: section.field=value (repeatable)");
  c->add_option("--steps", o.steps, "with --from: fine-tuning steps")->check(positive())->capture_default_str();
  c->add_option("--length", o.length, "with --from: the sequence length to train at (default: the model's)")->check(positive());
  c->add_option("--train-set", o.train_set, "with --from: change a field of the scenario's train section, KEY=VALUE (solve_max=64; repeatable)");
  c->add_option("--lr", o.lr, "with --from: the learning rate (default: a tenth of the model's scenario's)")->check(positive());
  c->add_option("--noise-seed", o.seed, "with --hw: the machine's noise draws (a new programming each step)")->check(seed_value());
  c->add_flag("--no-noise", o.no_noise, "with --hw: without the file's noise");
  c->add_flag("--ideal-optics", o.ideal_optics, "with --hw: ideal optics (out = x W) instead of the machine as measured");
  c->add_option("--balance", o.balance,
                 "with --hw: each step's program compiled with aoc compile --balance ALPHA (a scale per DAC channel moved into "
                 "the weights), as the model will be compiled (0: off)")
      ->check(between(0.0, 1.0));
  c->add_option("-o,--output", o.output, "the model folder to write")->required();
  c->add_option("--threads", o.threads, "threads for the evaluation (training runs on one: its weights do not depend on the machine)")->check(positive())->capture_default_str();
  c->add_flag("--quiet", o.quiet, "no progress lines");
  c->add_flag("--resume", o.resume, "continue the run DIR/checkpoint.h5 holds (a killed run): the same weights as an unbroken run");
  c->add_option("--stop-after", o.stop_after, "stop after this step with a checkpoint (jobs in time slices); --resume goes on")
      ->check(positive());
  c->add_option("--checkpoint-every", o.checkpoint_every, "steps between checkpoints (DIR/checkpoint.h5; default: every 5 % of the steps)")
      ->check(positive());
  c->footer(
      "The model folder is what aoc import reads (config.json) with its weights (weights.h5):\n"
      "  aoc import DIR/config.json --shapes-only -o g.json && aoc compile g.json --weights DIR/weights.h5 ...\n"
      "A killed run goes on from DIR/checkpoint.h5 with --resume, to the unbroken run's weights.\n"
      "Examples:\n  aoc train scenarios/train/parity-implicit.json -o models/trained/parity-implicit\n"
      "  aoc train scenarios/train/parity-implicit.json -o models/trained/parity-implicit --resume\n"
      "  aoc train --from models/trained/parity-implicit --hw aoc-48 --steps 20 -o parity-implicit-aoc48   (fine-tune for a machine)\n"
      "  aoc train --from models/trained/parity-implicit --steps 200 --lr 1e-3 -o parity-longer   (more steps on the reference)");
  c->callback([] { exit_status() = run(o); });
}

}  // namespace aoc::cli
