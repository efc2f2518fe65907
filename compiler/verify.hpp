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

namespace aoc::ir {

// The type of every value of g (inputs, weights, op results, body arguments and body results),
// by name. With `weights`, every declared weight must be in the store with its declared shape and
// finite data.
std::map<std::string, Type> verify(const Graph& g, const WeightStore* weights = nullptr);

// What an attribute holds. Number attributes accept an integer too (the JSON reader stores them
// as double). Reshape's "shape" is Ints in the ONNX convention: 0 copies the input's dim at that
// position (symbols included), -1 (at most once) is inferred from the element count.
enum class AttrKind { Number, Int, String, Ints };
std::optional<AttrKind> attr_kind(OpKind k, const std::string& attr);  // nullopt: not an attr of k

// Typed access to an op's attributes with a default when absent (no checks beyond the type: run
// verify first). attr_number accepts an integer attribute.
double attr_number(const Op& op, const std::string& name, double dflt);
std::int64_t attr_int(const Op& op, const std::string& name, std::int64_t dflt);
std::string attr_string(const Op& op, const std::string& name, const std::string& dflt);
std::vector<std::int64_t> attr_ints(const Op& op, const std::string& name);

}  // namespace aoc::ir
