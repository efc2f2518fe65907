#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "compiler/program_h5.hpp"
#include "runtime/cli/commands.hpp"
#include "runtime/cli/loop_flags.hpp"
#include "runtime/cli/program_flags.hpp"
#include "runtime/program_run.hpp"
#include "runtime/h5io.hpp"
#include "runtime/loop_run.hpp"
#include "runtime/output.hpp"
#include "sim/error.hpp"

namespace aoc::cli {

namespace {

struct Opts : LoopFlags {
  std::string input, output, example, backend = "sim";
  int n = 0, batch = 16, length = 8;
  ProgramFlags program;  // --inputs, --sequence (a program run takes --quantize, --noise, --seed, --threads from LoopFlags)
};

// `aoc run PROG.h5 --inputs IN.h5 --backend sim|cpu -o OUT.h5`: a compiled program on token sequences.
void run_program(const Opts& o) {
  const ir::Program p = ir::read_program_h5(o.input);
  if (!o.example.empty()) {
    write_example_inputs(o.example, p, o.batch, o.length, o.seed);
    std::printf("wrote %s: the inputs of %s, batch %d, length %d (seed %llu)\n", o.example.c_str(), o.input.c_str(), o.batch, o.length,
                static_cast<unsigned long long>(o.seed));
    return;
  }
  if (o.program.inputs.empty()) throw Error("run: " + o.input + " is a program: give its inputs with --inputs FILE.h5 (docs/program.md)");
  if (o.output.empty()) throw Error("run: no output file (-o OUT.h5)");
  if (o.backend != "sim" && (o.quantize || o.noise || o.program.optics))
    throw Error("run: --quantize, --noise and --optics are the sim backend's; the " + o.backend + " backend is the exact digital reference");
  ProgramFlags f = o.program;
  f.quantize = o.quantize, f.noise = o.noise, f.seed = o.seed, f.threads = o.threads;
  const Hardware hw = program_hardware(p);
  const auto backend = make_backend(o.backend, &hw);
  const auto inputs = read_program_inputs(o.program.inputs, p);
  const auto t0 = std::chrono::steady_clock::now();
  const ProgramResult r = backend->run(p, inputs, backend_options(f));
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ProgramRunMeta m{o.input, file_digest(o.input), o.backend, f.sequence, o.program.inputs, o.seed, o.noise, o.quantize};
  write_program_output(o.output, p, r, m);
  const IterationSummary it = summarize(r);
  std::printf("run: %s on %s, backend %s, %s mode, quantize %s, noise %s, optics %s, seed %llu, %d thread(s)\n", o.input.c_str(),
              o.program.inputs.c_str(), o.backend.c_str(), f.sequence.c_str(), o.quantize ? "on" : "off", o.noise ? "on" : "off",
              o.program.optics ? "calibrated" : "ideal",
              static_cast<unsigned long long>(o.seed), o.threads);
  if (it.solves)
    std::printf("%lld of %lld fixed points converged; iterations mean %.2f, min %d, max %d\n", it.converged, it.solves, it.mean, it.min, it.max);
  if (o.backend == "sim")
    std::printf("conversions: %lld DAC (%lld clipped), %lld ADC (%lld clipped)\n", r.counters.dac, r.counters.dac_clipped,
                r.counters.adc, r.counters.adc_clipped);
  std::printf("%.3g s; wrote %s\n", secs, o.output.c_str());
}

// The mode's configuration, then the input file's attributes, then --alpha.
CoreConfig make_config(const Opts& o, const Hardware& hw, const RunInput& in) {
  CoreConfig cfg = mode_config(o, hw);
  if (!in.alpha.empty()) cfg.alpha = in.alpha;
  if (!in.beta.empty()) cfg.beta = in.beta;
  if (in.gamma) cfg.gamma = in.gamma;
  if (o.alpha_opt->count()) cfg.alpha = {o.alpha};
  return cfg;
}

// A digest over everything that decides the result: the options in a canonical text, the
// hardware file's bytes and the input arrays' bytes (threads are left out: they change nothing).
std::string config_hash(const Opts& o, const Hardware& hw, const CoreConfig& cfg, const LoopProblem& p) {
  std::ifstream hf(hw.path, std::ios::binary);
  const std::string hw_bytes((std::istreambuf_iterator<char>(hf)), std::istreambuf_iterator<char>());
  std::ostringstream t;
  std::string overrides;
  for (const auto& v : o.set) overrides += " " + v;
  t << "aoc run config 1\nhardware " << hw.name << "\nset" << overrides << " " << digest_hex(hw_bytes.data(), hw_bytes.size()) << "\nmode " << o.mode
    << "\nalpha " << numbers_text(cfg.alpha, "none") << "\nbeta " << numbers_text(cfg.beta, "none") << "\nscale " << numbers_text({cfg.scale}, "")
    << "\ngamma " << (cfg.gamma ? numbers_text({*cfg.gamma}, "") : "none") << "\nrule " << o.rule << "\nmax_iter " << o.max_iter
    << "\ntol " << numbers_text({o.tol}, "") << "\ndamping " << numbers_text({o.damping}, "") << "\nprecision " << o.precision
    << "\nquantize " << o.quantize << "\nnoise " << o.noise << "\nbandwidth " << o.bandwidth << "\nseed " << o.seed << "\ntrace " << o.trace << "\nW "
    << p.W.rows() << " x " << p.W.cols() << "\nx " << p.x.rows() << " x " << p.x.cols() << "\n";
  std::string bytes = t.str();
  bytes.append(reinterpret_cast<const char*>(p.W.data()), sizeof(double) * p.W.size());
  bytes.append(reinterpret_cast<const char*>(p.bias.data()), sizeof(double) * p.bias.size());
  bytes.append(reinterpret_cast<const char*>(p.x.data()), sizeof(double) * p.x.size());
  bytes.append(reinterpret_cast<const char*>(p.z0.data()), sizeof(double) * p.z0.size());
  return digest_hex(bytes.data(), bytes.size());
}

void write_example(const Opts& o, const Hardware& hw) {
  const int n = o.n > 0 ? o.n : hw.channels;
  if (o.batch < 1) throw Error("--batch: must be at least 1");
  write_run_input(o.example, random_problem(n, o.batch, o.seed));
  std::printf("wrote %s: /W %d x %d ~ U(+-1/sqrt(N)), /x %d x %d ~ U(+-1.3), /bias %d, /z0 zeros (seed %llu)\n",
              o.example.c_str(), n, n, o.batch, n, n, static_cast<unsigned long long>(o.seed));
}

void run(const Opts& o) {
  if (!o.input.empty() && ir::is_program_h5(o.input)) return run_program(o);
  const Hardware hw = load_machine(o);
  if (!o.example.empty()) return write_example(o, hw);
  if (o.input.empty()) throw Error("run: no input file (aoc run INPUT.h5 -o OUT.h5, or --example-input FILE)");
  if (o.output.empty()) throw Error("run: no output file (-o OUT.h5)");
  const RunInput in = read_run_input(o.input);
  const LoopProblem& p = in.problem;
  const CoreConfig cfg = make_config(o, hw, in);
  const LoopRunOptions ro = run_options(o);

  const auto t0 = std::chrono::steady_clock::now();
  const LoopRunResult r = run_loop(hw, cfg, p, ro);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  RunOutputMeta m;
  m.quantized = o.quantize;
  m.trace = o.trace;
  m.seed = o.seed;
  m.text = {{"tool", "aoc run"},
            {"version", AOC_VERSION},
            {"input", o.input},
            {"hardware", hw.name},
            {"hardware_file", hw.path},
            {"config_hash", config_hash(o, hw, cfg, p)},
            {"mode", o.mode},
            {"alpha", numbers_text(cfg.alpha, "none")},
            {"beta", numbers_text(cfg.beta, "none (the mode's gain)")},
            {"gamma", cfg.gamma ? numbers_text({*cfg.gamma}, "") : "none"},
            {"stop_rule", o.rule},
            {"precision", o.precision}};
  m.numbers = {{"tol", o.tol}, {"max_iter", o.max_iter}, {"damping", o.damping},
               {"quantize", o.quantize}, {"noise", o.noise}, {"bandwidth", o.bandwidth}, {"trace", o.trace}};
  write_run_output(o.output, r, m);

  const SolveResult& s = r.solve;
  const int B = static_cast<int>(s.z.rows());
  const int conv = static_cast<int>(std::count(s.converged.begin(), s.converged.end(), 1));
  const auto [imin, imax] = std::minmax_element(s.iterations.begin(), s.iterations.end());
  double imean = 0;
  for (int i : s.iterations) imean += i / static_cast<double>(B);
  std::printf("run: %s: %d samples, N = %d; %s (%d channels), mode %s, alpha %s\n", o.input.c_str(), B,
              static_cast<int>(p.W.rows()), hw.name.c_str(), hw.channels, o.mode.c_str(), numbers_text(cfg.alpha, "none").c_str());
  std::printf("     %s stop rule (tol %.0e, max %d), %s, quantize %s, noise %s, seed %llu, %d thread(s)\n", o.rule.c_str(),
              o.tol, o.max_iter, o.precision.c_str(), o.quantize ? "on" : "off", o.noise ? "on" : "off",
              static_cast<unsigned long long>(o.seed), o.threads);
  std::printf("%d of %d samples converged; iterations per sample: mean %.1f, min %d, max %d; %d steps run; %.3g ms\n", conv,
              B, imean, *imin, *imax, s.steps, secs * 1e3);
  std::printf("digest of the output arrays %s (fixed points %s)\nwrote %s\n", run_output_digest(r, m).c_str(),
              digest_hex(s.z.data(), sizeof(double) * s.z.size()).c_str(), o.output.c_str());
}

}  // namespace

void add_run(CLI::App& app) {
  static Opts o;
  auto* c = app.add_subcommand("run", "Solve the fixed-point loop on weights and inputs from an HDF5 file, write an HDF5 file");
  c->add_option("input", o.input, "input HDF5 file: /W (N x N), /x (B x N), optional /bias, /z0 (docs/run.md); or a program from aoc compile");
  c->add_option("-o,--output", o.output, "output HDF5 file (fixed points, readout, iterations, residuals, codes)");
  add_loop_flags(c, o, "noise seed; with --example-input, the seed of the weights and inputs");
  c->add_option("--example-input", o.example, "write a seeded example input file to this path and exit");
  c->add_option("--n", o.n, "with --example-input: state size (default: the machine's channel count)");
  c->add_option("--batch", o.batch, "with --example-input: samples")->check(CLI::PositiveNumber)->capture_default_str();
  c->add_option("--backend", o.backend, "for a program: sim (the simulated core), cpu (the exact digital reference), cuda or cuda-f32 (the reference with its products on a GPU, float64 or float32)")
      ->check(CLI::IsMember(backend_names()))
      ->capture_default_str();
  add_program_flags(c, o.program, false);
  c->add_option("--length", o.length, "with a program and --example-input: the sequence length")->check(CLI::PositiveNumber)->capture_default_str();
  c->footer(
      "Example:\n"
      "  aoc run --example-input in.h5 --n 48 --batch 16 --seed 1    a seeded input file\n"
      "  aoc run in.h5 --hw aoc-48 -o out.h5 --precision f64         solve it, write out.h5\n"
      "  aoc run in.h5 --hw my-machine.json -o q.h5 --quantize --trace\n"
      "  aoc run model.aocp.h5 --example-input tokens.h5 --batch 4 --length 16     seeded inputs of a program\n"
      "  aoc run model.aocp.h5 --inputs tokens.h5 --backend sim --quantize --noise -o out.h5   a compiled program\n"
      "Root attributes alpha, beta (one value or N) and gamma of the input override the mode's; --alpha\n"
      "overrides both. Formats: docs/run.md.");
  c->callback([] { run(o); });
}

}  // namespace aoc::cli
