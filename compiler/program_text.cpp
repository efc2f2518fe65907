// The printed form of a program (MLIR-style) and its parser: print_program(parse_program(t)) == t
// for every program the printer writes whose tiles are all shown, so that a pass can be tested
// alone on a hand-written input (tests/test_program_text.cpp, docs/program.md "The printed form").
#include <algorithm>
#include <charconv>
#include <sstream>

#include "compiler/op_def.hpp"
#include "compiler/program.hpp"
#include "compiler/verify.hpp"
#include "sim/error.hpp"
#include "sim/json_reader.hpp"

namespace aoc::ir {

namespace {

std::string attr_text(const Attr& a) {
  if (const auto* d = std::get_if<double>(&a)) return jsonr::num(*d);
  if (const auto* i = std::get_if<std::int64_t>(&a)) return std::to_string(*i);
  if (const auto* s = std::get_if<std::string>(&a)) return "\"" + *s + "\"";
  const auto& v = std::get<std::vector<std::int64_t>>(a);
  std::string t = "[";
  for (std::size_t i = 0; i < v.size(); ++i) t += (i ? ", " : "") + std::to_string(v[i]);
  return t + "]";
}

void print_ops(std::ostringstream& s, const Graph& g, const std::vector<Op>& ops, const std::map<std::string, Type>& types,
               const std::string& indent) {
  for (const Op& o : ops) {
    s << indent;
    for (std::size_t i = 0; i < o.outputs.size(); ++i) s << (i ? ", %" : "%") << o.outputs[i];
    s << " = " << op_def(o.kind).name << "(";
    for (std::size_t i = 0; i < o.inputs.size(); ++i) s << (i ? ", " : "") << (is_weight(g, o.inputs[i]) ? "@" : "%") << o.inputs[i];
    s << ")";
    s << " {name = \"" << op_label(o) << "\"";
    for (const auto& [k, v] : o.attrs) s << ", " << k << " = " << attr_text(v);
    s << "} : ";
    for (std::size_t i = 0; i < o.outputs.size(); ++i) {
      const auto t = types.find(o.outputs[i]);
      s << (i ? ", " : "") << (t == types.end() ? "?" : to_string(t->second));
    }
    if (o.body) {
      s << " {\n" << indent << "  ^(";
      for (std::size_t i = 0; i < o.body->args.size(); ++i) s << (i ? ", %" : "%") << o.body->args[i];
      s << "):\n";
      print_ops(s, g, o.body->ops, types, indent + "    ");
      s << indent << "    yield %" << o.body->results[0] << "\n" << indent << "}";
    }
    s << "\n";
  }
}

}  // namespace

std::string print_program(const Program& p, bool all_tiles) {
  std::map<std::string, Type> types;
  try {
    types = verify(p.graph);
  } catch (const Error&) {
    // Print what there is; the types of a broken program are unknown ("?").
  }
  std::ostringstream s;
  s << "program \"" << p.graph.name << "\"";
  if (!p.target.hardware.empty())
    s << " for " << p.target.hardware << " (" << p.target.channels << " channels, " << p.target.modules << " module"
      << (p.target.modules == 1 ? "" : "s") << ")";
  s << "\n";
  for (const Value& v : p.graph.inputs) s << "  input %" << v.name << " : " << to_string(v.type) << "\n";
  for (const Value& v : p.graph.weights) s << "  weight @" << v.name << " : " << to_string(v.type) << "\n";
  print_ops(s, p.graph, p.graph.ops, types, "  ");
  s << "  return";
  for (const auto& o : p.graph.outputs) s << " %" << o;
  s << "\n";
  for (const OpticalPlan& plan : p.optical) {
    s << "plan '" << plan.op << "' @" << plan.weight << " [" << plan.rows << " x " << plan.cols << "] "
      << (plan.loop.empty() ? "top level" : "in loop '" + plan.loop + "'") << ": " << plan.tiles.size() << " tile"
      << (plan.tiles.size() == 1 ? "" : "s") << (plan.slm_bits ? ", SLM " + std::to_string(plan.slm_bits) + " bit" : "")
      << (plan.codes.empty() ? "" : " (codes)") << (plan.sum_range > 0 ? ", partial sums +-" + jsonr::num(plan.sum_range) : "")
      << (plan.drive_range > 0 ? ", drives +-" + jsonr::num(plan.drive_range) : "");
    if (plan.compensated()) {
      CompensationSummary c;
      c.add(plan);
      s << ", compensated (worst residual " << jsonr::num(c.worst) << ", " << c.dark << " dark, " << c.trimmed << " detector gains trimmed)";
    }
    s << "\n";
    const std::size_t shown = all_tiles ? plan.tiles.size() : std::min<std::size_t>(plan.tiles.size(), 4);
    for (std::size_t i = 0; i < shown; ++i) {
      const Tile& t = plan.tiles[i];
      s << "  tile " << i << ": rows " << t.row0 << ".." << t.row0 + t.rows << ", cols " << t.col0 << ".." << t.col0 + t.cols
        << " -> module " << t.module << ", pass " << t.pass << ", core " << t.core_row0 << ", " << t.core_col0;
      if (plan.compensated())
        s << " (residual " << jsonr::num(plan.compensation[i].residual) << ", rms " << jsonr::num(plan.compensation[i].rms_residual) << ", "
          << plan.compensation[i].dark << " dark, trims to 1/" << jsonr::num(1 / *std::min_element(plan.compensation[i].gain.begin(), plan.compensation[i].gain.end())) << ")";
      s << "\n";
    }
    if (plan.tiles.size() > shown) s << "  ... " << plan.tiles.size() - shown << " more\n";
  }
  return s.str();
}


namespace {

// One line at a time; a cursor within the line. Every failure names the source, the line and what
// was expected there.
class TextParser {
 public:
  TextParser(const std::string& text, std::string source) : source_(std::move(source)) {
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);) lines_.push_back(l);
  }

  Program run() {
    Program p;
    next_line();
    expect("program ");
    p.graph.name = quoted();
    if (accept(" for ")) {
      p.target.hardware = until(" (");
      expect(" (");
      p.target.channels = static_cast<int>(integer());
      expect(" channels, ");
      p.target.modules = static_cast<int>(integer());
      expect(p.target.modules == 1 ? " module)" : " modules)");
    }
    end_of_line();
    bool body = false;
    while (!body && next_line()) {
      skip_spaces();
      if (accept("input ")) p.graph.inputs.push_back(value('%'));
      else if (accept("weight ")) p.graph.weights.push_back(value('@'));
      else body = true;
    }
    if (!body) fail("expected the ops and \"return\" before the end of the text");
    p.graph.ops = ops(p.graph, "return");
    while (accept(" ")) p.graph.outputs.push_back(name('%'));
    end_of_line();
    while (next_line()) p.optical.push_back(plan(p.graph));
    return p;
  }

 private:
  std::string source_;
  std::vector<std::string> lines_;
  std::size_t line_ = 0;  // 1-based after next_line
  std::string cur_;
  std::size_t at_ = 0;

  [[noreturn]] void fail(const std::string& what) const {
    throw Error(source_ + ":" + std::to_string(line_) + ":" + std::to_string(at_ + 1) + ": " + what);
  }
  bool next_line() {
    if (line_ >= lines_.size()) return false;
    cur_ = lines_[line_++];
    at_ = 0;
    return true;
  }
  bool accept(const std::string& s) {
    if (cur_.compare(at_, s.size(), s) != 0) return false;
    at_ += s.size();
    return true;
  }
  void expect(const std::string& s) {
    if (!accept(s)) fail("expected \"" + s + "\", found \"" + cur_.substr(at_, 24) + "\"");
  }
  void skip_spaces() {
    while (at_ < cur_.size() && cur_[at_] == ' ') ++at_;
  }
  void end_of_line() {
    if (at_ != cur_.size()) fail("unexpected \"" + cur_.substr(at_, 24) + "\" at the end of the line");
  }
  std::string until(const std::string& stop) {
    const std::size_t e = cur_.find(stop, at_);
    if (e == std::string::npos) fail("expected \"" + stop + "\"");
    std::string s = cur_.substr(at_, e - at_);
    at_ = e;
    return s;
  }
  std::string quoted(char q = '"') {
    if (at_ >= cur_.size() || cur_[at_] != q) fail(std::string("expected a ") + (q == '"' ? "quoted" : "'quoted'") + " name");
    ++at_;
    const std::size_t e = cur_.find(q, at_);
    if (e == std::string::npos) fail("unterminated quote");
    std::string s = cur_.substr(at_, e - at_);
    at_ = e + 1;
    return s;
  }
  // A value name after its sigil: up to a space, comma, parenthesis, brace or colon.
  std::string name(char sigil) {
    if (at_ >= cur_.size() || (cur_[at_] != sigil && !(sigil == '%' && cur_[at_] == '@')))
      fail(std::string("expected a name starting with ") + sigil);
    const std::size_t b = ++at_;
    while (at_ < cur_.size() && std::string(" ,(){}:").find(cur_[at_]) == std::string::npos) ++at_;
    if (at_ == b) fail("empty name");
    return cur_.substr(b, at_ - b);
  }
  std::int64_t integer() {
    std::int64_t v = 0;
    const auto r = std::from_chars(cur_.data() + at_, cur_.data() + cur_.size(), v);
    if (r.ec != std::errc()) fail("expected an integer");
    at_ = static_cast<std::size_t>(r.ptr - cur_.data());
    return v;
  }
  double number() {
    double v = 0;
    const auto r = std::from_chars(cur_.data() + at_, cur_.data() + cur_.size(), v);
    if (r.ec != std::errc()) fail("expected a number");
    at_ = static_cast<std::size_t>(r.ptr - cur_.data());
    return v;
  }
  Type type() {
    Type t;
    if (accept("i64[")) t.dtype = DType::I64;
    else expect("f64[");
    while (!accept("]")) {
      if (!t.shape.empty()) expect(", ");
      if (at_ < cur_.size() && (std::isdigit(static_cast<unsigned char>(cur_[at_])))) t.shape.push_back(Dim::fixed(integer()));
      else {
        const std::size_t b = at_;
        while (at_ < cur_.size() && (std::isalnum(static_cast<unsigned char>(cur_[at_])) || cur_[at_] == '_')) ++at_;
        if (at_ == b) fail("expected a size or a symbol");
        t.shape.push_back(Dim::symbol(cur_.substr(b, at_ - b)));
      }
    }
    return t;
  }
  Value value(char sigil) {
    Value v;
    v.name = name(sigil);
    expect(" : ");
    v.type = type();
    end_of_line();
    return v;
  }
  Attr attr(const AttrSpec& spec) {
    switch (spec.kind) {
      case AttrKind::Number: return number();
      case AttrKind::Int: return integer();
      case AttrKind::String: return quoted();
      case AttrKind::Ints: {
        std::vector<std::int64_t> v;
        expect("[");
        while (!accept("]")) {
          if (!v.empty()) expect(", ");
          v.push_back(integer());
        }
        return v;
      }
    }
    fail("unknown attribute kind");
  }

  // The ops of a region, up to the line that starts with `end` ("return" or "yield"); the cursor is
  // left after it.
  std::vector<Op> ops(const Graph& g, const std::string& end) {
    std::vector<Op> out;
    while (true) {
      at_ = 0;
      skip_spaces();
      if (accept(end)) return out;
      out.push_back(op(g));
      if (!next_line()) fail("expected \"" + end + "\" before the end of the text");
    }
  }

  Op op(const Graph& g) {
    Op o;
    do o.outputs.push_back(name('%'));
    while (accept(", "));
    expect(" = ");
    const std::size_t b = at_;
    while (at_ < cur_.size() && std::isalnum(static_cast<unsigned char>(cur_[at_]))) ++at_;
    const std::string kind = cur_.substr(b, at_ - b);
    const auto k = op_kind(kind);
    if (!k) {
      at_ = b;
      fail("unknown op \"" + kind + "\"");
    }
    o.kind = *k;
    expect("(");
    while (!accept(")")) {
      if (!o.inputs.empty()) expect(", ");
      o.inputs.push_back(name('%'));
    }
    expect(" {name = ");
    o.name = quoted();
    while (accept(", ")) {
      const std::size_t key_at = at_;
      const std::string key = until(" = ");
      const AttrSpec* spec = attr_spec(o.kind, key);
      if (!spec) {
        at_ = key_at;
        fail(std::string(op_def(o.kind).name) + " has no attribute '" + key + "'");
      }
      expect(" = ");
      o.attrs[key] = attr(*spec);
    }
    expect("} : ");
    for (std::size_t i = 0; i < o.outputs.size(); ++i) {  // the inferred types: checked by the verifier, not read
      if (i) expect(", ");
      if (!accept("?")) type();
    }
    if (accept(" {")) {
      end_of_line();
      if (!next_line()) fail("expected the body's arguments");
      skip_spaces();
      expect("^(");
      auto r = std::make_shared<Region>();
      while (!accept(")")) {
        if (!r->args.empty()) expect(", ");
        r->args.push_back(name('%'));
      }
      expect(":");
      end_of_line();
      if (!next_line()) fail("expected the body's ops");
      r->ops = ops(g, "yield ");
      r->results.push_back(name('%'));
      end_of_line();
      if (!next_line()) fail("expected \"}\" closing the body");
      skip_spaces();
      expect("}");
      o.body = r;
    }
    end_of_line();
    return o;
  }

  OpticalPlan plan(const Graph& g) {
    OpticalPlan p;
    expect("plan ");
    p.op = quoted('\'');
    expect(" ");
    p.weight = name('@');
    expect(" [");
    p.rows = integer();
    expect(" x ");
    p.cols = integer();
    expect("] ");
    if (accept("in loop ")) p.loop = quoted('\'');
    else expect("top level");
    expect(": ");
    const std::int64_t n = integer();
    expect(n == 1 ? " tile" : " tiles");
    if (accept(", SLM ")) {
      p.slm_bits = static_cast<int>(integer());
      expect(" bit");
    }
    if (accept(" (codes)")) fail("plan '" + p.op + "': its SLM codes are not in the printed form (parse a program printed before quantize, or read its HDF5)");
    if (accept(", partial sums +-")) p.sum_range = number();
    if (accept(", drives +-")) p.drive_range = number();
    if (accept(", compensated"))
      fail("plan '" + p.op + "': its compensated SLM values are not in the printed form (parse a program printed before compensate, or read its HDF5)");
    end_of_line();
    bool found = false;
    walk(g.ops, [&](const Op& o, int) { found = found || (o.name == p.op && o.kind == OpKind::MatMul); });
    p.aoc_layout = found;
    for (std::int64_t i = 0; i < n; ++i) {
      if (!next_line()) fail("plan '" + p.op + "': expected " + std::to_string(n) + " tiles, found " + std::to_string(i));
      skip_spaces();
      if (accept("... ")) fail("plan '" + p.op + "': its tiles are elided (\"...\"): only a plan with every tile shown parses");
      expect("tile " + std::to_string(i) + ": rows ");
      Tile t;
      t.row0 = integer();
      expect("..");
      t.rows = integer() - t.row0;
      expect(", cols ");
      t.col0 = integer();
      expect("..");
      t.cols = integer() - t.col0;
      expect(" -> module ");
      t.module = static_cast<int>(integer());
      expect(", pass ");
      t.pass = static_cast<int>(integer());
      expect(", core ");
      t.core_row0 = integer();
      expect(", ");
      t.core_col0 = integer();
      end_of_line();
      p.tiles.push_back(t);
    }
    return p;
  }
};

}  // namespace

Program parse_program(const std::string& text, const std::string& source) { return TextParser(text, source).run(); }

}  // namespace aoc::ir
