#include "bench/program_bench.hpp"
#include "bench/loop_bench.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "compiler/graph_json.hpp"
#include "compiler/import_config.hpp"
#include "compiler/passes.hpp"
#include "models/model.hpp"
#include "runtime/backend/backend.hpp"
#include "runtime/io/output.hpp"
#include "runtime/estimate/program_estimate.hpp"
#include "runtime/run/program_run.hpp"
#include "sim/error.hpp"
#include "sim/hardware.hpp"

namespace aoc {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;


std::string need_file(const std::string& path, const std::string& what) {
  return bench_file(path, what + "; --no-program leaves the program section out");
}

// As `aoc compile GRAPH --weights W --hw HW [--calibrate]`: the default passes, no --set; with
// `calibrate`, the calibrate pass on the inputs it makes for the program.
ir::Program compile(ir::Graph g, ir::WeightStore w, const Hardware& hw, const std::string& hw_name,
                    const std::function<int(ir::Program&)>& calibrate = {}) {
  ir::Program p;
  p.graph = std::move(g);
  p.weights = std::move(w);
  p.target = ir::target_of(hw, hw_name, {});
  ir::PassOptions po;
  po.calibrate = calibrate;
  ir::run_pipeline(p, po);
  return p;
}

// The backends' options as `aoc run` / `aoc check` make them: the reference exact in double, the
// simulator as the machine is measured (SLM codes and converters, every noise source, the
// calibrated optics) in float32.
BackendOptions reference_options(const ProgramBenchOptions& o, ir::Mode mode) {
  BackendOptions b;
  b.threads = o.threads, b.mode = mode;
  b.noise = b.quantize = b.optics = false, b.f64 = true;
  return b;
}
BackendOptions sim_options(const ProgramBenchOptions& o, ir::Mode mode, std::uint64_t seed) {
  BackendOptions b;
  b.threads = o.threads, b.mode = mode, b.seed = seed;
  b.noise = b.quantize = b.optics = true, b.f64 = false;
  return b;
}

void check_options(const ProgramBenchOptions& o) {
  const std::pair<int, const char*> sizes[] = {{o.batch, "program batch"}, {o.length, "program length"}, {o.runs, "program runs"},
                                               {o.check_batch, "check batch"}, {o.check_length, "check length"},
                                               {o.seeds, "check seeds"}, {o.threads, "threads"}, {o.estimate_runs, "estimate runs"}};
  for (const auto& [v, what] : sizes)
    if (v < 1) throw Error(std::string("bench: ") + what + " " + std::to_string(v) + ": must be at least 1");
}

void time_parity(ProgramBench& b, const Hardware& hw, bool progress) {
  const ProgramBenchOptions& o = b.opt;
  b.model_path = o.model.empty() ? bundled_path("models/trained/parity-implicit") : o.model;
  const std::string config = need_file(b.model_path + "/config.json", "the trained model the program section runs");
  const std::string weights = need_file(b.model_path + "/weights.h5", "the trained model's weights");
  ir::ImportOptions io;
  io.weights = false;  // its trained weights are the folder's weights.h5, as aoc compile --weights reads them
  ir::Imported m = models::import_model_config(config, io);
  b.model = m.graph.name;
  // Converter ranges calibrated as a user does (aoc compile --calibrate) on other seeded tokens of
  // the same shape than the timed ones: without, the DACs clip and the noisy solves take more steps.
  ir::Program p = compile(std::move(m.graph), ir::read_weights_h5(weights), hw, o.hardware, [&](ir::Program& q) {
    return calibrate_converters(q, example_inputs(q, o.batch, o.length, o.seed + kCalibrationSeedOffset), 1.0, ir::Mode::Sequential);
  });
  const auto inputs = example_inputs(p, o.batch, o.length, o.seed);
  const auto cpu = make_backend("cpu", &hw), sim = make_backend("sim", &hw);
  const BackendOptions co = reference_options(o, ir::Mode::Sequential), so = sim_options(o, ir::Mode::Sequential, o.seed);
  b.model_hash = bench_cell_hash({config, weights, hw.path}, "parity " + o.hardware + " batch " + std::to_string(o.batch) + " length " +
                                                          std::to_string(o.length) + " sequential seed " + std::to_string(o.seed));
  if (progress) std::fprintf(stderr, "bench: program %s, cpu and sim, %d run(s) each ...\n", b.model.c_str(), o.runs);
  std::vector<double> cpu_s, sim_s;
  const auto timed = [&](const Backend& be, const BackendOptions& bo, ProgramTiming& t, std::vector<double>& secs) {
    const auto t0 = Clock::now();
    const ProgramResult r = be.run(p, inputs, bo);
    secs.push_back(seconds_since(t0));
    const IterationSummary s = summarize(r);
    t.backend = be.name(), t.iterations = s.mean, t.solves = s.solves, t.converged = s.converged;
  };
  for (int k = 0; k < o.runs; ++k) {  // alternating: a burst of load elsewhere slows both alike
    timed(*cpu, co, b.cpu, cpu_s);
    timed(*sim, so, b.sim, sim_s);
  }
  b.sim_over_cpu = median_ratio(sim_s, cpu_s);
  for (auto [t, s] : {std::pair{&b.cpu, &cpu_s}, std::pair{&b.sim, &sim_s}}) {
    std::sort(s->begin(), s->end());
    t->best_s = s->front(), t->median_s = (*s)[s->size() / 2];
  }
}

// `aoc check PROG --inputs TOK --quantize --noise --seeds N` with the check's comparison
// (runtime/run/program_check.hpp): the reference once, the simulator once per seed.
void time_check(ProgramBench& b, const Hardware& hw, bool progress) {
  const ProgramBenchOptions& o = b.opt;
  b.check_path = need_file(o.check_config.empty() ? bundled_path("tests/data/implicit-lm/mamba2-state-tracking-implicit/config.json") : o.check_config,
                           "the model the check cell compiles");
  if (progress) std::fprintf(stderr, "bench: check, import, compile and calibrate ...\n");
  const auto t0 = Clock::now();
  ir::Imported m = models::import_model_config(b.check_path, ir::ImportOptions{});  // aoc import's seeded weights (seed 0)
  b.check_model = m.graph.name;
  ir::Program p = compile(std::move(m.graph), std::move(m.weights), hw, o.hardware, [&](ir::Program& q) {
    return calibrate_converters(q, example_inputs(q, o.check_batch, o.check_length, o.seed));  // as aoc compile --calibrate on the same tokens
  });
  const auto inputs = example_inputs(p, o.check_batch, o.check_length, o.seed);
  b.check_prepare_s = seconds_since(t0);
  b.check_hash = bench_cell_hash({b.check_path, hw.path}, "check " + o.hardware + " batch " + std::to_string(o.check_batch) + " length " +
                                                        std::to_string(o.check_length) + " weights seed 0 seed " + std::to_string(o.seed) +
                                                        " seeds " + std::to_string(o.seeds));

  if (progress) std::fprintf(stderr, "bench: check %s, %d seed(s) ...\n", b.check_model.c_str(), o.seeds);
  const auto cpu = make_backend("cpu", &hw), sim = make_backend("sim", &hw);
  const auto t1 = Clock::now();
  const ProgramResult reference = cpu->run(p, inputs, reference_options(o, ir::Mode::Simultaneous));
  const SeedStats st = check_over_seeds(*sim, p, inputs, sim_options(o, ir::Mode::Simultaneous, o.seed), o.seeds, reference);
  b.check_s = seconds_since(t1);
  b.check_abs = st.abs, b.check_argmax = st.argmax;
  b.check_reference_iterations = summarize(reference).mean;
}

// As `aoc import CONFIG --shapes-only` then `aoc estimate GRAPH --hw HW --iterations 20`: the
// import is outside the timing, the compilation and the count of a token inside.
void time_estimate(ProgramBench& b, const Hardware& hw, const std::string& hw_path, bool progress) {
  const ProgramBenchOptions& o = b.opt;
  b.estimate_path = need_file(o.estimate_config.empty() ? bundled_path("tests/data/implicit-lm/mamba2-1.3b-implicit/config.json") : o.estimate_config,
                              "the model the estimate cell compiles");
  if (progress) std::fprintf(stderr, "bench: estimate, %d run(s) ...\n", o.estimate_runs);
  ir::ImportOptions shapes;
  shapes.weights = false;
  const ir::Imported m = models::import_model_config(b.estimate_path, shapes);
  b.estimate_model = m.graph.name;
  ProgramEstimateOptions eo;
  eo.iterations = 20;
  for (int r = 0; r < o.estimate_runs; ++r) {
    const auto t0 = Clock::now();
    const ir::Program p = compile_for_estimate(m.graph, hw, hw_path, {});
    const ProgramEstimate e = estimate_program(p, hw, eo);
    const double s = seconds_since(t0);
    b.estimate_s = r == 0 ? s : std::min(b.estimate_s, s);
    b.estimate_tiles = e.tiles;
  }
  b.estimate_hash = bench_cell_hash({b.estimate_path, hw.path}, "estimate " + o.hardware + " iterations 20");
}

}  // namespace

std::string bench_file(const std::string& path, const std::string& what) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) throw Error("bench: " + path + ": no such file (" + what + ")");
  return path;
}

std::string bench_cell_hash(const std::vector<std::string>& files, const std::string& settings) {
  std::string all = "aoc bench program 1\n" + settings + "\n";
  for (const auto& f : files) all += f + "\n" + file_digest(f) + "\n";
  return digest_hex(all.data(), all.size());
}

ProgramBench run_program_bench(const ProgramBenchOptions& opt, bool progress) {
  check_options(opt);
  ProgramBench b;
  b.opt = opt;
  const Hardware hw = load_hardware(resolve_hardware_path(opt.hardware));
  time_parity(b, hw, progress);
  time_check(b, hw, progress);
  time_estimate(b, hw, opt.hardware, progress);
  return b;
}

nlohmann::json program_bench_json(const ProgramBench& b) {
  const ProgramBenchOptions& o = b.opt;
  const auto parity = [&](const std::string& cell) {
    return nlohmann::json{{"cell", cell},         {"model", b.model},  {"model_path", b.model_path}, {"hardware", o.hardware},
                          {"batch", o.batch},     {"length", o.length}, {"mode", "sequential"},      {"seed", o.seed},
                          {"threads", o.threads}, {"runs", o.runs},    {"config_hash", b.model_hash}, {"version", AOC_VERSION}};
  };
  nlohmann::json cells = nlohmann::json::array();
  const double tokens = static_cast<double>(o.batch) * o.length;
  for (const ProgramTiming* t : {&b.cpu, &b.sim}) {
    const bool sim = t == &b.sim;
    nlohmann::json c = parity("parity " + t->backend);
    c["backend"] = t->backend;
    c["options"] = sim ? "--quantize --noise, calibrated optics, converters calibrated on seed " + std::to_string(o.seed + kCalibrationSeedOffset)
                       : "the digital reference: exact products";
    c["quantize"] = sim, c["noise"] = sim, c["optics"] = sim ? "calibrated" : "none", c["precision"] = sim ? "f32" : "f64";
    c["best_s"] = t->best_s, c["median_s"] = t->median_s, c["tokens_per_s"] = tokens / t->best_s;
    c["iterations_per_token"] = t->iterations, c["fixed_points"] = t->solves, c["converged"] = t->converged;
    cells.push_back(c);
  }
  nlohmann::json r = parity("parity sim/cpu");
  const double ratio = b.sim_over_cpu;
  r["ratio"] = ratio, r["ratio_of_best"] = b.sim.best_s / b.cpu.best_s;
  r["ratio_per_iteration"] = b.sim.iterations > 0 ? ratio * b.cpu.iterations / b.sim.iterations : 0.0;
  r["target"] = kSimOverCpuTarget, r["within_target"] = ratio <= kSimOverCpuTarget;
  cells.push_back(r);
  const auto band = [](const Stat& s) { return nlohmann::json{{"mean", s.mean}, {"sd", s.sd}, {"min", s.min}, {"max", s.max}}; };
  cells.push_back({{"cell", "check"},
                   {"model", b.check_model},
                   {"config", b.check_path},
                   {"hardware", o.hardware},
                   {"batch", o.check_batch},
                   {"length", o.check_length},
                   {"mode", "simultaneous"},
                   {"options", "aoc check --quantize --noise --seeds " + std::to_string(o.seeds) + ", calibrated converters and optics"},
                   {"quantize", true},
                   {"noise", true},
                   {"optics", "calibrated"},
                   {"precision", "f32"},
                   {"weights_seed", 0},
                   {"seed", o.seed},
                   {"seeds", o.seeds},
                   {"threads", o.threads},
                   {"config_hash", b.check_hash},
                   {"version", AOC_VERSION},
                   {"seconds", b.check_s},
                   {"prepare_s", b.check_prepare_s},
                   {"max_abs_error", band(b.check_abs)},
                   {"argmax_agreement", band(b.check_argmax)},
                   {"reference_iterations_mean", b.check_reference_iterations}});
  if (o.seeds == kCheckTargetSeeds) cells.back()["target_s"] = kCheckSecondsTarget, cells.back()["within_target"] = b.check_s < kCheckSecondsTarget;
  const bool published = o.estimate_config.empty();
  cells.push_back({{"cell", "estimate"},
                   {"model", b.estimate_model},
                   {"config", b.estimate_path},
                   {"hardware", o.hardware},
                   {"batch", 1},
                   {"length", 1},
                   {"options", "aoc estimate GRAPH --iterations 20 (shapes only): compile and count one token"},
                   {"iterations", 20},
                   {"tiles", b.estimate_tiles},
                   {"runs", o.estimate_runs},
                   {"seed", o.seed},
                   {"config_hash", b.estimate_hash},
                   {"version", AOC_VERSION},
                   {"best_s", b.estimate_s}});
  if (published && o.hardware == "aoc-48")
    cells.back()["target_s"] = kEstimateSecondsTarget, cells.back()["within_target"] = b.estimate_s < kEstimateSecondsTarget;
  return cells;
}

std::string program_bench_table(const ProgramBench& b) {
  const ProgramBenchOptions& o = b.opt;
  std::ostringstream t;
  char line[512];
  std::snprintf(line, sizeof line,
                "\nprograms on %s, %d thread(s), compiled in-process; parity: seconds per run (best, median of %d, the backends "
                "alternating)\n\n",
                o.hardware.c_str(), o.threads, o.runs);
  t << line;
  std::snprintf(line, sizeof line, "%-15s %-16s %5s %6s  %-45s %8s %9s %10s %11s\n", "cell", "model", "batch", "length", "options", "best s",
                "median s", "tokens/s", "iter/token");
  t << line;
  for (const ProgramTiming* p : {&b.cpu, &b.sim}) {
    const bool sim = p == &b.sim;
    std::snprintf(line, sizeof line, "%-15s %-16s %5d %6d  %-45s %8.3f %9.3f %10.3e %11.2f\n", ("parity " + p->backend).c_str(), b.model.c_str(),
                  o.batch, o.length, sim ? "sequential, quantize noise optics, calibrated" : "sequential, exact (f64)", p->best_s, p->median_s,
                  static_cast<double>(o.batch) * o.length / p->best_s, p->iterations);
    t << line;
  }
  const double ratio = b.sim_over_cpu;
  std::snprintf(line, sizeof line, "%-15s %.2fx the cpu's time, median of the pairs (target %.1fx: %s), %.2fx per fixed-point iteration\n", "parity sim/cpu", ratio,
                kSimOverCpuTarget, ratio <= kSimOverCpuTarget ? "met" : "not met", b.sim.iterations > 0 ? ratio * b.cpu.iterations / b.sim.iterations : 0.0);
  t << line;
  std::snprintf(line, sizeof line, "%-15s %s (%s) on %d x %d tokens, --quantize --noise --seeds %d: %.1f s", "check", b.check_model.c_str(),
                o.hardware.c_str(), o.check_batch, o.check_length, o.seeds, b.check_s);
  t << line;
  if (o.seeds == kCheckTargetSeeds) {
    std::snprintf(line, sizeof line, " (target %.0f s: %s)", kCheckSecondsTarget, b.check_s < kCheckSecondsTarget ? "met" : "not met");
    t << line;
  }
  t << "\n";
  std::snprintf(line, sizeof line, "%-15s import, compile and calibration %.1f s; max abs error mean %.3g, argmax agreement mean %.3g\n", "",
                b.check_prepare_s, b.check_abs.mean, b.check_argmax.mean);
  t << line;
  std::snprintf(line, sizeof line, "%-15s %s (%s, %d tiles), shapes only, --iterations 20: compile and estimate %.2f s, best of %d", "estimate",
                b.estimate_model.c_str(), o.hardware.c_str(), b.estimate_tiles, b.estimate_s, o.estimate_runs);
  t << line;
  if (o.estimate_config.empty() && o.hardware == "aoc-48") {
    std::snprintf(line, sizeof line, " (target %.0f s: %s)", kEstimateSecondsTarget, b.estimate_s < kEstimateSecondsTarget ? "met" : "not met");
    t << line;
  }
  t << "\n";
  return t.str();
}

}  // namespace aoc
