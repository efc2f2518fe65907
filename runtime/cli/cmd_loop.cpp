#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "runtime/cli/commands.hpp"
#include "runtime/output.hpp"
#include "runtime/problem.hpp"
#include "sim/core.hpp"
#include "sim/error.hpp"
#include "sim/solver.hpp"

namespace aoc::cli {

namespace {

struct Opts {
  std::string hw = "aoc-48", mode = "default", rule = "twin", precision = "f32", json_out;
  int batch = 64, max_iter = 40, threads = 1, n = 0;
  double tol = 1e-3, damping = 1.0, alpha = 0.5;
  std::uint64_t seed = 1;
  bool json = false, trace = false;
};

CoreConfig make_config(const Opts& o, const Hardware& hw) {
  CoreConfig cfg;
  if (o.mode == "default") cfg = CoreConfig::twin_defaults(hw);
  else if (o.mode == "all-off") cfg = CoreConfig::twin_all_off(hw);
  else cfg = CoreConfig::ideal(o.alpha, 1.0);
  cfg.alpha = {o.alpha};
  return cfg;
}

SolverOptions make_solver(const Opts& o) {
  SolverOptions s;
  if (o.rule == "twin") s = SolverOptions::twin(), s.max_iter = o.max_iter, s.tol = o.tol;
  else if (o.rule == "relative") s = SolverOptions::relative(o.tol, o.max_iter, o.damping);
  else s = SolverOptions::fixed(o.max_iter, o.tol);
  s.trace = o.trace;
  return s;
}

template <class T>
int run(const Opts& o) {
  const Hardware hw = load_hardware(resolve_hardware_path(o.hw));
  const int n = o.n > 0 ? o.n : hw.channels;
  if (o.batch < 1) throw Error("--batch: must be at least 1");
  omp_set_num_threads(o.threads);
  const LoopProblem p = random_problem(n, o.batch, o.seed);
  OpticalCore<T> core(hw, make_config(o, hw));
  core.load_weights(p.W, p.bias);
  const Batch<T> inj = core.injection(Batch<T>::from(p.x));
  const auto t0 = std::chrono::steady_clock::now();
  const SolveResult r = solve_fixed_point<T>(core.step_fn(), inj, Batch<T>::from(p.z0), make_solver(o));
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  const int conv = static_cast<int>(std::count(r.converged.begin(), r.converged.end(), 1));
  const auto [imin, imax] = std::minmax_element(r.iterations.begin(), r.iterations.end());
  double imean = 0;
  for (int i : r.iterations) imean += i / static_cast<double>(r.iterations.size());
  const std::string digest = digest_hex(r.z.data(), sizeof(double) * r.z.size());
  if (o.json) {
    nlohmann::json j{{"tool", "aoc loop"}, {"version", AOC_VERSION}, {"hardware", hw.name}, {"mode", o.mode},
                     {"rule", o.rule}, {"precision", o.precision}, {"seed", o.seed}, {"batch", o.batch}, {"n", n},
                     {"steps", r.steps}, {"converged", conv}, {"iterations", r.iterations},
                     {"max_residual_per_step", r.max_residual}, {"digest", digest}, {"seconds", secs}};
    j["fixed_points"] = nlohmann::json::array();
    for (Eigen::Index i = 0; i < r.z.rows(); ++i) j["fixed_points"].push_back(std::vector<double>(r.z.row(i).begin(), r.z.row(i).end()));
    emit_json(j.dump(1), o.json_out);
    return 0;
  }
  std::printf("loop: %s (%d channels), %d x %d weights ~ U(+-1/sqrt(N)), x ~ U(+-1.3), z0 = 0, seed %llu\n",
              hw.name.c_str(), hw.channels, n, n, static_cast<unsigned long long>(o.seed));
  std::printf("      mode %s, alpha %.3g, %s stop rule (tol %.0e, max %d), %s, batch %d, %d thread(s)\n\n",
              o.mode.c_str(), o.alpha, o.rule.c_str(), o.tol, o.max_iter, o.precision.c_str(), o.batch, o.threads);
  std::printf("step  max residual over the batch\n");
  for (size_t k = 0; k < r.max_residual.size(); ++k) std::printf("%4zu  %.3e\n", k + 1, r.max_residual[k]);
  std::printf("\n%d of %d samples converged; iterations per sample: mean %.1f, min %d, max %d; %d steps run\n", conv,
              o.batch, imean, *imin, *imax, r.steps);
  std::printf("sample 0 fixed point, first channels:");
  for (int j = 0; j < std::min(n, 6); ++j) std::printf(" %+.4f", r.z(0, j));
  std::printf("\ndigest of the fixed points %s; %.3g ms (%.3g sample-iterations/s)\n", digest.c_str(), secs * 1e3,
              o.batch * static_cast<double>(r.steps) / secs);
  return 0;
}

}  // namespace

void add_loop(CLI::App& app) {
  static Opts o;
  auto* c = app.add_subcommand("loop", "Run the optical fixed-point loop on seeded random weights and inputs");
  c->add_option("--hw", o.hw, "hardware file or bundled machine (aoc-48, aoc-16)")->capture_default_str();
  c->add_option("--mode", o.mode, "default: the twin's switches; all-off: every non-ideality off; ideal: tanh loop")
      ->check(CLI::IsMember({"default", "all-off", "ideal"}))->capture_default_str();
  c->add_option("--rule", o.rule, "stop rule: twin (batch max residual), relative (per sample, damped), fixed")
      ->check(CLI::IsMember({"twin", "relative", "fixed"}))->capture_default_str();
  c->add_option("--precision", o.precision, "f32 or f64")->check(CLI::IsMember({"f32", "f64"}))->capture_default_str();
  c->add_option("--batch", o.batch, "samples solved together")->check(CLI::PositiveNumber)->capture_default_str();
  c->add_option("--n", o.n, "state size (default: the machine's channel count; others use the mean fallback)");
  c->add_option("--max-iter", o.max_iter, "iteration limit (the count, for --rule fixed)")->check(CLI::PositiveNumber)->capture_default_str();
  c->add_option("--tol", o.tol, "residual tolerance")->check(CLI::PositiveNumber)->capture_default_str();
  c->add_option("--damping", o.damping, "relative rule: z <- (1-d) z + d f(z)")->check(CLI::Range(1e-6, 1.0))->capture_default_str();
  c->add_option("--alpha", o.alpha, "leak / feedback coefficient")->capture_default_str();
  c->add_option("--seed", o.seed, "seed of the weights and inputs")->capture_default_str();
  c->add_option("--threads", o.threads, "threads (results are identical for any count)")->check(CLI::PositiveNumber)->capture_default_str();
  c->add_flag("--json", o.json, "print a JSON record (fixed points, iterations, residuals, digest)");
  c->add_option("-o,--output", o.json_out, "write the JSON record to this file (with --json)");
  c->footer("Example:\n  aoc loop --hw aoc-48 --batch 256 --rule relative --damping 0.8 --precision f64");
  c->callback([] { exit_status() = o.precision == "f64" ? run<double>(o) : run<float>(o); });
}

}  // namespace aoc::cli
