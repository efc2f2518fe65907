#include "runtime/optimize/optimize.hpp"

#include <Eigen/Eigenvalues>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>

#include "runtime/run/loop_run.hpp"
#include "runtime/io/output.hpp"
#include "runtime/io/progress.hpp"
#include "sim/energy.hpp"
#include "sim/error.hpp"
#include "sim/json_reader.hpp"
#include "sim/noise.hpp"
#include "sim/tile.hpp"

namespace aoc {

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Philox streams of the sampler and the baselines (Source::Optimize, counter word a; the problem
// generators use 1-4).
enum Stream : std::uint32_t { kInitial = 10, kSearch = 11, kAnnealing = 12, kBifurcation = 13 };

// The set's energies of the states (rows of S), its best, and the time it took.
SampleSet sample_set(const IsingProblem& p, const MatrixXdR& S, int iterations, double seconds) {
  SampleSet set;
  set.iterations = iterations;
  set.wall_seconds = seconds;
  set.energies = ising_energy(p, S);
  Eigen::Index best = 0;
  set.best_energy = set.energies.minCoeff(&best);
  set.best_state = S.row(best).transpose();
  return set;
}

// The state a sample leaves the machine with: binaries by their sign (0 reads as +1), continuous
// variables as read, inside the walls.
Eigen::VectorXd decode(const IsingProblem& p, const double* readout) {
  Eigen::VectorXd s(p.n());
  for (int j = 0; j < p.n(); ++j) {
    const double v = readout[j];
    s(j) = p.binary[static_cast<size_t>(j)] ? (v < 0 ? -1.0 : 1.0) : std::clamp(v, -1.0, 1.0);
  }
  return s;
}

}  // namespace

ChainProgramming program_couplings(const Hardware& hw, const CoreConfig& cfg, const MatrixXdR& J, const DriveCalibration& cal) {
  if (cfg.led != LedModel::Twin) {  // the ideal chain is the product itself
    ChainProgramming prog;
    prog.W = J;
    prog.offset = Eigen::VectorXd::Zero(J.rows());
    return prog;
  }
  return program_for_chain(hw, cfg, J, cal);
}

double coupling_scale(const MatrixXdR& J) {
  const Eigen::SelfAdjointEigenSolver<MatrixXdR> es(J, Eigen::EigenvaluesOnly);
  const double lo = es.eigenvalues().minCoeff(), hi = es.eigenvalues().maxCoeff();
  const double lambda = (lo < 0) != (hi < 0) ? hi : 0.5 * (std::abs(lo) + std::abs(hi));
  return lambda <= 0.1 ? 1.0 : lambda;
}

Success success_of(const Eigen::VectorXd& energies, double target) {
  Success s;
  s.samples = static_cast<int>(energies.size());
  const double tol = 1e-9 * std::max(1.0, std::abs(target));
  for (double e : energies) s.hits += e <= target + tol;
  s.p = s.samples ? static_cast<double>(s.hits) / s.samples : 0;
  s.repeats99 = s.p >= 0.99 ? 1.0 : s.p <= 0 ? std::numeric_limits<double>::infinity() : std::log(0.01) / std::log1p(-s.p);
  return s;
}

SamplerMachine prepare_sampler(const IsingProblem& p, const Hardware& hw, const LoopSettings& loop) {
  if (p.n() > hw.channels)
    throw Error(hw.path + ": the problem's " + std::to_string(p.n()) + " variables do not fit the machine's " + std::to_string(hw.channels) +
                " channels (one module; tiling over modules is not modelled for the optimiser)");
  SamplerMachine m;
  m.problem = &p, m.hw = &hw, m.loop = loop;
  m.cfg = loop_config(loop, hw);
  m.cal = drive_calibration(hw, m.cfg);
  m.cfg.nonlinearity = Nonlinearity::Ising;
  m.cfg.ising_level = m.cal.level;
  m.cfg.binary = p.binary;
  m.cfg.wall = 1.0;
  m.cfg.gain = GainMode::Explicit;
  m.prog = program_couplings(hw, m.cfg, p.J, m.cal);
  return m;
}

SampleSet run_sampler(const IsingProblem& p, const Hardware& hw, const LoopSettings& loop, const SamplerParams& sp, double dt, int count,
                      int iterations, int first_sample) {
  return run_sampler(prepare_sampler(p, hw, loop), sp, dt, count, iterations, first_sample);
}

SampleSet run_sampler(const SamplerMachine& m, const SamplerParams& sp, double dt, int count, int iterations, int first_sample) {
  const IsingProblem& p = *m.problem;
  const Hardware& hw = *m.hw;
  const LoopSettings& loop = m.loop;
  const ChainProgramming& prog = m.prog;
  const int n = p.n();
  if (count < 1 || iterations < 1) throw Error("optimize: samples and iterations must be at least 1");
  CoreConfig cfg = m.cfg;
  cfg.beta = {dt * sp.g / m.cal.slope()};
  cfg.gamma = sp.m;
  cfg.alpha = {1.0 - dt * sp.a};
  cfg.alpha_schedule = {AlphaSchedule::Kind::Linear, 1.0 - dt * sp.a, 1.0, iterations};
  LoopRunOptions o = run_options(loop);
  o.solver = SolverOptions::fixed(iterations);
  o.solver.first_sample = first_sample;
  LoopProblem lp;
  lp.W = prog.W;
  lp.bias = dt * sp.g * (p.h - prog.offset);
  lp.x = MatrixXdR::Zero(count, n);
  lp.z0.resize(count, n);
  const double r = 1.0 / std::sqrt(static_cast<double>(n));
  std::vector<std::uint32_t> w(static_cast<size_t>(n));
  for (int b = 0; b < count; ++b) {
    noise::philox_words(loop.seed, noise::Source::Optimize, kInitial, static_cast<std::uint32_t>(first_sample + b), 0, n, w.data());
    for (int j = 0; j < n; ++j) lp.z0(b, j) = r * (2 * unit_uniform(w[static_cast<size_t>(j)]) - 1);
  }
  const auto t0 = Clock::now();
  const LoopRunResult res = run_loop(hw, cfg, lp, o);
  const double seconds = seconds_since(t0);
  MatrixXdR S(count, n);
  for (int b = 0; b < count; ++b) S.row(b) = decode(p, res.readout.row(b).data()).transpose();
  SampleSet set = sample_set(p, S, iterations, seconds);
  set.programming_residual = prog.residual;
  set.dead_weights = prog.dark;
  return set;
}

SampleSet run_annealing(const IsingProblem& p, int count, int sweeps, std::uint64_t seed, int threads) {
  if (!p.all_binary()) throw Error("simulated annealing: every variable must be binary");
  const int n = p.n();
  // The schedule's ends from the moves' sizes: a flip changes H by 2 |f_i| at most, f = Js + h.
  double largest = 0, smallest = std::numeric_limits<double>::infinity();
  for (int i = 0; i < n; ++i) {
    largest = std::max(largest, 2 * (p.J.row(i).cwiseAbs().sum() + std::abs(p.h(i))));
    for (int j = 0; j < n; ++j)
      if (p.J(i, j) != 0) smallest = std::min(smallest, 2 * std::abs(p.J(i, j)));
    if (p.h(i) != 0) smallest = std::min(smallest, 2 * std::abs(p.h(i)));
  }
  if (largest <= 0) largest = smallest = 1;
  const double beta0 = std::log(2.0) / largest, beta1 = std::log(100.0) / smallest;
  MatrixXdR S(count, n);
  const auto t0 = Clock::now();
#pragma omp parallel for num_threads(std::max(1, threads)) schedule(dynamic)
  for (int b = 0; b < count; ++b) {
    std::vector<std::uint32_t> w(static_cast<size_t>(n));
    Eigen::VectorXd s(n);
    noise::philox_words(seed, noise::Source::Optimize, kAnnealing, static_cast<std::uint32_t>(b), 0, n, w.data());
    for (int j = 0; j < n; ++j) s(j) = (w[static_cast<size_t>(j)] & 1u) ? 1.0 : -1.0;
    Eigen::VectorXd f = p.J * s + p.h;
    for (int k = 0; k < sweeps; ++k) {
      const double beta = sweeps > 1 ? beta0 * std::pow(beta1 / beta0, static_cast<double>(k) / (sweeps - 1)) : beta1;
      // one word per spin and sweep; the counter runs past the initial state's n words
      noise::philox_words(seed, noise::Source::Optimize, kAnnealing, static_cast<std::uint32_t>(b),
                          static_cast<std::uint32_t>((k + 1) * n), n, w.data());
      for (int i = 0; i < n; ++i) {
        const double dE = 2 * s(i) * f(i);
        if (dE <= 0 || unit_uniform(w[static_cast<size_t>(i)]) < std::exp(-beta * dE)) {
          const double d = -2 * s(i);
          s(i) = -s(i);
          f += d * p.J.col(i);
        }
      }
    }
    S.row(b) = s.transpose();
  }
  return sample_set(p, S, sweeps, seconds_since(t0));
}

SampleSet run_bifurcation(const IsingProblem& p, int count, int steps, std::uint64_t seed, int threads) {
  if (!p.all_binary()) throw Error("simulated bifurcation: every variable must be binary");
  const int n = p.n();
  constexpr double a0 = 1.0, dt = 1.25;
  const double norm = p.J.norm();
  const double c0 = norm > 0 ? 0.5 * std::sqrt(static_cast<double>(std::max(1, n - 1))) / norm : 1.0;
  MatrixXdR S(count, n);
  const auto t0 = Clock::now();
#pragma omp parallel for num_threads(std::max(1, threads)) schedule(dynamic)
  for (int b = 0; b < count; ++b) {
    std::vector<std::uint32_t> w(static_cast<size_t>(2 * n));
    noise::philox_words(seed, noise::Source::Optimize, kBifurcation, static_cast<std::uint32_t>(b), 0, 2 * n, w.data());
    Eigen::VectorXd x(n), y(n);
    for (int j = 0; j < n; ++j) x(j) = 0.2 * (unit_uniform(w[static_cast<size_t>(j)]) - 0.5), y(j) = 0.2 * (unit_uniform(w[static_cast<size_t>(n + j)]) - 0.5);
    for (int k = 0; k < steps; ++k) {
      const double a = a0 * k / std::max(1, steps - 1);
      y += dt * (-(a0 - a) * x + c0 * (p.J * x + p.h));
      x += dt * a0 * y;
      for (int j = 0; j < n; ++j)
        if (std::abs(x(j)) > 1) x(j) = x(j) > 0 ? 1.0 : -1.0, y(j) = 0;
    }
    for (int j = 0; j < n; ++j) S(b, j) = x(j) < 0 ? -1.0 : 1.0;
  }
  return sample_set(p, S, steps, seconds_since(t0));
}

OptimizeResult optimize(const IsingProblem& p, const Hardware& hw, const OptimizeSettings& s, bool progress) {
  check_settings(s.loop);
  OptimizeResult r;
  const SamplerMachine machine = prepare_sampler(p, hw, s.loop);
  r.lambda = coupling_scale(p.J);
  if (s.params) {
    const SamplerParams& q = *s.params;
    if (!(std::isfinite(q.a) && q.a >= 0) || !(std::isfinite(q.g) && q.g > 0) || !(std::isfinite(q.m) && q.m >= 0 && q.m < 1))
      throw Error("optimize: --params A G M: need A >= 0, G > 0 and 0 <= M < 1, finite; got " + jsonr::num(q.a) + " " + jsonr::num(q.g) + " " +
                  jsonr::num(q.m));
    r.params = q;
  } else {
    // AOCoptimizer's search: (a, g, m) uniform in [0.01, 1]^2 x [0.95, 0.99], then a <- a / g and
    // g <- 1 / (g lambda); each configuration's short samples ranked by their mean energy.
    if (s.search_configs < 1) throw Error("optimize: --search-configs must be at least 1");
    Progress meter("configurations", progress);
    meter.phase("optimize: search");
    double best_mean = std::numeric_limits<double>::infinity();
    for (int c = 0; c < s.search_configs; ++c) {
      std::uint32_t w[3];
      noise::philox_words(s.loop.seed, noise::Source::Optimize, kSearch, static_cast<std::uint32_t>(c), 0, 3, w);
      const double a0 = 0.01 + 0.99 * unit_uniform(w[0]), g0 = 0.01 + 0.99 * unit_uniform(w[1]), m = 0.95 + 0.04 * unit_uniform(w[2]);
      const SamplerParams sp{a0 / g0, 1.0 / (g0 * r.lambda), m};
      // the search's samples are keyed apart from the final run's (first sample past them)
      const SampleSet set = run_sampler(machine, sp, s.dt, s.search_samples, s.search_iterations, (c + 1) * 1000000);
      const double mean = set.energies.mean();
      r.search.emplace_back(sp, mean);
      if (mean < best_mean) best_mean = mean, r.params = sp;
      meter.update(c + 1, s.search_configs);
    }
  }
  r.aoc = run_sampler(machine, r.params, s.dt, s.samples, s.iterations, 0);
  if (p.all_binary()) {
    if (s.sa_sweeps > 0) {
      r.baselines.push_back({"simulated annealing", "sweeps", run_annealing(p, s.sa_samples, s.sa_sweeps, s.loop.seed, s.loop.threads), {}});
    }
    if (s.sb_steps > 0) {
      r.baselines.push_back({"simulated bifurcation", "steps", run_bifurcation(p, s.sa_samples, s.sb_steps, s.loop.seed, s.loop.threads), {}});
    }
  }
  if (p.best_known) {
    r.target_energy = energy_of(p, *p.best_known);
    r.target_source = p.best_known_source;
  } else {
    r.target_energy = r.aoc.best_energy;
    r.target_source = "the best any method found in this run (no known optimum)";
    for (const auto& b : r.baselines) r.target_energy = std::min(r.target_energy, b.set.best_energy);
  }
  r.aoc_success = success_of(r.aoc.energies, r.target_energy);
  for (auto& b : r.baselines) b.success = success_of(b.set.energies, r.target_energy);
  const TimingSpec t = hw.timing.value_or(TimingSpec{});
  r.loop_period_s = t.loop_period_ns * 1e-9;
  if (hw.energy) {
    Workload wl;
    wl.n = p.n();
    wl.fixed_points = 1;
    wl.iterations_per_fixed_point = s.iterations;
    const EnergyReport e = estimate(hw, wl);
    r.energy_per_sample_j = e.total_joules.typ;
    r.energy_source = hw.path + " (energy section; aoc estimate's loop form, n " + std::to_string(p.n()) + ", " + std::to_string(s.iterations) +
                      " iterations and one readout per sample, the weights programmed once for the run and not counted)";
  }
  return r;
}


double baseline_cpu_s_per_sample(const OptimizeResult::Baseline& b, int threads) {
  return b.set.wall_seconds / static_cast<double>(std::max<Eigen::Index>(1, b.set.energies.size())) * std::max(1, threads);
}

namespace {

// JSON has no infinity: a figure that is none (p = 0) is null.
nlohmann::ordered_json finite_or_null(double v) { return std::isfinite(v) ? nlohmann::ordered_json(v) : nlohmann::ordered_json(nullptr); }

nlohmann::ordered_json success_json(const Success& s) {
  return {{"hits", s.hits}, {"samples", s.samples}, {"p", s.p}, {"repeats_99", finite_or_null(s.repeats99)}};
}

}  // namespace

nlohmann::ordered_json optimize_summary(const IsingProblem& p, const std::string& path, const OptimizeSettings& s, const OptimizeResult& r) {
  nlohmann::ordered_json j{{"tool", "aoc optimize"},
                           {"version", AOC_VERSION},
                           {"problem", path},
                           {"name", p.name},
                           {"n", p.n()},
                           {"hw", s.loop.hw},
                           {"mode", s.loop.mode},
                           {"quantize", s.loop.quantize},
                           {"noise", s.loop.noise},
                           {"seed", s.loop.seed},
                           {"target_objective", objective_of(p, r.target_energy)},
                           {"target_source", r.target_source},
                           {"params", {{"a", r.params.a}, {"g", r.params.g}, {"m", r.params.m}, {"dt", s.dt}, {"lambda", r.lambda}}},
                           {"search_configs", r.search.size()}};
  j["aoc"] = {{"samples", r.aoc.energies.size()},
              {"iterations", r.aoc.iterations},
              {"best_objective", objective_of(p, r.aoc.best_energy)},
              {"success", success_json(r.aoc_success)},
              {"ops_to_solution", finite_or_null(r.ops_to_solution())},
              {"loop_period_s", r.loop_period_s},
              {"tts99_machine_s", finite_or_null(r.tts99_s())},
              {"energy_per_sample_j", r.energy_per_sample_j},
              {"energy_to_solution_j", finite_or_null(r.energy_to_solution_j())},
              {"energy_source", r.energy_source},
              {"programming_residual", r.aoc.programming_residual},
              {"dead_weights", r.aoc.dead_weights},
              {"simulation_wall_s", r.aoc.wall_seconds}};
  const auto cpu_per_sample = [&](const OptimizeResult::Baseline& b) { return baseline_cpu_s_per_sample(b, s.loop.threads); };
  j["baselines"] = nlohmann::ordered_json::array();
  for (const auto& b : r.baselines)
    j["baselines"].push_back({{"name", b.name},
                              {"samples", b.set.energies.size()},
                              {b.unit, b.set.iterations},
                              {"best_objective", objective_of(p, b.set.best_energy)},
                              {"success", success_json(b.success)},
                              {"cpu_s_per_sample", cpu_per_sample(b)},
                              {"tts99_cpu_s", finite_or_null(cpu_per_sample(b) * b.success.repeats99)},
                              {b.unit + "_to_solution", finite_or_null(b.set.iterations * b.success.repeats99)}});
  return j;
}

}  // namespace aoc
