// The AOC's second job: combinatorial optimisation. AOCoptimizer.jl's sampler (MIT; its own terms)
// run as the machine's loop on the one optical core model (sim/core.hpp):
//   s = sign(x) on binaries, x on continuous variables      Nonlinearity::Ising
//   x <- x + dt g (J s + h) - dt a(t) x + m (x - x_prev)     alpha(t) = 1 - dt a(t), beta = dt g,
//   x <- clip(x, -1, 1)                                      W = J, gamma = m, bias = dt g h; walls
// with a(t) falling linearly to 0 over the iterations and x0 ~ U(+-1/sqrt(n)), each sample its own
// solve on the machine (its converters, noise and clock when switched on). A short search picks
// (a, g, m); the best then runs many samples. Metrics as AOCoptimizer and the annealing literature
// report them: success probability p, operations (loop iterations) to solution with 99 %
// confidence, the machine time and energy that takes; simulated annealing measured in the same run.
#pragma once
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/optimize/ising.hpp"
#include "runtime/run/loop_settings.hpp"
#include "sim/programming.hpp"

namespace aoc {

struct SamplerParams {
  double a = 0, g = 0, m = 0;  // annealing start, gain (J's scale already divided out), momentum
};

struct OptimizeSettings {
  LoopSettings loop;           // machine, mode, converters, noise, seed, threads (as aoc run)
  int samples = 200;           // samples of the final run
  int iterations = 500;        // loop iterations per sample
  double dt = 0.5;
  std::optional<SamplerParams> params;  // given: no search
  int search_configs = 32;     // (a, g, m) tried in the search
  int search_samples = 16;     // samples per configuration
  int search_iterations = 100; // iterations per search sample
  int sa_sweeps = 200;         // simulated annealing: sweeps per sample (0: no baseline)
  int sa_samples = 200;        // the baselines' samples (simulated annealing, simulated bifurcation)
  int sb_steps = 200;          // simulated bifurcation: steps per sample (0: no baseline)
};

// Energies (and the best of them) of a set of samples, and what they cost.
struct SampleSet {
  Eigen::VectorXd energies;       // per sample, H + offset
  Eigen::VectorXd best_state;     // the lowest-energy sample's state
  double best_energy = 0;
  double wall_seconds = 0;        // this process's time for the whole set
  int iterations = 0;             // per sample: loop iterations (aoc) or sweeps (SA)
  double programming_residual = 0;  // aoc: max |Jeff - J| / max |J| of what the machine was programmed with
  int dead_weights = 0;             // aoc: weights the chain does not pass (left uncompensated)
};

// The success figures against a target energy: p and the repeats for 99 % confidence.
struct Success {
  int hits = 0, samples = 0;
  double p = 0;
  double repeats99 = 0;  // ln(0.01) / ln(1 - p), 1 when p >= 0.99, infinity when p = 0
};
Success success_of(const Eigen::VectorXd& energies, double target_energy);

struct OptimizeResult {
  SamplerParams params;
  double lambda = 1;                 // J's scale the gain was divided by
  std::vector<std::pair<SamplerParams, double>> search;  // each configuration and its mean energy
  SampleSet aoc;                     // the final run on the machine
  // The digital baselines run in the same process (all-binary problems): each one's name, what it
  // counts (sweeps, steps), its samples and its success.
  struct Baseline {
    std::string name, unit;
    SampleSet set;
    Success success;
  };
  std::vector<Baseline> baselines;
  double target_energy = 0;          // the best known, else the best any method found
  std::string target_source;
  Success aoc_success;
  double loop_period_s = 0;          // the machine's iteration (its timing section)
  double energy_per_sample_j = 0;    // the energy model's estimate of one sample (typical)
  std::string energy_source;

  // Loop iterations (optical products) to reach the target with 99 % confidence (infinity at p = 0),
  // the machine's time for them, and their energy (NaN without an energy model).
  double ops_to_solution() const { return aoc.iterations * aoc_success.repeats99; }
  double tts99_s() const { return ops_to_solution() * loop_period_s; }
  double energy_to_solution_j() const {
    return energy_per_sample_j > 0 ? energy_per_sample_j * aoc_success.repeats99 : std::numeric_limits<double>::quiet_NaN();
  }
};

// What the machine is programmed with so that its product of the drives is J s: sim/programming.hpp's
// program_for_chain over the problem's core, at the comparator's drives (drive_calibration of the
// machine's loop configuration). The ideal chain (linear LEDs): W = J, no offset.
ChainProgramming program_couplings(const Hardware& hw, const CoreConfig& cfg, const MatrixXdR& J, const DriveCalibration& cal);

// J's scale for the gain (AOCoptimizer's normalisation): the largest eigenvalue where the extremes
// differ in sign, else the mean of their magnitudes; 1 when that is at most 0.1.
double coupling_scale(const MatrixXdR& J);

// The machine set up for the sampler on one problem: its loop configuration before the sampler's
// coefficients, the drives' calibration and the weights programmed for its chain. None of it depends
// on (a, g, m), so the search's configurations and the final run share one.
struct SamplerMachine {
  const IsingProblem* problem = nullptr;
  const Hardware* hw = nullptr;
  LoopSettings loop;
  CoreConfig cfg;
  DriveCalibration cal;
  ChainProgramming prog;
};
SamplerMachine prepare_sampler(const IsingProblem& p, const Hardware& hw, const LoopSettings& loop);

// Samples first_sample .. first_sample + count - 1 of the sampler on the machine (each keyed by its
// index: the same for any batch split or thread count).
SampleSet run_sampler(const SamplerMachine& m, const SamplerParams& params, double dt, int count, int iterations, int first_sample);
// The same on a machine set up for this one run.
SampleSet run_sampler(const IsingProblem& p, const Hardware& hw, const LoopSettings& loop, const SamplerParams& params, double dt, int count,
                      int iterations, int first_sample);
// Simulated annealing (Metropolis single flips, a geometric inverse-temperature schedule from 50 %
// acceptance of the largest move to 1 % of the smallest), all-binary problems.
SampleSet run_annealing(const IsingProblem& p, int count, int sweeps, std::uint64_t seed, int threads);
// Ballistic simulated bifurcation (bSB; Goto et al., Sci. Adv. 7, eabe7953, 2021): positions x and
// momenta y, y += dt (-(a0 - a(t)) x + c0 (J x + h)), x += dt a0 y, walls at |x| = 1 (x held, y
// zeroed), a(t) rising linearly from 0 to a0 = 1, dt 1.25, c0 = 0.5 sqrt(n - 1) / |J|_F; s = sign(x).
SampleSet run_bifurcation(const IsingProblem& p, int count, int steps, std::uint64_t seed, int threads);

// On hw (s.loop's machine, loaded with its overrides: load_machine, or a sweep point's).
OptimizeResult optimize(const IsingProblem& p, const Hardware& hw, const OptimizeSettings& s, bool progress);

// A baseline's CPU time per sample: its wall time over the samples, times the threads that shared them.
double baseline_cpu_s_per_sample(const OptimizeResult::Baseline& b, int threads);
// The run's summary as `aoc optimize --json` prints it (and the Python module returns): the problem
// (path as given), the machine and switches, the target and its source, the sampler's parameters,
// aoc's figures (p, ops, machine time and energy to 99 %, with the energy's source) and each
// baseline's.
nlohmann::ordered_json optimize_summary(const IsingProblem& p, const std::string& path, const OptimizeSettings& s, const OptimizeResult& r);

}  // namespace aoc
