// aoc retina eval --model DIR --data retina.h5: a trained retina model (aoc retina train) compiled
// for a machine and run on the test movie, on the simulated machine (its converters and noise, by
// default) or the digital reference; scored (CC, FEV, NLL) beside the ceiling and the digital
// model's scores of its training record, with the energy and latency per frame (runtime/retina/retina_eval.hpp).
// aoc retina stimulus: the closed-loop search for a coarse movie that elicits the same responses on
// the machine (runtime/retina/retina_stimulus.hpp).
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "runtime/backend/backend.hpp"
#include "runtime/cli/commands.hpp"
#include "runtime/cli/program_flags.hpp"
#include "runtime/cli/retina_report.hpp"
#include "runtime/estimate/estimate_json.hpp"
#include "runtime/io/h5io.hpp"
#include "runtime/io/output.hpp"
#include "runtime/io/progress.hpp"
#include "runtime/retina/retina_eval.hpp"
#include "runtime/retina/retina_stimulus.hpp"
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
std::optional<ScoreRow> digital_row(const RetinaModelFiles& m) {
  if (m.record.is_null()) return std::nullopt;
  const auto& t = m.record.value("test_digital", nlohmann::json::object());
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

void write_csv(const std::string& path, const RetinaEval& r) {
  const retina::Split& test = r.test;
  std::string out = "frame,cell,pred,rate";
  const bool truth = test.true_rate.size() > 0;
  if (truth) out += ",true_rate";
  out += "\n";
  char b[128];
  for (int c = 0; c < r.pred.rows(); ++c)
    for (int t = 0; t < r.test.frames; ++t) {
      std::snprintf(b, sizeof b, "%d,%d,%.9g,%.9g", t, c + 1, r.pred(c, t), test.rate(c, t));
      out += b;
      if (truth) std::snprintf(b, sizeof b, ",%.9g", test.true_rate(c, t)), out += b;
      out += "\n";
    }
  write_file_atomic(path, out);
}

int run_eval(const EvalOpts& o) {
  check_outputs({{"-o", o.output}, {"--csv", o.csv}}, {{"--data", o.data}});
  const RetinaModelFiles m = read_retina_model(o.model);
  const retina::Dataset d = retina::read_dataset(o.data);
  Progress meter(o.f.sequence == "sequential" ? "frames" : "steps", !o.f.quiet);
  meter.phase("eval " + m.graph.name + " (" + o.s.backend + ")");
  const RetinaEval r = evaluate_retina(m, d, o.s, meter.counter(o.f.sequence != "sequential"));
  meter.finish();
  const retina::Split& test = r.test;
  const std::optional<ScoreRow> ceiling = ceiling_row(test, r.skip);
  const std::optional<ScoreRow> digital = r.test.frames == d.test.frames && r.skip == m.skip ? digital_row(m) : std::nullopt;
  const EnergyReport& e = r.estimate.token;
  const std::string model_digest = file_digest((std::filesystem::path(o.model) / "weights.h5").string());

  std::string others;  // the graph's other outputs written beside /rate: ", /latent, ..."
  if (!o.output.empty()) {
    H5Array a;
    a.name = "rate";
    a.shape = {1, static_cast<std::size_t>(r.test.frames), static_cast<std::size_t>(r.pred.rows())};
    for (int t = 0; t < r.test.frames; ++t)
      for (int c = 0; c < r.pred.rows(); ++c) a.values.push_back(r.pred(c, t));
    std::vector<H5Array> arrays{a};
    for (const std::string& name : m.graph.outputs)  // the graph's other outputs as run (IB-GP: latent, latent_logvar, synth)
      if (name != "rate") {
        const ir::Tensor& v = r.result.values.at(name);
        arrays.push_back({name, std::vector<std::size_t>(v.shape.begin(), v.shape.end()), v.data});
        others += ", /" + name;
      }
    write_h5_arrays(o.output, arrays, {{"seed", {static_cast<double>(o.f.seed)}}, {"synthetic", {d.synthetic ? 1.0 : 0.0}}},
                    {{"tool", "aoc retina eval"}, {"version", AOC_VERSION}, {"model", o.model}, {"model_digest", model_digest},
                     {"data", o.data}, {"hardware", r.hw.name}, {"backend", o.s.backend}, {"settings", settings_text(o)}});
  }
  if (!o.csv.empty()) write_csv(o.csv, r);

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
                             {"settings", {{"sequence", o.f.sequence}, {"quantize", o.f.quantize}, {"noise", o.f.noise}, {"optics", !o.f.ideal_optics}, {"compensate", o.s.compensate},
                                           {"precision", o.f.precision}, {"seed", o.f.seed},
                                           {"program_seed", seed_json(o.f.program_seed)}, {"zero_reads", o.f.zero_reads},
                                           {"after_programming_us", o.f.after_programming_us ? nlohmann::json(*o.f.after_programming_us) : nlohmann::json(nullptr)},
                                           {"zero_every_us", o.f.zero_every_us ? nlohmann::json(*o.f.zero_every_us) : nlohmann::json(nullptr)},
                                           {"threads", o.f.threads}}},
                             {"calibration_frames", r.calibration_frames},
                             {"calibrated_ranges", r.calibrated_ranges},
                             {"frames", r.test.frames},
                             {"skip", r.skip},
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
              settings_text(o).c_str(), o.f.sequence.c_str(), r.test.frames - r.skip, r.skip);
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
  if (!o.output.empty())
    std::printf("wrote %s (/rate [1, %d, %d]: aoc retina score --pred reads it%s)\n", o.output.c_str(), r.test.frames, static_cast<int>(r.pred.rows()),
                others.c_str());
  if (!o.csv.empty()) std::printf("wrote %s (frame, cell, pred, rate%s)\n", o.csv.c_str(), test.true_rate.size() ? ", true_rate" : "");
  return 0;
}

// The model, the data and the machine it runs on, as eval and stimulus take them.
void add_machine_flags(CLI::App* c, EvalOpts& o) {
  c->add_option("--model", o.model, "the model folder (aoc retina train -o DIR; models/retina/ln, cnn, implicit, ibgp)")->required();
  c->add_option("--data", o.data, "the retina file (aoc retina data, or a naturalscene.h5)")->required();
  c->add_option("--hw", o.s.hw, "hardware file or bundled machine (aoc-48, aoc-16, aoc-scale): the graph is compiled for it")->capture_default_str();
  c->add_option("--backend", o.s.backend, "sim: the simulated machine; cpu: the exact digital reference (cuda, cuda-f32: the reference on a GPU)")
      ->check(CLI::IsMember(backend_names()))
      ->capture_default_str();
  o.f.sequence = "sequential";  // the machine sees the movie frame by frame
  add_program_flags(c, o.f, true);
  c->get_option("--set")->description("change the machine, e.g. --set converters.slm_bits=4 or --set noise.thermal_sigma=0.01 (repeatable; the graph is compiled here)");
  c->add_flag_function("--no-compensate", [&o](std::int64_t) { o.s.compensate = false; },
              "program the tiles' weights as they are (the compiler's compensate pass off): the raw measured optical chain");
  c->add_option("--calibration-frames", o.s.calibration_frames, "train frames (at most the split's) the converters' ranges are calibrated on (0: the compiled defaults)")
      ->check(between(0, 1 << 24))
      ->capture_default_str();
  c->add_option("--skip", o.s.skip, "frames at the start not scored or matched [default: the model's warm-up, train.json's test_skip: 40 for 40-tap filters]")
      ->check(between(0, 1 << 24));
}

// Flags that do not apply are errors; the settings record the run's flags.
void check_machine_flags(const CLI::App* c, const std::string& cmd, EvalOpts& o) {
  refuse_given(c, cmd, {"--inputs"}, "does not apply: the inputs are the --data file's test movie");
  if (o.s.backend != "sim") {
    refuse_given(c, cmd, {"--noise", "--quantize", "--ideal-optics", "--precision", "--light-map"}, "applies only with --backend sim");
    o.f.quantize = o.f.noise = false;
  }
  o.s.run = o.f;
  o.s.set = o.f.set;  // the machine is loaded (and the graph compiled) with them: RetinaEvalSettings::set
}

}  // namespace

void add_retina_eval(CLI::App& retina) {
  static EvalOpts o;
  auto* c = retina.add_subcommand("eval", "Evaluate a trained retina model on the test movie: on the simulated machine (converters, noise) or the digital reference");
  add_machine_flags(c, o);
  c->add_option("--frames", o.s.frames, "test frames to run, from the first (0: all)")->check(between(0, 1 << 24))->capture_default_str();
  c->add_option("-o,--output", o.output, "write the predictions to this HDF5 file (/rate [1, frames, cells], as aoc run writes; a graph's other outputs beside it: IB-GP's latent, latent_logvar, synth)");
  c->add_option("--csv", o.csv, "write frame, cell, predicted and recorded rate (and the true rate of SYNTHETIC data) as CSV, for plots");
  c->add_flag("--json", o.json, "print the evaluation as a JSON record (scores per cell, settings, per-frame energy and latency with sources)");
  c->footer("The scores are over the test frames after --skip; 'digital' is the training record's (train.json), 'ceiling' the generator's\n"
            "own rate (SYNTHETIC data). The converters are calibrated on train frames, never on what is scored. Per frame: aoc estimate's\n"
            "energy and latency of the compiled program, a frame a token, the fixed point's iterations as measured here. docs/retina.md.\n"
            "Examples:\n  aoc retina eval --model models/retina/cnn --data retina.h5                the simulated aoc-48, converters and noise\n"
            "  aoc retina eval --model models/retina/cnn --data retina.h5 --backend cpu  the digital reference\n"
            "  aoc retina eval --model models/retina/implicit --data retina.h5 --hw aoc-scale --json");
  c->callback([c] {
    check_machine_flags(c, "retina eval", o);
    exit_status() = run_eval(o);
  });
}

namespace {

struct StimulusOpts {
  EvalOpts e;
  StimulusSearchSettings search;
};

nlohmann::ordered_json step_json(const StimulusStep& m) { return {{"step", m.step}, {"cc", m.cc}, {"mse", m.mse}}; }

int run_stimulus(const StimulusOpts& so) {
  const EvalOpts& o = so.e;
  check_outputs({{"-o", o.output}, {"--csv", o.csv}}, {{"--data", o.data}});
  const RetinaModelFiles m = read_retina_model(o.model);
  const int skip = o.s.skip >= 0 ? o.s.skip : m.skip;
  retina::Model digital = read_retina_digital(m);
  const retina::Dataset d = retina::read_dataset(o.data);
  check_stimulus_settings(so.search, d.test, skip);
  const Hardware hw = load_hardware(resolve_hardware_path(o.s.hw), o.s.set);
  const RetinaMachine machine = compile_retina(m, d, hw, o.s);
  const int coarse = (d.test.height / std::max(1, so.search.block)) * (d.test.width / std::max(1, so.search.block));
  if (!o.json && !o.f.quiet)
    std::printf("%sminimal stimulus for %s on %s (%s): test frames %d..%d, matched from frame %d; %d coarse pixels per frame (%dx%d px blocks, %dx fewer than %dx%d)\n",
                d.synthetic ? "SYNTHETIC data: " : "", m.graph.name.c_str(), hw.name.c_str(), settings_text(o).c_str(), so.search.first,
                so.search.first + so.search.frames, so.search.first + skip, coarse, so.search.block, so.search.block,
                so.search.block * so.search.block, d.test.width, d.test.height);
  std::fflush(stdout);
  const auto start = std::chrono::steady_clock::now();
  const StimulusSearch r = search_stimulus(machine, digital, d.test, skip, o.f.seed, so.search, [&](const StimulusStep& st) {
    if (o.json || o.f.quiet) return;
    if (st.step % 10 == 0 || st.step == so.search.steps) std::printf("  step %3d/%d  CC %.3f  MSE %.3g\n", st.step, so.search.steps, st.cc, st.mse);
    std::fflush(stdout);
  });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!o.output.empty()) {
    const auto F = static_cast<std::size_t>(r.frames), H = static_cast<std::size_t>(r.height), W = static_cast<std::size_t>(r.width);
    H5Array stim{"stimulus", {F, H, W}, std::vector<double>(r.stimulus.begin(), r.stimulus.end()), false};
    H5Array nat{"natural", {F, H, W}, std::vector<double>(r.natural.begin(), r.natural.end()), false};
    H5Array co{"coarse", {F, static_cast<std::size_t>(r.coarse_h), static_cast<std::size_t>(r.coarse_w)},
               std::vector<double>(r.coarse.data(), r.coarse.data() + r.coarse.size()), false};
    H5Array tg{"target", {static_cast<std::size_t>(r.target.rows()), F}, {}, false};
    for (Eigen::Index c = 0; c < r.target.rows(); ++c)
      for (Eigen::Index t = 0; t < r.target.cols(); ++t) tg.values.push_back(r.target(c, t));
    write_h5_arrays(o.output, {stim, nat, co, tg}, {{"seed", {static_cast<double>(o.f.seed)}}, {"synthetic", {d.synthetic ? 1.0 : 0.0}}, {"first", {static_cast<double>(so.search.first)}}},
                    {{"tool", "aoc retina stimulus"}, {"version", AOC_VERSION}, {"model", o.model}, {"data", o.data}, {"hardware", hw.name},
                     {"settings", settings_text(o)}});
  }
  if (!o.csv.empty()) {  // frame, y, x, natural, found: for figures
    std::string out = "frame,y,x,natural,found\n";
    char b[96];
    const std::size_t px = static_cast<std::size_t>(r.height) * static_cast<std::size_t>(r.width);
    for (int t = 0; t < r.frames; ++t)
      for (int y = 0; y < r.height; ++y)
        for (int x = 0; x < r.width; ++x) {
          const std::size_t i = static_cast<std::size_t>(t) * px + static_cast<std::size_t>(y * r.width + x);
          std::snprintf(b, sizeof b, "%d,%d,%d,%.4g,%.4g\n", so.search.first + t, y, x, r.natural[i], r.stimulus[i]);
          out += b;
        }
    write_file_atomic(o.csv, out);
  }
  if (o.json) {
    nlohmann::ordered_json curve = nlohmann::ordered_json::array();
    for (const auto& st : r.curve) curve.push_back(step_json(st));
    nlohmann::ordered_json j{{"tool", "aoc retina stimulus"}, {"version", AOC_VERSION}, {"synthetic", d.synthetic}, {"data", o.data},
                             {"model", o.model}, {"graph", m.graph.name}, {"hardware", hw.name}, {"set", o.s.set}, {"backend", o.s.backend},
                             {"settings", {{"sequence", o.f.sequence}, {"quantize", o.f.quantize}, {"noise", o.f.noise}, {"optics", !o.f.ideal_optics}, {"compensate", o.s.compensate},
                                           {"precision", o.f.precision}, {"seed", o.f.seed},
                                           {"program_seed", seed_json(o.f.program_seed)}, {"zero_reads", o.f.zero_reads},
                                           {"after_programming_us", o.f.after_programming_us ? nlohmann::json(*o.f.after_programming_us) : nlohmann::json(nullptr)},
                                           {"zero_every_us", o.f.zero_every_us ? nlohmann::json(*o.f.zero_every_us) : nlohmann::json(nullptr)}}},
                             {"search", {{"first", so.search.first}, {"frames", so.search.frames}, {"skip", skip}, {"block", so.search.block},
                                         {"steps", so.search.steps}, {"lr", so.search.lr}, {"from_grey", so.search.from_grey}, {"limit", so.search.limit}}},
                             {"pixels_per_frame", {{"natural", r.height * r.width}, {"coarse", r.coarse_h * r.coarse_w}}},
                             {"downsampled", step_json(r.downsampled)}, {"final", step_json(r.final_fresh)}, {"curve", curve}, {"output", o.output}, {"seconds", seconds}};
    emit_json(j.dump(1), "");
    return 0;
  }
  std::printf("found: CC %.3f, MSE %.3g with the target on a fresh noise seed (the block-averaged movie: CC %.3f, MSE %.3g)\n", r.final_fresh.cc,
              r.final_fresh.mse, r.downsampled.cc, r.downsampled.mse);
  if (!o.output.empty()) std::printf("wrote %s (/stimulus, /natural [frames, H, W], /coarse, /target [cells, frames])\n", o.output.c_str());
  if (!o.csv.empty()) std::printf("wrote %s (frame, y, x, natural, found)\n", o.csv.c_str());
  return 0;
}

}  // namespace

void add_retina_stimulus(CLI::App& retina) {
  static StimulusOpts o;
  auto* c = retina.add_subcommand("stimulus", "Search a coarse movie that elicits the natural movie's responses on the machine (closed loop: forward on the machine, backward on the model)");
  add_machine_flags(c, o.e);
  c->add_option("--first", o.search.first, "the test movie's first frame of the stretch")->check(between(0, 1 << 24))->capture_default_str();
  c->add_option("--frames", o.search.frames, "frames of the stretch (the first --skip warm up and are not matched)")->check(between(1, 1 << 20))->capture_default_str();
  c->add_option("--block", o.search.block, "coarse pixel side, frame pixels (divides the frame: 50 = 2 x 5 x 5)")->check(between(1, 4096))->capture_default_str();
  c->add_option("--steps", o.search.steps, "search steps (each one run on the machine)")->check(between(0, 100000))->capture_default_str();
  c->add_option("--lr", o.search.lr, "Adam's step on the coarse pixels, contrast units")->check(positive())->capture_default_str();
  c->add_option("--limit", o.search.limit, "the coarse pixels stay within +-limit (contrast units)")->check(positive())->capture_default_str();
  c->add_flag("--from-grey", o.search.from_grey, "start from a grey movie instead of the block-averaged one");
  c->add_option("-o,--output", o.e.output, "write the found movie, the natural stretch, the coarse pixels and the target responses (HDF5)");
  c->add_option("--csv", o.e.csv, "write frame, y, x, the natural and the found movie's pixel as CSV, for figures");
  c->add_flag("--json", o.e.json, "print the search as a JSON record (settings, the block-averaged start, each step, the result)");
  c->footer("The target is the machine's response to the natural stretch; each step runs the coarse movie on the machine (noise seed\n"
            "--seed + step) and follows the gradient of the response error through the model's digital twin (its train.json spec\n"
            "and weights). The result is measured on a noise seed no step used. docs/retina.md, \"Minimal stimuli\".\n"
            "Examples:\n  aoc retina stimulus --model models/retina/implicit --data retina.h5 -o stim.h5\n"
            "  aoc retina stimulus --model models/retina/implicit --data retina.h5 --block 10 --from-grey --steps 100 --json");
  c->callback([c] {
    check_machine_flags(c, "retina stimulus", o.e);
    exit_status() = run_stimulus(o);
  });
}

}  // namespace aoc::cli
