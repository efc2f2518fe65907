// aoc retina eval --model DIR --data retina.h5: a trained retina model (aoc retina train) compiled
// for a machine and run on the test movie, on the simulated machine (its converters and noise, by
// default) or the digital reference; scored (CC, FEV, NLL) beside the ceiling and the digital
// model's scores of its training record, with the energy and latency per frame (runtime/retina_eval.hpp).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "runtime/backend.hpp"
#include "runtime/cli/commands.hpp"
#include "runtime/cli/program_flags.hpp"
#include "runtime/cli/retina_report.hpp"
#include "runtime/estimate_json.hpp"
#include "runtime/h5io.hpp"
#include "runtime/output.hpp"
#include "runtime/progress.hpp"
#include "runtime/retina_eval.hpp"
#include "sim/error.hpp"

namespace aoc::cli {

namespace {

struct EvalOpts {
  std::string model, data, output, csv;
  RetinaEvalSettings s;
  ProgramFlags f;
  bool json = false;
};

// The digital model's test scores from the folder's train.json, if it has one.
std::optional<ScoreRow> digital_row(const std::string& dir) {
  const std::filesystem::path p = std::filesystem::path(dir) / "train.json";
  if (!std::filesystem::is_regular_file(p)) return std::nullopt;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(std::ifstream(p));
  } catch (const std::exception& e) {
    throw Error(p.string() + ": not JSON: " + e.what());
  }
  const auto& t = j.value("test_digital", nlohmann::json::object());
  const auto num = [&](const char* k) { return t.contains(k) && t[k].is_number() ? t[k].get<double>() : std::nan(""); };
  retina::Scores s;
  s.cc_mean = num("cc_mean"), s.fev_mean = num("fev_mean"), s.nll_mean = num("nll_mean");
  return ScoreRow{"digital", s, "(train.json: the trained model, digitally, every test frame)"};
}

std::string settings_text(const EvalOpts& o) {
  if (o.s.backend != "sim") return o.s.backend + " backend, the exact digital reference";
  std::string t = "sim backend: " + std::string(o.f.quantize ? "SLM codes and converters" : "exact weights and conversions") + ", " +
                  (o.f.noise ? "noise" : "no noise") + ", " + (o.f.ideal_optics ? "ideal optics" : "the optics as measured") + ", " + o.f.precision;
  if (o.f.noise) t += ", seed " + std::to_string(o.f.seed);
  return t;
}

void write_csv(const std::string& path, const retina::Split& test, const RetinaEval& r) {
  std::string out = "frame,cell,pred,rate";
  const bool truth = test.true_rate.size() > 0;
  if (truth) out += ",true_rate";
  out += "\n";
  char b[128];
  for (int c = 0; c < r.pred.rows(); ++c)
    for (int t = 0; t < r.frames; ++t) {
      std::snprintf(b, sizeof b, "%d,%d,%.9g,%.9g", t, c + 1, r.pred(c, t), test.rate(c, t));
      out += b;
      if (truth) std::snprintf(b, sizeof b, ",%.9g", test.true_rate(c, t)), out += b;
      out += "\n";
    }
  write_file_atomic(path, out);
}

int run_eval(EvalOpts o) {
  check_outputs({{"-o", o.output}, {"--csv", o.csv}}, {{"--data", o.data}});
  if (o.s.backend != "sim") o.f.quantize = o.f.noise = false;
  o.s.run = o.f;
  const RetinaModelFiles m = read_retina_model(o.model);
  const retina::Dataset d = retina::read_dataset(o.data);
  Progress meter(o.f.sequence == "sequential" ? "frames" : "steps", !o.f.quiet);
  meter.phase("eval " + m.graph.name + " (" + o.s.backend + ")");
  const RetinaEval r = evaluate_retina(m, d, o.s, meter.counter(o.f.sequence != "sequential"));
  meter.finish();
  const retina::Split test = retina::slice(d.test, 0, r.frames);  // the frames run, for the ceiling and the CSV
  const std::optional<ScoreRow> ceiling = ceiling_row(test, o.s.skip);
  const std::optional<ScoreRow> digital = r.frames == d.test.frames && o.s.skip == retina::kDefaultSkip ? digital_row(o.model) : std::nullopt;
  const EnergyReport& e = r.estimate.token;
  const std::string model_digest = file_digest((std::filesystem::path(o.model) / "weights.h5").string());

  if (!o.output.empty()) {
    H5Array a;
    a.name = "rate";
    a.shape = {1, static_cast<std::size_t>(r.frames), static_cast<std::size_t>(r.pred.rows())};
    for (int t = 0; t < r.frames; ++t)
      for (int c = 0; c < r.pred.rows(); ++c) a.values.push_back(r.pred(c, t));
    write_h5_arrays(o.output, {a}, {{"seed", {static_cast<double>(o.f.seed)}}, {"synthetic", {d.synthetic ? 1.0 : 0.0}}},
                    {{"tool", "aoc retina eval"}, {"version", AOC_VERSION}, {"model", o.model}, {"model_digest", model_digest},
                     {"data", o.data}, {"hardware", r.hw.name}, {"backend", o.s.backend}, {"settings", settings_text(o)}});
  }
  if (!o.csv.empty()) write_csv(o.csv, test, r);

  if (o.json) {
    nlohmann::ordered_json j{{"tool", "aoc retina eval"},
                             {"version", AOC_VERSION},
                             {"synthetic", d.synthetic},
                             {"data", o.data},
                             {"data_description", d.description},
                             {"model", o.model},
                             {"graph", m.graph.name},
                             {"model_digest", model_digest},
                             {"hardware", r.hw.name},
                             {"set", o.s.set},
                             {"backend", o.s.backend},
                             {"settings", {{"sequence", o.f.sequence}, {"quantize", o.f.quantize}, {"noise", o.f.noise}, {"optics", !o.f.ideal_optics},
                                           {"precision", o.f.precision}, {"seed", o.f.seed}, {"threads", o.f.threads}}},
                             {"calibration_frames", r.calibration_frames},
                             {"calibrated_ranges", r.calibrated_ranges},
                             {"frames", r.frames},
                             {"skip", o.s.skip},
                             {"scores", scores_json(r.scores)}};
    if (ceiling) j["ceiling"] = scores_json(ceiling->scores);
    if (digital) j["digital"] = {{"cc_mean", digital->scores.cc_mean}, {"fev_mean", digital->scores.fev_mean}, {"nll_mean", digital->scores.nll_mean},
                                 {"source", (std::filesystem::path(o.model) / "train.json").string()}};
    if (r.iterations.solves)
      j["iterations"] = {{"mean", r.iterations.mean}, {"p99", r.iterations.p99}, {"max", r.iterations.max}, {"solves", r.iterations.solves},
                         {"converged", r.iterations.converged}};
    j["conversions"] = {{"dac", r.result.counters.dac}, {"adc", r.result.counters.adc}, {"dac_clipped", r.result.counters.dac_clipped},
                        {"adc_clipped", r.result.counters.adc_clipped}};
    j["per_frame"] = {{"energy_j", band_json(e.total_joules)}, {"latency_s", e.total_seconds}, {"gpu_energy_j", e.gpu.joules},
                      {"gpu_latency_s", e.gpu.seconds}, {"gpu", e.gpu.name}};
    j["estimate"] = program_estimate_json(r.estimate, r.hw, resolve_hardware_path(o.s.hw), o.s.set,
                                          "per frame (a token is a frame) of the evaluated program, fixed-point iterations as measured");
    j["output"] = o.output;
    j["csv"] = o.csv;
    j["seconds"] = r.seconds;
    emit_json(j.dump(1), "");
    return 0;
  }
  std::printf("%s%s on %s (%s; %s): test %d frames from %d", d.synthetic ? "SYNTHETIC data: " : "", m.graph.name.c_str(), r.hw.name.c_str(),
              settings_text(o).c_str(), o.f.sequence.c_str(), r.frames - o.s.skip, o.s.skip);
  if (r.calibrated_ranges) std::printf(", %d converter ranges calibrated on %d train frames", r.calibrated_ranges, r.calibration_frames);
  std::printf("\n");
  std::vector<ScoreRow> more;
  if (digital) more.push_back(*digital);
  if (ceiling) more.push_back(*ceiling);
  print_scores(d, r.scores, more);
  if (r.iterations.solves)
    std::printf("fixed point: %.1f iterations per frame on average (p99 %d, max %d), %lld of %lld solves converged\n", r.iterations.mean, r.iterations.p99,
                r.iterations.max, r.iterations.converged, r.iterations.solves);
  std::printf("per frame on %s: %s (%s..%s), %s; %s: %s, %s (aoc estimate's model of the compiled program; every figure's source: --json)\n",
              r.hw.name.c_str(), si(e.total_joules.typ, "J").c_str(), si(e.total_joules.min, "J").c_str(), si(e.total_joules.max, "J").c_str(),
              si(e.total_seconds, "s").c_str(), e.gpu.name.c_str(), si(e.gpu.joules, "J").c_str(), si(e.gpu.seconds, "s").c_str());
  for (const auto& n : r.estimate.notes)
    if (n.find("not stationary") != std::string::npos) std::printf("  %s\n", n.c_str());
  if (!o.output.empty()) std::printf("wrote %s (/rate [1, %d, %d]: aoc retina score --pred reads it)\n", o.output.c_str(), r.frames, static_cast<int>(r.pred.rows()));
  if (!o.csv.empty()) std::printf("wrote %s (frame, cell, pred, rate%s)\n", o.csv.c_str(), test.true_rate.size() ? ", true_rate" : "");
  return 0;
}

}  // namespace

void add_retina_eval(CLI::App& retina) {
  static EvalOpts o;
  auto* c = retina.add_subcommand("eval", "Evaluate a trained retina model on the test movie: on the simulated machine (converters, noise) or the digital reference");
  c->add_option("--model", o.model, "the model folder (aoc retina train -o DIR; models/retina/ln, cnn, implicit)")->required();
  c->add_option("--data", o.data, "the retina file (aoc retina data, or a naturalscene.h5)")->required();
  c->add_option("--hw", o.s.hw, "hardware file or bundled machine (aoc-48, aoc-16, aoc-scale): the graph is compiled for it")->capture_default_str();
  c->add_option("--backend", o.s.backend, "sim: the simulated machine; cpu: the exact digital reference (cuda, cuda-f32: the reference on a GPU)")
      ->check(CLI::IsMember(backend_names()))
      ->capture_default_str();
  o.f.sequence = "sequential";  // the machine sees the movie frame by frame
  add_program_flags(c, o.f, true);
  c->get_option("--set")->description("change the machine, e.g. --set converters.slm_bits=4 or --set noise.thermal_sigma=0.01 (repeatable; the graph is compiled here)");
  c->add_option("--calibration-frames", o.s.calibration_frames, "train frames (at most the split's) the converters' ranges are calibrated on (0: the compiled defaults)")
      ->check(CLI::Range(0, 1 << 24))
      ->capture_default_str();
  c->add_option("--frames", o.s.frames, "test frames to run, from the first (0: all)")->check(CLI::Range(0, 1 << 24))->capture_default_str();
  c->add_option("--skip", o.s.skip, "frames not scored at the start (the filters' warm-up)")->check(CLI::Range(0, 1 << 24))->capture_default_str();
  c->add_option("-o,--output", o.output, "write the predictions to this HDF5 file (/rate [1, frames, cells], as aoc run writes)");
  c->add_option("--csv", o.csv, "write frame, cell, predicted and recorded rate (and the true rate of SYNTHETIC data) as CSV, for plots");
  c->add_flag("--json", o.json, "print the evaluation as a JSON record (scores per cell, settings, per-frame energy and latency with sources)");
  c->footer("The scores are over the test frames after --skip; 'digital' is the training record's (train.json), 'ceiling' the generator's\n"
            "own rate (SYNTHETIC data). The converters are calibrated on train frames, never on what is scored. Per frame: aoc estimate's\n"
            "energy and latency of the compiled program, a frame a token, the fixed point's iterations as measured here. docs/retina.md.\n"
            "Examples:\n  aoc retina eval --model models/retina/cnn --data retina.h5                the simulated aoc-48, converters and noise\n"
            "  aoc retina eval --model models/retina/cnn --data retina.h5 --backend cpu  the digital reference\n"
            "  aoc retina eval --model models/retina/implicit --data retina.h5 --hw aoc-scale --json");
  c->callback([c] {
    refuse_given(c, "retina eval", {"--inputs"}, "does not apply: the inputs are the --data file's test movie");
    if (o.s.backend != "sim")
      refuse_given(c, "retina eval", {"--noise", "--quantize", "--ideal-optics", "--precision", "--light-map"}, "applies only with --backend sim");
    exit_status() = run_eval(o);
  });
}

}  // namespace aoc::cli
