// The graph's file forms (docs/ir.md): JSON for the structure, HDF5 for the weights. Every problem
// a user can cause is one aoc::Error line naming the file and the field or dataset:
//   model.json: ops[3].op: unknown op "Sofplus" (did you mean Softplus?)
//   weights.h5: /layer0.W: NaN or infinite value at element 17
// Reading checks the format (keys, JSON types, op names, attribute names and kinds); shapes and
// definitions are the verifier's job (compiler/verify.hpp).
#pragma once
#include <functional>
#include <string>

#include "compiler/ir.hpp"

namespace aoc::ir {

Graph read_graph(const std::string& path);
// The same from JSON text; `source` stands in for the file name in messages.
Graph parse_graph(const std::string& text, const std::string& source = "<graph>");
// Pretty JSON (two-space indent, keys in a fixed order, attributes sorted), ending in a newline.
// parse_graph(write_graph(g)) gives g back.
std::string write_graph(const Graph& g);

// Every numeric dataset of an HDF5 file (nested groups included, named by their path without the
// leading '/': "layer0/W"), as f64 tensors; integer datasets become exact doubles. A NaN or
// infinite value, or a non-numeric dataset, is an error naming the file and the dataset.
// `group` reads only the datasets under that group, named relative to it (a program's "/weights").
WeightStore read_weights_h5(const std::string& path, const std::string& group = "/");
// One float64 dataset per tensor ('/' in a name makes groups); written to a temporary file next to
// `path` and renamed into place.
void write_weights_h5(const std::string& path, const WeightStore& weights);
// The same, the tensors handed over one at a time: produce(add) calls add(name, tensor) for each,
// which writes it at once into the file's image (so a producer need not hold them all). Nothing is renamed into place
// unless produce returns.
using AddWeight = std::function<void(const std::string& name, const Tensor& t)>;
void write_weights_h5(const std::string& path, const std::function<void(const AddWeight& add)>& produce);
// The bytes such a file holds (sim/h5file.hpp h5_image), for outputs written together
// (write_files_atomic).
std::vector<char> weights_h5_image(const std::string& path, const WeightStore& weights);
std::vector<char> weights_h5_image(const std::string& path, const std::function<void(const AddWeight& add)>& produce);

}  // namespace aoc::ir
