// Files around a program run (docs/program.md, "Running programs"): the inputs (one HDF5 dataset per
// graph input, by name) and the outputs (one dataset per graph output, the iterations and the
// convergence of every FixedPoint, root attributes saying what ran: tool version, backend, mode,
// seed, the program's digest).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "compiler/program.hpp"
#include "runtime/backend/backend.hpp"

namespace aoc {

// The graph's inputs from an HDF5 file: every declared input must be there; other datasets are an
// error naming them (a typo would otherwise run on zeros). i64 inputs must hold whole numbers.
std::map<std::string, ir::Tensor> read_program_inputs(const std::string& path, const ir::Program& p);

// Seeded example inputs for a program: every symbolic dim is `batch` at axis 0 and `length`
// elsewhere; an i64 input read by an Embedding gets ids below the table's rows, f64 inputs U(-1, 1).
std::map<std::string, ir::Tensor> example_inputs(const ir::Program& p, std::int64_t batch, std::int64_t length, std::uint64_t seed);
// The same, written as aoc run --inputs reads them.
void write_example_inputs(const std::string& path, const ir::Program& p, std::int64_t batch, std::int64_t length, std::uint64_t seed);

// What ran, for the output's root attributes (docs/program.md, "Running programs").
struct ProgramRunMeta {
  std::string program, program_digest, backend, mode, inputs, precision = "f64";
  std::uint64_t seed = 0;
  std::optional<std::uint64_t> program_seed;  // recorded where given
  int first_sample = 0;  // the inputs' first sample in the whole input (noise keys)
  bool noise = false, quantize = false, optics = false, trace = false;
  std::vector<std::string> set, compile_set;  // the run-time --set, and the program's compile-time ones
};

// Overrides as one text: "noise.thermal_sigma=0.5 timing.settle_ns=100" ("" for none).
std::string set_text(const std::vector<std::string>& set);

std::string write_program_output(const std::string& path, const ir::Program& p, const ProgramResult& r, const ProgramRunMeta& m);  // its output_digest

// The mean, p99, min and max of the iterations of fixed-point solves, over samples (and tokens).
struct IterationSummary {
  double mean = 0;
  int p99 = 0, min = 0, max = 0;
  long long solves = 0, converged = 0;
  long long at_floor = 0;  // of the others, stopped at the noise floor (SolverOptions::floor_patience)
};
IterationSummary summarize(const std::vector<int>& iterations, const std::vector<std::uint8_t>& converged,
                           const std::vector<std::uint8_t>& at_floor = {});
IterationSummary summarize(const ProgramResult& r);  // every FixedPoint of a run together

// One top-level FixedPoint's solves as an `aoc run` output file records them (the datasets
// OP.iterations and OP.converged); throws aoc::Error naming the file and dataset.
IterationSummary read_run_iterations(const std::string& path, const std::string& op);

}  // namespace aoc
