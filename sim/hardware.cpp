// Loading, validating and describing hardware files (docs/hardware.md).
//
// Every check goes through Reader, which knows the file name and builds the one-line message
// "<file>: <field path>: <what is wrong>"; the typed readers (number, numbers, rows3, ...) are the
// only places that look at JSON types, lengths and ranges.
#include "sim/hardware.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string_view>

#include <nlohmann/json.hpp>

#include "sim/error.hpp"
#include "sim/hardware_sections.hpp"
#include "sim/json_reader.hpp"

namespace aoc {
namespace {

using namespace jsonr;
namespace fs = std::filesystem;

constexpr const char* kFormat = "aoc-hardware";
constexpr int kVersion = 1;
constexpr long long kMaxChannels = 4096;


// ---------------------------------------------------------------------------------------------
// Reading the file

std::string read_text(const std::string& path) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (st.type() == fs::file_type::not_found)
    throw Error(one_line(path + ": cannot read hardware file: no such file"));
  if (st.type() == fs::file_type::directory)
    throw Error(one_line(path + ": cannot read hardware file: it is a directory"));
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw Error(one_line(path + ": cannot read hardware file: " +
                         (errno ? std::strerror(errno) : "cannot open")));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw Error(one_line(path + ": cannot read hardware file: read error"));
  return ss.str();
}


// ---------------------------------------------------------------------------------------------
// Sections

const std::vector<std::string> kPerChannelKeys = {"pbs_neg_to_pos", "pbs_pos_to_neg"};
const std::vector<std::string> kQuadraticLeakKeys = {"pbs_leak_coeffs_pos", "pbs_leak_coeffs_neg",
                                                     "pbs_leak_norm_pos", "pbs_leak_norm_neg"};
const std::vector<std::string> kClosedLoopKeys = {"closed_loop_dc_offset", "closed_loop_linear_offset",
                                                  "closed_loop_scaling", "closed_loop_solution_to_adc_ratio"};
const std::vector<std::string> kCalibrationKeys = {
    "tanh_coeffs", "led_poly_pos", "led_poly_neg", "fan_in_pos", "fan_in_neg",
    "slm_distortion_pos", "slm_distortion_neg", "output_gain_pos", "output_gain_neg",
    "pd_crosstalk_to_earlier_pos", "pd_crosstalk_to_later_pos", "pd_crosstalk_to_earlier_neg",
    "pd_crosstalk_to_later_neg", "input_clip", "pbs_model", "pbs_neg_to_pos", "pbs_pos_to_neg",
    "pbs_leak_coeffs_pos", "pbs_leak_coeffs_neg", "pbs_leak_norm_pos", "pbs_leak_norm_neg",
    "crosstalk_order", "closed_loop_dc_offset", "closed_loop_linear_offset", "closed_loop_scaling",
    "closed_loop_solution_to_adc_ratio", "readout_saturation"};

const std::vector<std::string> kSat48Keys = {
    "negative_saturation", "piece0_start_stop", "piece0_constant", "piece0_cosine_coeff",
    "piece1_start_stop", "piece1_polynomials", "piece3_start_stop", "piece3_polynomials",
    "piece4_start_stop", "piece4_first_constant", "piece4_second_constant", "positive_saturation"};
const std::vector<std::string> kSat16Keys = {
    "negative_saturation", "piece0_start_stop", "piece0_constant", "piece0_cosine_coeff",
    "piece1_start_stop", "piece1_multiplier", "piece1_sine_coeff", "positive_saturation"};

std::vector<std::string> minus(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  std::vector<std::string> out;
  for (const auto& k : a)
    if (std::find(b.begin(), b.end(), k) == b.end()) out.push_back(k);
  return out;
}

// The calibration section: entries {"value": ..., "source": "..."}.
class Calibration {
 public:
  Calibration(const Reader& r, const json& cal, Hardware& hw) : r_(r), cal_(cal), hw_(hw) {}

  static std::string field(const std::string& key) { return "calibration." + key + ".value"; }
  bool has(const std::string& key) const { return cal_.contains(key); }

  // The value of entry `key`, after checking the entry's shape and recording its source.
  const json& value(const std::string& key) const {
    const std::string f = "calibration." + key;
    const json& e = r_.need(cal_, "calibration", key);
    r_.object(e, f);
    r_.only_keys(e, f, {"value", "source"});
    hw_.sources[f] = r_.text(r_.need(e, f, "source"), f + ".source", true);
    return r_.need(e, f, "value");
  }

  std::vector<double> numbers(const std::string& key, const Range& range = kAny) const {
    return r_.numbers(value(key), field(key), n(), range);
  }
  std::vector<Quad> rows3(const std::string& key, std::size_t rows) const {
    return r_.rows3(value(key), field(key), rows);
  }
  double number(const std::string& key, const Range& range = kAny) const {
    return r_.number(value(key), field(key), range);
  }
  template <std::size_t N>
  std::array<double, N> fixed(const std::string& key) const {
    const auto v = r_.numbers(value(key), field(key), N);
    std::array<double, N> a{};
    std::copy(v.begin(), v.end(), a.begin());
    return a;
  }
  // One number for every channel, or one per channel.
  std::vector<double> scalar_or_numbers(const std::string& key, const Range& range) const {
    const json& v = value(key);
    if (v.is_number()) return std::vector<double>(n(), r_.number(v, field(key), range));
    if (!v.is_array())
      r_.fail(field(key), "expected a number or an array of " + std::to_string(n()) + " numbers, got " + got(v));
    return r_.numbers(v, field(key), n(), range);
  }
  std::string choice(const std::string& key, const std::vector<std::string>& options) const {
    return r_.choice(value(key), field(key), options);
  }

  std::size_t n() const { return static_cast<std::size_t>(hw_.channels); }
  const Reader& reader() const { return r_; }
  const json& raw() const { return cal_; }
  Hardware& hw() const { return hw_; }

 private:
  const Reader& r_;
  const json& cal_;
  Hardware& hw_;
};

void read_tanh(const Calibration& c) {
  const std::string key = "tanh_coeffs", f = Calibration::field(key);
  const json& v = c.value(key);
  if (!v.is_array() || (v.size() != 5 && v.size() != 6))
    c.reader().fail(f, "expected 5 or 6 numbers (a, b, c, d, f[, g]), got " +
                           (v.is_array() ? std::to_string(v.size()) : got(v)));
  const auto t = c.reader().numbers(v, f, v.size());
  c.reader().number(v[2], elem(f, 2), kPositive);  // the exponent c
  auto& out = c.hw().tanh;
  out.fill(0.0);
  std::copy(t.begin(), t.end(), out.begin());
}

void read_pbs(const Calibration& c) {
  Hardware& hw = c.hw();
  const std::string model = c.choice("pbs_model", {"per_channel", "quadratic_leak"});
  if (model == "per_channel") {
    c.reader().reject(c.raw(), "calibration", kQuadraticLeakKeys,
                      "not a field of pbs_model per_channel (it belongs to quadratic_leak)");
    hw.pbs_model = PbsModel::PerChannel;
    hw.pbs_neg_to_pos = c.numbers("pbs_neg_to_pos", kUnitRatio);
    hw.pbs_pos_to_neg = c.numbers("pbs_pos_to_neg", kUnitRatio);
  } else {
    c.reader().reject(c.raw(), "calibration", kPerChannelKeys,
                      "not a field of pbs_model quadratic_leak (it belongs to per_channel)");
    hw.pbs_model = PbsModel::QuadraticLeak;
    hw.pbs_leak_pos = c.rows3("pbs_leak_coeffs_pos", c.n() - 1);
    hw.pbs_leak_neg = c.rows3("pbs_leak_coeffs_neg", c.n() - 1);
    hw.pbs_leak_norm_pos = c.number("pbs_leak_norm_pos", kPositive);
    hw.pbs_leak_norm_neg = c.number("pbs_leak_norm_neg", kPositive);
  }
}

void read_closed_loop(const Calibration& c) {
  std::vector<std::string> given, missing;
  for (const auto& k : kClosedLoopKeys) (c.has(k) ? given : missing).push_back(k);
  if (given.empty()) return;
  if (!missing.empty())
    c.reader().fail("calibration." + missing.front(),
                    "missing required field (the closed-loop correction needs all four closed_loop_* "
                    "fields or none, and " + given.front() + " is given)");
  ClosedLoop cl;
  cl.dc_offset = c.numbers("closed_loop_dc_offset");
  cl.linear_offset = c.numbers("closed_loop_linear_offset");
  cl.scaling = c.numbers("closed_loop_scaling", kPositive);
  cl.solution_to_adc_ratio = c.number("closed_loop_solution_to_adc_ratio", kPositive);
  c.hw().closed_loop = std::move(cl);
}

void read_readout(const Reader& r, const json& cal, Hardware& hw) {
  const std::string F = "calibration.readout_saturation";
  const json& j = r.need(cal, "calibration", "readout_saturation");
  r.object(j, F);
  const std::string model = r.choice(r.need(j, F, "model"), F + ".model", {"piecewise48", "piecewise16"});
  const bool is48 = model == "piecewise48";
  const auto& mine = is48 ? kSat48Keys : kSat16Keys;
  r.reject(j, F, minus(is48 ? kSat16Keys : kSat48Keys, mine),
           "not a field of model " + model + " (it belongs to " + (is48 ? "piecewise16" : "piecewise48") + ")");
  std::vector<std::string> allowed = {"model", "source"};
  allowed.insert(allowed.end(), mine.begin(), mine.end());
  r.only_keys(j, F, allowed);
  hw.sources[F] = r.text(r.need(j, F, "source"), F + ".source", true);

  ReadoutSaturation& s = hw.readout;
  auto number = [&](const char* k) { return r.number(r.need(j, F, k), F + "." + k); };
  auto piece = [&](const char* k) { return r.interval(r.need(j, F, k), F + "." + k, "start", "stop"); };
  s.model = is48 ? ReadoutSaturation::Model::Piecewise48 : ReadoutSaturation::Model::Piecewise16;
  s.negative_saturation = number("negative_saturation");
  s.positive_saturation = number("positive_saturation");
  if (!(s.negative_saturation < s.positive_saturation))
    r.fail(F + ".positive_saturation", num(s.positive_saturation) + " must be greater than negative_saturation " +
                                           num(s.negative_saturation));
  s.piece0 = piece("piece0_start_stop");
  s.piece0_constant = number("piece0_constant");
  s.piece0_cosine_coeff = number("piece0_cosine_coeff");
  s.piece1 = piece("piece1_start_stop");
  std::vector<std::pair<std::string, std::array<double, 2>>> order = {{"piece0_start_stop", s.piece0},
                                                                      {"piece1_start_stop", s.piece1}};
  if (is48) {
    s.piece1_poly = r.some_numbers(r.need(j, F, "piece1_polynomials"), F + ".piece1_polynomials");
    s.piece3 = piece("piece3_start_stop");
    s.piece3_poly = r.some_numbers(r.need(j, F, "piece3_polynomials"), F + ".piece3_polynomials");
    s.piece4 = piece("piece4_start_stop");
    s.piece4_first_constant = number("piece4_first_constant");
    s.piece4_second_constant = number("piece4_second_constant");
    order.push_back({"piece3_start_stop", s.piece3});
    order.push_back({"piece4_start_stop", s.piece4});
  } else {
    s.piece1_multiplier = number("piece1_multiplier");
    s.piece1_sine_coeff = number("piece1_sine_coeff");
  }
  for (std::size_t i = 1; i < order.size(); ++i) {
    const auto& [prev, p] = order[i - 1];
    const auto& [name, q] = order[i];
    if (q[0] < p[1])
      r.fail(F + "." + name, "starts at " + num(q[0]) + ", before " + prev + " stops at " + num(p[1]) +
                                 " (pieces must be in increasing order)");
  }
}

void read_calibration(const Reader& r, const json& cal, Hardware& hw) {
  r.object(cal, "calibration");
  r.only_keys(cal, "calibration", kCalibrationKeys);
  const Calibration c(r, cal, hw);
  read_tanh(c);
  hw.led_pos = c.fixed<4>("led_poly_pos");
  hw.led_neg = c.fixed<4>("led_poly_neg");
  hw.fan_in_pos = c.numbers("fan_in_pos", kNonNegative);
  hw.fan_in_neg = c.numbers("fan_in_neg", kNonNegative);
  hw.slm_pos = c.rows3("slm_distortion_pos", c.n());
  hw.slm_neg = c.rows3("slm_distortion_neg", c.n());
  hw.gain_pos = c.scalar_or_numbers("output_gain_pos", kPositive);
  hw.gain_neg = c.scalar_or_numbers("output_gain_neg", kPositive);
  hw.pd_earlier_pos = c.numbers("pd_crosstalk_to_earlier_pos", kUnitRatio);
  hw.pd_later_pos = c.numbers("pd_crosstalk_to_later_pos", kUnitRatio);
  hw.pd_earlier_neg = c.numbers("pd_crosstalk_to_earlier_neg", kUnitRatio);
  hw.pd_later_neg = c.numbers("pd_crosstalk_to_later_neg", kUnitRatio);
  const auto clip = r.interval(c.value("input_clip"), Calibration::field("input_clip"), "lo", "hi");
  hw.clip_lo = clip[0];
  hw.clip_hi = clip[1];
  read_pbs(c);
  hw.crosstalk_order = c.choice("crosstalk_order", {"pbs_then_pd", "pd_then_pbs"}) == "pbs_then_pd"
                           ? CrosstalkOrder::PbsThenPd
                           : CrosstalkOrder::PdThenPbs;
  read_closed_loop(c);
  read_readout(r, cal, hw);
}

void read_defaults(const Reader& r, const json& j, Hardware& hw) {
  const std::string F = "defaults";
  r.object(j, F);
  r.only_keys(j, F, {"source", "scale", "alpha", "normalise_matrix", "switches"});
  hw.sources[F] = r.text(r.need(j, F, "source"), F + ".source", true);
  TwinDefaults& d = hw.defaults;
  d.scale = r.number(r.need(j, F, "scale"), F + ".scale", kPositive);
  d.alpha = r.number(r.need(j, F, "alpha"), F + ".alpha");
  d.normalise_matrix = r.boolean(r.need(j, F, "normalise_matrix"), F + ".normalise_matrix");

  const std::string S = F + ".switches";
  const json& s = r.need(j, F, "switches");
  r.object(s, S);
  const std::vector<std::pair<std::string, bool*>> fields = {
      {"weight_distortion", &d.switches.weight_distortion},
      {"input_efficiencies", &d.switches.input_efficiencies},
      {"output_efficiencies", &d.switches.output_efficiencies},
      {"pd_crosstalk", &d.switches.pd_crosstalk},
      {"pbs_crosstalk", &d.switches.pbs_crosstalk},
      {"slm_darkness", &d.switches.slm_darkness}};
  std::vector<std::string> names;
  for (const auto& f : fields) names.push_back(f.first);
  r.only_keys(s, S, names);
  for (const auto& [name, out] : fields) *out = r.boolean(r.need(s, S, name), S + "." + name);
}

void read_provenance(const Reader& r, const json& j, Hardware& hw) {
  r.object(j, "provenance");
  for (const auto& [key, v] : j.items()) {
    const std::string f = sub("provenance", key);
    if (v.is_string()) {
      hw.provenance.emplace_back(key, v.get<std::string>());
    } else if (v.is_number()) {
      r.number(v, f);
      hw.provenance.emplace_back(key, v.dump());
    } else {
      r.fail(f, "expected a string or a number, got " + got(v));
    }
  }
}

// Values the twin loads but never uses: shape only, the value can be anything.
void read_unused(const Reader& r, const json& j, Hardware& hw) {
  r.object(j, "unused");
  for (const auto& [key, e] : j.items()) {
    const std::string f = sub("unused", key);
    r.object(e, f);
    r.only_keys(e, f, {"value", "source"});
    r.need(e, f, "value");
    hw.sources[f] = r.text(r.need(e, f, "source"), f + ".source", true);
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------

namespace {

void apply_override(const Reader& r, json& doc, const std::string& o) {
  const auto eq = o.find('=');
  if (eq == std::string::npos || eq == 0) r.fail("override " + o, "expected section.field=value");
  const std::string path = o.substr(0, eq), text = o.substr(eq + 1);
  json value;
  try {
    value = jsonr::parse_text<json>(text, "--set " + o);
  } catch (const Error&) {
    value = text;  // a bare word is a string
  }
  json* node = &doc;
  std::string at;
  for (std::size_t start = 0; start <= path.size();) {
    const auto dot = path.find('.', start);
    const std::string key = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    at = sub(at, key);
    if (!node->is_object() || !node->contains(key)) r.fail(at, "no such field to override (from " + o + ")");
    node = &(*node)[key];
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  if (node->is_object() && (node->contains("value") || node->contains("derived"))) {
    node->erase("derived");  // a value given replaces a derived one
    (*node)["value"] = value;
    if (node->contains("source") && (*node)["source"].is_string()) (*node)["source"] = "override " + o + " (was: " + (*node)["source"].get<std::string>() + ")";
  } else {
    *node = value;
  }
}

}  // namespace

namespace {

// A parsed file (overrides applied) read into a Hardware, every field validated.
Hardware read_document(const Reader& r, const std::string& path, const json& doc) {
  // Format and version first: a file of another kind gets one clear error, not a cascade.
  const json& format = r.need(doc, "", "format");
  if (!format.is_string() || format.get<std::string>() != kFormat)
    r.fail("format", std::string("expected \"") + kFormat + "\", got " + got(format));
  const json& version = r.need(doc, "", "version");
  if (!version.is_number_integer()) r.fail("version", "expected an integer, got " + got(version));
  if (version.get<long long>() != kVersion)
    r.fail("version", "unsupported version " + version.dump() + " (this build reads version " +
                          std::to_string(kVersion) + ")");
  r.only_keys(doc, "", {"format", "version", "name", "description", "provenance", "channels",
                        "calibration", "unused", "defaults", "noise", "converters", "timing", "energy", "architecture", "area"});

  Hardware hw;
  hw.path = path;
  hw.name = r.text(r.need(doc, "", "name"), "name", true);
  if (const json* d = r.find(doc, "description")) hw.description = r.text(*d, "description", false);
  if (const json* p = r.find(doc, "provenance")) read_provenance(r, *p, hw);
  hw.channels = static_cast<int>(r.integer(r.need(doc, "", "channels"), "channels", 1, kMaxChannels));
  read_calibration(r, r.need(doc, "", "calibration"), hw);
  read_defaults(r, r.need(doc, "", "defaults"), hw);
  if (const json* u = r.find(doc, "unused")) read_unused(r, *u, hw);
  if (const json* j = r.find(doc, "noise")) hw.noise = read_noise(r, *j, hw);
  if (const json* j = r.find(doc, "converters")) hw.converters = read_converters(r, *j, hw);
  if (const json* j = r.find(doc, "timing")) hw.timing = read_timing(r, *j, hw);
  if (const json* j = r.find(doc, "energy")) hw.energy = read_energy(r, *j, hw);
  if (const json* j = r.find(doc, "architecture")) hw.architecture = read_architecture(r, *j, hw);
  if (const json* j = r.find(doc, "area")) hw.area = read_area(r, *j, hw);
  derive_operating_point(r, hw);
  return hw;
}

// The sections an override can change without the calibration being read again.
bool physical_section(const std::string& s) {
  return s == "noise" || s == "converters" || s == "timing" || s == "energy" || s == "architecture" || s == "area";
}

}  // namespace

namespace {

// The file parsed, its overrides applied, not yet validated.
json overridden_document(const Reader& r, const std::string& path, const std::vector<std::string>& overrides) {
  json doc = jsonr::parse_text<json>(read_text(path), path);
  r.object(doc, "");
  for (const auto& o : overrides) apply_override(r, doc, o);
  return doc;
}

}  // namespace

Hardware load_hardware(const std::string& path, const std::vector<std::string>& overrides) {
  const Reader r(path);
  return read_document(r, path, overridden_document(r, path, overrides));
}

json hardware_document(const std::string& path, const std::vector<std::string>& overrides) {
  const Reader r(path);
  json doc = overridden_document(r, path, overrides);
  const Hardware hw = read_document(r, path, doc);  // validated as a load would
  // Resolved: a derived value is written as the value it came to, with its arithmetic as source
  if (hw.noise && hw.noise->photons_derived)
    doc["noise"]["photons_per_sample"] = {{"value", hw.noise->photons_per_sample}, {"unit", "photons"},
                                          {"source", hw.sources.at("noise.photons_per_sample")}};
  return doc;
}

namespace {

// A per-channel calibration entry of a machine of n channels, as one of `to` channels: a vector of n
// numbers becomes `to` copies of its mean; n rows (or n - 1, the quadratic beam-splitter leak) become
// `to` (or `to - 1`) copies of their column means. Anything else is left as it is.
bool widen_entry(json& entry, int n, int to, const std::string& from) {
  if (!entry.is_object() || !entry.contains("value") || !entry["value"].is_array()) return false;
  json& v = entry["value"];
  const auto size = static_cast<int>(v.size());
  if (size == 0) return false;
  const bool rows = v[0].is_array();
  if (!(size == n || (rows && size == n - 1))) return false;
  const int out = size == n ? to : to - 1;
  if (rows) {
    const std::size_t k = v[0].size();
    json mean = json::array();
    for (std::size_t i = 0; i < k; ++i) {
      double sum = 0;
      for (const json& row : v) {
        if (!row.is_array() || row.size() != k || !row[i].is_number()) return false;
        sum += row[i].get<double>();
      }
      mean.push_back(sum / size);
    }
    v = json::array();
    for (int i = 0; i < out; ++i) v.push_back(mean);
  } else {
    double sum = 0;
    for (const json& x : v) {
      if (!x.is_number()) return false;
      sum += x.get<double>();
    }
    v = json::array();
    for (int i = 0; i < out; ++i) v.push_back(sum / size);
  }
  if (entry.contains("source") && entry["source"].is_string())
    entry["source"] = entry["source"].get<std::string>() + " [stand-in: " + from + "'s mean over its " + std::to_string(n) +
                      " channels, repeated]";
  return true;
}

}  // namespace

json resized_hardware(const std::string& path, int channels, const std::string& name, const std::string& command,
                      const std::vector<std::string>& overrides) {
  const Reader r(path);
  json doc = jsonr::parse_text<json>(read_text(path), path);
  r.object(doc, "");
  const Hardware src = read_document(r, path, doc);  // the source machine is valid before it is resized
  if (channels < 2 || channels > kMaxChannels)
    throw Error("--channels: " + std::to_string(channels) + " is outside 2.." + std::to_string(kMaxChannels));
  if (name.empty()) throw Error("NAME: empty (give the machine a name of its own)");
  int widened = 0;
  for (const char* section : {"calibration", "unused"})
    if (doc.contains(section))
      for (auto& [key, entry] : doc[section].items())
        if (widen_entry(entry, src.channels, channels, src.name) && std::string(section) == "calibration") ++widened;
  json out;  // the document's keys in the format's order, the new ones first
  for (auto& [key, value] : doc.items()) {
    if (key == "name") {
      out["name"] = name;
      out["description"] = "A machine of " + std::to_string(channels) + " channels (" + std::to_string(static_cast<long long>(channels) * channels) +
                           " weights per module) made by `aoc hw new` from " + src.name + ". Its calibration is " + src.name +
                           "'s, each per-channel vector replaced by its mean: a stand-in, not a measurement. From " + src.name + ": " +
                           src.description;
      out["provenance"] = {{"generated_by", command},
                           {"from", src.name},
                           {"calibration", std::to_string(widened) + " per-channel entries of " + src.name + " -> " + std::to_string(channels) +
                                               " copies of their mean over its " + std::to_string(src.channels) +
                                               " channels, rows -> copies of their column means, the rest copied: a stand-in"}};
    } else if (key == "description" || key == "provenance") {
      continue;
    } else if (key == "channels") {
      out["channels"] = channels;
    } else {
      out[key] = std::move(value);
    }
  }
  for (const auto& o : overrides) apply_override(r, out, o);
  read_document(r, path, out);  // validated as a load would
  return out;
}

std::vector<std::string> bundled_machines() {
  std::error_code ec;
  std::vector<std::string> names;
  for (fs::directory_iterator it(bundled_path("scenarios/hardware"), ec), end; !ec && it != end; it.increment(ec))
    if (it->path().extension() == ".json") names.push_back(it->path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

HardwareFile::HardwareFile(const std::string& path) : path_(path) {
  const Reader r(path);
  doc_ = jsonr::parse_text<json>(read_text(path), path);
  r.object(doc_, "");
  base_ = read_document(r, path, doc_);
}

Hardware HardwareFile::load(const std::vector<std::string>& overrides) const {
  const Reader r(path_);
  // Each physical section an override touches, alone in a document of its own, overridden.
  std::map<std::string, json> touched;
  for (const auto& o : overrides) {
    const std::string section = o.substr(0, o.find_first_of(".="));
    if (!physical_section(section) || !doc_.contains(section)) {
      json doc = doc_;
      for (const auto& all : overrides) apply_override(r, doc, all);
      return read_document(r, path_, doc);
    }
    json& d = touched[section];
    if (d.is_null()) d = json{{section, doc_[section]}};
    apply_override(r, d, o);
  }
  Hardware hw = base_;
  for (const auto& [section, d] : touched) {
    const json& j = d[section];
    if (section == "noise") hw.noise = read_noise(r, j, hw);
    else if (section == "converters") hw.converters = read_converters(r, j, hw);
    else if (section == "timing") hw.timing = read_timing(r, j, hw);
    else if (section == "energy") hw.energy = read_energy(r, j, hw);
    else if (section == "area") hw.area = read_area(r, j, hw);
    else hw.architecture = read_architecture(r, j, hw);
  }
  derive_operating_point(r, hw);
  return hw;
}

namespace {

// The folder of the file this code was loaded from: the aoc executable, or the Python module (a
// shared object the interpreter loaded), as the dynamic loader names it.
fs::path code_dir() {
  std::error_code ec;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&bundled_path), &info) && info.dli_fname && std::strchr(info.dli_fname, '/')) {
    const fs::path p = fs::canonical(info.dli_fname, ec);
    if (!ec) return p.parent_path();
  }
  const fs::path exe = fs::canonical("/proc/self/exe", ec);
  return ec ? fs::path() : exe.parent_path();
}

// The data `cmake --install` put beside an installed aoc: PREFIX/share/aoc, found from the binary's
// (or the module's) own place, so that an installed tree works wherever it is moved.
fs::path installed_data_dir() {
  std::error_code ec;
  fs::path d = code_dir();
  for (int up = 0; up < 6 && !d.empty(); ++up, d = d.parent_path()) {
    if (fs::is_directory(d / "share" / "aoc" / "scenarios" / "hardware", ec)) return d / "share" / "aoc";
    if (d == d.root_path()) break;
  }
  return {};
}

}  // namespace

std::string bundled_path(const std::string& relative) {
  fs::path dir;
  if (const char* env = std::getenv("AOC_DATA_DIR"); env && *env) {
    dir = env;
  } else {
    static const fs::path installed = installed_data_dir();
    dir = installed;
#ifdef AOC_SOURCE_DIR
    if (dir.empty()) dir = AOC_SOURCE_DIR;  // a binary in its build tree: the source tree it was built from
#endif
  }
  return (dir / relative).string();
}

std::string resolve_hardware_path(const std::string& name_or_path) {
  std::error_code ec;
  if (!name_or_path.empty() && fs::exists(name_or_path, ec) && !fs::is_directory(name_or_path, ec))
    return name_or_path;

  const fs::path dir = bundled_path("scenarios/hardware");

  const bool bare = !name_or_path.empty() && name_or_path.find('/') == std::string::npos &&
                    name_or_path != "." && name_or_path != "..";
  if (bare) {
    std::string stem = name_or_path;
    if (stem.size() > 5 && stem.ends_with(".json")) stem.resize(stem.size() - 5);
    const fs::path candidate = dir / (stem + ".json");
    if (fs::is_regular_file(candidate, ec)) return candidate.string();
  }

  const std::vector<std::string> bundled = bundled_machines();
  const std::string list = bundled.empty() ? "none found in " + dir.string() : join(bundled, ", ");
  if (!name_or_path.empty() && fs::is_directory(name_or_path, ec))
    throw Error(one_line(name_or_path + ": is a directory; give a hardware file or a bundled machine (" + list + ")"));
  throw Error(one_line(name_or_path + ": no such hardware file (bundled: " + list + ")"));
}

// ---------------------------------------------------------------------------------------------
// describe

namespace {

// "0 (channel 8)", "0 (channels 0, 1, 2, 4, 6 and 3 more)"
std::string at_channels(const std::vector<double>& v, double x) {
  std::vector<std::string> where;
  for (std::size_t i = 0; i < v.size(); ++i)
    if (v[i] == x) where.push_back(std::to_string(i));
  const std::size_t shown = std::min<std::size_t>(where.size(), 5);
  std::string s = g4(x) + (where.size() == 1 ? " (channel " : " (channels ");
  s += join(std::vector<std::string>(where.begin(), where.begin() + shown), ", ");
  if (where.size() > shown) s += " and " + std::to_string(where.size() - shown) + " more";
  return s + ")";
}

std::string list(const double* v, std::size_t n) {
  std::vector<std::string> parts;
  for (std::size_t i = 0; i < n; ++i) parts.push_back(g4(v[i]));
  return "[" + join(parts, ", ") + "]";
}

std::string vector_summary(const std::vector<double>& v) {
  if (v.empty()) return "empty";
  if (std::all_of(v.begin(), v.end(), [&](double x) { return x == v[0]; })) return "all " + g4(v[0]);
  if (v.size() <= 4) return list(v.data(), v.size());
  const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  double sum = 0;
  for (double x : v) sum += x;
  return "min " + at_channels(v, *lo) + ", mean " + g4(sum / static_cast<double>(v.size())) + ", max " +
         at_channels(v, *hi);
}

std::string rows_summary(const std::vector<Quad>& rows) {
  if (rows.empty()) return "empty";
  static const char* names[3] = {"q2", "q1", "q0"};
  std::vector<std::string> parts;
  for (int k = 0; k < 3; ++k) {
    double lo = rows[0][k], hi = rows[0][k];
    for (const auto& q : rows) lo = std::min(lo, q[k]), hi = std::max(hi, q[k]);
    parts.push_back(std::string(names[k]) + " " + g4(lo) + ".." + g4(hi));
  }
  return join(parts, ", ");
}

std::string pad(const std::string& s, std::size_t w) {
  return s.size() >= w ? s : s + std::string(w - s.size(), ' ');
}

struct Row {
  std::string name, shape, summary;
};

}  // namespace

std::string describe(const Hardware& hw) {
  const std::string n = std::to_string(hw.channels);
  const std::string vec = n, mat = n + "x3";
  std::vector<Row> rows;
  auto add = [&](const std::string& name, const std::string& shape, const std::string& summary) {
    rows.push_back({name, shape, summary});
  };
  const auto& t = hw.tanh;
  add("tanh_coeffs", "6", "a " + g4(t[0]) + ", b " + g4(t[1]) + ", c " + g4(t[2]) + ", d " + g4(t[3]) +
                              ", f " + g4(t[4]) + ", g " + g4(t[5]));
  add("led_poly_pos", "4", list(hw.led_pos.data(), 4));
  add("led_poly_neg", "4", list(hw.led_neg.data(), 4));
  add("fan_in_pos", vec, vector_summary(hw.fan_in_pos));
  add("fan_in_neg", vec, vector_summary(hw.fan_in_neg));
  add("slm_distortion_pos", mat, rows_summary(hw.slm_pos));
  add("slm_distortion_neg", mat, rows_summary(hw.slm_neg));
  add("output_gain_pos", vec, vector_summary(hw.gain_pos));
  add("output_gain_neg", vec, vector_summary(hw.gain_neg));
  add("pd_crosstalk_to_earlier_pos", vec, vector_summary(hw.pd_earlier_pos));
  add("pd_crosstalk_to_later_pos", vec, vector_summary(hw.pd_later_pos));
  add("pd_crosstalk_to_earlier_neg", vec, vector_summary(hw.pd_earlier_neg));
  add("pd_crosstalk_to_later_neg", vec, vector_summary(hw.pd_later_neg));
  add("input_clip", "2", "[" + g4(hw.clip_lo) + ", " + g4(hw.clip_hi) + "]");
  if (hw.pbs_model == PbsModel::PerChannel) {
    add("pbs_model", "-", "per_channel");
    add("pbs_neg_to_pos", vec, vector_summary(hw.pbs_neg_to_pos));
    add("pbs_pos_to_neg", vec, vector_summary(hw.pbs_pos_to_neg));
  } else {
    const std::string leak = std::to_string(std::max(hw.channels - 1, 0)) + "x3";
    add("pbs_model", "-", "quadratic_leak");
    add("pbs_leak_coeffs_pos", leak, rows_summary(hw.pbs_leak_pos));
    add("pbs_leak_coeffs_neg", leak, rows_summary(hw.pbs_leak_neg));
    add("pbs_leak_norm_pos", "1", g4(hw.pbs_leak_norm_pos));
    add("pbs_leak_norm_neg", "1", g4(hw.pbs_leak_norm_neg));
  }
  add("crosstalk_order", "-", hw.crosstalk_order == CrosstalkOrder::PbsThenPd ? "pbs_then_pd" : "pd_then_pbs");
  if (hw.closed_loop) {
    const ClosedLoop& cl = *hw.closed_loop;
    add("closed_loop_dc_offset", vec, vector_summary(cl.dc_offset));
    add("closed_loop_linear_offset", vec, vector_summary(cl.linear_offset));
    add("closed_loop_scaling", vec, vector_summary(cl.scaling));
    add("closed_loop_solution_to_adc_ratio", "1", g4(cl.solution_to_adc_ratio));
  }
  {
    const ReadoutSaturation& s = hw.readout;
    const bool is48 = s.model == ReadoutSaturation::Model::Piecewise48;
    const double stop = is48 ? s.piece4[1] : s.piece1[1];
    add("readout_saturation", "-",
        std::string(is48 ? "piecewise48, 4 pieces" : "piecewise16, 2 pieces") + " over [" + g4(s.piece0[0]) +
            ", " + g4(stop) + "], saturates at " + g4(s.negative_saturation) + " / " +
            g4(s.positive_saturation));
  }

  std::size_t wn = 4, ws = 5, wv = 7;
  for (const auto& r : rows) {
    wn = std::max(wn, r.name.size());
    ws = std::max(ws, r.shape.size());
    wv = std::max(wv, r.summary.size());
  }
  auto source = [&](const std::string& key) {
    const auto it = hw.sources.find(key);
    return it == hw.sources.end() ? std::string("-") : it->second;
  };

  std::ostringstream o;
  o << "name         " << hw.name << "\n";
  if (!hw.description.empty()) o << "description  " << hw.description << "\n";
  if (!hw.path.empty()) o << "file         " << hw.path << "\n";
  o << "channels     " << hw.channels << "\n";
  if (!hw.provenance.empty()) {
    std::size_t wk = 0;
    for (const auto& [k, v] : hw.provenance) wk = std::max(wk, k.size());
    o << "\nprovenance\n";
    for (const auto& [k, v] : hw.provenance) o << "  " << pad(k, wk) << "  " << v << "\n";
  }

  o << "\ncalibration\n";
  o << "  " << pad("item", wn) << "  " << pad("shape", ws) << "  " << pad("summary", wv) << "  source\n";
  for (const auto& r : rows)
    o << "  " << pad(r.name, wn) << "  " << pad(r.shape, ws) << "  " << pad(r.summary, wv) << "  "
      << source("calibration." + r.name) << "\n";

  const TwinDefaults& d = hw.defaults;
  const Switches& sw = d.switches;
  auto on = [](bool b) { return b ? "on" : "off"; };
  o << "\ntwin defaults  (" << source("defaults") << ")\n";
  o << "  scale " << g4(d.scale) << ", alpha " << g4(d.alpha) << ", normalise_matrix "
    << (d.normalise_matrix ? "true" : "false") << "\n";
  o << "  switches: weight_distortion " << on(sw.weight_distortion) << ", input_efficiencies "
    << on(sw.input_efficiencies) << ", output_efficiencies " << on(sw.output_efficiencies)
    << ", pd_crosstalk " << on(sw.pd_crosstalk) << ", pbs_crosstalk " << on(sw.pbs_crosstalk)
    << ", slm_darkness " << on(sw.slm_darkness) << "\n";

  // The physical sections: one line per value, with its source.
  auto section = [&](const char* title, const std::vector<std::pair<std::string, std::string>>& items) {
    o << "\n" << title << "\n";
    for (const auto& [name, value] : items)
      o << "  " << pad(name, 24) << "  " << pad(value, 14) << "  " << source(std::string(title) + "." + name) << "\n";
  };
  if (const auto& n = hw.noise) {
    std::vector<std::pair<std::string, std::string>> items = {
        {"led_bias", g4(n->led_bias) + " V"},
        {"photons_per_sample", g4(n->photons_per_sample) + (n->photons_derived ? " (" + g4(n->photons_band[0]) + ".." + g4(n->photons_band[1]) + ")" : "")},
        {"thermal_sigma", g4(n->thermal_sigma) + " V"}};
    if (n->receiver_noise_density > 0)
      items.insert(items.end(), {{"receiver_noise_density", g4(n->receiver_noise_density) + " A/sqrt(Hz)"},
                                 {"receiver_electrons", g4(n->receiver_electrons) + " e-"}});
    items.insert(items.end(), {{"rin_sigma", g4(n->rin_sigma)},
                               {"slm_fixed_pattern_sigma", g4(n->slm_fixed_pattern_sigma)},
                               {"drift_sigma", g4(n->drift_sigma) + " V"},
                               {"drift_time_us", g4(n->drift_time_us) + " us"},
                               {"flicker_sigma", g4(n->flicker_sigma) + " V"}});
    section("noise", items);
  }
  if (const auto& c = hw.converters)
    section("converters", {{"slm_bits", std::to_string(c->slm_bits)}, {"dac_bits", std::to_string(c->dac_bits)},
                           {"dac_min", g4(c->dac_range[0]) + " V"}, {"dac_max", g4(c->dac_range[1]) + " V"},
                           {"adc_bits", std::to_string(c->adc_bits)}, {"adc_min", g4(c->adc_range[0]) + " V"},
                           {"adc_max", g4(c->adc_range[1]) + " V"}});
  if (const auto& t = hw.timing)
    section("timing", {{"loop_period_ns", g4(t->loop_period_ns) + " ns"}, {"bandwidth_mhz", g4(t->bandwidth_mhz) + " MHz"},
                       {"settle_ns", g4(t->settle_ns) + " ns"}, {"readout_samples", std::to_string(t->readout_samples)},
                       {"readout_rate_mhz", g4(t->readout_rate_mhz) + " MHz"}, {"slm_reload_us", g4(t->slm_reload_us) + " us"},
                       {"dac_conversion_ns", g4(t->dac_conversion_ns) + " ns"},
                       {"digital_gmac_per_s", t->digital_gmac_per_s > 0 ? g4(t->digital_gmac_per_s) + " GMAC/s" : "not given"}});
  if (const auto& e = hw.energy) {
    std::vector<std::pair<std::string, std::string>> items;
    for (const auto& c : e->components)
      items.emplace_back(c.name, g4(c.value.typ) + " " + c.unit + " (" + g4(c.value.min) + ".." + g4(c.value.max) + ")");
    section("energy", items);
    if (const auto& p = e->photon_budget)
      section("energy.photon_budget",
              {{"wavelength_nm", g4(p->wavelength_nm) + " nm"}, {"optical_path_efficiency", g4(p->optical_path_efficiency)},
               {"detector_quantum_efficiency", g4(p->detector_quantum_efficiency)}, {"led_wall_plug_efficiency", g4(p->led_wall_plug_efficiency)},
               {"photons_per_sample", p->photons_per_sample > 0 ? g4(p->photons_per_sample) : "not given (the file's led_drive)"}});
  }
  if (const auto& a = hw.architecture) {
    section("architecture", {{"modules", std::to_string(a->modules)},
                             {"analog_functions", a->analog_functions.empty() ? "none" : join(a->analog_functions, ", ")},
                             {"partial_sums", a->partial_sums == ArchitectureSpec::Sum::Analog ? "analog" : "digital"},
                             {"state_memory", a->state_memory == ArchitectureSpec::Memory::Analog ? "analog" : "digital"}});
  }

  if (const auto& a = hw.area) {
    std::vector<std::pair<std::string, std::string>> items;
    for (const auto& c : a->components)
      items.emplace_back(c.name, g4(c.mm2.typ) + " mm2 per " + c.per + " (" + g4(c.mm2.min) + ".." + g4(c.mm2.max) + ")");
    section("area", items);
    const AreaReport rep = area_report(hw);
    o << "  one module " << g4(rep.module_mm2.typ) << " mm2 (" << g4(rep.module_mm2.min) << ".." << g4(rep.module_mm2.max) << ") at "
      << hw.channels << " channels; not counted: " << rep.not_counted << "\n";
  }

  std::size_t unused = 0;
  for (const auto& [k, v] : hw.sources)
    if (k.rfind("unused.", 0) == 0) ++unused;
  o << "\nunused       " << unused << (unused == 1 ? " entry" : " entries")
    << " (values the twin loads but never uses; kept with their source)\n";
  return o.str();
}

}  // namespace aoc
