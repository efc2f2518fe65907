// aoc check: one compiled program on the same inputs on several backends (the simulator against the
// digital reference by default; --backends sim,cpu,cuda checks the simulator and the GPU reference
// against cpu), compared: errors, decisions (argmax), ADC codes of the outputs, iterations and
// convergence; with noise, the statistics over seeds. Exits 1 outside the tolerances.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <tuple>

#include "compiler/graph_json.hpp"
#include "compiler/program_h5.hpp"
#include "compiler/verify.hpp"
#include "models/train.hpp"
#include "runtime/cli/commands.hpp"
#include "runtime/cli/program_flags.hpp"
#include "runtime/io/output.hpp"
#include "runtime/run/program_check.hpp"
#include "runtime/run/program_run.hpp"
#include "runtime/io/progress.hpp"
#include "sim/error.hpp"
#include "sim/json_reader.hpp"
#include "sim/quantize.hpp"

namespace aoc::cli {

namespace {

struct Opts : ProgramFlags {
  std::string program, backends = "sim,cpu", json_out, labels;
  int seeds = 1;
  bool json = false, ideal = false, budget = false;
  double max_abs = -1, max_rel = -1, min_argmax = -1, min_codes = -1;
  int max_failures = -1;
};

// --backends: the reference is cpu when listed, else the last one; every other one is checked
// against it ("sim,cpu": the simulator against the reference; "sim,cpu,cuda": both against cpu).
struct BackendList {
  std::string reference;
  std::vector<std::string> checked;
};
BackendList parse_backends(const std::string& text) {
  std::vector<std::string> names;
  std::stringstream ss(text);
  for (std::string b; std::getline(ss, b, ',');) names.push_back(b);
  if (!text.empty() && text.back() == ',') names.push_back("");
  const auto& known = backend_names();
  for (const auto& n : names) {
    if (std::find(known.begin(), known.end(), n) == known.end())
      throw Error("--backends: unknown backend \"" + n + "\" in \"" + text + "\" (backends: cpu, sim, cuda, cuda-f32)");
    if (std::count(names.begin(), names.end(), n) > 1) throw Error("--backends: \"" + n + "\" is listed twice in \"" + text + "\"");
  }
  if (names.size() < 2)
    throw Error("--backends: expected at least two backends, those checked and the reference (e.g. sim,cpu or sim,cpu,cuda), got \"" + text + "\"");
  BackendList l;
  l.reference = std::find(names.begin(), names.end(), "cpu") != names.end() ? "cpu" : names.back();
  for (const auto& n : names)
    if (n != l.reference) l.checked.push_back(n);
  return l;
}

// One checked backend's runs against the reference: per seed for the simulator, once for an exact backend.
struct Checked {
  std::string name;
  bool physics = false;  // the sim backend: --quantize, --noise, the optics, --set, --precision and the seeds apply
  Stat abs, rel, arg, codes, fails, floor, iters, differ, acc, acc_last, acc_whole;  // against --labels: every position, the last, whole sequences
  std::vector<double> per_position;                                           // against --labels: the mean over the runs at each position
  Stat ce;                                                 // next-token cross-entropy (a language model on /tokens)
  std::string precision;  // as the runs record it
  long long rewrites = 0;  // SLM pixels written again by --write-verify, over the seeds
};

// --budget: the machine's stages switched on one at a time against the reference, so that a loss
// has a name: the lowering alone (exact products and conversions, ideal optics), the optical chain
// as the program was compiled for it, the SLM codes and converters on top, then each noise source
// of the hardware file alone on top of those (the others at 0), then every source: the machine.
// With --ideal-optics the same stages without the chain: the two budgets side by side say which
// stage the chain makes dearer.
struct BudgetStage {
  std::string name;
  bool optics = false, quantize = false, noise = false;
  std::vector<std::string> set;  // run-time --set on top of the user's (the other noise sources off)
};

std::vector<BudgetStage> budget_stages(const Hardware& hw, bool optics) {
  std::vector<BudgetStage> v = {{"lowering alone: exact, ideal optics", false, false, false, {}}};
  if (optics) v.push_back({"+ the optical chain as measured", true, false, false, {}});
  v.push_back({"+ SLM codes, DAC and ADC", optics, true, false, {}});
  if (!hw.noise) return v;
  const NoiseSpec& n = *hw.noise;
  const std::vector<std::tuple<const char*, const char*, double>> sources = {
      {"electronics noise", "thermal_sigma", n.thermal_sigma},
      {n.receiver_electrons > 0 ? "shot and receiver noise" : "shot noise", "photons_per_sample", n.photons_per_sample},
      {"LED intensity noise", "rin_sigma", n.rin_sigma},          {"SLM fixed pattern", "slm_fixed_pattern_sigma", n.slm_fixed_pattern_sigma},
      {"drift", "drift_sigma", n.drift_sigma},                    {"1/f noise", "flicker_sigma", n.flicker_sigma}};
  for (const auto& [name, field, level] : sources) {
    if (!(level > 0)) continue;
    BudgetStage s{std::string("+ ") + name + " alone", optics, true, true, {}};
    for (const auto& [other, f, l] : sources)
      if (f != field && l > 0) s.set.push_back(std::string("noise.") + f + "=0");
    v.push_back(s);
  }
  v.push_back({optics ? "+ every noise source: the machine" : "+ every noise source, ideal optics", optics, true, true, {}});
  return v;
}

int run(Opts o, const CLI::App* c) {
  const ir::Program p = ir::read_program_h5(o.program);
  if (o.inputs.empty()) throw Error("check: give the program's inputs with --inputs FILE.h5");
  const BackendList list = parse_backends(o.backends);
  const bool has_sim = std::find(list.checked.begin(), list.checked.end(), "sim") != list.checked.end();
  const std::vector<std::string> sim_options = {"--quantize", "--noise", "--ideal-optics", "--light-map", "--set", "--precision", "--seed", "--seeds", "--ideal"};
  if (!has_sim) refuse_given(c, "check", sim_options, "applies to the sim backend, which --backends " + o.backends + " does not check");
  if (o.ideal)
    refuse_given(c, "check", {"--quantize", "--noise", "--ideal-optics", "--light-map", "--set"},
                 "does not apply with --ideal (it switches the simulator's converters, noise and optics off)");
  // --ideal: the lowering alone, so no converters or noise, exact optics and, unless --precision says
  // otherwise, float64 products.
  if (o.ideal) o.ideal_optics = true, o.quantize = o.noise = false;
  if (o.ideal && !c->get_option("--precision")->count()) o.precision = "f64";
  if (o.budget) {
    if (!has_sim) throw Error("check: --budget explains the sim backend's loss: list sim in --backends");
    refuse_given(c, "check", {"--ideal", "--quantize", "--no-quantize", "--noise", "--no-noise"},
                 "does not apply with --budget (it switches the optics, converters and noise on one stage at a time)");
    refuse_given(c, "check", {"--max-abs-error", "--max-rel-error", "--min-argmax-agreement", "--min-code-agreement", "--max-failures"},
                 "does not apply with --budget (check the machine without it to apply a tolerance)");
  }
  const Hardware hw = program_hardware(p, o.set, "check");
  const auto ref = make_backend(list.reference, &hw);
  std::vector<std::unique_ptr<Backend>> duts;  // made before anything runs, so that a missing one fails at once
  for (const auto& n : list.checked) duts.push_back(make_backend(n, &hw));
  const auto inputs = read_program_inputs(o.inputs, p);
  ir::Tensor label_tensor;
  if (!o.labels.empty()) {
    const ir::WeightStore l = ir::read_weights_h5(o.labels);
    if (!l.count("labels")) throw Error(o.labels + ": /labels: missing (aoc task writes it)");
    label_tensor = l.at("labels");
  }
  const ir::Tensor* labels = o.labels.empty() ? nullptr : &label_tensor;
  // Progress over every run: the reference, then each checked backend (the simulator once per seed).
  int total_runs = 1;
  for (const auto& n : list.checked) total_runs += n == "sim" ? o.seeds : 1;
  Progress meter(progress_unit(o), !o.quiet);
  int part = 0;
  BackendOptions ro = backend_options(o);
  ro.noise = false, ro.quantize = false, ro.optics = false, ro.f64 = true;
  ro.progress = meter.counter(progress_bound(o));
  meter.phase("check: reference " + list.reference, part++, total_runs);
  const ProgramResult reference = ref->run(p, inputs, ro);
  const IterationSummary ref_it = summarize(reference);
  const LabelScore ref_accuracy = label_score(p, reference, labels, o.labels);
  // A language model: logits [B, L, V] of the /tokens input, scored on the next token. A program
  // scored against --labels is a classifier (a state-tracking task): the next token means nothing
  // there (a perfect parity model had a perplexity of 8e10).
  const auto tok = labels ? inputs.end() : inputs.find("tokens");
  const auto cross_entropy = [&](const ProgramResult& r) {
    return tok == inputs.end() ? std::nullopt : ir::next_token_cross_entropy(r.values.at(p.graph.outputs.at(0)), tok->second);
  };
  const std::optional<double> ref_ce = cross_entropy(reference);

  if (o.budget) {
    std::vector<BudgetStage> stages = budget_stages(hw, !o.ideal_optics);
    nlohmann::ordered_json rows = nlohmann::ordered_json::array();
    std::vector<std::string> text;
    char buf[512];
    for (std::size_t k = 0; k < stages.size(); ++k) {
      const BudgetStage& s = stages[k];
      std::vector<std::string> set = o.set;
      set.insert(set.end(), s.set.begin(), s.set.end());
      const Hardware hs = program_hardware(p, set, "check");
      const auto sim = make_backend("sim", &hs);
      BackendOptions bo = backend_options(o);
      bo.optics = s.optics, bo.quantize = s.quantize, bo.noise = s.noise;
      const int seeds = s.noise ? o.seeds : 1;
      std::vector<double> acc, acc_last;
      const SeedStats st = check_over_seeds(
          *sim, p, inputs, bo, seeds, reference,
          [&](int, BackendOptions& r) {
            r.progress = meter.counter(progress_bound(o));
            meter.phase("check --budget: " + s.name, static_cast<int>(k) + 1, static_cast<int>(stages.size()) + 1);
          },
          [&](int, const ProgramResult& r) {
            const LabelScore a = label_score(p, r, labels, o.labels);
            acc.push_back(a.all), acc_last.push_back(a.last);
          });
      nlohmann::ordered_json row{{"stage", s.name},        {"optics", s.optics}, {"quantize", s.quantize}, {"noise", s.noise},
                                 {"set", s.set},           {"seeds", seeds},     {"argmax_agreement", st.argmax.mean},
                                 {"max_abs_error", st.abs.mean}, {"iterations_mean", st.iterations.mean}};
      if (labels) row["accuracy_last"] = stat(acc_last).mean, row["accuracy"] = stat(acc).mean;
      rows.push_back(row);
      std::snprintf(buf, sizeof buf, "  %-40s %9.4f %13.4g %11.2f", s.name.c_str(), st.argmax.mean, st.abs.mean, st.iterations.mean);
      std::string line = buf;
      if (labels) std::snprintf(buf, sizeof buf, "   %.4f / %.4f", stat(acc_last).mean, stat(acc).mean), line += buf;
      text.push_back(line);
    }
    meter.finish();
    if (o.json) {
      nlohmann::ordered_json j{{"tool", "aoc check --budget"}, {"version", AOC_VERSION}, {"program", o.program},
                               {"config_hash", file_digest(o.program)}, {"inputs", o.inputs}, {"reference", list.reference},
                               {"mode", o.sequence}, {"precision", o.precision}, {"seed", o.seed}, {"seeds", o.seeds},
                               {"program_seed", seed_json(o.program_seed)}, {"set", o.set}, {"compile_set", p.target.overrides},
                               {"compensated", std::any_of(p.optical.begin(), p.optical.end(), [](const ir::OpticalPlan& q) { return q.compensated(); })},
                               {"ideal_optics", o.ideal_optics}, {"reference_iterations_mean", ref_it.mean}};
      if (labels) j["labels"] = o.labels, j["reference_accuracy_last"] = ref_accuracy.last, j["reference_accuracy"] = ref_accuracy.all;
      j["budget"] = rows;
      emit_json(j.dump(1), o.json_out);
      return 0;
    }
    std::printf("check --budget: %s on %s against %s, %s mode, %s%s; each stage on top of the ones above it, a noise source alone on top of "
                "the converters (%d seed(s) from %llu)\n",
                o.program.c_str(), o.inputs.c_str(), list.reference.c_str(), o.sequence.c_str(), o.precision.c_str(),
                o.ideal_optics ? ", ideal optics" : "", o.seeds,
                static_cast<unsigned long long>(o.seed));
    std::printf("  %-40s %9s %13s %11s%s\n", "stage", "argmax", "max abs err", "iterations", labels ? "   accuracy last / all" : "");
    for (const std::string& l : text) std::printf("%s\n", l.c_str());
    std::printf("  reference: iterations mean %.2f", ref_it.mean);
    if (labels) std::printf(", accuracy %.4f / %.4f", ref_accuracy.last, ref_accuracy.all);
    std::printf("\n");
    return 0;
  }

  std::vector<Checked> checks;
  std::vector<std::string> out_of_tolerance;
  for (const auto& dut : duts) {
    Checked ch;
    ch.name = dut->name();
    ch.physics = ch.name == "sim";
    std::vector<double> acc, acc_last, acc_whole, ce;
    RunCounters clips;  // over the runs, for the clipping warning
    long long non_finite = 0;  // output values that are NaN or infinite, over the runs
    BackendOptions bo = backend_options(o);
    if (!ch.physics) bo.noise = false, bo.quantize = false, bo.optics = false;
    const SeedStats st = check_over_seeds(
        *dut, p, inputs, bo, ch.physics ? o.seeds : 1, reference,
        [&](int, BackendOptions& run) {
          run.progress = meter.counter(progress_bound(o));
          meter.phase("check: " + ch.name + (ch.physics && o.seeds > 1 ? ", seed " + std::to_string(run.seed) : ""), part++, total_runs);
        },
        [&](int, const ProgramResult& r) {
          const LabelScore a = label_score(p, r, labels, o.labels);
          acc.push_back(a.all), acc_last.push_back(a.last), acc_whole.push_back(a.whole);
          if (ch.per_position.empty()) ch.per_position.assign(a.per_position.size(), 0.0);
          for (std::size_t t = 0; t < a.per_position.size(); ++t) ch.per_position[t] += a.per_position[t];
          for (const auto& [name, t] : r.values) non_finite += std::count_if(t.data.begin(), t.data.end(), [](double v) { return !std::isfinite(v); });
          clips.dac += r.counters.dac, clips.dac_clipped += r.counters.dac_clipped;
          clips.adc += r.counters.adc, clips.adc_clipped += r.counters.adc_clipped;
          ch.rewrites += r.counters.slm_rewrites;
          if (ref_ce) ce.push_back(cross_entropy(r).value_or(std::numeric_limits<double>::quiet_NaN()));
          ch.precision = ch.physics ? precision_text(o.precision, r) : ch.name == "cuda-f32" ? "f32" : "f64";
        });
    ch.abs = st.abs, ch.rel = st.rel, ch.arg = st.argmax, ch.codes = st.codes, ch.fails = st.failures, ch.floor = st.at_floor, ch.iters = st.iterations,
    ch.differ = st.iterations_differ, ch.acc = stat(acc), ch.acc_last = stat(acc_last), ch.acc_whole = stat(acc_whole);
    for (double& a : ch.per_position) a /= static_cast<double>(acc.size());
    if (ref_ce) ch.ce = stat(ce);
    // Clipped conversions are the usual cause of a bad check: converters at the machine's volts
    // where the model's values are larger. Say how many, and what fixes it.
    if (clips.dac_clipped + clips.adc_clipped > 0) {
      const bool calibrated = std::find(p.passes.begin(), p.passes.end(), "calibrate") != p.passes.end();
      std::fprintf(stderr, "check: warning: %s clipped %lld of %lld DAC and %lld of %lld ADC conversions%s\n", ch.name.c_str(),
                   clips.dac_clipped, clips.dac, clips.adc_clipped, clips.adc,
                   calibrated ? "" : "; the program's converters are not calibrated: aoc compile ... --calibrate TOKENS.h5");
    }

    const std::string who = duts.size() > 1 ? ch.name + ": " : "";
    const auto limit = [&](bool bad, const std::string& what) {
      if (bad) out_of_tolerance.push_back(who + what);
    };
    // finite inputs that end in infinities or NaN fail the check whatever the tolerances
    limit(non_finite > 0, std::to_string(non_finite) + " output value(s) not finite (an overflow from finite inputs)");
    if (o.max_abs >= 0) limit(ch.abs.max > o.max_abs, "max abs error " + jsonr::num(ch.abs.max) + " > " + jsonr::num(o.max_abs));
    if (o.max_rel >= 0) limit(ch.rel.max > o.max_rel, "max rel error " + jsonr::num(ch.rel.max) + " > " + jsonr::num(o.max_rel));
    if (o.min_argmax >= 0) limit(ch.arg.min < o.min_argmax, "argmax agreement " + jsonr::num(ch.arg.min) + " < " + jsonr::num(o.min_argmax));
    if (o.min_codes >= 0) limit(ch.codes.min < o.min_codes, "ADC-code agreement " + jsonr::num(ch.codes.min) + " < " + jsonr::num(o.min_codes));
    if (o.max_failures >= 0)
      limit(ch.fails.max > o.max_failures, "convergence failures " + jsonr::num(ch.fails.max) + " > " + std::to_string(o.max_failures));
    checks.push_back(ch);
  }
  meter.finish();

  const auto band = [](const Stat& s) { return nlohmann::ordered_json{{"mean", s.mean}, {"sd", s.sd}, {"min", s.min}, {"max", s.max}}; };
  if (o.json) {
    // One checked backend: its record. Several: the first one's record, and "checks" with all of them.
    const auto record = [&](const Checked& ch) {
      nlohmann::ordered_json j{{"tool", "aoc check"}, {"version", AOC_VERSION}, {"program", o.program}, {"config_hash", file_digest(o.program)},
                               {"inputs", o.inputs}, {"checked", ch.name}, {"reference", list.reference}, {"mode", o.sequence},
                               {"quantize", ch.physics && o.quantize}, {"noise", ch.physics && o.noise}, {"optics", ch.physics && !o.ideal_optics},
                               {"precision", ch.precision},
                               {"seed", o.seed}, {"seeds", ch.physics ? o.seeds : 1},
                               {"program_seed", seed_json(ch.physics ? o.program_seed : std::nullopt)},
                               {"set", ch.physics ? o.set : std::vector<std::string>{}}, {"compile_set", p.target.overrides}};
      if (ch.physics && o.noise) j["zero_reads"] = o.zero_reads, j["floor_patience"] = o.floor_patience;
      if (ch.physics && o.noise && o.after_programming_us) j["after_programming_us"] = *o.after_programming_us;
      if (ch.physics && o.noise && o.zero_every_us) j["zero_every_us"] = *o.zero_every_us;
      if (ch.physics && o.write_verify > 0)
        j["write_verify"] = {{"tolerance", o.write_verify}, {"rounds", o.verify_rounds}, {"rewrites", ch.rewrites}};
      j["max_abs_error"] = band(ch.abs), j["max_rel_error"] = band(ch.rel), j["argmax_agreement"] = band(ch.arg);
      j["adc_code_agreement"] = band(ch.codes), j["convergence_failures"] = band(ch.fails), j["noise_floor_stops"] = band(ch.floor);
      j["iterations_mean"] = band(ch.iters);
      j["iterations_differing"] = band(ch.differ);
      j["reference_iterations_mean"] = ref_it.mean, j["reference_convergence_failures"] = ref_it.solves - ref_it.converged;
      if (labels) {
        j["labels"] = o.labels, j["accuracy_last"] = band(ch.acc_last), j["accuracy"] = band(ch.acc);
        j["accuracy_whole_sequences"] = band(ch.acc_whole), j["accuracy_per_position"] = ch.per_position;
        j["reference_accuracy_last"] = ref_accuracy.last, j["reference_accuracy"] = ref_accuracy.all;
        j["reference_accuracy_whole_sequences"] = ref_accuracy.whole, j["reference_accuracy_per_position"] = ref_accuracy.per_position;
      }
      if (ref_ce) {
        j["cross_entropy_nats"] = band(ch.ce), j["perplexity"] = band({std::exp(ch.ce.mean), 0, std::exp(ch.ce.min), std::exp(ch.ce.max)});
        j["reference_cross_entropy_nats"] = *ref_ce, j["reference_perplexity"] = std::exp(*ref_ce);
      }
      return j;
    };
    nlohmann::ordered_json j = record(checks.front());
    if (checks.size() > 1)
      for (const Checked& ch : checks) j["checks"].push_back(record(ch));
    j["out_of_tolerance"] = out_of_tolerance;
    emit_json(j.dump(1), o.json_out);
  } else {
    for (const Checked& ch : checks) {
      const int seeds = ch.physics ? o.seeds : 1;
      if (ch.physics)
        std::printf("check: %s on %s: %s against %s, %s mode, quantize %s, noise %s, optics %s, %s, %d seed(s) from %llu%s%s\n",
                    o.program.c_str(), o.inputs.c_str(), ch.name.c_str(), list.reference.c_str(), o.sequence.c_str(), o.quantize ? "on" : "off",
                    o.noise ? "on" : "off", o.ideal_optics ? "ideal" : "calibrated", ch.precision.c_str(), seeds,
                    static_cast<unsigned long long>(o.seed), o.set.empty() ? "" : ", run-time --set ", set_text(o.set).c_str());
      else
        std::printf("check: %s on %s: %s against %s, %s mode, exact\n", o.program.c_str(), o.inputs.c_str(), ch.name.c_str(),
                    list.reference.c_str(), o.sequence.c_str());
      const auto line = [&](const char* what, const Stat& s) {
        if (seeds == 1) std::printf("  %-24s %.6g\n", what, s.mean);
        else std::printf("  %-24s mean %.6g  sd %.3g  min %.6g  max %.6g\n", what, s.mean, s.sd, s.min, s.max);
      };
      line("max abs error", ch.abs);
      line("max rel error", ch.rel);
      line("argmax agreement", ch.arg);
      line("ADC-code agreement", ch.codes);
      line("convergence failures", ch.fails);
      if (ch.floor.max > 0) line("stopped at noise floor", ch.floor);
      line("iterations (mean)", ch.iters);
      line("iterations differing", ch.differ);
      if (labels) line("accuracy, last position", ch.acc_last), line("accuracy (labels)", ch.acc);
      if (ref_ce) {
        line("cross-entropy (nats)", ch.ce);
        std::printf("  %-24s %.6g\n", "perplexity", std::exp(ch.ce.mean));
      }
      std::printf("  reference: iterations mean %.2f, %lld of %lld fixed points converged", ref_it.mean, ref_it.converged, ref_it.solves);
      if (labels) std::printf(", accuracy %.6g (last position %.6g)", ref_accuracy.all, ref_accuracy.last);
      if (ref_ce) std::printf(", cross-entropy %.6g nats, perplexity %.6g", *ref_ce, std::exp(*ref_ce));
      std::printf("\n");
    }
    for (const auto& s : out_of_tolerance) std::printf("FAIL: %s\n", s.c_str());
    if (out_of_tolerance.empty()) std::printf("%s\n", o.max_abs < 0 && o.max_rel < 0 && o.min_argmax < 0 && o.min_codes < 0 && o.max_failures < 0
                                                         ? "no tolerances given: nothing to fail"
                                                         : "within the tolerances");
  }
  return out_of_tolerance.empty() ? 0 : 1;
}

}  // namespace

void add_check(CLI::App& app) {
  static Opts o;
  auto* c = app.add_subcommand("check", "Run a program on the simulator and the digital reference and compare them");
  c->add_option("program", o.program, "the program (aoc compile -o)")->required()->check(CLI::ExistingFile);
  add_program_flags(c, o, true);
  c->add_option("--backends", o.backends,
                "the backends, comma-separated: each is checked against the reference, cpu when listed, else the last one "
                "(cpu, sim, cuda, cuda-f32)")
      ->capture_default_str();
  c->add_option("--labels", o.labels, "an HDF5 file with /labels (aoc task): score every backend's decisions against them")
      ->check(CLI::ExistingFile);
  c->add_flag("--ideal", o.ideal,
              "the simulator with all its physics off (exact weights and conversions, no noise, ideal optics; float64 unless "
              "--precision f32): the lowering alone");
  c->add_flag("--budget", o.budget,
              "explain a loss: the simulator's stages switched on one at a time against the reference (the lowering alone, the "
              "optical chain as compiled, the SLM codes and converters, each noise source alone, every source), one line each; "
              "with --ideal-optics the same stages without the chain");
  c->add_option("--seeds", o.seeds, "noise seeds to run the simulator on (seed, seed+1, ...): statistics over them")
      ->check(between(1, 100000))
      ->capture_default_str();
  c->add_option("--max-abs-error", o.max_abs, "fail when the largest absolute output error exceeds this (default: no limit)");
  c->add_option("--max-rel-error", o.max_rel, "fail when the largest error over the reference's largest |output| exceeds this (default: no limit)");
  c->add_option("--min-argmax-agreement", o.min_argmax, "fail when fewer positions (fraction) have the reference's argmax (default: no limit)");
  c->add_option("--min-code-agreement", o.min_codes, "fail when fewer output elements (fraction) have the reference's ADC code (default: no limit)");
  c->add_option("--max-failures", o.max_failures, "fail when more fixed points miss their tolerance (default: no limit)");
  c->add_flag("--json", o.json, "print a JSON record (with the options, the run-time --set, seed and version)");
  c->add_option("-o,--output", o.json_out, "write the JSON record to this file (with --json)");
  c->footer(
      "The reference runs once, exactly. The sim backend runs once per seed: the machine as measured\n"
      "(its calibrated optics; --ideal-optics: exact products) with its converters (SLM codes, DAC, ADC;\n"
      "--no-quantize: exact) and its noise (--no-noise: none), and the run-time --set as given; --ideal:\n"
      "all of them off, the lowering alone. cpu and the GPU references cuda (float64) and cuda-f32\n"
      "(float32 products) run once, exactly. ADC-code agreement reads both outputs through the ADC that\n"
      "reads them out (its calibrated range when the program was compiled with --calibrate). 'iterations\n"
      "differing' counts the solves whose step count is not the reference's. A language model (logits\n"
      "[B, L, V] of a /tokens input) is also scored on the next token: its cross-entropy in nats and\n"
      "perplexity, for every backend and the reference. The progress meter on\n"
      "stderr says which backend and seed runs. Options for the sim backend are errors when\n"
      "--backends checks none.\n"
      "Exit status 1 when a tolerance is exceeded (the lines starting with FAIL say which).\n"
      "Examples:\n"
      "  aoc check m.aocp.h5 --inputs tokens.h5 --seeds 8 --min-argmax-agreement 0.9   the machine, 8 noise seeds\n"
      "  aoc check m.aocp.h5 --inputs tokens.h5 --set noise.thermal_sigma=0.01 --seeds 4\n"
      "  aoc check m.aocp.h5 --inputs tokens.h5 --no-noise --ideal-optics     the converters alone\n"
      "  aoc check m.aocp.h5 --inputs tokens.h5 --ideal --max-abs-error 1e-12  the lowering alone\n"
      "  aoc check m.aocp.h5 --inputs tokens.h5 --labels labels.h5 --budget --seeds 4   what each stage costs\n"
      "  aoc check m.aocp.h5 --inputs tokens.h5 --backends cpu,cuda --max-abs-error 1e-12");
  c->callback([c] {
    require_json_for_output(c, "check");
    exit_status() = run(o, c);
  });
}

}  // namespace aoc::cli
