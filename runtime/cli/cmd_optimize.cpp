// aoc optimize: solve an optimisation instance on the simulated machine (runtime/optimize/optimize.hpp) and
// report the best objective, the success probability p against the known optimum, operations and
// time to solution with 99 % confidence on the machine's clock, energy per solve, and simulated
// annealing measured in the same run.
#include <cmath>
#include <optional>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "runtime/cli/commands.hpp"
#include "runtime/cli/loop_flags.hpp"
#include "runtime/io/h5io.hpp"
#include "runtime/optimize/optimize.hpp"
#include "runtime/io/output.hpp"
#include "sim/json_reader.hpp"

namespace aoc::cli {

namespace {

struct Opts {
  std::string problem, output;
  OptimizeSettings s;
  std::vector<double> params;
  std::optional<double> best_known;
  bool json = false, quiet = false;
};

std::string fmt(double v) { return std::isfinite(v) ? jsonr::g4(v) : "-"; }

int run(Opts& o) {
  check_outputs({{"-o", o.output}}, {});
  if (!o.params.empty()) {
    if (o.params.size() != 3) throw Error("--params: expected A G M (three numbers)");
    o.s.params = SamplerParams{o.params[0], o.params[1], o.params[2]};
  }
  IsingProblem p = read_problem(o.problem);
  if (o.best_known) {
    if (!std::isfinite(*o.best_known)) throw Error("--best-known: must be a finite number");
    p.best_known = *o.best_known, p.best_known_source = "given (--best-known)";
  }
  check_settings(o.s.loop);
  const OptimizeResult r = optimize(p, load_machine(o.s.loop), o.s, !o.quiet && !o.json);
  const nlohmann::ordered_json j = optimize_summary(p, o.problem, o.s, r);
  const auto cpu_per_sample = [&](const OptimizeResult::Baseline& b) { return baseline_cpu_s_per_sample(b, o.s.loop.threads); };
  if (!o.output.empty()) {
    std::vector<H5Array> arrays{{"aoc_objectives", {static_cast<size_t>(r.aoc.energies.size())}, {}},
                                {"best_state", {static_cast<size_t>(p.n())}, std::vector<double>(r.aoc.best_state.data(), r.aoc.best_state.data() + p.n())}};
    for (double e : r.aoc.energies) arrays[0].values.push_back(objective_of(p, e));
    for (const auto& b : r.baselines) {
      arrays.push_back({b.name == "simulated annealing" ? "sa_objectives" : "sb_objectives", {static_cast<size_t>(b.set.energies.size())}, {}});
      for (double e : b.set.energies) arrays.back().values.push_back(objective_of(p, e));
    }
    write_h5_arrays(o.output, arrays, {}, {{"summary", j.dump()}, {"version", AOC_VERSION}});
  }
  if (o.json) {
    emit_json(j.dump(1), "");
    return 0;
  }
  std::printf("%s: %d variables on %s (%s%s%s), target %s (%s)\n", p.name.c_str(), p.n(), o.s.loop.hw.c_str(), o.s.loop.mode.c_str(),
              o.s.loop.quantize ? ", quantized" : "", o.s.loop.noise ? ", noise" : "", fmt(objective_of(p, r.target_energy)).c_str(),
              r.target_source.c_str());
  std::printf("  sampler a %.4g, g %.4g (J's scale %.4g), m %.4g, dt %.3g%s\n", r.params.a, r.params.g, r.lambda, r.params.m, o.s.dt,
              r.search.empty() ? " (given)" : (" (best mean energy of " + std::to_string(r.search.size()) + " configurations)").c_str());
  if (r.aoc.programming_residual > 0 || r.aoc.dead_weights > 0)
    std::printf("  programmed to the chain as measured: J's largest error %.2g of max |J|, %d weight(s) the SLM does not pass\n",
                r.aoc.programming_residual, r.aoc.dead_weights);
  std::printf("  %-20s %10s %8s %12s %14s %14s %14s\n", "", "best", "p", "samples", "ops to 99%", "TTS99", "energy to 99%");
  std::printf("  %-20s %10s %8.3f %12d %14s %14s %14s\n", ("aoc (" + std::to_string(r.aoc.iterations) + " iter)").c_str(),
              fmt(objective_of(p, r.aoc.best_energy)).c_str(), r.aoc_success.p, r.aoc_success.samples, fmt(r.ops_to_solution()).c_str(),
              (fmt(r.tts99_s()) + " s").c_str(), r.energy_per_sample_j > 0 ? (fmt(r.energy_to_solution_j()) + " J").c_str() : "-");
  for (const auto& b : r.baselines)
    std::printf("  %-20s %10s %8.3f %12d %14s %14s %14s\n", ((b.name == "simulated annealing" ? "SA (" : "SB (") + std::to_string(b.set.iterations) + " " + b.unit + ")").c_str(),
                fmt(objective_of(p, b.set.best_energy)).c_str(), b.success.p, b.success.samples, fmt(b.set.iterations * b.success.repeats99).c_str(),
                (fmt(cpu_per_sample(b) * b.success.repeats99) + " s CPU").c_str(), "-");
  std::printf("  aoc: ops are loop iterations, TTS99 at the machine's %.3g ns per iteration; SA: sweeps, SB: steps, their CPU time on this machine\n",
              r.loop_period_s * 1e9);
  if (!o.output.empty()) std::printf("  wrote %s\n", o.output.c_str());
  return 0;
}

}  // namespace

void add_optimize(CLI::App& app) {
  static Opts o;
  auto* c = app.add_subcommand("optimize", "Solve an optimisation problem (Ising, QUBO, QUMO, Max-Cut) on the simulated machine's loop; p, TTS99, energy");
  c->add_option("problem", o.problem, "the instance: aoc's JSON (aoc problem), a G-set / Biq Mac edge list, or a .qplib file")->required();
  add_machine_flags(c, o.s.loop, "seed of the initial states, the search and the noise");
  c->add_option("--samples", o.s.samples, "samples of the final run (each one solve of the loop)")->check(between(1, 1 << 22))->capture_default_str();
  c->add_option("--iterations", o.s.iterations, "loop iterations per sample (annealing runs over them)")->check(between(1, 1 << 24))->capture_default_str();
  c->add_option("--dt", o.s.dt, "the sampler's time step")->check(between(1e-6, 1.0))->capture_default_str();
  c->add_option("--params", o.params, "A G M: the sampler's annealing, gain and momentum (skips the search)")->expected(3);
  c->add_option("--search-configs", o.s.search_configs, "configurations the search tries")->check(between(1, 1 << 16))->capture_default_str();
  c->add_option("--search-samples", o.s.search_samples, "samples per configuration")->check(between(1, 1 << 16))->capture_default_str();
  c->add_option("--search-iterations", o.s.search_iterations, "iterations per search sample")->check(between(1, 1 << 20))->capture_default_str();
  c->add_option("--sa-sweeps", o.s.sa_sweeps, "simulated annealing baseline: sweeps per sample (0: none)")->check(between(0, 1 << 24))->capture_default_str();
  c->add_option("--sa-samples", o.s.sa_samples, "the baselines' samples (simulated annealing and bifurcation)")->check(between(1, 1 << 22))->capture_default_str();
  c->add_option("--sb-steps", o.s.sb_steps, "simulated bifurcation baseline (ballistic): steps per sample (0: none)")->check(between(0, 1 << 24))->capture_default_str();
  c->add_option_function<double>("--best-known", [](double v) { o.best_known = v; },
                                 "the best objective known (e.g. a G-set graph's published cut): p counts samples that reach it");
  c->add_option("-o,--output", o.output, "HDF5 file: every sample's objective (aoc, SA, SB), the best state, the summary (JSON attribute)");
  c->add_flag("--json", o.json, "print the summary as JSON");
  c->add_flag("--quiet", o.quiet, "no progress lines");
  c->footer("The sampler is AOCoptimizer.jl's (docs/optimisation.md): s = sign(x) on binaries, x <- x + dt g (J s + h) - dt a(t) x\n"
            "+ m (x - x_prev), clipped to [-1, 1], a(t) falling to 0: the loop's alpha(t) = 1 - dt a(t), beta = dt g, W = J, gamma = m.\n"
            "p counts samples at the target (the instance's best known, else the run's best); ops to 99% = iterations x ln(0.01)/ln(1-p).\n"
            "Examples:\n  aoc problem sk --n 16 --seed 1 --exhaustive -o sk16.json\n"
            "  aoc optimize sk16.json --hw aoc-48 --quantize --noise\n"
            "  aoc optimize sk16.json --mode ideal --params 0.5 0.1 0.9 --json");
  c->callback([] { exit_status() = run(o); });
}

}  // namespace aoc::cli
