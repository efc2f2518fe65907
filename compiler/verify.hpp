// The verifier: checks a Graph (docs/ir.md, "What the verifier checks") and infers the type of
// every value. Every failure is one aoc::Error line that names the op at fault:
//   verify: op #4 Linear 'layer0.in_proj': input W has 512 columns, x has 768
// Ops are numbered from 0 in the order of their region (as `ops[4]` in the JSON); an op inside a
// FixedPoint body is named through its parent ("op #5 FixedPoint 'deq' body op #2 Linear").
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "compiler/ir.hpp"
#include "compiler/op_def.hpp"

namespace aoc::ir {

// The type of every value of g (inputs, weights, op results, body arguments and body results),
// by name. With `weights`, every declared weight must be in the store with its declared shape and
// finite data.
std::map<std::string, Type> verify(const Graph& g, const WeightStore* weights = nullptr);

}  // namespace aoc::ir
