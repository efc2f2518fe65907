#include "bench/loop_bench.hpp"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <sstream>

#include "sim/isa.hpp"
#include "sim/core.hpp"
#include "sim/reference.hpp"

namespace aoc {

namespace {

// The twin's figures on this kind of machine (2-vCPU x86, Debian PyTorch 1.13 CPU, 1 thread, best
// of 15 runs of 100 iterations): docs/research/aoc_dt.md section 10, copied in docs/bench.md.
const std::map<std::string, std::map<int, double>> kTwin = {
    {"twin default", {{1, 3.0e3}, {64, 1.26e5}, {1024, 2.30e5}}},
    {"twin all-off", {{1, 4.3e3}, {64, 1.60e5}, {1024, 3.20e5}}},
    {"ideal tanh", {{1, 8.8e4}, {64, 8.5e5}, {1024, 9.8e5}}},  // the twin's SimpleCell48
};

using Clock = std::chrono::steady_clock;

// Times each of fns (one run of opt.iterations iterations each) repeatedly, taking turns, so that
// a change in the machine's load in the meantime falls on all of them alike: each one's
// sample-iterations/s (best, median) and its seconds in each turn.
struct Turns {
  double best = 0, median = 0;
  std::vector<double> seconds;  // per turn
};
std::vector<Turns> time_turns(const BenchOptions& opt, int batch, const std::vector<std::function<void()>>& fns) {
  for (const auto& fn : fns) fn();  // warm-up
  std::vector<Turns> out(fns.size());
  const auto start = Clock::now();
  while (out[0].seconds.size() < 5 || seconds_since(start) < opt.min_seconds * static_cast<double>(fns.size())) {
    for (std::size_t f = 0; f < fns.size(); ++f) {
      const auto t0 = Clock::now();
      fns[f]();
      out[f].seconds.push_back(seconds_since(t0));
    }
    if (out[0].seconds.size() >= 200) break;
  }
  for (Turns& t : out) {
    std::vector<double> s = t.seconds;
    std::sort(s.begin(), s.end());
    t.best = static_cast<double>(batch) * opt.iterations / s.front();
    t.median = static_cast<double>(batch) * opt.iterations / s[s.size() / 2];
  }
  return out;
}

std::pair<double, double> time_runs(const BenchOptions& opt, int batch, const std::function<void()>& fn) {
  const Turns t = time_turns(opt, batch, {fn})[0];
  return {t.best, t.median};
}

template <class T>
std::vector<BenchRow> bench_batch(const BenchOptions& opt, const Hardware& hw, int batch) {
  const int N = hw.channels;
  std::mt19937_64 rng(opt.seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  MatrixXdR W(N, N), x(batch, N);
  for (auto& v : W.reshaped()) v = u(rng) / std::sqrt(static_cast<double>(N));
  for (auto& v : x.reshaped()) v = 1.3 * u(rng);
  const Eigen::VectorXd bias = Eigen::VectorXd::Zero(N);
  std::vector<BenchRow> rows;

  // One cell of the simulator's core: a run solves new samples, later on the machine's clock, so no
  // run reuses the noise another drew.
  struct CoreCell {
    std::string name;
    OpticalCore<T> core;
    Batch<T> inj, a, b;
    std::vector<int> samples;
    int run = 0;
    CoreCell(std::string n, const Hardware& hw, const CoreConfig& cfg, const NoiseRun* noise, const MatrixXdR& W, const Eigen::VectorXd& bias,
             const MatrixXdR& x)
        : name(std::move(n)), core(hw, cfg) {
      if (noise) core.set_noise(*noise);
      core.load_weights(W, bias);
      inj = core.injection(Batch<T>::from(x));
      a = Batch<T>(static_cast<int>(x.rows()), static_cast<int>(x.cols())), b = a;
      samples.resize(static_cast<size_t>(x.rows()));
    }
    void solve(int iterations) {
      std::fill(a.data.begin(), a.data.end(), T(0));
      for (std::size_t r = 0; r < samples.size(); ++r) samples[r] = run * static_cast<int>(samples.size()) + static_cast<int>(r);
      ++run;
      for (int i = 0; i < iterations; ++i) {
        core.step(a, inj, nullptr, b, StepContext{i, samples.data()});
        std::swap(a, b);
      }
    }
  };
  // the cells timed in turns (the noiseless and noisy twin: their ratio is a target)
  auto core_runs = [&](std::vector<std::unique_ptr<CoreCell>> cells) {
    std::vector<std::function<void()>> fns;
    for (auto& c : cells) fns.push_back([&c, &opt] { c->solve(opt.iterations); });
    const auto turns = time_turns(opt, batch, fns);
    for (std::size_t c = 0; c < cells.size(); ++c) {
      rows.push_back({cells[c]->name, batch, turns[c].best, turns[c].median, 0, 0});
      if (c > 0) rows.back().noise_cost = median_ratio(turns[c].seconds, turns[0].seconds);  // the noisy twin against the noiseless one
    }
  };
  auto cell = [&](const std::string& name, const CoreConfig& cfg, const NoiseRun* noise = nullptr) {
    return std::make_unique<CoreCell>(name, hw, cfg, noise, W, bias, x);
  };
  auto core_run = [&](const std::string& name, const CoreConfig& cfg) {
    std::vector<std::unique_ptr<CoreCell>> one;
    one.push_back(cell(name, cfg));
    core_runs(std::move(one));
  };
  {
    std::vector<std::unique_ptr<CoreCell>> twin;
    twin.push_back(cell("twin default", CoreConfig::twin_defaults(hw)));
    NoiseRun n;
    if (hw.noise) {  // every noise source of the file on: what a noisy sweep point costs
      n.spec = *hw.noise;
      n.seed = opt.seed;
      twin.push_back(cell("twin + noise", CoreConfig::twin_defaults(hw), &n));
    }
    core_runs(std::move(twin));
  }
  core_run("twin all-off", CoreConfig::twin_all_off(hw));
  core_run("ideal tanh", CoreConfig::ideal(0.5, 1.0));

  {  // the digital reference (double, plain Eigen)
    ReferenceLoop ref(W, bias, {0.5}, {1.0});
    const Batch<double> inj = ref.injection(Batch<double>::from(x));
    Batch<double> a(batch, N), b(batch, N);
    auto [best, med] = time_runs(opt, batch, [&] {
      std::fill(a.data.begin(), a.data.end(), 0.0);
      for (int i = 0; i < opt.iterations; ++i) {
        ref.step(a, inj, b);
        std::swap(a, b);
      }
    });
    rows.push_back({"reference f64", batch, best, med, 0, 0});
  }
  {  // only the two matrix products of one iteration's shapes, chained so that neither is dead code
    using M = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    const Eigen::JacobiSVD<MatrixXdR> svd(W);
    const M Wp = (W / svd.singularValues()(0)).cast<T>(), Wn = (W.transpose() / svd.singularValues()(0)).cast<T>();
    const M z0 = x.cast<T>();
    M z(batch, N), p(batch, N);
    auto [best, med] = time_runs(opt, batch, [&] {
      z = z0;
      for (int i = 0; i < opt.iterations; ++i) {
        p.noalias() = z * Wp;
        z.noalias() = p * Wn;
      }
    });
    rows.push_back({"matmul only", batch, best, med, 0, 0});
  }
  const double mm = rows.back().best;
  for (auto& r : rows) {
    r.ratio_to_matmul = r.best / mm;
    if (auto it = kTwin.find(r.cell); it != kTwin.end() && it->second.count(batch)) r.twin = it->second.at(batch);
  }
  return rows;
}

}  // namespace

double median_ratio(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> r;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) r.push_back(a[i] / b[i]);
  std::sort(r.begin(), r.end());
  return r.empty() ? 0 : r.size() % 2 ? r[r.size() / 2] : 0.5 * (r[r.size() / 2 - 1] + r[r.size() / 2]);
}

std::vector<BenchRow> run_loop_bench(const BenchOptions& opt, bool progress) {
  const Hardware hw = load_hardware(resolve_hardware_path(opt.hardware));
  omp_set_num_threads(opt.threads);
  Eigen::setNbThreads(opt.threads);
  std::vector<BenchRow> all;
  for (int b : opt.batches) {
    if (progress) std::fprintf(stderr, "bench: batch %d ...\n", b);
    auto rows = opt.f64 ? bench_batch<double>(opt, hw, b) : bench_batch<float>(opt, hw, b);
    all.insert(all.end(), rows.begin(), rows.end());
  }
  return all;
}

nlohmann::json bench_json(const BenchOptions& opt, const std::vector<BenchRow>& rows) {
  nlohmann::json j;
  j["tool"] = "aoc bench";
  j["version"] = AOC_VERSION;
  j["instruction_sets"] = isa::describe();
  j["cpu"] = isa::cpu_model();
  j["hardware"] = opt.hardware;
  j["precision"] = opt.f64 ? "f64" : "f32";
  j["threads"] = opt.threads;
  j["iterations_per_run"] = opt.iterations;
  j["seed"] = opt.seed;
  j["unit"] = "sample-iterations per second";
  j["twin_source"] = "microsoft/aoc twin timed on a 2-vCPU x86 machine, torch 1.13 CPU, 1 thread (docs/bench.md)";
  for (const auto& r : rows) {
    nlohmann::json e{{"cell", r.cell}, {"batch", r.batch}, {"best", r.best}, {"median", r.median},
                     {"ratio_to_matmul_only", r.ratio_to_matmul}};
    if (r.twin > 0) {
      e["twin"] = r.twin;
      e["speedup_vs_twin"] = r.best / r.twin;
    }
    if (r.noise_cost > 0) {
      e["noise_on_over_off"] = r.noise_cost;
      e["noise_target"] = kNoiseCostTarget;
    }
    j["rows"].push_back(e);
  }
  return j;
}

std::string bench_table(const BenchOptions& opt, const std::vector<BenchRow>& rows) {
  std::ostringstream o;
  char line[256];
  std::snprintf(line, sizeof line, "%s, %s, %d thread(s), %d iterations per run; sample-iterations/s (best, median)\n",
                opt.hardware.c_str(), opt.f64 ? "f64" : "f32", opt.threads, opt.iterations);
  o << line;
  std::snprintf(line, sizeof line, "CPU: %s; instruction sets: %s\n\n", isa::cpu_model().c_str(), isa::describe().c_str());
  o << line;
  std::snprintf(line, sizeof line, "%-14s %6s %11s %11s %9s %10s %9s\n", "cell", "batch", "best", "median", "/matmul", "twin", "x twin");
  o << line;
  for (const auto& r : rows) {
    std::snprintf(line, sizeof line, "%-14s %6d %11.3e %11.3e %9.2f", r.cell.c_str(), r.batch, r.best, r.median, r.ratio_to_matmul);
    o << line;
    if (r.twin > 0) {
      std::snprintf(line, sizeof line, " %10.2e %8.1fx", r.twin, r.best / r.twin);
      o << line;
    }
    o << "\n";
  }
  std::string costs;
  bool met = true;
  for (const auto& r : rows)
    if (r.noise_cost > 0) {
      std::snprintf(line, sizeof line, "%s%.2fx at batch %d", costs.empty() ? "" : ", ", r.noise_cost, r.batch);
      costs += line, met = met && r.noise_cost <= kNoiseCostTarget;
    }
  if (!costs.empty()) {
    std::snprintf(line, sizeof line, "\nnoise on / off (time of twin + noise over twin default, median of the turns): %s (target %.1fx: %s)\n", costs.c_str(),
                  kNoiseCostTarget, met ? "met" : "not met");
    o << line;
  }
  return o.str();
}

}  // namespace aoc
