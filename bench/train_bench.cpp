#include "bench/train_bench.hpp"

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <vector>

#include "bench/program_bench.hpp"
#include "models/train_scenario.hpp"
#include "sim/error.hpp"
#include "sim/hardware.hpp"
#include "sim/json_reader.hpp"

namespace aoc {

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// bench/torch_train_step.py's record, checked: its seconds per step of each kind and precision, for
// the scenario's batch and length.
nlohmann::json read_torch_step(const std::string& path, int batch, int length) {
  const jsonr::json j = jsonr::parse_file(path);
  const jsonr::Reader r(path);
  r.object(j, "");
  if (r.integer(r.need(j, "", "batch"), "batch", 1, 1 << 20) != batch) r.fail("batch", "the scenario's batch is " + std::to_string(batch));
  if (r.integer(r.need(j, "", "length"), "length", 1, 1 << 20) != length) r.fail("length", "the scenario's length is " + std::to_string(length));
  const jsonr::json& s = r.need(j, "", "seconds_per_step");
  for (const char* p : {"f64", "f32"})
    for (const char* k : {"bounded", "free"}) r.number(r.need(r.need(s, "seconds_per_step", p), jsonr::sub("seconds_per_step", p), k),
                                                       jsonr::sub(jsonr::sub("seconds_per_step", p), k), jsonr::kPositive);
  return j;
}

// Seconds of each of `steps` steps after one untimed, with every step bounded or every step free.
std::vector<double> time_steps(const models::TrainScenario& s, const TrainBenchOptions& opt, bool bounded) {
  const std::unique_ptr<models::SequenceModel> m = models::make_model(s);
  models::TrainOptions o = s.train;
  o.steps = 1 + opt.steps, o.warmup = 0;
  o.bounded_fraction = bounded ? 1.0 : 0.0;
  o.solve_tol = 1e-300;  // out of reach: every free step takes solve_max gradient-free steps
  std::vector<double> secs;
  double last = 0;
  models::train(*m, o, [&](const models::TrainStep& st) {
    if (st.step > 0) secs.push_back(st.seconds - last);
    last = st.seconds;
  });
  return secs;
}

}  // namespace

double TrainBench::torch_s(const std::string& kind, std::string* precision) const {
  if (!torch) return 0;
  const nlohmann::json& s = torch->at("seconds_per_step");
  const double f64 = s.at("f64").at(kind).get<double>(), f32 = s.at("f32").at(kind).get<double>();
  if (precision) *precision = f32 < f64 ? "f32" : "f64";
  return std::min(f32, f64);
}

TrainBench run_train_bench(const TrainBenchOptions& opt, bool progress) {
  if (opt.steps < 1) throw Error("bench: train steps must be at least 1");
  TrainBench b;
  b.opt = opt;
  b.scenario_path = bench_file(opt.scenario.empty() ? bundled_path("scenarios/train/parity-implicit.json") : opt.scenario,
                               "the scenario the training section times; --no-train leaves it out");
  const models::TrainScenario s = models::read_train_scenario(b.scenario_path);
  if (!opt.torch_step.empty()) b.torch = read_torch_step(opt.torch_step, s.train.batch, s.train.length);
  b.model = s.name, b.batch = s.train.batch, b.length = s.train.length;
  b.unroll = s.train.unroll, b.solve_steps = s.train.solve_max, b.phantom = s.train.phantom;
  b.parameters = models::make_model(s)->parameter_count();
  b.config_hash = bench_cell_hash(opt.torch_step.empty() ? std::vector<std::string>{b.scenario_path} : std::vector<std::string>{b.scenario_path, opt.torch_step},
                                  "train steps " + std::to_string(opt.steps));
  if (progress) std::fprintf(stderr, "bench: train %s, %d bounded and %d free step(s) ...\n", b.model.c_str(), opt.steps, opt.steps);
  b.bounded_s = median(time_steps(s, opt, true));
  b.free_s = median(time_steps(s, opt, false));
  return b;
}

nlohmann::json train_bench_json(const TrainBench& b) {
  nlohmann::json cells = nlohmann::json::array();
  for (const std::string kind : {"bounded", "free"}) {
    nlohmann::json c{{"cell", "train " + kind},
                     {"model", b.model},
                     {"scenario", b.scenario_path},
                     {"parameters", b.parameters},
                     {"batch", b.batch},
                     {"length", b.length},
                     {"options", kind == "bounded" ? "f(0) and " + std::to_string(b.unroll - 1) + " damped steps, full backpropagation"
                                                   : std::to_string(b.solve_steps) + " gradient-free steps, " + std::to_string(b.phantom) +
                                                         " damped steps with gradients"},
                     {"precision", "f64"},
                     {"threads", 1},
                     {"steps", b.opt.steps},
                     {"seed", 0},
                     {"config_hash", b.config_hash},
                     {"version", AOC_VERSION},
                     {"seconds_per_step", kind == "bounded" ? b.bounded_s : b.free_s}};
    if (b.torch) {
      std::string precision;
      const double t = b.torch_s(kind, &precision);
      c["torch"] = {{"version", b.torch->value("torch", "")}, {"threads", b.torch->value("threads", 0)},
                    {"seconds_per_step", b.torch->at("seconds_per_step")}, {"faster_precision", precision}};
      c["over_torch"] = c["seconds_per_step"].get<double>() / t;
      c["target"] = kTrainOverTorchTarget;
      c["within_target"] = c["over_torch"].get<double>() <= kTrainOverTorchTarget;
    }
    cells.push_back(c);
  }
  return cells;
}

std::string train_bench_table(const TrainBench& b) {
  std::ostringstream t;
  char line[512];
  std::snprintf(line, sizeof line, "\ntraining: %s (%lld parameters), batch %d x %d tokens, f64, 1 thread, median of %d step(s)\n", b.model.c_str(),
                b.parameters, b.batch, b.length, b.opt.steps);
  t << line;
  for (const std::string kind : {"bounded", "free"}) {
    const double s = kind == "bounded" ? b.bounded_s : b.free_s;
    std::snprintf(line, sizeof line, "%-15s %.3f s per step", ("train " + kind).c_str(), s);
    t << line;
    if (b.torch) {
      std::string precision;
      const double ts = b.torch_s(kind, &precision);
      std::snprintf(line, sizeof line, "; PyTorch %s %s: %.3f s: %.2fx (target %.1fx: %s)", b.torch->value("torch", "").c_str(), precision.c_str(), ts,
                    s / ts, kTrainOverTorchTarget, s / ts <= kTrainOverTorchTarget ? "met" : "not met");
      t << line;
    } else {
      t << " (no PyTorch figure: --torch-step FILE from bench/torch_train_step.py)";
    }
    t << "\n";
  }
  return t.str();
}

}  // namespace aoc
