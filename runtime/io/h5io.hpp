// HDF5 input and output of `aoc run` (formats in docs/run.md). Every problem a user can cause (no
// such file, not HDF5, a missing dataset, a wrong rank, shape or type, NaN/inf) is a one-line
// aoc::Error naming the file and the dataset. Files are written to a temporary file next to the
// target and renamed into place, so a failed write never leaves a half-written file.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/run/loop_run.hpp"
#include "runtime/run/loop_problem.hpp"

namespace aoc {

// An input file: /W, /x, /bias (zeros if absent), /z0 (zeros if absent) and the optional root
// attributes alpha, beta (one value or N), gamma (one value). Empty / nullopt: not in the file.
struct RunInput {
  LoopProblem problem;
  std::vector<double> alpha, beta;
  std::optional<double> gamma;
};

RunInput read_run_input(const std::string& path);
void write_run_input(const std::string& path, const LoopProblem& p);

// One dataset of a file: its shape and values (float64 in the file, or int32 when `integer`).
struct H5Array {
  std::string name;
  std::vector<std::size_t> shape;
  std::vector<double> values;
  bool integer = false;
};
using H5Attrs = std::vector<std::pair<std::string, std::vector<double>>>;  // numeric root attributes

H5Array read_h5_array(const std::string& path, const std::string& name);
// Root attribute as text (numbers printed with %.17g).
std::string read_h5_attr(const std::string& path, const std::string& name);
using H5Text = std::vector<std::pair<std::string, std::string>>;       // text root attributes
void write_h5_arrays(const std::string& path, const std::vector<H5Array>& arrays, const H5Attrs& attrs = {},
                     const H5Text& text = {});

// The output of `aoc run`: every result array (codes only when quantized, the trace only when
// traced) plus root attributes (`text` as strings, `numbers` as float64 / uint64 for "seed").
// The digest is digest_hex over the raw bytes of the arrays in the order they are written.
struct RunOutputMeta {
  bool quantized = false, trace = false;
  std::vector<std::pair<std::string, std::string>> text;
  std::vector<std::pair<std::string, double>> numbers;
  std::uint64_t seed = 0;
};
std::string run_output_digest(const LoopRunResult& r, const RunOutputMeta& m);
void write_run_output(const std::string& path, const LoopRunResult& r, const RunOutputMeta& m);

}  // namespace aoc
