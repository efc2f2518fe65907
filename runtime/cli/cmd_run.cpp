#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "compiler/program_h5.hpp"
#include "runtime/cli/commands.hpp"
#include "runtime/cli/loop_flags.hpp"
#include "runtime/cli/program_flags.hpp"
#include "runtime/run/program_run.hpp"
#include "runtime/io/progress.hpp"
#include "runtime/io/h5io.hpp"
#include "runtime/run/loop_run.hpp"
#include "runtime/io/output.hpp"
#include "sim/error.hpp"

namespace aoc::cli {

namespace {

struct Opts : LoopSettings {
  std::string input, output, example, backend = "sim";
  int n = 0, batch = 16, length = 8;
  bool json = false, ideal = false;
  ProgramFlags program;  // --inputs, --sequence, --ideal-optics, --quiet (the rest of a program run's options are LoopSettings')
};

// A loop's stop rule and update (a program's fixed points carry their own), and the sim backend's options.
const std::vector<std::string> kLoopRule = {"--mode", "--alpha", "--anneal", "--rule", "--tol", "--max-iter", "--damping"};
const std::vector<std::string> kSimOnly = {"--quantize", "--noise", "--ideal-optics", "--ideal", "--light-map", "--set", "--precision", "--seed", "--first-sample", "--after-programming-us"};

// `aoc run PROG.h5 --inputs IN.h5 --backend sim|cpu -o OUT.h5`: a compiled program on token sequences.
void run_program(const Opts& o, const CLI::App* c) {
  refuse_given(c, "run", {"--hw"},
               "does not apply to a program: it runs on the machine it was compiled for (aoc compile --hw); "
               "--set changes that machine's noise, timing and converter bits");
  refuse_given(c, "run", kLoopRule, "does not apply to a program (its fixed points carry their own rule and tolerance; docs/program.md)");
  refuse_given(c, "run", {"--bandwidth", "--hardware-readout"},
               "does not apply to a program (the loop's settling and readout are not modelled inside programs yet; docs/program.md)");
  refuse_given(c, "run", {"--n"}, "does not apply to a program (a loop input's state size; a program's example inputs take --batch and --length)");
  const ir::Program p = ir::read_program_h5(o.input);
  if (!o.example.empty()) {
    refuse_given(c, "run", {"-o", "--json", "--inputs", "--backend", "--sequence", "--quantize", "--noise", "--ideal-optics", "--ideal", "--light-map", "--set",
                            "--precision", "--trace", "--threads", "--quiet", "--first-sample"},
                 "does not apply with --example-input (it writes seeded inputs for the program and exits)");
    check_outputs({{"--example-input", o.example}}, {{"the program", o.input}});
    write_example_inputs(o.example, p, o.batch, o.length, o.seed);
    std::printf("wrote %s: the inputs of %s, batch %d, length %d (seed %llu)\n", o.example.c_str(), o.input.c_str(), o.batch, o.length,
                static_cast<unsigned long long>(o.seed));
    return;
  }
  refuse_given(c, "run", {"--batch", "--length"}, "applies with --example-input only (the shape of the seeded inputs)");
  const bool sim = o.backend == "sim";
  if (o.ideal)
    refuse_given(c, "run", {"--quantize", "--noise", "--ideal-optics", "--light-map", "--set"},
                 "does not apply with --ideal (it switches the simulator's converters, noise and optics off)");
  if (!sim) refuse_given(c, "run", kSimOnly, "applies to the sim backend only (the " + o.backend + " backend is the digital reference: no converters, noise or optics)");
  if (o.program.inputs.empty()) throw Error("run: " + o.input + " is a program: give its inputs with --inputs FILE.h5 (docs/program.md)");
  if (o.output.empty()) throw Error("run: no output file (-o OUT.h5)");
  check_outputs({{"-o", o.output}}, {{"the program", o.input}, {"--inputs", o.program.inputs}});
  ProgramFlags f = o.program;
  f.quantize = o.quantize, f.noise = o.noise, f.seed = o.seed, f.program_seed = o.program_seed, f.zero_reads = o.zero_reads, f.after_programming_us = o.after_programming_us, f.zero_every_us = o.zero_every_us, f.floor_patience = o.floor_patience, f.threads = o.threads, f.set = o.set, f.precision = o.precision, f.trace = o.trace;
  // --ideal: the lowering alone, as aoc check --ideal: no converters or noise, exact optics, float64
  // unless --precision says otherwise
  if (o.ideal) f.ideal_optics = true, f.quantize = f.noise = false;
  if (o.ideal && !c->get_option("--precision")->count()) f.precision = "f64";
  const Hardware hw = program_hardware(p, f.set, "run");
  const auto backend = make_backend(o.backend, &hw);
  const auto inputs = read_program_inputs(f.inputs, p);
  BackendOptions bo = backend_options(f);
  bo.first_sample = o.first_sample;
  Progress meter(progress_unit(f), !f.quiet);
  meter.phase("run: " + o.backend);
  bo.progress = meter.counter(progress_bound(f));
  const auto t0 = std::chrono::steady_clock::now();
  const ProgramResult r = backend->run(p, inputs, bo);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  meter.finish();

  ProgramRunMeta m;
  m.program = o.input, m.program_digest = file_digest(o.input), m.backend = o.backend, m.mode = f.sequence, m.inputs = f.inputs;
  m.program_seed = f.program_seed;
  m.seed = f.seed, m.first_sample = o.first_sample, m.noise = sim && f.noise, m.quantize = sim && f.quantize, m.optics = sim && !f.ideal_optics, m.trace = f.trace;
  m.precision = sim ? precision_text(f.precision, r) : o.backend == "cuda-f32" ? "f32" : "f64";
  m.set = f.set, m.compile_set = p.target.overrides;
  for (const auto& [name, t] : r.values)
    for (std::size_t i = 0; i < t.data.size(); ++i)
      if (!std::isfinite(t.data[i]))
        throw Error("run: output '" + name + "' element " + std::to_string(i) + " is not finite (an overflow in the program from finite inputs); nothing written");
  const std::string digest = write_program_output(o.output, p, r, m);
  const IterationSummary it = summarize(r);
  if (o.json) {
    nlohmann::ordered_json j{{"tool", "aoc run"},       {"version", AOC_VERSION}, {"program", o.input},  {"inputs", f.inputs},
                             {"output", o.output},      {"backend", o.backend},   {"mode", f.sequence},  {"precision", m.precision},
                             {"quantize", m.quantize},  {"noise", m.noise},       {"optics", m.optics},  {"seed", f.seed}, {"program_seed", seed_json(f.program_seed)},
                             {"set", f.set},            {"threads", f.threads},   {"solves", it.solves}, {"converged", it.converged},
                             {"noise_floor_stops", it.at_floor},
                             {"iterations", {{"mean", it.mean}, {"p99", it.p99}, {"min", it.min}, {"max", it.max}}},
                             {"output_digest", digest}, {"seconds", secs}};
    if (sim)
      j["conversions"] = {{"dac", r.counters.dac}, {"dac_clipped", r.counters.dac_clipped}, {"adc", r.counters.adc}, {"adc_clipped", r.counters.adc_clipped}},
      j["programming_seconds"] = r.programming_seconds;
    if (sim && m.noise) j["zero_reads"] = f.zero_reads, j["floor_patience"] = f.floor_patience;
    if (sim && m.noise && f.after_programming_us) j["after_programming_us"] = *f.after_programming_us;
    if (sim && m.noise && f.zero_every_us) j["zero_every_us"] = *f.zero_every_us;
    if (sim && f.write_verify > 0)
      j["write_verify"] = {{"tolerance", f.write_verify}, {"rounds", f.verify_rounds}, {"rewrites", r.counters.slm_rewrites}};
    emit_json(j.dump(1), "");
    return;
  }
  if (sim)
    std::printf("run: %s on %s, backend sim, %s mode, quantize %s, noise %s, optics %s, %s, seed %llu, %d thread(s)\n", o.input.c_str(),
                f.inputs.c_str(), f.sequence.c_str(), m.quantize ? "on" : "off", m.noise ? "on" : "off", m.optics ? "calibrated" : "ideal",
                m.precision.c_str(), static_cast<unsigned long long>(f.seed), f.threads);
  else
    std::printf("run: %s on %s, backend %s, %s mode, the digital reference, %d thread(s)\n", o.input.c_str(), f.inputs.c_str(), o.backend.c_str(),
                f.sequence.c_str(), f.threads);
  if (!f.set.empty()) std::printf("     run-time --set %s\n", set_text(f.set).c_str());
  if (it.solves)
    std::printf("%lld of %lld fixed points converged%s; iterations mean %.2f, min %d, max %d\n", it.converged, it.solves,
                it.at_floor ? (", " + std::to_string(it.at_floor) + " stopped at the noise floor").c_str() : "", it.mean, it.min, it.max);
  if (sim)
    std::printf("conversions: %lld DAC (%lld clipped), %lld ADC (%lld clipped)\n", r.counters.dac, r.counters.dac_clipped,
                r.counters.adc, r.counters.adc_clipped);
  if (sim && f.write_verify > 0)
    std::printf("write-verify to %g: %lld SLM pixels written again (at most %d times each)\n", f.write_verify, r.counters.slm_rewrites,
                f.verify_rounds);
  if (sim)
    std::printf("%.3g s (programming the tiles %.3g s, then the inputs %.3g s); wrote %s%s\n", secs, r.programming_seconds, secs - r.programming_seconds,
                o.output.c_str(), f.trace ? " (with every top-level value: --trace)" : "");
  else
    std::printf("%.3g s; wrote %s%s\n", secs, o.output.c_str(), f.trace ? " (with every top-level value: --trace)" : "");
}

void write_example(const Opts& o, const Hardware& hw) {
  const int n = o.n > 0 ? o.n : hw.channels;
  if (o.batch < 1) throw Error("--batch: must be at least 1");
  write_run_input(o.example, random_problem(n, o.batch, o.seed));
  std::printf("wrote %s: /W %d x %d ~ U(+-1/sqrt(N)), /x %d x %d ~ U(+-1.3), /bias %d, /z0 zeros (seed %llu)\n",
              o.example.c_str(), n, n, o.batch, n, n, static_cast<unsigned long long>(o.seed));
}

void run(const Opts& o, const CLI::App* c) {
  if (!o.input.empty() && !std::filesystem::exists(o.input)) throw Error(o.input + ": no such file");
  if (!o.input.empty() && ir::is_program_h5(o.input)) return run_program(o, c);
  refuse_given(c, "run", {"--inputs", "--sequence", "--ideal-optics", "--light-map", "--quiet", "--length"},
               "applies to a program only (aoc compile writes one; docs/program.md)");
  refuse_given(c, "run", {"--ideal"}, "applies to a program only (a loop input's ideal loop is --mode ideal)");
  if (o.backend != "sim") throw Error("run: --backend " + o.backend + " applies to a program only (a loop input runs on the simulated core)");
  if (!o.example.empty()) {
    if (!o.input.empty()) throw Error("run: " + o.input + ": not a program; --example-input without one writes a loop input");
    refuse_given(c, "run", {"-o", "--json", "--backend", "--mode", "--alpha", "--anneal", "--rule", "--tol", "--max-iter", "--damping", "--precision",
                            "--quantize", "--noise", "--bandwidth", "--hardware-readout", "--threads", "--trace", "--first-sample"},
                 "does not apply with --example-input (it writes a seeded loop input and exits)");
    return write_example(o, load_machine(o));
  }
  refuse_given(c, "run", {"--batch", "--n"}, "applies with --example-input only (the shape of the seeded input)");
  if (o.input.empty()) throw Error("run: no input file (aoc run INPUT.h5 -o OUT.h5, or --example-input FILE)");
  const Hardware hw = load_machine(o);
  if (o.output.empty()) throw Error("run: no output file (-o OUT.h5)");
  check_outputs({{"-o", o.output}}, {{"the input", o.input}});
  const RunInput in = read_run_input(o.input);
  const LoopProblem& p = in.problem;
  const CoreConfig cfg = loop_config(o, hw, {in.alpha, in.beta, in.gamma});
  const LoopRunOptions ro = run_options(o);

  const auto t0 = std::chrono::steady_clock::now();
  const LoopRunResult r = run_loop(hw, cfg, p, ro);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  const std::string hash = loop_config_hash(o, hw, cfg, view_of(p));
  RunOutputMeta m;
  m.quantized = o.quantize;
  m.trace = o.trace;
  m.seed = o.seed;
  m.text = {{"tool", "aoc run"},
            {"version", AOC_VERSION},
            {"input", o.input},
            {"hardware", hw.name},
            {"hardware_file", hw.path},
            {"config_hash", hash},
            {"mode", o.mode},
            {"alpha", numbers_text(cfg.alpha, "none")},
            {"beta", numbers_text(cfg.beta, "none (the mode's gain)")},
            {"gamma", cfg.gamma ? numbers_text({*cfg.gamma}, "") : "none"},
            {"stop_rule", o.rule},
            {"precision", o.precision}};
  m.numbers = {{"tol", o.tol}, {"max_iter", o.max_iter}, {"damping", o.damping}, {"first_sample", o.first_sample},
               {"quantize", o.quantize}, {"noise", o.noise}, {"bandwidth", o.bandwidth}, {"trace", o.trace}};
  if (o.program_seed) m.numbers.push_back({"program_seed", static_cast<double>(*o.program_seed)});
  // finite inputs that end in infinities or NaN: an overflow, never a silent success
  if (const long bad = (!r.solve.z.array().isFinite()).rowwise().any().count(); bad > 0)
    throw Error("run: " + std::to_string(bad) + " of " + std::to_string(r.solve.z.rows()) + " fixed points are not finite (the loop overflowed: " +
                "scale W or the inputs down, or use a mode with the machine's gain); nothing written");
  write_run_output(o.output, r, m);

  const SolveResult& s = r.solve;
  const int B = static_cast<int>(s.z.rows());
  const IterationSummary it = summarize(s.iterations, s.converged, s.at_floor);
  const std::string digest = run_output_digest(r, m), fixed_points = digest_hex(s.z.data(), sizeof(double) * s.z.size());
  if (o.json) {
    emit_json(nlohmann::ordered_json{{"tool", "aoc run"}, {"version", AOC_VERSION}, {"input", o.input}, {"output", o.output},
                                     {"hardware", hw.name}, {"samples", B}, {"n", p.W.rows()}, {"mode", o.mode}, {"rule", o.rule},
                                     {"precision", o.precision}, {"quantize", o.quantize}, {"noise", o.noise}, {"seed", o.seed},
                                     {"program_seed", seed_json(o.program_seed)}, {"set", o.set}, {"threads", o.threads},
                                     {"converged", it.converged}, {"noise_floor_stops", it.at_floor},
                                     {"iterations", {{"mean", it.mean}, {"min", it.min}, {"max", it.max}}}, {"steps", s.steps},
                                     {"output_digest", digest}, {"fixed_point_digest", fixed_points}, {"config_hash", hash},
                                     {"seconds", secs}}
                  .dump(1),
              "");
    return;
  }
  std::printf("run: %s: %d samples, N = %d; %s (%d channels), mode %s, alpha %s\n", o.input.c_str(), B,
              static_cast<int>(p.W.rows()), hw.name.c_str(), hw.channels, o.mode.c_str(), numbers_text(cfg.alpha, "none").c_str());
  std::printf("     %s stop rule (tol %.0e, max %d), %s, quantize %s, noise %s, seed %llu, %d thread(s)\n", o.rule.c_str(),
              o.tol, o.max_iter, o.precision.c_str(), o.quantize ? "on" : "off", o.noise ? "on" : "off",
              static_cast<unsigned long long>(o.seed), o.threads);
  std::printf("%lld of %d samples converged", it.converged, B);
  if (it.at_floor) std::printf(", %lld stopped at the noise floor", it.at_floor);
  std::printf("; iterations per sample: mean %.1f, min %d, max %d; %d steps run; %.3g ms\n", it.mean, it.min, it.max, s.steps, secs * 1e3);
  std::printf("digest of the output arrays %s (fixed points %s)\nwrote %s\n", digest.c_str(), fixed_points.c_str(), o.output.c_str());
}

}  // namespace

void add_run(CLI::App& app) {
  static Opts o;
  auto* c = app.add_subcommand("run", "Solve the fixed-point loop on weights and inputs from an HDF5 file, or run a compiled program; write an HDF5 file");
  c->add_option("input", o.input, "input HDF5 file: /W (N x N), /x (B x N), optional /bias, /z0 (docs/run.md); or a program from aoc compile");
  c->add_option("-o,--output", o.output, "output HDF5 file (a loop: fixed points, readout, iterations, residuals, codes; a program: its outputs)");
  add_loop_flags(c, o, "noise seed (a program: the sim backend's); with --example-input, the seed of the weights and inputs");
  // The options a program run shares with the loop, told for both.
  c->get_option("--hw")->description("loop input: hardware file or bundled machine (aoc-48, aoc-16, aoc-scale); a program runs on the machine it was compiled for");
  c->get_option("--set")->description(std::string("override a hardware value, e.g. --set noise.thermal_sigma=0.005 (repeatable); a program takes ") +
                                      kRunTimeSet + " at run time, on top of its compile-time overrides (the rest is compiled in: aoc compile --set)");
  c->get_option("--precision")->description("f32 (default, as the twin and the machine's loop core) or f64: the loop's arithmetic; a program: the sim backend's products");
  c->get_option("--quantize")->description("SLM weight codes, input DAC, and the readout chain: the saturation curve, then the ADC (the hardware's converters section); a program: its SLM codes and every DAC/ADC conversion (sim)");
  c->get_option("--noise")->description("add the hardware's noise sources (its noise section; a program: on the sim backend)");
  c->get_option("--trace")->description("loop input: keep every sample's residual and state at every step; a program: write every top-level value, not only the outputs");
  c->add_option("--example-input", o.example, "write a seeded example input file to this path and exit (of the program given, else of a loop)");
  c->add_option("--n", o.n, "loop --example-input: state size (default: the machine's channel count)")->check(positive());
  c->add_option("--batch", o.batch, "with --example-input: samples (sequences of a program)")->check(positive())->capture_default_str();
  c->add_option("--backend", o.backend, "a program: sim (the simulated core), cpu (the exact digital reference), cuda or cuda-f32 (the reference with its products on a GPU, float64 or float32)")
      ->check(CLI::IsMember(backend_names()))
      ->capture_default_str();
  add_program_flags(c, o.program, false);
  c->add_option("--length", o.length, "a program's --example-input: the sequence length")->check(positive())->capture_default_str();
  c->add_flag("--json", o.json, "print what ran as a JSON record (settings, convergence, iterations, conversions, digests, seconds)");
  c->add_flag("--ideal", o.ideal,
              "a program on the simulator with all its physics off (exact weights and conversions, no noise, ideal optics; float64 "
              "unless --precision is given), as aoc check --ideal");
  c->footer(
      "Examples:\n"
      "  aoc run --example-input in.h5 --n 48 --batch 16 --seed 1    a seeded loop input\n"
      "  aoc run in.h5 --hw aoc-48 -o out.h5 --precision f64         solve it, write out.h5\n"
      "  aoc run in.h5 --hw my-machine.json -o q.h5 --quantize --trace\n"
      "  aoc run model.aocp.h5 --example-input tokens.h5 --batch 4 --length 16     seeded inputs of a program\n"
      "  aoc run model.aocp.h5 --inputs tokens.h5 --quantize --noise -o out.h5   a compiled program on the simulated core\n"
      "  aoc run model.aocp.h5 --inputs tokens.h5 --noise --set noise.thermal_sigma=0.005 -o hot.h5   with 5x its electronics noise\n"
      "  aoc run model.aocp.h5 --inputs tokens.h5 --ideal-optics -o ideal.h5   exact optical products\n"
      "  aoc run model.aocp.h5 --inputs tokens.h5 --backend cpu -o ref.h5     the digital reference\n"
      "A loop input: root attributes alpha, beta (one value or N) and gamma of the input override the\n"
      "mode's; --alpha overrides both. A program: the sim backend runs the machine as measured (its\n"
      "calibrated optics) with exact weights and conversions unless --quantize, without noise unless\n"
      "--noise. An option that does not apply to the input (--mode for a program, --inputs for a loop)\n"
      "is an error. Formats: docs/run.md, docs/program.md.");
  c->callback([c] { run(o, c); });
}

}  // namespace aoc::cli
