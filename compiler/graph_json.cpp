#include "compiler/graph_json.hpp"

#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "compiler/verify.hpp"
#include "sim/error.hpp"
#include "sim/json_reader.hpp"

namespace aoc::ir {

namespace {

using jsonr::json;
using jsonr::Reader;
using jsonr::elem;
using jsonr::sub;

bool is_symbol(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  return true;
}

struct GraphReader {
  Reader r;

  Dim dim(const json& j, const std::string& field) const {
    if (j.is_string()) {
      const std::string s = j.get<std::string>();
      if (!is_symbol(s)) r.fail(field, "expected a size or a symbol (a name such as \"B\"), got " + jsonr::got(j));
      return Dim::symbol(s);
    }
    if (!j.is_number_integer()) r.fail(field, "expected a size or a symbol (a name such as \"B\"), got " + jsonr::got(j));
    return Dim::fixed(r.integer(j, field, 0, std::numeric_limits<std::int64_t>::max()));
  }

  Shape shape(const json& j, const std::string& field) const {
    if (!j.is_array()) r.fail(field, "expected an array of sizes and symbols, got " + jsonr::got(j));
    Shape s;
    for (std::size_t i = 0; i < j.size(); ++i) s.push_back(dim(j[i], elem(field, i)));
    return s;
  }

  std::vector<std::string> names(const json& j, const std::string& field) const {
    if (!j.is_array()) r.fail(field, "expected an array of value names, got " + jsonr::got(j));
    std::vector<std::string> v;
    for (std::size_t i = 0; i < j.size(); ++i) v.push_back(r.text(j[i], elem(field, i), true));
    return v;
  }

  Value value(const json& j, const std::string& field, bool weight) const {
    r.object(j, field);
    r.only_keys(j, field, weight ? std::vector<std::string>{"name", "shape"} : std::vector<std::string>{"name", "dtype", "shape"});
    Value v;
    v.name = r.text(r.need(j, field, "name"), sub(field, "name"), true);
    v.type.dtype = DType::F64;
    if (!weight)
      if (const json* d = r.find(j, "dtype"))
        v.type.dtype = r.choice(*d, sub(field, "dtype"), {"f64", "i64"}) == "i64" ? DType::I64 : DType::F64;
    v.type.shape = shape(r.need(j, field, "shape"), sub(field, "shape"));
    return v;
  }

  std::vector<Value> values(const json& j, const std::string& field, bool weight) const {
    if (!j.is_array()) r.fail(field, "expected an array of {\"name\", \"shape\"} objects, got " + jsonr::got(j));
    std::vector<Value> v;
    for (std::size_t i = 0; i < j.size(); ++i) v.push_back(value(j[i], elem(field, i), weight));
    return v;
  }

  Attr attr(OpKind k, const std::string& key, const json& j, const std::string& field) const {
    switch (attr_spec(k, key)->kind) {
      case AttrKind::Number: return r.number(j, field);
      case AttrKind::Int: return static_cast<std::int64_t>(r.integer(j, field, std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::max()));
      case AttrKind::String: return r.text(j, field, true);
      case AttrKind::Ints: {
        if (!j.is_array()) r.fail(field, "expected an array of integers, got " + jsonr::got(j));
        std::vector<std::int64_t> v;
        for (std::size_t i = 0; i < j.size(); ++i)
          v.push_back(r.integer(j[i], elem(field, i), std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::max()));
        return v;
      }
    }
    r.fail(field, "unsupported attribute");
  }

  Region region(const json& j, const std::string& field) const {
    r.object(j, field);
    r.only_keys(j, field, {"args", "ops", "results"});
    Region g;
    g.args = names(r.need(j, field, "args"), sub(field, "args"));
    g.ops = ops(r.need(j, field, "ops"), sub(field, "ops"));
    g.results = names(r.need(j, field, "results"), sub(field, "results"));
    return g;
  }

  Op op(const json& j, const std::string& field) const {
    r.object(j, field);
    r.only_keys(j, field, {"op", "name", "in", "out", "attrs", "body"});
    const json& kj = r.need(j, field, "op");
    const std::string kname = r.text(kj, sub(field, "op"), true);
    const auto k = op_kind(kname);
    if (!k) {
      const std::string best = jsonr::closest(kname, op_names(), std::max<std::size_t>(2, kname.size() / 3), true);
      r.fail(sub(field, "op"), "unknown op " + kj.dump() +
                                   (best.empty() ? " (expected one of " + jsonr::join(op_names(), ", ") + ")"
                                                 : " (did you mean " + best + "?)"));
    }
    const OpDef& info = op_def(*k);
    Op o;
    o.kind = *k;
    if (const json* n = r.find(j, "name")) o.name = r.text(*n, sub(field, "name"), false);
    o.inputs = names(r.need(j, field, "in"), sub(field, "in"));
    o.outputs = names(r.need(j, field, "out"), sub(field, "out"));
    if (const json* a = r.find(j, "attrs")) {
      const std::string af = sub(field, "attrs");
      r.object(*a, af);
      std::vector<std::string> allowed;
      for (const AttrSpec& s : info.attrs) allowed.push_back(s.name);
      allowed.push_back(kPlaceAttr);
      r.only_keys(*a, af, allowed);
      for (const auto& [key, v] : a->items()) o.attrs[key] = attr(*k, key, v, sub(af, key));
    }
    for (const AttrSpec& s : info.attrs)
      if (s.required && !o.attrs.count(s.name)) r.fail(sub(sub(field, "attrs"), s.name), "missing required attribute of " + std::string(info.name));
    if (const json* b = r.find(j, "body")) {
      if (*k != OpKind::FixedPoint) r.fail(sub(field, "body"), "only a FixedPoint op has a body");
      o.body = std::make_shared<Region>(region(*b, sub(field, "body")));
    } else if (*k == OpKind::FixedPoint) {
      r.fail(sub(field, "body"), "missing required field (a FixedPoint op needs its body)");
    }
    return o;
  }

  std::vector<Op> ops(const json& j, const std::string& field) const {
    if (!j.is_array()) r.fail(field, "expected an array of ops, got " + jsonr::got(j));
    std::vector<Op> v;
    for (std::size_t i = 0; i < j.size(); ++i) v.push_back(op(j[i], elem(field, i)));
    return v;
  }

  Graph graph(const json& j) const {
    r.object(j, "");
    r.only_keys(j, "", {"format", "version", "name", "inputs", "weights", "ops", "outputs"});
    r.choice(r.need(j, "", "format"), "format", {"aoc-graph"});
    r.integer(r.need(j, "", "version"), "version", 1, 1);
    Graph g;
    if (const json* n = r.find(j, "name")) g.name = r.text(*n, "name", false);
    g.inputs = values(r.need(j, "", "inputs"), "inputs", false);
    if (const json* w = r.find(j, "weights")) g.weights = values(*w, "weights", true);
    g.ops = ops(r.need(j, "", "ops"), "ops");
    g.outputs = names(r.need(j, "", "outputs"), "outputs");
    if (g.outputs.empty()) r.fail("outputs", "a graph needs at least one output");
    return g;
  }
};

// ---------------------------------------------------------------------------------------------
// Writing

json dim_json(const Dim& d) { return d.is_fixed() ? json(d.size) : json(d.sym); }

json shape_json(const Shape& s) {
  json a = json::array();
  for (const Dim& d : s) a.push_back(dim_json(d));
  return a;
}

json names_json(const std::vector<std::string>& v) {
  json a = json::array();
  for (const auto& s : v) a.push_back(s);
  return a;
}

json ops_json(const std::vector<Op>& ops);

json attr_json(const Attr& a) {
  return std::visit([](const auto& v) { return json(v); }, a);
}

json op_json(const Op& o) {
  json j;
  j["op"] = op_def(o.kind).name;
  if (!o.name.empty()) j["name"] = o.name;
  j["in"] = names_json(o.inputs);
  j["out"] = names_json(o.outputs);
  if (!o.attrs.empty()) {
    json a = json::object();
    for (const auto& [k, v] : o.attrs) a[k] = attr_json(v);
    j["attrs"] = a;
  }
  if (o.body) {
    json b;
    b["args"] = names_json(o.body->args);
    b["ops"] = ops_json(o.body->ops);
    b["results"] = names_json(o.body->results);
    j["body"] = b;
  }
  return j;
}

json ops_json(const std::vector<Op>& ops) {
  json a = json::array();
  for (const Op& o : ops) a.push_back(op_json(o));
  return a;
}

}  // namespace

Graph parse_graph(const std::string& text, const std::string& source) {
  return GraphReader{Reader(source)}.graph(jsonr::parse_text<json>(text, source));
}

Graph read_graph(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw Error(path + ": no such file");
  std::ifstream in(path);
  if (std::filesystem::is_directory(path, ec) || !in) throw Error(path + ": cannot read (a directory or not readable)");
  std::ostringstream s;
  s << in.rdbuf();
  return parse_graph(s.str(), path);
}

std::string write_graph(const Graph& g) {
  json j;
  j["format"] = "aoc-graph";
  j["version"] = 1;
  j["name"] = g.name;
  auto values = [](const std::vector<Value>& vs, bool weight) {
    json a = json::array();
    for (const Value& v : vs) {
      json e;
      e["name"] = v.name;
      if (!weight) e["dtype"] = v.type.dtype == DType::I64 ? "i64" : "f64";
      e["shape"] = shape_json(v.type.shape);
      a.push_back(e);
    }
    return a;
  };
  j["inputs"] = values(g.inputs, false);
  j["weights"] = values(g.weights, true);
  j["ops"] = ops_json(g.ops);
  j["outputs"] = names_json(g.outputs);
  return j.dump(2) + "\n";
}

}  // namespace aoc::ir
