#include "compiler/op_def.hpp"

#include <algorithm>
#include <cmath>

#include "compiler/program.hpp"
#include "sim/error.hpp"

namespace aoc::ir {

namespace {

// The records by OpKind, checked once: every kind has exactly one record.
const std::vector<OpDef>& registry() {
  static const std::vector<OpDef> table = [] {
    std::vector<OpDef> all;
    for (auto family : {linalg_ops, elementwise_ops, sequence_ops, data_ops, spatial_ops, control_ops})
      for (OpDef& d : family()) all.push_back(std::move(d));
    const auto n = static_cast<std::size_t>(OpKind::FixedPoint) + 1;
    std::vector<OpDef> by_kind;
    by_kind.reserve(n);
    for (std::size_t k = 0; k < n; ++k) {
      const auto it = std::find_if(all.begin(), all.end(), [&](const OpDef& d) { return static_cast<std::size_t>(d.kind) == k; });
      if (it == all.end() || std::count_if(all.begin(), all.end(), [&](const OpDef& d) { return d.kind == it->kind; }) != 1)
        throw std::logic_error("op registry: OpKind " + std::to_string(k) + " needs exactly one record");
      by_kind.push_back(*it);
    }
    return by_kind;
  }();
  return table;
}

const AttrSpec kPlaceSpec{kPlaceAttr, AttrKind::String, false, std::nullopt, {"optical", "analog", "digital"},
                          "where the compiler put the op (set by the lowering passes)"};

const Attr* find_attr(const Op& op, const std::string& name) {
  if (const auto it = op.attrs.find(name); it != op.attrs.end()) return &it->second;
  const AttrSpec* s = attr_spec(op.kind, name);
  if (!s) throw Error(std::string(op_def(op.kind).name) + " has no attribute '" + name + "'");
  return s->dflt ? &*s->dflt : nullptr;
}

[[noreturn]] void wrong_kind(const Op& op, const std::string& name, const char* want) {
  throw Error("attribute '" + name + "' of " + op_def(op.kind).name + " must be " + want);
}

const Attr& need_attr(const Op& op, const std::string& name) {
  const Attr* a = find_attr(op, name);
  if (!a) throw Error("missing attribute '" + name + "' of " + op_def(op.kind).name);
  return *a;
}

}  // namespace

const OpDef& op_def(OpKind k) { return registry().at(static_cast<std::size_t>(k)); }

std::string arity_text(const OpDef& d) {
  if (d.min_inputs == d.max_inputs) return std::to_string(d.min_inputs);
  if (d.max_inputs < 0) return "at least " + std::to_string(d.min_inputs);
  return std::to_string(d.min_inputs) + " to " + std::to_string(d.max_inputs);
}

std::optional<OpKind> op_kind(const std::string& name) {
  for (const OpDef& d : registry())
    if (name == d.name) return d.kind;
  return std::nullopt;
}

std::vector<std::string> op_names() {
  std::vector<std::string> v;
  for (const OpDef& d : registry()) v.push_back(d.name);
  return v;
}

const AttrSpec* attr_spec(OpKind k, const std::string& attr) {
  if (attr == kPlaceAttr) return &kPlaceSpec;
  for (const AttrSpec& s : op_def(k).attrs)
    if (attr == s.name) return &s;
  return nullptr;
}

double attr_number(const Op& op, const std::string& name) {
  const Attr& a = need_attr(op, name);
  if (const auto* i = std::get_if<std::int64_t>(&a)) return static_cast<double>(*i);
  if (const auto* d = std::get_if<double>(&a)) return *d;
  wrong_kind(op, name, "a number");
}

std::optional<double> attr_number_if(const Op& op, const std::string& name) {
  if (!find_attr(op, name)) return std::nullopt;
  return attr_number(op, name);
}

std::optional<std::int64_t> attr_int_if(const Op& op, const std::string& name) {
  if (!find_attr(op, name)) return std::nullopt;
  return attr_int(op, name);
}

std::optional<std::string> attr_string_if(const Op& op, const std::string& name) {
  if (!find_attr(op, name)) return std::nullopt;
  return attr_string(op, name);
}

std::int64_t attr_int(const Op& op, const std::string& name) {
  const Attr& a = need_attr(op, name);
  if (const auto* i = std::get_if<std::int64_t>(&a)) return *i;
  if (const auto* d = std::get_if<double>(&a))
    if (std::isfinite(*d) && *d == std::floor(*d) && std::abs(*d) < 9.0e15) return static_cast<std::int64_t>(*d);
  wrong_kind(op, name, "an integer");
}

std::string attr_string(const Op& op, const std::string& name) {
  const Attr& a = need_attr(op, name);
  if (const auto* s = std::get_if<std::string>(&a)) return *s;
  wrong_kind(op, name, "a string");
}

std::vector<std::int64_t> attr_ints(const Op& op, const std::string& name) {
  const Attr& a = need_attr(op, name);
  if (const auto* v = std::get_if<std::vector<std::int64_t>>(&a)) return *v;
  wrong_kind(op, name, "a list of integers");
}

Place place(const Op& op) {
  const auto it = op.attrs.find(kPlaceAttr);
  if (it == op.attrs.end()) return Place::Unplaced;
  const auto* s = std::get_if<std::string>(&it->second);
  if (s && *s == "optical") return Place::Optical;
  if (s && *s == "analog") return Place::Analog;
  if (s && *s == "digital") return Place::Digital;
  throw Error(std::string(op_def(op.kind).name) + " '" + op.name + "': attribute place is not optical, analog or digital");
}

void set_place(Op& op, Place p) {
  if (p == Place::Unplaced) op.attrs.erase(kPlaceAttr);
  else op.attrs[kPlaceAttr] = std::string(to_string(p));
}

const char* to_string(Place p) {
  switch (p) {
    case Place::Optical: return "optical";
    case Place::Analog: return "analog";
    case Place::Digital: return "digital";
    case Place::Unplaced: break;
  }
  return "unplaced";
}

void walk(const std::vector<Op>& ops, const std::function<void(const Op&, int)>& f, int depth) {
  for (const Op& o : ops) {
    f(o, depth);
    if (o.body) walk(static_cast<const std::vector<Op>&>(o.body->ops), f, depth + 1);
  }
}

void walk(std::vector<Op>& ops, const std::function<void(Op&, int)>& f, int depth) {
  for (Op& o : ops) {
    f(o, depth);
    if (o.body) walk(o.body->ops, f, depth + 1);
  }
}

// ---- the contexts' tools ----

void InferCtx::bad(const std::string& what) const {
  std::string t = where + what;
  std::replace(t.begin(), t.end(), '\n', ' ');
  std::replace(t.begin(), t.end(), '\r', ' ');
  throw Error(t);
}

std::string InferCtx::operand(const Op& o, std::size_t i, const char* role) const {
  return std::string(role) + " '" + (i < o.inputs.size() ? o.inputs[i] : std::string()) + "'";
}

void InferCtx::f64(const Type& t, const std::string& role) const {
  if (t.dtype != DType::F64) bad(role + " is " + to_string(t) + ", expected f64");
}

void InferCtx::rank(const Type& t, const std::string& role, std::size_t r) const {
  if (t.shape.size() != r) bad(role + " must have rank " + std::to_string(r) + ", got " + to_string(t));
}

void InferCtx::rank_at_least(const Type& t, const std::string& role, std::size_t r) const {
  if (t.shape.size() < r) bad(role + " must have rank >= " + std::to_string(r) + ", got " + to_string(t));
}

Type InferCtx::broadcast(const Type& a, const Type& b) const {
  const Shape &x = a.shape, &y = b.shape;
  const std::size_t n = std::max(x.size(), y.size());
  Shape s(n);
  for (std::size_t i = 0; i < n; ++i) {
    const Dim* dx = i < x.size() ? &x[x.size() - 1 - i] : nullptr;
    const Dim* dy = i < y.size() ? &y[y.size() - 1 - i] : nullptr;
    Dim& out = s[n - 1 - i];
    if (!dx) out = *dy;
    else if (!dy || *dx == *dy) out = *dx;
    else if (*dx == Dim::fixed(1)) out = *dy;
    else if (*dy == Dim::fixed(1)) out = *dx;
    else bad("cannot broadcast " + to_string(a) + " with " + to_string(b) + " (trailing dims must be equal or 1)");
  }
  return {DType::F64, s};
}

std::int64_t InferCtx::norm_axis(std::int64_t axis, std::size_t r) const {
  const std::int64_t ax = axis < 0 ? axis + static_cast<std::int64_t>(r) : axis;
  if (ax < 0 || ax >= static_cast<std::int64_t>(r)) bad("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(r));
  return ax;
}

void last_axis_per_token(const EvalCtx& c, const Op& op, const std::vector<const Tensor*>& in, const std::vector<std::size_t>& seq) {
  if (seq.front() == 0 && in[0]->shape.size() == 2)
    c.fail("acts along the last axis of '" + op.inputs[0] + "', its sequence axis; sequential mode needs per-token ops");
}

void spatial_per_token(const EvalCtx& c, const Op& op, const std::vector<const Tensor*>& in, const std::vector<std::size_t>& seq) {
  if (seq.front() == 0 && in[0]->shape.size() < 5)
    c.fail("acts on the last three axes [H, W, C] of '" + op.inputs[0] + "', " + shape_text(in[0]->shape) +
           " at one token, of which axis 1 is its sequence axis; sequential mode needs x[B, L, H, W, C]");
}

void EvalCtx::fail(const std::string& msg) const { throw Error(where + ": " + msg); }

double CostCtx::per_token(const Type& t) const { return static_cast<double>(per_token_elements(t)); }

}  // namespace aoc::ir
