#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "runtime/cli/commands.hpp"
#include "runtime/cli/loop_flags.hpp"
#include "runtime/io/output.hpp"
#include "sim/error.hpp"

namespace aoc::cli {

namespace {

struct Opts : LoopSettings {
  int batch = 64, n = 0;
  bool json = false, compare = false;
  std::string json_out;
};

struct Deviation {
  double max_abs = 0, rms = 0;
};

// How far the fixed points of a run with converters/noise/bandwidth lie from the clean run's.
Deviation deviation(const RowMatrix<double>& a, const RowMatrix<double>& b) {
  const RowMatrix<double> d = a - b;
  return {d.cwiseAbs().maxCoeff(), std::sqrt(d.squaredNorm() / static_cast<double>(d.size()))};
}

int run(const Opts& o) {
  const Hardware hw = load_machine(o);
  const int n = o.n > 0 ? o.n : hw.channels;
  const LoopProblem p = random_problem(n, o.batch, o.seed, o.first_sample);
  const CoreConfig cfg = loop_config(o, hw);
  const LoopRunOptions ro = run_options(o);
  const auto t0 = std::chrono::steady_clock::now();
  const LoopRunResult res = run_loop(hw, cfg, p, ro);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const SolveResult& r = res.solve;
  Deviation dev, dev_readout;
  if (o.compare) {
    LoopRunOptions clean = ro;
    clean.noise = clean.quantize = clean.bandwidth = clean.hardware_readout = false;
    const RowMatrix<double> reference = run_loop(hw, cfg, p, clean).solve.z;
    dev = deviation(r.z, reference);
    dev_readout = deviation(res.readout, reference);
  }

  const int conv = static_cast<int>(std::count(r.converged.begin(), r.converged.end(), 1));
  const int at_floor = static_cast<int>(std::count(r.at_floor.begin(), r.at_floor.end(), 1));
  const int diverged = non_finite_samples(r);
  const auto exit_status = [&] {  // a diverged sample is reported after the results, and fails the run
    if (diverged) std::fprintf(stderr, "aoc: error: loop: %s\n", non_finite_text(r).c_str());
    return diverged ? 1 : 0;
  };
  const auto [imin, imax] = std::minmax_element(r.iterations.begin(), r.iterations.end());
  double imean = 0;
  for (int i : r.iterations) imean += i / static_cast<double>(r.iterations.size());
  const std::string digest = digest_hex(r.z.data(), sizeof(double) * r.z.size());
  if (o.json) {
    nlohmann::json j{{"tool", "aoc loop"}, {"version", AOC_VERSION}, {"hardware", hw.name}, {"overrides", o.set},
                     {"mode", o.mode}, {"rule", o.rule}, {"precision", o.precision}, {"seed", o.seed},
                     {"program_seed", seed_json(o.program_seed)}, {"zero_reads", o.noise ? o.zero_reads : 0},
                     {"after_programming_us", o.noise && o.after_programming_us ? nlohmann::json(*o.after_programming_us) : nlohmann::json(nullptr)},
                     {"zero_every_us", o.noise && o.zero_every_us ? nlohmann::json(*o.zero_every_us) : nlohmann::json(nullptr)},
                     {"first_sample", o.first_sample},
                     {"batch", o.batch}, {"n", n}, {"quantize", o.quantize}, {"noise", o.noise},
                     {"bandwidth", o.bandwidth}, {"steps", r.steps}, {"converged", conv}, {"noise_floor_stops", at_floor},
                     {"floor_patience", o.noise && o.rule != "fixed" ? o.floor_patience : 0}, {"non_finite", diverged},
                     {"iterations", r.iterations}, {"mean_iterations", imean},
                     {"max_residual_per_step", r.max_residual}, {"digest", digest}, {"seconds", secs}};
    if (o.compare) {
      j["deviation_from_clean"] = {{"max_abs", dev.max_abs}, {"rms", dev.rms}};
      j["readout_deviation_from_clean"] = {{"max_abs", dev_readout.max_abs}, {"rms", dev_readout.rms}};
    }
    j["fixed_points"] = nlohmann::json::array();
    for (Eigen::Index i = 0; i < r.z.rows(); ++i) j["fixed_points"].push_back(std::vector<double>(r.z.row(i).begin(), r.z.row(i).end()));
    emit_json(j.dump(1), o.json_out);
    return exit_status();
  }
  std::printf("loop: %s (%d channels), %d x %d weights ~ U(+-1/sqrt(N)), x ~ U(+-1.3), z0 = 0, seed %llu\n",
              hw.name.c_str(), hw.channels, n, n, static_cast<unsigned long long>(o.seed));
  std::printf("      mode %s, alpha %s, %s stop rule (tol %.0e, max %d), %s, batch %d, %d thread(s)\n",
              o.mode.c_str(), numbers_text(cfg.alpha, "none").c_str(), o.rule.c_str(), o.tol, o.max_iter,
              o.precision.c_str(), o.batch, o.threads);
  std::printf("      converters %s, noise %s, bandwidth %s%s\n\n", o.quantize ? "on" : "off", o.noise ? "on" : "off",
              o.bandwidth ? "on" : "off", o.set.empty() ? "" : ", with hardware overrides");
  std::printf("step  max residual over the batch\n");
  for (size_t k = 0; k < r.max_residual.size(); ++k) std::printf("%4zu  %.3e\n", k + 1, r.max_residual[k]);
  std::printf("\n%d of %d samples converged", conv, o.batch);
  if (at_floor) std::printf(", %d stopped at the noise floor (their residual stopped falling: the mean of their last %d iterates)", at_floor, o.floor_patience);
  std::printf("; iterations per sample: mean %.1f, min %d, max %d; %d steps run\n", imean, *imin, *imax, r.steps);
  std::printf("sample 0 fixed point, first channels:");
  for (int j = 0; j < std::min(n, 6); ++j) std::printf(" %+.4f", r.z(0, j));
  if (o.compare)
    std::printf("\nagainst the clean run (no converters, noise, bandwidth): fixed points max |d| %.3e, rms %.3e;"
                "\n  readout max |d| %.3e, rms %.3e", dev.max_abs, dev.rms, dev_readout.max_abs, dev_readout.rms);
  std::printf("\ndigest of the fixed points %s; %.3g ms (%.3g sample-iterations/s)\n", digest.c_str(), secs * 1e3,
              o.batch * static_cast<double>(r.steps) / secs);
  return exit_status();
}

}  // namespace

void add_loop(CLI::App& app) {
  static Opts o;
  auto* c = app.add_subcommand("loop", "Run the optical fixed-point loop on seeded random weights and inputs");
  add_loop_flags(c, o, "seed of the weights, inputs and noise");
  c->add_option("--batch", o.batch, "samples solved together")->check(positive())->capture_default_str();
  c->add_option("--n", o.n, "state size (default: the machine's channel count; others use the mean fallback)")->check(positive());
  c->add_flag("--compare", o.compare,
              "also solve without converters, noise and bandwidth and report the deviation of the fixed points "
              "(and of the readout: with --quantize it went through the saturation curve and the ADC, the clean one did not)");
  c->add_flag("--json", o.json, "print a JSON record (fixed points, iterations, residuals, digest)");
  c->add_option("-o,--output", o.json_out, "write the JSON record to this file (with --json)");
  c->footer(
      "Example:\n"
      "  aoc loop --hw aoc-48 --batch 256 --rule relative --damping 0.8 --precision f64\n"
      "  aoc loop --noise --quantize --compare --set noise.thermal_sigma=0.01 --set converters.slm_bits=6");
  c->callback([c] {
    require_json_for_output(c, "loop");
    exit_status() = run(o);
  });
}

}  // namespace aoc::cli
