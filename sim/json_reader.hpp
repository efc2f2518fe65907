// Reading JSON input files with one-line errors: every check goes through Reader, which knows the
// file name and builds "<file>: <field path>: <what is wrong>"; its typed readers (number, numbers,
// rows3, choice, ...) are the only places that look at JSON types, lengths and ranges. Used by the
// hardware loader and every section parser of a hardware file.
#pragma once
#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/error.hpp"
#include "sim/hardware.hpp"

namespace aoc::jsonr {

// ordered_json keeps the file's key order, so summaries list entries as written.
using json = nlohmann::ordered_json;

inline constexpr double kInf = std::numeric_limits<double>::infinity();

// ---------------------------------------------------------------------------------------------
// Text helpers

// Shortest text that reads back as the same double: "1.7", "0.65", "1e+300".
inline std::string num(double v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

// Four significant digits, for summaries.
inline std::string g4(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

// Messages are one line whatever ends up in them (paths, parser text, keys from the file).
inline std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  return s;
}

inline std::string join(const std::vector<std::string>& v, const std::string& sep) {
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + v[i];
  return s;
}

inline std::string sub(const std::string& field, const std::string& key) {
  return field.empty() ? key : field + "." + key;
}

inline std::string elem(const std::string& field, std::size_t i) {
  return field + "[" + std::to_string(i) + "]";
}

// What a JSON value is, for "expected X, got Y".
inline std::string got(const json& j) {
  switch (j.type()) {
    case json::value_t::null: return "null";
    case json::value_t::object: return "an object";
    case json::value_t::array: return "an array of " + std::to_string(j.size());
    case json::value_t::boolean: return j.get<bool>() ? "true" : "false";
    case json::value_t::string: {
      std::string s = j.dump();
      if (s.size() > 42) s = s.substr(0, 40) + "...\"";
      return "the string " + s;
    }
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
    case json::value_t::number_float: return "the number " + j.dump();
    default: return std::string("a ") + j.type_name();
  }
}

inline std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// The candidate nearest to `name` by edit distance when it is at most `max_d` edits away (the first
// of equals), else ""; `fold_case` compares in lower case. For "did you mean" in errors.
inline std::string closest(std::string_view name, const std::vector<std::string>& candidates, std::size_t max_d, bool fold_case = false) {
  const auto fold = [&](std::string_view v) {
    std::string t(v);
    if (fold_case)
      for (char& c : t) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return t;
  };
  std::string best;
  std::size_t best_d = max_d + 1;
  for (const auto& c : candidates) {
    const std::size_t d = edit_distance(fold(name), fold(c));
    if (d < best_d) best_d = d, best = c;
  }
  return best;
}

// ---------------------------------------------------------------------------------------------
// Ranges of allowed numbers

struct Range {
  double lo = -kInf, hi = kInf;
  bool lo_closed = false, hi_closed = false;

  bool contains(double v) const {
    return (lo_closed ? v >= lo : v > lo) && (hi_closed ? v <= hi : v < hi);
  }
  // "<v> must be > 0", "<v> is out of range [0, 1)"
  std::string complaint(double v) const {
    if (hi == kInf) return num(v) + " must be " + (lo_closed ? ">= " : "> ") + num(lo);
    if (lo == -kInf) return num(v) + " must be " + (hi_closed ? "<= " : "< ") + num(hi);
    return num(v) + " is out of range " + (lo_closed ? "[" : "(") + num(lo) + ", " + num(hi) +
           (hi_closed ? "]" : ")");
  }
};

inline const Range kAny{};
inline const Range kPositive{0, kInf, false, false};     // > 0
inline const Range kNonNegative{0, kInf, true, false};   // >= 0
inline const Range kUnitRatio{0, 1, true, false};        // [0, 1): a fraction of a signal that leaks

// ---------------------------------------------------------------------------------------------
// The typed readers

class Reader {
 public:
  explicit Reader(std::string file) : file_(std::move(file)) {}

  [[noreturn]] void fail(const std::string& field, const std::string& what) const {
    throw Error(one_line(file_ + ": " + (field.empty() ? "top level" : field) + ": " + what));
  }

  void object(const json& j, const std::string& field) const {
    if (!j.is_object()) fail(field, "expected an object, got " + got(j));
  }

  const json* find(const json& obj, const std::string& key) const {
    const auto it = obj.find(key);
    return it == obj.end() ? nullptr : &*it;
  }

  const json& need(const json& obj, const std::string& field, const std::string& key) const {
    const json* j = find(obj, key);
    if (!j) fail(sub(field, key), "missing required field");
    return *j;
  }

  // Every key of obj must be in `allowed`: unknown keys are typos until a format version says
  // otherwise.
  void only_keys(const json& obj, const std::string& field,
                 const std::vector<std::string>& allowed) const {
    for (const auto& [key, value] : obj.items()) {
      if (std::find(allowed.begin(), allowed.end(), key) != allowed.end()) continue;
      const std::string best = closest(key, allowed, std::max<std::size_t>(2, key.size() / 4));
      if (!best.empty()) fail(sub(field, key), "unknown key (did you mean " + best + "?)");
      if (allowed.size() <= 10) fail(sub(field, key), "unknown key (expected one of " + join(allowed, ", ") + ")");
      fail(sub(field, key), "unknown key (see docs/hardware.md for the fields)");
    }
  }

  // Keys that belong to another variant (the other PBS model, the other readout fit).
  void reject(const json& obj, const std::string& field, const std::vector<std::string>& keys,
              const std::string& why) const {
    for (const auto& k : keys)
      if (obj.contains(k)) fail(sub(field, k), why);
  }

  double number(const json& j, const std::string& field, const Range& r = kAny) const {
    if (!j.is_number()) fail(field, "expected a number, got " + got(j));
    const double v = j.get<double>();
    if (!std::isfinite(v)) fail(field, num(v) + " is not a finite number");
    if (!r.contains(v)) fail(field, r.complaint(v));
    return v;
  }

  // Exactly n finite numbers in r.
  std::vector<double> numbers(const json& j, const std::string& field, std::size_t n,
                              const Range& r = kAny) const {
    if (!j.is_array()) fail(field, "expected an array of " + std::to_string(n) + " numbers, got " + got(j));
    if (j.size() != n)
      fail(field, "expected " + std::to_string(n) + " numbers, got " + std::to_string(j.size()));
    std::vector<double> v;
    v.reserve(n);
    for (std::size_t i = 0; i < n; ++i) v.push_back(number(j[i], elem(field, i), r));
    return v;
  }

  // At least one finite number (polynomial coefficients of any degree).
  std::vector<double> some_numbers(const json& j, const std::string& field) const {
    if (!j.is_array() || j.empty()) fail(field, "expected a non-empty array of numbers, got " + got(j));
    return numbers(j, field, j.size());
  }

  // Exactly n rows of three finite numbers [q2, q1, q0].
  std::vector<Quad> rows3(const json& j, const std::string& field, std::size_t n) const {
    const std::string want = std::to_string(n) + " rows of 3 numbers";
    if (!j.is_array()) fail(field, "expected an array of " + want + ", got " + got(j));
    if (j.size() != n) fail(field, "expected " + want + ", got " + std::to_string(j.size()) + " rows");
    std::vector<Quad> rows(n);
    for (std::size_t i = 0; i < n; ++i) {
      const auto v = numbers(j[i], elem(field, i), 3);
      rows[i] = {v[0], v[1], v[2]};
    }
    return rows;
  }

  // [lo, hi] with lo < hi.
  std::array<double, 2> interval(const json& j, const std::string& field, const char* lo,
                                 const char* hi) const {
    const auto v = numbers(j, field, 2);
    if (!(v[0] < v[1]))
      fail(field, std::string("expected [") + lo + ", " + hi + "] with " + lo + " < " + hi + ", got [" +
                      num(v[0]) + ", " + num(v[1]) + "]");
    return {v[0], v[1]};
  }

  std::string text(const json& j, const std::string& field, bool non_empty) const {
    if (!j.is_string()) fail(field, "expected a string, got " + got(j));
    std::string s = j.get<std::string>();
    if (non_empty && s.empty()) fail(field, "must not be empty");
    return s;
  }

  // One of a fixed set of strings.
  std::string choice(const json& j, const std::string& field,
                     const std::vector<std::string>& options) const {
    if (!j.is_string()) fail(field, "expected one of " + join(options, ", ") + ", got " + got(j));
    std::string s = j.get<std::string>();
    if (std::find(options.begin(), options.end(), s) == options.end())
      fail(field, j.dump() + " is not one of " + join(options, ", "));
    return s;
  }

  bool boolean(const json& j, const std::string& field) const {
    if (!j.is_boolean()) fail(field, "expected true or false, got " + got(j));
    return j.get<bool>();
  }

  long long integer(const json& j, const std::string& field, long long lo, long long hi) const {
    if (!j.is_number_integer()) fail(field, "expected an integer, got " + got(j));
    const bool too_big = j.is_number_unsigned() &&
                         j.get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<long long>::max());
    const long long v = too_big ? std::numeric_limits<long long>::max() : j.get<long long>();
    if (too_big || v < lo || v > hi)
      fail(field, j.dump() + " is out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return v;
  }

 private:
  std::string file_;
};

// The limits of a JSON document aoc reads: deeper nesting is refused before it can exhaust the
// stack of a recursive walk (nlohmann's serializer, our readers), a larger text before it is held
// in memory twice.
inline constexpr int kMaxJsonDepth = 256;
inline constexpr std::size_t kMaxJsonBytes = std::size_t{1} << 30;

namespace detail {
// Where the parser is, kept by the parse callback, so that errors found while parsing (duplicate
// keys, numbers too large for a double, too deep) name the field like every other error.
struct Frame {
  bool is_object = false;
  std::string field;
  std::set<std::string> keys;  // objects: seen so far
  std::string key;             // objects: the current key
  std::size_t index = 0;       // arrays: the current element
};

inline std::string child_field(const std::vector<Frame>& stack) {
  if (stack.empty()) return "";
  const Frame& f = stack.back();
  return f.is_object ? sub(f.field, f.key) : elem(f.field, f.index);
}
}  // namespace detail

// One JSON document parsed with every check a file from a user needs, each failure one line naming
// `source` and the field: malformed text (with the parser's line and column), a duplicate key, a
// number beyond the range of a double, nesting deeper than kMaxJsonDepth, a text over
// kMaxJsonBytes. The one way aoc parses JSON it did not write itself.
template <class Json = json>
Json parse_text(const std::string& text, const std::string& source) {
  if (text.size() > kMaxJsonBytes)
    throw Error(source + ": " + std::to_string(text.size()) + " bytes of JSON, more than the " + std::to_string(kMaxJsonBytes) + " aoc reads");
  const Reader r(source);
  std::vector<detail::Frame> stack;
  const typename Json::parser_callback_t track = [&](int depth, typename Json::parse_event_t ev, Json& parsed) {
    using E = typename Json::parse_event_t;
    switch (ev) {
      case E::object_start:
      case E::array_start: {
        if (depth >= kMaxJsonDepth) {
          std::string at = detail::child_field(stack);
          if (at.size() > 60) at = at.substr(0, 60) + "...";
          r.fail(at, "nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
        }
        detail::Frame f;
        f.is_object = ev == E::object_start;
        f.field = detail::child_field(stack);
        if (!stack.empty() && !stack.back().is_object) ++stack.back().index;
        stack.push_back(std::move(f));
        break;
      }
      case E::object_end:
      case E::array_end: stack.pop_back(); break;
      case E::key: {
        detail::Frame& f = stack.back();
        f.key = parsed.template get<std::string>();
        if (!f.keys.insert(f.key).second) r.fail(sub(f.field, f.key), "duplicate key");
        break;
      }
      case E::value:
        if (!stack.empty() && !stack.back().is_object) ++stack.back().index;
        break;
    }
    return true;
  };
  // a binary file given where JSON is expected: say what it is, not which byte the parser met
  if (text.rfind("\x89HDF\r\n", 0) == 0) throw Error(source + ": this is an HDF5 file, not JSON");
  if (text.find('\0') != std::string::npos) throw Error(source + ": a binary file, not JSON");
  try {
    return Json::parse(text, track);
  } catch (const typename Json::parse_error& e) {
    // "[json.exception.parse_error.101] parse error at line 2, column 1: syntax error ..."
    std::string s = e.what();
    if (const auto p = s.find("] "); s.rfind("[json.exception", 0) == 0 && p != std::string::npos) s.erase(0, p + 2);
    const std::string at = "parse error at ";
    if (s.rfind(at, 0) == 0) {
      s.erase(0, at.size());
      const auto colon = s.find(": ");
      if (colon != std::string::npos) throw Error(one_line(source + ": " + s.substr(0, colon) + ": malformed JSON: " + s.substr(colon + 2)));
    }
    throw Error(one_line(source + ": malformed JSON: " + s));
  } catch (const typename Json::out_of_range& e) {
    // "number overflow parsing '1e999'": a literal beyond the range of a double.
    std::string s = e.what();
    const auto q1 = s.find('\''), q2 = s.rfind('\'');
    if (q1 != std::string::npos && q2 > q1)
      r.fail(detail::child_field(stack), s.substr(q1 + 1, q2 - q1 - 1) + " is not a finite number (too large for a double)");
    throw Error(one_line(source + ": malformed JSON: " + s));
  } catch (const typename Json::exception& e) {
    throw Error(one_line(source + ": malformed JSON: " + e.what()));
  }
}

// A JSON file parsed whole (nlohmann::json or ordered_json) by parse_text; a file that cannot be
// opened is one line naming it.
template <class Json = json>
Json parse_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(path + ": cannot open the file");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_text<Json>(ss.str(), path);
}

}  // namespace aoc::jsonr
