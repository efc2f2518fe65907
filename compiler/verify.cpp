#include "compiler/verify.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>

#include "sim/error.hpp"
#include "sim/json_reader.hpp"

namespace aoc::ir {

namespace {

bool is_symbol(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

}  // namespace

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
    walk(ops, [this](const Op& o, int) {
      all_defs_.insert(o.outputs.begin(), o.outputs.end());
      if (o.body) all_defs_.insert(o.body->args.begin(), o.body->args.end());
    });
  }

  void define(Scope& s, const std::string& name, const Type& t, const std::string& by) {
    std::vector<std::int64_t> fixed;
    for (const Dim& d : t.shape)
      if (d.is_fixed()) fixed.push_back(d.size);
    if (checked_elements(fixed) < 0)
      fail((where_.empty() ? "verify: " : where_) + "value " + q(name) + " " + ts(t) + " has more than 2^50 elements per token");
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

  void check_attrs(const Op& o, const OpDef& def) const {
    for (const AttrSpec& spec : def.attrs)
      if (spec.required && !o.attrs.count(spec.name)) bad("missing attribute " + std::string(spec.name));
    for (const auto& [name, a] : o.attrs) {
      const AttrSpec* spec = attr_spec(o.kind, name);
      if (!spec) bad("unknown attribute " + name);
      const auto k = &spec->kind;
      bool ok = false;
      switch (*k) {
        case AttrKind::Number:
          ok = std::holds_alternative<double>(a) || std::holds_alternative<std::int64_t>(a);
          if (ok && !std::isfinite(attr_number(o, name))) bad("attribute " + name + " is not a finite number");
          break;
        case AttrKind::Int: ok = std::holds_alternative<std::int64_t>(a); break;
        case AttrKind::String: ok = std::holds_alternative<std::string>(a); break;
        case AttrKind::Ints: ok = std::holds_alternative<std::vector<std::int64_t>>(a); break;
      }
      static const char* kinds[] = {"a number", "an integer", "a string", "a list of integers"};
      if (!ok) bad("attribute " + name + " must be " + kinds[static_cast<int>(*k)]);
      if (!spec->choices.empty()) {
        const std::string v = std::get<std::string>(a);
        if (std::find(spec->choices.begin(), spec->choices.end(), v) == spec->choices.end()) {
          bad("attribute " + name + " \"" + v + "\" is not one of " + jsonr::join(spec->choices, ", "));
        }
      }
    }
  }

  // A FixedPoint's body, checked with the iterate's type z and the captures' types.
  Type region(const Op& o, const Type& z, const std::vector<Type>& in) {
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
    const OpDef& def = op_def(o.kind);
    where_ = "verify: " + id + " " + def.name + (o.name.empty() ? "" : " " + q(o.name)) + ": ";
    const int n = static_cast<int>(o.inputs.size());
    if (n < def.min_inputs || (def.max_inputs >= 0 && n > def.max_inputs)) bad("takes " + arity_text(def) + " inputs, got " + std::to_string(n));
    if (def.outputs >= 0 && static_cast<int>(o.outputs.size()) != def.outputs)
      bad("has " + std::to_string(def.outputs) + " result, got " + std::to_string(o.outputs.size()));
    if (o.outputs.empty()) bad("has no results");
    if (def.region && !o.body) bad("a " + std::string(def.name) + " op needs a body");
    if (!def.region && o.body) bad("only a FixedPoint op has a body");
    check_attrs(o, def);
    // The optical core only multiplies by a programmed matrix: a weight, not a computed value.
    if (place(o) == Place::Optical && !optical_capable(g_, o)) bad("only a Linear without bias, a MatMul or a Conv2d without bias by a weight can be placed optical");
    std::vector<Type> in;
    for (const auto& name : o.inputs) in.push_back(use(s, name));
    const std::string here = where_;
    InferCtx ctx{&g_, where_, [this](const Op& fp, const Type& z, const std::vector<Type>& caps) { return region(fp, z, caps); }};
    const std::vector<Type> out = def.infer(ctx, o, in);
    where_ = here;
    if (out.size() != o.outputs.size()) bad("infers " + std::to_string(out.size()) + " results for " + std::to_string(o.outputs.size()) + " names");
    for (std::size_t i = 0; i < o.outputs.size(); ++i) {
      if (o.outputs[i].empty()) bad("result " + std::to_string(i) + " has an empty name");
      define(s, o.outputs[i], out[i], id + " " + def.name);
    }
  }
};

}  // namespace

std::map<std::string, Type> verify(const Graph& g, const WeightStore* weights) { return Verifier(g, weights).run(); }

}  // namespace aoc::ir
