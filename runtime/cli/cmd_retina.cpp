// aoc retina: the retina workload (models/retina_data.hpp, docs/retina.md). `data` writes the seeded
// SYNTHETIC retina in the naturalscene.h5 layout; `score` scores predicted firing rates against a
// file's test split (correlation, fraction of explainable variance, Poisson NLL). Each subcommand is
// its own Opts, run and add function, so more (training, evaluation) slot in beside them.
#include <H5Cpp.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <nlohmann/json.hpp>

#include "models/retina_data.hpp"
#include "runtime/cli/commands.hpp"
#include "runtime/cli/retina_report.hpp"
#include "runtime/io/h5io.hpp"
#include "runtime/io/output.hpp"
#include "sim/error.hpp"
#include "sim/h5file.hpp"

namespace aoc::cli {

namespace {

// Mean spikes per second of each cell over the train split's trial.
std::vector<double> mean_rates_hz(const retina::Dataset& d) {
  std::vector<double> hz;
  for (int i = 0; i < d.train.cells(); ++i) hz.push_back(d.train.counts.row(i).mean() / d.bin_s);
  return hz;
}

// ---- aoc retina data ----

struct DataOpts {
  std::string output;
  retina::SynthConfig config;
  bool json = false;
};

int run_data(const DataOpts& o) {
  check_outputs({{"-o", o.output}}, {});
  const auto start = std::chrono::steady_clock::now();
  const retina::Dataset d = retina::synthesize(o.config);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  retina::write_dataset(o.output, d);
  const retina::Scores ceiling = retina::score(d.test, d.test.true_rate, retina::kDefaultSkip);
  const std::vector<double> hz = mean_rates_hz(d);
  const double mb = static_cast<double>(std::filesystem::file_size(o.output)) / 1e6;
  int on = 0;
  for (int p : d.polarity) on += p > 0;
  if (o.json) {
    nlohmann::ordered_json j{{"tool", "aoc retina data"},
                             {"version", AOC_VERSION},
                             {"synthetic", true},
                             {"description", d.description},
                             {"seed", d.seed},
                             {"cells", d.train.cells()},
                             {"on_cells", on},
                             {"height", d.train.height},
                             {"width", d.train.width},
                             {"train_frames", d.train.frames},
                             {"test_frames", d.test.frames},
                             {"repeats", o.config.repeats},
                             {"bin_s", d.bin_s},
                             {"mean_rate_hz", hz},
                             {"ceiling", {{"skip", retina::kDefaultSkip}, {"cc", ceiling.cc_mean}, {"fev", ceiling.fev_mean}, {"nll", ceiling.nll_mean}}},
                             {"config", d.config},
                             {"output", o.output},
                             {"bytes", std::filesystem::file_size(o.output)},
                             {"seconds", seconds}};
    emit_json(j.dump(1), "");
    return 0;
  }
  std::string rates;
  for (double v : hz) rates += (rates.empty() ? "" : " ") + fixed(v, 1);
  std::printf("SYNTHETIC retina: %d cells (%d ON, %d OFF), %dx%d px, train %d frames, test %d frames x %d repeats at %g ms, seed %llu; "
              "mean rate per cell (Hz) %s; ceiling of true_rate on test (skip %d): CC %.3f, FEV %.3f: wrote %s (%.1f MB)\n",
              d.train.cells(), on, d.train.cells() - on, d.train.height, d.train.width, d.train.frames, d.test.frames, o.config.repeats,
              d.bin_s * 1e3, static_cast<unsigned long long>(d.seed), rates.c_str(), retina::kDefaultSkip, ceiling.cc_mean, ceiling.fev_mean,
              o.output.c_str(), mb);
  return 0;
}

void add_data(CLI::App& retina) {
  static DataOpts o;
  auto* c = retina.add_subcommand("data", "Write the seeded SYNTHETIC retina (a stand-in for naturalscene.h5, in its layout)");
  c->add_option("-o,--output", o.output, "the HDF5 file to write (/train, /test, /truth; docs/retina.md)")->required();
  c->add_option("--seed", o.config.seed, "the seed: the movie, the cells and the spikes")->check(seed_value())->capture_default_str();
  c->add_option("--train-frames", o.config.train_frames, "train movie frames at 10 ms (one trial)")->check(between(41, 1 << 24))->capture_default_str();
  c->add_option("--test-frames", o.config.test_frames, "test movie frames (a different movie, repeated)")->check(between(41, 1 << 24))->capture_default_str();
  c->add_option("--repeats", o.config.repeats, "test trials of the same movie (FEV's noise estimate needs 2)")->check(between(2, 1000))->capture_default_str();
  c->add_option("--cells", o.config.cells, "ganglion cells, alternately ON and OFF")->check(between(1, 999))->capture_default_str();
  c->add_flag("--json", o.json, "print what was written as a JSON record (shape, rates, ceiling, config, seconds)");
  c->footer("The data are SYNTHETIC: a model retina (rectified subunits, so an LN model is misspecified) watching 1/f^2 movies;\n"
            "the summary says so, and so does the file (attributes synthetic = 1, description).\n"
            "The ceiling is what the generator's own expected rate scores: no model can do better on average.\n"
            "Examples:\n  aoc retina data -o retina.h5\n  aoc retina data -o small.h5 --train-frames 2000 --test-frames 500 --seed 7\n"
            "  aoc retina score --data retina.h5 --pred pred.h5");
  c->callback([] { exit_status() = run_data(o); });
}

// ---- aoc retina score ----

struct ScoreOpts {
  std::string data, pred, dataset;
  int skip = retina::kDefaultSkip;
  bool json = false;
};

// The dataset of predictions: the one named, else /rate, else the file's only dataset.
std::string pick_dataset(const std::string& path, const std::string& named) {
  if (!named.empty()) return named;
  const H5::H5File f = open_h5_read(path);
  std::vector<std::string> names;
  for (hsize_t i = 0; i < f.getNumObjs(); ++i)
    if (f.getObjTypeByIdx(i) == H5G_DATASET) names.push_back(f.getObjnameByIdx(i));
  for (const auto& n : names)
    if (n == "rate") return n;
  if (names.size() == 1) return names[0];
  std::string all;
  for (const auto& n : names) all += (all.empty() ? "" : ", ") + n;
  throw Error(path + ": " + (names.empty() ? std::string("no datasets at the root") : "several datasets (" + all + ") and none is rate") +
              "; name one with --dataset");
}

// Predictions as [cells, frames]: [1, frames, cells] (an aoc run output, batch 1), [frames, cells],
// or [cells, frames]; a square array is read as [frames, cells].
Eigen::MatrixXd read_predictions(const std::string& path, const std::string& name, int cells, int frames) {
  const H5Array a = read_h5_array(path, name);
  const std::string where = path + ": /" + name;
  const auto& s = a.shape;
  std::string shape;
  for (std::size_t v : s) shape += (shape.empty() ? "" : " x ") + std::to_string(v);
  const std::string expect = " (the test split has " + std::to_string(frames) + " frames of " + std::to_string(cells) + " cells: expected 1 x " +
                             std::to_string(frames) + " x " + std::to_string(cells) + ", " + std::to_string(frames) + " x " +
                             std::to_string(cells) + " or " + std::to_string(cells) + " x " + std::to_string(frames) + ")";
  const std::size_t F = static_cast<std::size_t>(frames), C = static_cast<std::size_t>(cells);
  Eigen::MatrixXd p(cells, frames);
  if ((s.size() == 3 && s[0] == 1 && s[1] == F && s[2] == C) || (s.size() == 2 && s[0] == F && s[1] == C)) {
    for (std::size_t t = 0; t < F; ++t)
      for (std::size_t i = 0; i < C; ++i) p(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(t)) = a.values[t * C + i];
  } else if (s.size() == 2 && s[0] == C && s[1] == F) {
    for (std::size_t i = 0; i < C; ++i)
      for (std::size_t t = 0; t < F; ++t) p(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(t)) = a.values[i * F + t];
  } else {
    throw Error(where + ": shape " + (shape.empty() ? "a scalar" : shape) + expect);
  }
  for (Eigen::Index i = 0; i < p.size(); ++i)
    if (!std::isfinite(p.data()[i])) throw Error(where + ": NaN or infinite prediction");
  return p;
}

int run_score(const ScoreOpts& o) {
  const retina::Dataset d = retina::read_dataset(o.data);
  const std::string name = pick_dataset(o.pred, o.dataset);
  const Eigen::MatrixXd pred = read_predictions(o.pred, name, d.test.cells(), d.test.frames);
  const retina::Scores s = retina::score(d.test, pred, o.skip);
  const std::optional<ScoreRow> ceiling = ceiling_row(d.test, o.skip);
  const std::size_t R = d.test.repeats.empty() ? 0 : static_cast<std::size_t>(d.test.repeats[0].rows());
  if (o.json) {
    nlohmann::ordered_json j{{"tool", "aoc retina score"}, {"version", AOC_VERSION}, {"data", o.data},      {"synthetic", d.synthetic},
                             {"description", d.description}, {"pred", o.pred},        {"dataset", name},   {"skip", o.skip},
                             {"frames", d.test.frames},    {"repeats", R},          {"scores", scores_json(s)}};
    if (!d.polarity.empty()) {
      j["types"] = nlohmann::ordered_json::array();
      for (int p : d.polarity) j["types"].push_back(p > 0 ? "ON" : "OFF");
    }
    if (ceiling) j["ceiling"] = scores_json(ceiling->scores);
    emit_json(j.dump(1), "");
    return 0;
  }
  std::printf("%s%s /%s against %s: test %d frames from %d, %zu repeats%s\n", d.synthetic ? "SYNTHETIC data: " : "", o.pred.c_str(), name.c_str(),
              o.data.c_str(), d.test.frames - o.skip, o.skip, R, R ? "" : " (scored against firing_rate_10ms)");
  print_scores(d, s, ceiling ? std::vector<ScoreRow>{*ceiling} : std::vector<ScoreRow>{});
  return 0;
}

void add_score(CLI::App& retina) {
  static ScoreOpts o;
  auto* c = retina.add_subcommand("score", "Score predicted firing rates against a retina file's test split: CC, FEV, Poisson NLL per cell");
  c->add_option("--data", o.data, "the retina file (aoc retina data, or a naturalscene.h5)")->required();
  c->add_option("--pred", o.pred, "HDF5 predictions, expected spikes per 10 ms bin: [1, frames, cells] (aoc run's output), [frames, cells] or [cells, frames]")
      ->required();
  c->add_option("--dataset", o.dataset, "the dataset in --pred (default: rate, else the only one)");
  c->add_option("--skip", o.skip, "frames not scored at the start (the filters' warm-up: 40 taps = 400 ms)")->check(between(0, 1 << 24))->capture_default_str();
  c->add_flag("--json", o.json, "print the scores as a JSON record (per cell and means; NaN as null)");
  c->footer("CC: correlation with the repeats' mean. FEV: 1 - (MSE - noise) / (variance - noise), the noise from the repeats' spread;\n"
            "1 is the best a model can do on average. NLL: Poisson, per bin, log(y!) included, of the first trial. docs/retina.md.\n"
            "Examples:\n  aoc retina score --data retina.h5 --pred pred.h5\n  aoc retina score --data retina.h5 --pred out.h5 --dataset rate --skip 40 --json");
  c->callback([] { exit_status() = run_score(o); });
}

}  // namespace

void add_retina(CLI::App& app) {
  auto* c = app.add_subcommand("retina", "The retina workload: SYNTHETIC salamander-like recordings, models of them trained and evaluated on the machine, scores");
  c->require_subcommand(1);
  c->footer("Examples:\n  aoc retina data -o retina.h5          the seeded SYNTHETIC retina (naturalscene.h5 layout)\n"
            "  aoc retina train --data retina.h5 --model cnn -o cnn\n"
            "  aoc retina eval --model models/retina/cnn --data retina.h5   on the simulated aoc-48\n"
            "  aoc retina stimulus --model models/retina/implicit --data retina.h5   a coarse movie with the same responses\n"
            "  aoc retina score --data retina.h5 --pred pred.h5\nRun 'aoc retina SUBCOMMAND --help' for each one's options; docs/retina.md.");
  add_data(*c);
  add_retina_train(*c);
  add_retina_eval(*c);
  add_retina_stimulus(*c);
  add_score(*c);
}

}  // namespace aoc::cli
