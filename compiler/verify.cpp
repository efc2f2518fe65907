#include "compiler/verify.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <iterator>
#include <set>

#include "sim/error.hpp"

namespace aoc::ir {

// ---------------------------------------------------------------------------------------------
// Attributes

std::optional<AttrKind> attr_kind(OpKind k, const std::string& a) {
  if (a == kPlaceAttr) return AttrKind::String;
  switch (k) {
    case OpKind::Clip:
      if (a == "min" || a == "max") return AttrKind::Number;
      break;
    case OpKind::RMSNorm:
    case OpKind::GatedRMSNorm:
      if (a == "eps") return AttrKind::Number;
      break;
    case OpKind::Split:
      if (a == "sizes") return AttrKind::Ints;
      if (a == "axis") return AttrKind::Int;
      break;
    case OpKind::Concat:
      if (a == "axis") return AttrKind::Int;
      break;
    case OpKind::Reshape:
      if (a == "shape") return AttrKind::Ints;
      break;
    case OpKind::Einsum:
      if (a == "spec") return AttrKind::String;
      break;
    case OpKind::CausalAttention:
      if (a == "heads") return AttrKind::Int;
      if (a == "rope_theta") return AttrKind::Number;
      break;
    case OpKind::FixedPoint:
      if (a == "tol" || a == "damping") return AttrKind::Number;
      if (a == "max_iter") return AttrKind::Int;
      if (a == "rule" || a == "like" || a == "layout") return AttrKind::String;
      break;
    case OpKind::Convert:
      if (a == "to") return AttrKind::String;
      if (a == "bits") return AttrKind::Int;
      if (a == "lo" || a == "hi") return AttrKind::Number;
      break;
    default: break;
  }
  return std::nullopt;
}

namespace {

bool is_symbol(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

}  // namespace

double attr_number(const Op& op, const std::string& name, double dflt) {
  const auto it = op.attrs.find(name);
  if (it == op.attrs.end()) return dflt;
  if (const auto* i = std::get_if<std::int64_t>(&it->second)) return static_cast<double>(*i);
  return std::get<double>(it->second);
}

std::int64_t attr_int(const Op& op, const std::string& name, std::int64_t dflt) {
  const auto it = op.attrs.find(name);
  return it == op.attrs.end() ? dflt : std::get<std::int64_t>(it->second);
}

std::string attr_string(const Op& op, const std::string& name, const std::string& dflt) {
  const auto it = op.attrs.find(name);
  return it == op.attrs.end() ? dflt : std::get<std::string>(it->second);
}

std::vector<std::int64_t> attr_ints(const Op& op, const std::string& name) {
  const auto it = op.attrs.find(name);
  return it == op.attrs.end() ? std::vector<std::int64_t>{} : std::get<std::vector<std::int64_t>>(it->second);
}

// ---------------------------------------------------------------------------------------------
// The verifier

namespace {

using Scope = std::map<std::string, Type>;

std::string ts(const Type& t) { return to_string(t); }
std::string q(const std::string& s) { return "'" + s + "'"; }

bool valid_shape(const Shape& s) {
  return std::all_of(s.begin(), s.end(), [](const Dim& d) { return d.is_fixed() || is_symbol(d.sym); });
}

class Verifier {
 public:
  Verifier(const Graph& g, const WeightStore* w) : g_(g), w_(w) {}

  std::map<std::string, Type> run() {
    collect(g_.ops);
    for (const auto& v : g_.inputs) all_defs_.insert(v.name);
    Scope top;
    for (const Value& v : g_.inputs) {
      if (v.name.empty()) fail("verify: a graph input has an empty name");
      if (!valid_shape(v.type.shape)) fail("verify: input " + q(v.name) + ": a dimension is neither a size nor a symbol");
      define(top, v.name, v.type, "graph input");
    }
    for (const Value& v : g_.weights) check_weight(v), define(top, v.name, v.type, "weight");
    for (std::size_t i = 0; i < g_.ops.size(); ++i) op(top, g_.ops[i], "op #" + std::to_string(i));
    if (g_.outputs.empty()) fail("verify: the graph has no outputs");
    for (const std::string& o : g_.outputs)
      if (!top.count(o))
        fail("verify: output " + q(o) + " is not defined" +
             (types_.count(o) ? " at the top level (it is a value inside a FixedPoint body)" : ""));
    return types_;
  }

 private:
  const Graph& g_;
  const WeightStore* w_;
  std::map<std::string, Type> types_;        // every value so far, all regions
  std::map<std::string, std::string> definer_;
  std::set<std::string> all_defs_;           // every name any op or body defines
  std::string where_;                        // "verify: op #4 Linear 'x': "

  [[noreturn]] static void fail(const std::string& s) {
    std::string t = s;
    for (char& c : t)
      if (c == '\n' || c == '\r') c = ' ';
    throw Error(t);
  }
  [[noreturn]] void bad(const std::string& what) const { fail(where_ + what); }

  void collect(const std::vector<Op>& ops) {
    for (const Op& o : ops) {
      for (const auto& n : o.outputs) all_defs_.insert(n);
      if (o.body) {
        for (const auto& a : o.body->args) all_defs_.insert(a);
        collect(o.body->ops);
      }
    }
  }

  void define(Scope& s, const std::string& name, const Type& t, const std::string& by) {
    if (types_.count(name))
      fail((where_.empty() ? "verify: " : where_) + "value " + q(name) + " is defined twice (first by " + definer_[name] +
           "; value names are unique in the whole graph)");
    types_[name] = t;
    definer_[name] = by;
    s[name] = t;
  }

  void check_weight(const Value& v) {
    const std::string w = "verify: weight " + q(v.name) + ": ";
    if (v.name.empty()) fail("verify: a weight has an empty name");
    if (v.type.dtype != DType::F64) fail(w + "weights are f64, got " + ts(v.type));
    for (const Dim& d : v.type.shape)
      if (!d.is_fixed()) fail(w + "a weight's shape must be fixed sizes, got " + ts(v.type));
    if (!w_) return;
    const auto it = w_->find(v.name);
    if (it == w_->end()) fail(w + "declared as " + ts(v.type) + " but not in the weight store");
    const Tensor& t = it->second;
    std::vector<std::int64_t> want;
    for (const Dim& d : v.type.shape) want.push_back(d.size);
    if (t.shape != want) {
      std::string got;
      for (std::size_t i = 0; i < t.shape.size(); ++i) got += (i ? ", " : "") + std::to_string(t.shape[i]);
      fail(w + "declared as " + ts(v.type) + ", the data have shape [" + got + "]");
    }
    if (static_cast<std::int64_t>(t.data.size()) != t.size())
      fail(w + "the data hold " + std::to_string(t.data.size()) + " values for a shape of " + std::to_string(t.size()));
    for (std::size_t i = 0; i < t.data.size(); ++i)
      if (!std::isfinite(t.data[i])) fail(w + "NaN or infinite value at element " + std::to_string(i));
  }

  const Type& use(const Scope& s, const std::string& name) const {
    const auto it = s.find(name);
    if (it != s.end()) return it->second;
    if (types_.count(name))
      bad("value " + q(name) + " is defined outside this FixedPoint body: pass it as an input of the FixedPoint op (a capture)");
    if (all_defs_.count(name)) bad("undefined value " + q(name) + " (used before its definition: a cycle outside a FixedPoint region?)");
    bad("undefined value " + q(name) + " (not a graph input, a weight or the result of an earlier op)");
  }

  void check_attrs(const Op& o, const OpInfo& info) const {
    for (const char* r : info.required_attrs)
      if (!o.attrs.count(r)) bad("missing attribute " + std::string(r));
    for (const auto& [name, a] : o.attrs) {
      const auto k = attr_kind(o.kind, name);
      if (!k) bad("unknown attribute " + name);
      bool ok = false;
      switch (*k) {
        case AttrKind::Number:
          ok = std::holds_alternative<double>(a) || std::holds_alternative<std::int64_t>(a);
          if (ok && !std::isfinite(attr_number(o, name, 0))) bad("attribute " + name + " is not a finite number");
          break;
        case AttrKind::Int: ok = std::holds_alternative<std::int64_t>(a); break;
        case AttrKind::String: ok = std::holds_alternative<std::string>(a); break;
        case AttrKind::Ints: ok = std::holds_alternative<std::vector<std::int64_t>>(a); break;
      }
      static const char* kinds[] = {"a number", "an integer", "a string", "a list of integers"};
      if (!ok) bad("attribute " + name + " must be " + kinds[static_cast<int>(*k)]);
    }
  }

  void f64(const Type& t, const std::string& role) const {
    if (t.dtype != DType::F64) bad(role + " is " + ts(t) + ", expected f64");
  }
  void rank(const Type& t, const std::string& role, std::size_t r) const {
    if (t.shape.size() != r) bad(role + " must have rank " + std::to_string(r) + ", got " + ts(t));
  }
  void rank_at_least(const Type& t, const std::string& role, std::size_t r) const {
    if (t.shape.size() < r) bad(role + " must have rank >= " + std::to_string(r) + ", got " + ts(t));
  }

  Type broadcast(const Type& a, const Type& b) const {
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
      else bad("cannot broadcast " + ts(a) + " with " + ts(b) + " (trailing dims must be equal or 1)");
    }
    return {DType::F64, s};
  }

  std::int64_t norm_axis(std::int64_t axis, std::size_t r) const {
    const std::int64_t ax = axis < 0 ? axis + static_cast<std::int64_t>(r) : axis;
    if (ax < 0 || ax >= static_cast<std::int64_t>(r)) bad("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(r));
    return ax;
  }

  // Fixed product and sorted symbols of a shape: two shapes hold as many elements when both agree.
  static std::pair<std::int64_t, std::vector<std::string>> count(const Shape& s) {
    std::int64_t n = 1;
    std::vector<std::string> syms;
    for (const Dim& d : s)
      if (d.is_fixed()) n *= d.size;
      else syms.push_back(d.sym);
    std::sort(syms.begin(), syms.end());
    return {n, syms};
  }

  std::vector<Type> infer(const Scope& s, const Op& o, const std::vector<Type>& in) {
    const auto& I = o.inputs;
    switch (o.kind) {
      case OpKind::Linear: {
        const Type &x = in[0], &W = in[1];
        f64(x, "x " + q(I[0])), f64(W, "W " + q(I[1]));
        rank_at_least(x, "x " + q(I[0]), 1), rank(W, "W " + q(I[1]), 2);
        if (!(x.shape.back() == W.shape[1]))
          bad("input W " + ts(W) + " has " + to_string(W.shape[1]) + " columns, x " + ts(x) + " has " + to_string(x.shape.back()));
        if (in.size() == 3) {
          f64(in[2], "b " + q(I[2])), rank(in[2], "b " + q(I[2]), 1);
          if (!(in[2].shape[0] == W.shape[0])) bad("bias b " + ts(in[2]) + " does not match W's " + to_string(W.shape[0]) + " rows");
        }
        Shape out(x.shape.begin(), x.shape.end() - 1);
        out.push_back(W.shape[0]);
        return {{DType::F64, out}};
      }
      case OpKind::MatMul: {
        const Type &a = in[0], &b = in[1];
        f64(a, "a " + q(I[0])), f64(b, "b " + q(I[1]));
        rank_at_least(a, "a " + q(I[0]), 1), rank(b, "b " + q(I[1]), 2);
        if (!(a.shape.back() == b.shape[0]))
          bad("a " + ts(a) + " has last dim " + to_string(a.shape.back()) + ", b " + ts(b) + " has " + to_string(b.shape[0]) + " rows");
        Shape out(a.shape.begin(), a.shape.end() - 1);
        out.push_back(b.shape[1]);
        return {{DType::F64, out}};
      }
      case OpKind::Add:
      case OpKind::Sub:
      case OpKind::Mul:
        f64(in[0], "input " + q(I[0])), f64(in[1], "input " + q(I[1]));
        return {broadcast(in[0], in[1])};
      case OpKind::Tanh:
      case OpKind::Sigmoid:
      case OpKind::SiLU:
      case OpKind::Softplus:
      case OpKind::Exp:
      case OpKind::Neg:
        f64(in[0], "input " + q(I[0]));
        return {in[0]};
      case OpKind::Clip:
        f64(in[0], "input " + q(I[0]));
        if (!(attr_number(o, "min", 0) <= attr_number(o, "max", 0))) bad("attribute min must be <= max");
        return {in[0]};
      case OpKind::RMSNorm:
      case OpKind::GatedRMSNorm: {
        const Type& x = in[0];
        const Type& g = in.back();
        const std::string gr = "g " + q(I.back());
        f64(x, "x " + q(I[0])), f64(g, gr), rank_at_least(x, "x " + q(I[0]), 1), rank(g, gr, 1);
        if (o.kind == OpKind::GatedRMSNorm) {
          f64(in[1], "gate " + q(I[1]));
          if (!(in[1] == x)) bad("gate " + ts(in[1]) + " must have x's type " + ts(x));
        }
        if (!(g.shape[0] == x.shape.back())) bad("g " + ts(g) + " must have x's last dim " + to_string(x.shape.back()));
        if (o.attrs.count("eps") && !(attr_number(o, "eps", 0) > 0)) bad("attribute eps must be > 0");
        return {x};
      }
      case OpKind::Conv1dCausal: {
        const Type &x = in[0], &w = in[1];
        f64(x, "x " + q(I[0])), f64(w, "w " + q(I[1])), rank(x, "x " + q(I[0]), 3), rank(w, "w " + q(I[1]), 2);
        if (!(w.shape[0] == x.shape[2])) bad("w " + ts(w) + " must have x's " + to_string(x.shape[2]) + " channels as rows, x is " + ts(x));
        if (in.size() == 3) {
          f64(in[2], "b " + q(I[2])), rank(in[2], "b " + q(I[2]), 1);
          if (!(in[2].shape[0] == x.shape[2])) bad("bias b " + ts(in[2]) + " must have x's " + to_string(x.shape[2]) + " channels");
        }
        return {x};
      }
      case OpKind::Embedding: {
        const Type &ids = in[0], &t = in[1];
        if (ids.dtype != DType::I64) bad("ids " + q(I[0]) + " is " + ts(ids) + ", expected i64");
        f64(t, "table " + q(I[1])), rank(t, "table " + q(I[1]), 2);
        Shape out = ids.shape;
        out.push_back(t.shape[1]);
        return {{DType::F64, out}};
      }
      case OpKind::Split: {
        const Type& x = in[0];
        rank_at_least(x, "input " + q(I[0]), 1);
        const std::int64_t ax = norm_axis(attr_int(o, "axis", -1), x.shape.size());
        const auto sizes = attr_ints(o, "sizes");
        if (sizes.empty()) bad("attribute sizes must not be empty");
        if (o.outputs.size() != sizes.size())
          bad(std::to_string(sizes.size()) + " sizes but " + std::to_string(o.outputs.size()) + " results");
        std::int64_t sum = 0;
        for (std::int64_t v : sizes) {
          if (v < 0) bad("attribute sizes: " + std::to_string(v) + " must be >= 0");
          sum += v;
        }
        const Dim& d = x.shape[ax];
        if (!d.is_fixed()) bad("cannot split the symbolic dim " + d.sym + " of " + ts(x));
        if (sum != d.size) bad("sizes sum to " + std::to_string(sum) + ", axis " + std::to_string(ax) + " of " + ts(x) + " is " + std::to_string(d.size));
        std::vector<Type> out;
        for (std::int64_t v : sizes) {
          Type t = x;
          t.shape[ax] = Dim::fixed(v);
          out.push_back(t);
        }
        return out;
      }
      case OpKind::Concat: {
        const Type& x = in[0];
        rank_at_least(x, "input " + q(I[0]), 1);
        const std::int64_t ax = norm_axis(attr_int(o, "axis", -1), x.shape.size());
        Type out = x;
        std::int64_t sum = 0;
        bool fixed = true;
        for (std::size_t i = 0; i < in.size(); ++i) {
          const Type& t = in[i];
          if (t.dtype != x.dtype || t.shape.size() != x.shape.size())
            bad("input " + q(I[i]) + " " + ts(t) + " does not match " + q(I[0]) + " " + ts(x));
          for (std::size_t k = 0; k < t.shape.size(); ++k)
            if (static_cast<std::int64_t>(k) != ax && !(t.shape[k] == x.shape[k]))
              bad("input " + q(I[i]) + " " + ts(t) + " differs from " + q(I[0]) + " " + ts(x) + " outside axis " + std::to_string(ax));
          if (t.shape[ax].is_fixed()) sum += t.shape[ax].size;
          else fixed = false;
        }
        if (in.size() > 1) {
          if (!fixed) bad("cannot concatenate along a symbolic dim (axis " + std::to_string(ax) + ")");
          out.shape[ax] = Dim::fixed(sum);
        }
        return {out};
      }
      case OpKind::Reshape: {
        const Type& x = in[0];
        const auto target = attr_ints(o, "shape");
        std::string want;
        for (std::size_t i = 0; i < target.size(); ++i) want += (i ? ", " : "") + std::to_string(target[i]);
        const std::string to = " to [" + want + "]";
        Shape out(target.size());
        int infer = -1;
        for (std::size_t i = 0; i < target.size(); ++i) {
          const std::int64_t t = target[i];
          if (t == -1) {
            if (infer >= 0) bad("cannot reshape" + to + ": more than one -1");
            infer = static_cast<int>(i);
          } else if (t == 0) {
            if (i >= x.shape.size()) bad("cannot reshape " + ts(x) + to + ": 0 at position " + std::to_string(i) + " has no input dim");
            out[i] = x.shape[i];
          } else if (t > 0) {
            out[i] = Dim::fixed(t);
          } else {
            bad("cannot reshape" + to + ": " + std::to_string(t) + " is not a size, 0 or -1");
          }
        }
        auto [n_in, s_in] = count(x.shape);
        if (infer >= 0) {
          Shape known = out;
          known.erase(known.begin() + infer);
          const auto [n_k, s_k] = count(known);
          std::vector<std::string> rest;
          std::set_difference(s_in.begin(), s_in.end(), s_k.begin(), s_k.end(), std::back_inserter(rest));
          if (rest.size() + s_k.size() != s_in.size() || n_k == 0 || n_in % n_k != 0 ||
              (rest.size() == 1 && n_in != n_k) || rest.size() > 1)
            bad("cannot reshape " + ts(x) + to + ": the -1 cannot be inferred");
          out[infer] = rest.empty() ? Dim::fixed(n_in / n_k) : Dim::symbol(rest[0]);
        }
        if (count(out) != count(x.shape)) bad("cannot reshape " + ts(x) + to + ": the element counts differ");
        return {{x.dtype, out}};
      }
      case OpKind::Einsum: return {einsum(o, in)};
      case OpKind::Scan: {
        const Type &a = in[0], &x = in[1];
        f64(a, "a " + q(I[0])), f64(x, "x " + q(I[1]));
        rank_at_least(a, "a " + q(I[0]), 2), rank_at_least(x, "x " + q(I[1]), 2);
        if (a.shape.size() > x.shape.size() || !std::equal(a.shape.begin(), a.shape.end(), x.shape.begin()))
          bad("a " + ts(a) + " must match the leading dims of x " + ts(x));
        if (in.size() == 3) {
          Shape h = x.shape;
          h.erase(h.begin() + 1);
          f64(in[2], "h0 " + q(I[2]));
          if (!(in[2].shape == h)) bad("h0 " + ts(in[2]) + " must be " + ts(Type{DType::F64, h}) + " (x without axis 1)");
        }
        return {x};
      }
      case OpKind::Delay:
        f64(in[0], "x " + q(I[0])), rank_at_least(in[0], "x " + q(I[0]), 2);
        return {in[0]};
      case OpKind::CausalAttention: {
        const Type& qt = in[0];
        f64(qt, "q " + q(I[0])), rank(qt, "q " + q(I[0]), 3);
        if (!(in[1] == qt)) bad("k " + q(I[1]) + " is " + ts(in[1]) + ", q is " + ts(qt) + ": q, k, v must have one type");
        if (!(in[2] == qt)) bad("v " + q(I[2]) + " is " + ts(in[2]) + ", q is " + ts(qt) + ": q, k, v must have one type");
        const std::int64_t heads = attr_int(o, "heads", 0);
        if (heads < 1) bad("attribute heads must be >= 1");
        if (!qt.shape[2].is_fixed()) bad("q " + ts(qt) + " must have a fixed last dim (split into heads)");
        if (qt.shape[2].size % heads != 0)
          bad("the last dim " + std::to_string(qt.shape[2].size) + " of q " + ts(qt) + " is not divisible by heads " + std::to_string(heads));
        if (o.attrs.count("rope_theta")) {
          if (!(attr_number(o, "rope_theta", 0) > 0)) bad("attribute rope_theta must be > 0");
          if ((qt.shape[2].size / heads) % 2 != 0)
            bad("RoPE (rope_theta) needs an even head dim, got " + std::to_string(qt.shape[2].size / heads));
        }
        return {qt};
      }
      case OpKind::Convert: {
        const std::string to = attr_string(o, "to", "");
        if (to != "analog" && to != "digital") bad("attribute to \"" + to + "\" is not analog (a DAC) or digital (an ADC)");
        if (o.attrs.count("bits") && attr_int(o, "bits", 0) < 1) bad("attribute bits must be >= 1");
        if (o.attrs.count("lo") != o.attrs.count("hi")) bad("attributes lo and hi go together");
        if (o.attrs.count("lo") && !(attr_number(o, "lo", 0) < attr_number(o, "hi", 0))) bad("attribute lo must be below hi");
        f64(in[0], "input " + q(I[0]));
        return {in[0]};
      }
      case OpKind::FixedPoint: return {fixed_point(s, o, in)};
    }
    bad("unknown op kind");
  }

  Type einsum(const Op& o, const std::vector<Type>& in) const {
    std::string spec;
    for (char c : attr_string(o, "spec", ""))
      if (c != ' ') spec += c;
    const auto arrow = spec.find("->");
    if (arrow == std::string::npos) bad("attribute spec \"" + spec + "\" needs an explicit \"->\" and output");
    std::vector<std::string> terms;
    const std::string lhs = spec.substr(0, arrow), rhs = spec.substr(arrow + 2);
    std::size_t start = 0;
    while (true) {
      const auto c = lhs.find(',', start);
      terms.push_back(lhs.substr(start, c == std::string::npos ? std::string::npos : c - start));
      if (c == std::string::npos) break;
      start = c + 1;
    }
    if (terms.size() != in.size())
      bad("spec \"" + spec + "\" has " + std::to_string(terms.size()) + " operands, the op has " + std::to_string(in.size()) + " inputs");
    std::map<char, Dim> dims;
    for (std::size_t i = 0; i < terms.size(); ++i) {
      f64(in[i], "input " + q(o.inputs[i]));
      if (terms[i].size() != in[i].shape.size())
        bad("spec term \"" + terms[i] + "\" has " + std::to_string(terms[i].size()) + " labels, input " + q(o.inputs[i]) + " is " + ts(in[i]));
      for (std::size_t k = 0; k < terms[i].size(); ++k) {
        const char c = terms[i][k];
        if (!std::isalpha(static_cast<unsigned char>(c))) bad("spec \"" + spec + "\": labels are letters, got '" + std::string(1, c) + "'");
        const auto it = dims.find(c);
        if (it == dims.end()) dims[c] = in[i].shape[k];
        else if (!(it->second == in[i].shape[k]))
          bad("label " + std::string(1, c) + " is " + to_string(it->second) + " in one operand and " + to_string(in[i].shape[k]) + " in input " + q(o.inputs[i]) + " " + ts(in[i]));
      }
    }
    Shape out;
    std::set<char> seen;
    for (char c : rhs) {
      if (!dims.count(c)) bad("output label " + std::string(1, c) + " of spec \"" + spec + "\" is not in any operand");
      if (!seen.insert(c).second) bad("output label " + std::string(1, c) + " of spec \"" + spec + "\" repeats");
      out.push_back(dims[c]);
    }
    return {DType::F64, out};
  }

  Type fixed_point(const Scope&, const Op& o, const std::vector<Type>& in) {
    if (!(attr_number(o, "tol", 0) > 0)) bad("attribute tol must be > 0");
    if (attr_int(o, "max_iter", 0) < 1) bad("attribute max_iter must be >= 1");
    const double damping = attr_number(o, "damping", 1.0);
    if (!(damping > 0 && damping <= 1)) bad("attribute damping must be in (0, 1]");
    const std::string rule = attr_string(o, "rule", "relative");
    if (rule != "relative" && rule != "fixed" && rule != "twin" && rule != "released")
      bad("attribute rule \"" + rule + "\" is not one of relative, fixed, twin, released");
    const std::string layout = attr_string(o, "layout", "native");
    if (layout != "native" && layout != "assisted") bad("attribute layout \"" + layout + "\" is not native or assisted");
    const std::string like = attr_string(o, "like", "");
    const auto it = std::find(o.inputs.begin(), o.inputs.end(), like);
    if (it == o.inputs.end()) bad("attribute like \"" + like + "\" must name one of the op's inputs (the iterate has its type)");
    const Type z = in[it - o.inputs.begin()];
    f64(z, "the iterate (like " + q(like) + ")");
    const Region& r = *o.body;
    if (r.args.size() != 1 + o.inputs.size())
      bad("the body has " + std::to_string(r.args.size()) + " args, expected " + std::to_string(1 + o.inputs.size()) +
          " (the iterate, then one per input)");
    if (r.results.size() != 1) bad("the body has " + std::to_string(r.results.size()) + " results, expected 1 (the next iterate)");
    // The body sees the weights and its args, nothing else of the graph.
    Scope body;
    for (const Value& w : g_.weights) body[w.name] = w.type;
    const std::string outer = where_;
    define(body, r.args[0], z, outer + "body arg 0");
    for (std::size_t i = 0; i < o.inputs.size(); ++i) define(body, r.args[i + 1], in[i], outer + "body arg " + std::to_string(i + 1));
    const std::string base = outer.substr(std::string("verify: ").size(), outer.size() - std::string("verify: ").size() - 2) + " body ";
    for (std::size_t i = 0; i < r.ops.size(); ++i) op(body, r.ops[i], base + "op #" + std::to_string(i));
    where_ = outer;
    const std::string& res = r.results[0];
    if (!body.count(res)) bad("the body's result " + q(res) + " is not defined in the body");
    if (!(body.at(res) == z)) bad("the body's result " + q(res) + " is " + ts(body.at(res)) + ", the iterate is " + ts(z));
    return z;
  }

  void op(Scope& s, const Op& o, const std::string& id) {
    const OpInfo& info = op_info(o.kind);
    where_ = "verify: " + id + " " + info.name + (o.name.empty() ? "" : " " + q(o.name)) + ": ";
    const int n = static_cast<int>(o.inputs.size());
    if (n < info.min_inputs || (info.max_inputs >= 0 && n > info.max_inputs)) {
      const std::string want = info.max_inputs == info.min_inputs ? std::to_string(info.min_inputs)
                               : info.max_inputs < 0            ? "at least " + std::to_string(info.min_inputs)
                                                                : std::to_string(info.min_inputs) + " to " + std::to_string(info.max_inputs);
      bad("takes " + want + " inputs, got " + std::to_string(n));
    }
    if (info.outputs >= 0 && static_cast<int>(o.outputs.size()) != info.outputs)
      bad("has " + std::to_string(info.outputs) + " result, got " + std::to_string(o.outputs.size()));
    if (o.outputs.empty()) bad("has no results");
    if (o.kind == OpKind::FixedPoint && !o.body) bad("a FixedPoint op needs a body");
    if (o.kind != OpKind::FixedPoint && o.body) bad("only a FixedPoint op has a body");
    check_attrs(o, info);
    if (o.attrs.count(kPlaceAttr)) {
      const std::string place = attr_string(o, kPlaceAttr, "");
      if (place != "optical" && place != "analog" && place != "digital")
        bad("attribute place \"" + place + "\" is not optical, analog or digital");
      // The optical core only multiplies by a programmed matrix: a weight, not a computed value.
      if (place == "optical" && !optical_capable(g_, o))
        bad("only a Linear without bias or a MatMul by a weight can be placed optical");
    }
    std::vector<Type> in;
    for (const auto& name : o.inputs) in.push_back(use(s, name));
    const std::string here = where_;
    const std::vector<Type> out = infer(s, o, in);
    where_ = here;
    for (std::size_t i = 0; i < o.outputs.size(); ++i) {
      if (o.outputs[i].empty()) bad("result " + std::to_string(i) + " has an empty name");
      define(s, o.outputs[i], out[i], id + " " + info.name);
    }
  }
};

}  // namespace

std::map<std::string, Type> verify(const Graph& g, const WeightStore* weights) { return Verifier(g, weights).run(); }

}  // namespace aoc::ir
