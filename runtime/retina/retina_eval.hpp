// A trained retina model (a folder of `aoc retina train`: graph.json, weights.h5) evaluated on a
// retina file's test split (`aoc retina eval`, docs/retina.md): the graph compiled for a machine,
// its converters calibrated on the train split's first frames (never on what is scored), run on a
// backend (the digital reference, or the simulated machine with its converters and noise) over the
// whole test movie as one sequence, and scored (CC, FEV, Poisson NLL), with the energy and latency
// per frame of the compiled program on that machine beside a GPU's.
#pragma once
#include <Eigen/Dense>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "models/retina_data.hpp"
#include "runtime/backend/backend.hpp"
#include "runtime/estimate/program_estimate.hpp"
#include "runtime/run/program_run.hpp"
#include "runtime/run/program_settings.hpp"
#include "sim/hardware.hpp"

namespace aoc {

struct RetinaEvalSettings {
  std::string hw = "aoc-48";         // hardware file or bundled machine
  std::vector<std::string> set;      // hardware overrides (compile and run time: the graph is compiled here)
  std::string backend = "sim";       // sim, cpu, cuda, cuda-f32 (make_backend)
  ProgramSettings run;               // sequence, converters, noise, optics, precision, seed, threads
  int calibration_frames = 1000;     // train frames (at most the split's) the converters' ranges are set on (0: none, the compiled defaults)
  int frames = 0;                    // test frames evaluated from the first (0: all)
  int skip = -1;                     // frames not scored (the filters' warm-up); -1: the model's (RetinaModelFiles::skip)
  bool compensate = true;            // the compiler's compensate pass (false: the raw measured chain)
};

// A model folder: its graph (input `stimulus` [B, L, H, W, 1], output `rate` [B, L, cells]) and weights.
struct RetinaModelFiles {
  std::string dir;
  ir::Graph graph;
  ir::WeightStore weights;
  nlohmann::json record;  // its train.json (null when the folder has none)
  int skip = retina::kDefaultSkip;  // frames its scores skip: train.json's test_skip (the model's filters' warm-up), else 40
};
// Throws aoc::Error naming the file and what is wrong (missing, malformed, not a retina graph).
RetinaModelFiles read_retina_model(const std::string& dir);

// A model compiled for a machine, its converters calibrated on the train split's first frames:
// what runs any stimulus (the evaluation, the minimal-stimulus search).
struct RetinaMachine {
  Hardware hw;
  ir::Program program;
  std::string backend, graph_file;
  BackendOptions options;  // the run's settings (the seed is given per run)
  int cells = 0, calibrated_ranges = 0, calibration_frames = 0;
  int skip = retina::kDefaultSkip;  // the model's (RetinaModelFiles::skip)
};
RetinaMachine compile_retina(const RetinaModelFiles& m, const retina::Dataset& d, const Hardware& hw, const RetinaEvalSettings& s);
// The expected spikes per bin [cells, frames] of a stimulus [1, frames, H, W, 1] run on the machine
// with noise seed `seed`; the whole run in *result when given.
Eigen::MatrixXd run_retina(const RetinaMachine& m, const ir::Tensor& stimulus, std::uint64_t seed, ProgramResult* result = nullptr,
                           std::function<void(long long, long long)> progress = {});

struct RetinaEval {
  Hardware hw;
  ir::Program program;            // compiled (and calibrated) for hw
  int calibrated_ranges = 0;
  int calibration_frames = 0;     // train frames the ranges were set on
  retina::Split test;             // the test frames run (the split cut to them)
  Eigen::MatrixXd pred;           // [cells, frames] expected spikes per bin
  int skip = 0;                   // frames not scored (the settings' or the model's)
  retina::Scores scores;          // over frames >= skip
  ProgramResult result;           // the run (fixed-point statistics, conversions)
  IterationSummary iterations;    // every fixed-point solve (empty without a FixedPoint)
  ProgramEstimate estimate;       // per frame (a token is a frame), with the measured iterations
  double seconds = 0;             // the run
};

// The model evaluated on `d`'s test split on `hw` (loaded with its overrides: s.hw and s.set name
// them for the program's target; a sweep's point passes its machine). The model's frame size and
// cells must be the data's (else an aoc::Error naming the model file and the sizes). `progress` as
// BackendOptions::progress.
RetinaEval evaluate_retina(const RetinaModelFiles& m, const retina::Dataset& d, const Hardware& hw, const RetinaEvalSettings& s,
                           std::function<void(long long, long long)> progress = {});
// The same on a compiled machine (its hardware and run options as they are; s gives the frames,
// the skip and the noise seed).
RetinaEval evaluate_retina(const RetinaMachine& machine, const retina::Dataset& d, const RetinaEvalSettings& s,
                           std::function<void(long long, long long)> progress = {});
// The same on s.hw with s.set loaded here.
RetinaEval evaluate_retina(const RetinaModelFiles& m, const retina::Dataset& d, const RetinaEvalSettings& s,
                           std::function<void(long long, long long)> progress = {});

// A split's first `frames` frames as the graph's input tensor [1, frames, H, W, 1].
ir::Tensor retina_stimulus_tensor(const retina::Split& s, int frames);

}  // namespace aoc
