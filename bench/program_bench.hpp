// `aoc bench`'s program section: compiled models on the backends that run them, measured as ratios
// within one run so that the machine's load cancels (docs/bench.md, "Programs"):
//   parity   the trained parity model compiled for aoc-48, run token by token on the digital
//            reference (cpu) and on the simulated machine (sim: SLM codes, converters, noise, its
//            calibrated optics, float32), alternately; tokens/s of each and sim/cpu.
//   check    `aoc check --quantize --noise --seeds 8` of docs/program.md's example (the untrained
//            state-tracking Mamba2 compiled with calibrated converters): its wall time.
//   estimate `aoc estimate GRAPH --hw aoc-48 --iterations 20` of the published 1.3B implicit
//            Mamba2 (shapes only): the compiler's passes and checks and the count of a token over
//            its hundreds of thousands of tiles; the best wall time of a few runs.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runtime/run/program_check.hpp"

namespace aoc {

struct ProgramBenchOptions {
  std::string hardware = "aoc-48";
  // A trained model's folder (config.json, weights.h5); "": the bundled models/trained/parity-implicit.
  std::string model;
  // Sequential: the mode the parity model was trained and is scored in (its train.json, the demo).
  int batch = 16, length = 64;
  int runs = 9;  // timed runs of each backend, alternating, so that both see the same load
  // A config.json `aoc import` reads, with its seeded weights; "": the bundled state-tracking Mamba2.
  std::string check_config;
  int check_batch = 2, check_length = 6, seeds = 8;
  // A config.json compiled shapes-only and estimated; "": the bundled mamba2-1.3b-implicit.
  std::string estimate_config;
  int estimate_runs = 3;
  std::uint64_t seed = 1;  // the inputs' seed and the first noise seed (aoc run's and aoc check's default)
  int threads = 1;
};

// The targets of the project's issue 12 (docs/bench.md): what the cells are measured against.
constexpr double kSimOverCpuTarget = 1.5;
constexpr double kCheckSecondsTarget = 60;  // for kCheckTargetSeeds seeds; other counts have no target
constexpr int kCheckTargetSeeds = 8;
constexpr double kEstimateSecondsTarget = 2;  // issue 20: a 1.3B model on aoc-48, compiled and estimated
// The parity program's converters are calibrated on tokens of seed + this (not the timed ones).
constexpr std::uint64_t kCalibrationSeedOffset = 1000;

// One backend's timed runs of the parity program.
struct ProgramTiming {
  std::string backend;
  double best_s = 0, median_s = 0;  // seconds per run
  double iterations = 0;            // fixed-point iterations per token, mean
  long long solves = 0, converged = 0;
};

struct ProgramBench {
  ProgramBenchOptions opt;
  std::string model, model_path, model_hash;  // the graph's name, its folder, the digest of what the cells depend on
  ProgramTiming cpu, sim;
  double sim_over_cpu = 0;  // the median over the alternating runs of sim's time over the cpu's before it
  std::string check_model, check_path, check_hash;
  double check_prepare_s = 0, check_s = 0;  // import, compile and calibration; the check itself
  Stat check_abs, check_argmax;             // the check's findings over the seeds, beside its time
  double check_reference_iterations = 0;
  std::string estimate_model, estimate_path, estimate_hash;
  double estimate_s = 0;  // best of estimate_runs: compile (shapes only) and estimate one token
  int estimate_tiles = 0;
};

// The file a bench section reads: `path` when it is one, else a one-line error saying what it is for.
std::string bench_file(const std::string& path, const std::string& what);

// The config hash of a cell: everything its figures depend on but the code, i.e. the files it reads
// (model, weights, machine) and its settings.
std::string bench_cell_hash(const std::vector<std::string>& files, const std::string& settings);

// Compiles both models in-process as aoc import / aoc compile do and times them; throws aoc::Error
// (one line) when a model is missing or an option is out of range.
ProgramBench run_program_bench(const ProgramBenchOptions& opt, bool progress);
// The cells, each with what it measured (model, machine, batch, length, options, config hash, seed).
nlohmann::json program_bench_json(const ProgramBench& b);
std::string program_bench_table(const ProgramBench& b);

}  // namespace aoc
