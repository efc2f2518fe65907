// Data movement and contraction: table lookup, split, concat, reshape, einsum.
#include <algorithm>
#include <cctype>
#include <iterator>
#include <set>

#include "compiler/kernels.hpp"
#include "compiler/op_def.hpp"

namespace aoc::ir {

namespace {

std::vector<Type> infer_embedding(const InferCtx& c, const Op& o, const std::vector<Type>& in) {
  const Type &ids = in[0], &t = in[1];
  if (ids.dtype != DType::I64) c.bad(c.operand(o, 0, "ids") + " is " + to_string(ids) + ", expected i64");
  const std::string tr = c.operand(o, 1, "table");
  c.f64(t, tr), c.rank(t, tr, 2);
  Shape out = ids.shape;
  out.push_back(t.shape[1]);
  return {{DType::F64, out}};
}

std::vector<Type> infer_split(const InferCtx& c, const Op& o, const std::vector<Type>& in) {
  const Type& x = in[0];
  c.rank_at_least(x, c.operand(o, 0, "input"), 1);
  const std::int64_t ax = c.norm_axis(attr_int(o, "axis"), x.shape.size());
  const auto sizes = attr_ints(o, "sizes");
  if (sizes.empty()) c.bad("attribute sizes must not be empty");
  if (o.outputs.size() != sizes.size()) c.bad(std::to_string(sizes.size()) + " sizes but " + std::to_string(o.outputs.size()) + " results");
  std::int64_t sum = 0;
  for (std::int64_t v : sizes) {
    if (v < 0) c.bad("attribute sizes: " + std::to_string(v) + " must be >= 0");
    sum += v;
  }
  const Dim& d = x.shape[ax];
  if (!d.is_fixed()) c.bad("cannot split the symbolic dim " + d.sym + " of " + to_string(x));
  if (sum != d.size) c.bad("sizes sum to " + std::to_string(sum) + ", axis " + std::to_string(ax) + " of " + to_string(x) + " is " + std::to_string(d.size));
  std::vector<Type> out;
  for (std::int64_t v : sizes) {
    Type t = x;
    t.shape[ax] = Dim::fixed(v);
    out.push_back(t);
  }
  return out;
}

std::vector<Type> infer_concat(const InferCtx& c, const Op& o, const std::vector<Type>& in) {
  const Type& x = in[0];
  c.rank_at_least(x, c.operand(o, 0, "input"), 1);
  const std::int64_t ax = c.norm_axis(attr_int(o, "axis"), x.shape.size());
  Type out = x;
  std::int64_t sum = 0;
  bool fixed = true;
  for (std::size_t i = 0; i < in.size(); ++i) {
    const Type& t = in[i];
    if (t.dtype != x.dtype || t.shape.size() != x.shape.size())
      c.bad(c.operand(o, i, "input") + " " + to_string(t) + " does not match '" + o.inputs[0] + "' " + to_string(x));
    for (std::size_t k = 0; k < t.shape.size(); ++k)
      if (static_cast<std::int64_t>(k) != ax && !(t.shape[k] == x.shape[k]))
        c.bad(c.operand(o, i, "input") + " " + to_string(t) + " differs from '" + o.inputs[0] + "' " + to_string(x) + " outside axis " + std::to_string(ax));
    if (t.shape[ax].is_fixed()) sum += t.shape[ax].size;
    else fixed = false;
  }
  if (in.size() > 1) {
    if (!fixed) c.bad("cannot concatenate along a symbolic dim (axis " + std::to_string(ax) + ")");
    out.shape[ax] = Dim::fixed(sum);
  }
  return {out};
}

// The per-axis-1 refusal of Split and Concat in sequential mode.
void axis_per_token(const EvalCtx& c, const Op& op, const std::vector<const Tensor*>& in, const std::vector<std::size_t>& seq) {
  const std::int64_t axis = attr_int(op, "axis");
  for (std::size_t i : seq)
    if (in[i]->shape.size() >= 2 && kernels::norm_axis(axis, in[i]->shape.size(), c.where) == 1)
      c.fail(std::string(op.kind == OpKind::Split ? "splits" : "concatenates") + " along axis 1, the sequence axis of '" + op.inputs[i] +
             "'; sequential mode needs per-token ops");
}

// Fixed product and sorted symbols of a shape: two shapes hold as many elements when both agree.
std::pair<std::int64_t, std::vector<std::string>> count(const Shape& s) {
  std::int64_t n = 1;
  std::vector<std::string> syms;
  for (const Dim& d : s)
    if (d.is_fixed()) n *= d.size;
    else syms.push_back(d.sym);
  std::sort(syms.begin(), syms.end());
  return {n, syms};
}

std::vector<Type> infer_reshape(const InferCtx& c, const Op& o, const std::vector<Type>& in) {
  const Type& x = in[0];
  const auto target = attr_ints(o, "shape");
  const std::string to = " to " + shape_text(target);
  Shape out(target.size());
  int infer = -1;
  for (std::size_t i = 0; i < target.size(); ++i) {
    const std::int64_t t = target[i];
    if (t == -1) {
      if (infer >= 0) c.bad("cannot reshape" + to + ": more than one -1");
      infer = static_cast<int>(i);
    } else if (t == 0) {
      if (i >= x.shape.size()) c.bad("cannot reshape " + to_string(x) + to + ": 0 at position " + std::to_string(i) + " has no input dim");
      out[i] = x.shape[i];
    } else if (t > 0) {
      out[i] = Dim::fixed(t);
    } else {
      c.bad("cannot reshape" + to + ": " + std::to_string(t) + " is not a size, 0 or -1");
    }
  }
  auto [n_in, s_in] = count(x.shape);
  if (infer >= 0) {
    Shape known = out;
    known.erase(known.begin() + infer);
    const auto [n_k, s_k] = count(known);
    std::vector<std::string> rest;
    std::set_difference(s_in.begin(), s_in.end(), s_k.begin(), s_k.end(), std::back_inserter(rest));
    if (rest.size() + s_k.size() != s_in.size() || n_k == 0 || n_in % n_k != 0 || (rest.size() == 1 && n_in != n_k) || rest.size() > 1)
      c.bad("cannot reshape " + to_string(x) + to + ": the -1 cannot be inferred");
    out[infer] = rest.empty() ? Dim::fixed(n_in / n_k) : Dim::symbol(rest[0]);
  }
  if (count(out) != count(x.shape)) c.bad("cannot reshape " + to_string(x) + to + ": the element counts differ");
  return {{x.dtype, out}};
}


std::vector<Type> infer_einsum(const InferCtx& c, const Op& o, const std::vector<Type>& in) {
  const kernels::EinsumSpec s = kernels::parse_einsum(attr_string(o, "spec"));
  if (!s.arrow) c.bad("attribute spec \"" + s.text + "\" needs an explicit \"->\" and output");
  if (s.terms.size() != in.size())
    c.bad("spec \"" + s.text + "\" has " + std::to_string(s.terms.size()) + " operands, the op has " + std::to_string(in.size()) + " inputs");
  std::map<char, Dim> dims;
  for (std::size_t i = 0; i < s.terms.size(); ++i) {
    c.f64(in[i], c.operand(o, i, "input"));
    if (s.terms[i].size() != in[i].shape.size())
      c.bad("spec term \"" + s.terms[i] + "\" has " + std::to_string(s.terms[i].size()) + " labels, " + c.operand(o, i, "input") + " is " + to_string(in[i]));
    for (std::size_t k = 0; k < s.terms[i].size(); ++k) {
      const char ch = s.terms[i][k];
      if (!std::isalpha(static_cast<unsigned char>(ch))) c.bad("spec \"" + s.text + "\": labels are letters, got '" + std::string(1, ch) + "'");
      const auto it = dims.find(ch);
      if (it == dims.end()) dims[ch] = in[i].shape[k];
      else if (!(it->second == in[i].shape[k]))
        c.bad("label " + std::string(1, ch) + " is " + to_string(it->second) + " in one operand and " + to_string(in[i].shape[k]) + " in " +
              c.operand(o, i, "input") + " " + to_string(in[i]));
    }
  }
  Shape out;
  std::set<char> seen;
  for (char ch : s.out) {
    if (!dims.count(ch)) c.bad("output label " + std::string(1, ch) + " of spec \"" + s.text + "\" is not in any operand");
    if (!seen.insert(ch).second) c.bad("output label " + std::string(1, ch) + " of spec \"" + s.text + "\" repeats");
    out.push_back(dims[ch]);
  }
  return {{DType::F64, out}};
}

// The letter on axis 1 of a sequence operand must stay on axis 1.
void einsum_per_token(const EvalCtx& c, const Op& op, const std::vector<const Tensor*>&, const std::vector<std::size_t>& seq) {
  const kernels::EinsumSpec s = kernels::parse_einsum(attr_string(op, "spec"));
  for (std::size_t i : seq)
    if (i < s.terms.size() && s.terms[i].size() >= 2 && (s.out.size() < 2 || s.out[1] != s.terms[i][1]))
      c.fail("spec '" + s.text + "' " + (s.out.find(s.terms[i][1]) == std::string::npos ? "sums" : "moves") + " letter '" +
             std::string(1, s.terms[i][1]) + "', the sequence axis of '" + op.inputs[i] + "'; sequential mode needs per-token ops");
}

DigitalCost cost_einsum(const CostCtx& c, const Op& o) {
  const kernels::EinsumSpec s = kernels::parse_einsum(attr_string(o, "spec"));
  std::map<char, double> size;
  for (std::size_t arg = 0; arg < s.terms.size() && arg < o.inputs.size(); ++arg) {
    const Shape& sh = c.type(o.inputs[arg]).shape;
    for (std::size_t pos = 0; pos < s.terms[arg].size() && pos < sh.size(); ++pos)
      size[s.terms[arg][pos]] = std::max(size[s.terms[arg][pos]], c.dim(sh[pos]));
  }
  double n = 1;
  for (const auto& [ch, v] : size) n *= v;
  return {n, "the product of every index's size (B, L = 1)"};
}

DigitalCost data_movement(const CostCtx&, const Op&) { return {0, "0 (data movement)"}; }

}  // namespace

std::vector<OpDef> data_ops() {
  using V = std::vector<const Tensor*>;
  const AttrSpec axis{"axis", AttrKind::Int, false, Attr{std::int64_t{-1}}, {}, "in [-rank, rank); negative counts from the end"};
  std::vector<OpDef> v;
  v.push_back({.kind = OpKind::Embedding, .name = "Embedding", .summary = "ids i64[...], table[V, D] -> [..., D]", .operands = {"ids", "table"},
               .min_inputs = 2, .max_inputs = 2, .outputs = 1, .attrs = {}, .infer = infer_embedding,
               .eval = [](EvalCtx& c, const Op&, const V& in) { return single(kernels::embedding(*in[0], *in[1], c.where)); },
               .cost = [](const CostCtx&, const Op&) { return DigitalCost{0, "0 (a table lookup)"}; }});
  v.push_back({.kind = OpKind::Split, .name = "Split", .summary = "x -> several results along axis, of the given sizes", .operands = {"x"},
               .min_inputs = 1, .max_inputs = 1, .outputs = -1,
               .attrs = {{"sizes", AttrKind::Ints, true, std::nullopt, {}, "the results' sizes along axis, >= 0, summing to its dim"}, axis},
               .infer = infer_split,
               .eval = [](EvalCtx& c, const Op& op, const V& in) {
                 return kernels::split(*in[0], attr_ints(op, "sizes"), attr_int(op, "axis"), op.outputs.size(), c.where);
               },
               .cost = data_movement, .per_token = axis_per_token});
  v.push_back({.kind = OpKind::Concat, .name = "Concat", .summary = "several -> one along axis", .operands = {"x"}, .min_inputs = 1,
               .max_inputs = -1, .outputs = 1, .attrs = {axis}, .infer = infer_concat,
               .eval = [](EvalCtx& c, const Op& op, const V& in) { return single(kernels::concat(in, attr_int(op, "axis"), c.where)); },
               .cost = data_movement, .per_token = axis_per_token});
  v.push_back({.kind = OpKind::Reshape, .name = "Reshape", .summary = "x with another shape of as many elements", .operands = {"x"},
               .min_inputs = 1, .max_inputs = 1, .outputs = 1,
               .attrs = {{"shape", AttrKind::Ints, true, std::nullopt, {}, "sizes; 0 copies the input's dim there, -1 (once) is inferred"}},
               .infer = infer_reshape,
               .eval = [](EvalCtx& c, const Op& op, const V& in) { return single(kernels::reshape(*in[0], attr_ints(op, "shape"), c.where)); },
               .cost = data_movement});
  v.push_back({.kind = OpKind::Einsum, .name = "Einsum", .summary = "a contraction given by spec, e.g. \"blh,bln,blhp->blhpn\"", .operands = {"x"},
               .min_inputs = 1, .max_inputs = -1, .outputs = 1,
               .attrs = {{"spec", AttrKind::String, true, std::nullopt, {}, "letters per operand, comma-separated, then -> and the output's letters"}},
               .infer = infer_einsum,
               .eval = [](EvalCtx& c, const Op& op, const V& in) { return single(kernels::einsum(attr_string(op, "spec"), in, c.threads, c.where)); },
               .cost = cost_einsum, .per_token = einsum_per_token});
  return v;
}

}  // namespace aoc::ir
