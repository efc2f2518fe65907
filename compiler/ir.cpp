#include "compiler/ir.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>

#include "sim/error.hpp"

namespace aoc::ir {

std::string to_string(const Dim& d) { return d.is_fixed() ? std::to_string(d.size) : d.sym; }

std::string to_string(const Type& t) {
  std::string s = t.dtype == DType::F64 ? "f64[" : "i64[";
  for (std::size_t i = 0; i < t.shape.size(); ++i) s += (i ? ", " : "") + to_string(t.shape[i]);
  return s + "]";
}

Body::Body(const Body& o) : p_(o.p_ ? std::make_shared<Region>(*o.p_) : nullptr) {}

Body& Body::operator=(const Body& o) {
  if (this != &o) p_ = o.p_ ? std::make_shared<Region>(*o.p_) : nullptr;
  return *this;
}

bool is_weight(const Graph& g, const std::string& name) {
  for (const Value& v : g.weights)
    if (v.name == name) return true;
  return false;
}

bool optical_capable(const Graph& g, const Op& o) {
  return (o.kind == OpKind::Linear && o.inputs.size() == 2 && is_weight(g, o.inputs[1])) ||
         (o.kind == OpKind::MatMul && o.inputs.size() == 2 && is_weight(g, o.inputs[1])) ||
         (o.kind == OpKind::Conv2d && o.inputs.size() == 2 && is_weight(g, o.inputs[1]));
}

std::vector<std::int64_t> argmax_last(const Tensor& t) {
  const std::size_t V = t.shape.empty() ? 1 : static_cast<std::size_t>(t.shape.back());
  std::vector<std::int64_t> out;
  for (std::size_t i = 0; V && i + V <= t.data.size(); i += V)
    out.push_back(std::max_element(t.data.begin() + static_cast<std::ptrdiff_t>(i), t.data.begin() + static_cast<std::ptrdiff_t>(i + V)) -
                  (t.data.begin() + static_cast<std::ptrdiff_t>(i)));
  return out;
}

double label_accuracy(const Tensor& logits, const Tensor& labels) {
  const std::vector<std::int64_t> guess = argmax_last(logits);
  if (guess.size() != labels.data.size())
    throw Error("labels: " + std::to_string(labels.data.size()) + " labels for " + std::to_string(guess.size()) + " positions");
  if (!labels.shape.empty() && !logits.shape.empty() &&
      labels.shape != std::vector<std::int64_t>(logits.shape.begin(), logits.shape.end() - 1))
    throw Error("labels: shape " + shape_text(labels.shape) + ", the outputs' positions are " +
                shape_text(std::vector<std::int64_t>(logits.shape.begin(), logits.shape.end() - 1)) + " (transposed?)");
  const std::int64_t V = logits.shape.empty() ? 1 : logits.shape.back();
  long long right = 0, counted = 0;
  for (std::size_t i = 0; i < guess.size(); ++i) {
    const double l = labels.data[i];
    if (!(l == std::floor(l) && l < static_cast<double>(V)))  // NaN fails too
      throw Error("labels: " + std::to_string(l) + " at position " + std::to_string(i) + " is not a class (an integer from 0 to " +
                  std::to_string(V - 1) + ", or negative to skip the position)");
    if (l >= 0) ++counted, right += guess[i] == static_cast<std::int64_t>(l);
  }
  return counted ? static_cast<double>(right) / static_cast<double>(counted) : 0.0;
}

std::optional<double> next_token_cross_entropy(const Tensor& logits, const Tensor& tokens) {
  if (logits.shape.size() != 3 || tokens.shape.size() != 2 || logits.shape[0] != tokens.shape[0] || logits.shape[1] != tokens.shape[1] ||
      logits.shape[1] < 2 || logits.shape[2] < 1)
    return std::nullopt;
  const std::int64_t B = logits.shape[0], L = logits.shape[1], V = logits.shape[2];
  double sum = 0;
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t t = 0; t + 1 < L; ++t) {
      const double* row = logits.data.data() + (b * L + t) * V;
      const double next = tokens.data[static_cast<std::size_t>(b * L + t + 1)];
      if (!(next >= 0 && next < static_cast<double>(V))) return std::nullopt;
      const double top = *std::max_element(row, row + V);
      double z = 0;
      for (std::int64_t v = 0; v < V; ++v) z += std::exp(row[v] - top);
      sum += top + std::log(z) - row[static_cast<std::int64_t>(next)];
    }
  return sum / static_cast<double>(B * (L - 1));
}

std::string shape_text(const std::vector<std::int64_t>& dims) {
  std::string t = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) t += (i ? ", " : "") + std::to_string(dims[i]);
  return t + "]";
}

std::int64_t checked_elements(const std::vector<std::int64_t>& dims) {
  std::int64_t n = 1;
  for (std::int64_t d : dims) {
    if (d < 0 || (d > 0 && n > kMaxElements / d)) return -1;
    n *= d;
  }
  return n;
}

std::int64_t Tensor::size() const {
  const std::int64_t n = checked_elements(shape);
  if (n < 0) throw Error("a tensor of shape " + shape_text(shape) + " has more than 2^50 elements (or a negative dim)");
  return n;
}

Op make_op(OpKind kind, std::vector<std::string> inputs, std::vector<std::string> outputs,
           std::map<std::string, Attr> attrs, std::string name) {
  Op op;
  op.kind = kind;
  op.name = std::move(name);
  op.inputs = std::move(inputs);
  op.outputs = std::move(outputs);
  op.attrs = std::move(attrs);
  return op;
}

}  // namespace aoc::ir
