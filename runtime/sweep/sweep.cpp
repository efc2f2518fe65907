#include "runtime/sweep/sweep.hpp"

#include <Random123/philox.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <numeric>
#include <optional>

#include "models/tasks.hpp"
#include "runtime/optimize/ising.hpp"
#include "runtime/io/output.hpp"
#include "runtime/run/program_run.hpp"
#include "sim/energy.hpp"
#include "sim/error.hpp"
#include "sim/hardware.hpp"
#include "sim/json_reader.hpp"

namespace aoc::sweep {

namespace fs = std::filesystem;
using jsonr::Reader;

const std::vector<std::string>& run_parameters() {
  static const std::vector<std::string> names{"iterations", "seq_len", "photons_per_sample", "noise_scale", "seed",
                                              "seeds",      "batch",   "length",             "channels",    "optics"};
  return names;
}

namespace {

constexpr int kMaxPoints = 1 << 22;

// A uniform double in [0, 1) from one Philox4x32-10 block keyed on the scenario's seed ("SWEP"
// tags the stream apart from the noise's and the tasks' for the same seed).
double uniform(std::uint64_t seed, std::uint32_t a, std::uint32_t b, std::uint32_t c) {
  using G = r123::Philox4x32;
  const G::key_type k = {{static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32) ^ 0x53574550u}};
  const G::ctr_type x = G()({{a, b, c, 0}}, k);
  const std::uint64_t bits = (static_cast<std::uint64_t>(x[0]) << 21) ^ (x[1] >> 11);  // 53 bits
  return static_cast<double>(bits) * 0x1p-53;
}

enum : std::uint32_t { kDraw = 1, kPermute = 2, kJitter = 3 };

// A grid's values of one parameter: its list, or `steps` values over its range.
std::vector<json> grid_values(const Param& p) {
  if (!p.values.empty()) return p.values;
  std::vector<json> v;
  for (int k = 0; k < p.steps; ++k) {
    const double t = p.steps == 1 ? 0.0 : static_cast<double>(k) / (p.steps - 1);
    const double x = p.log ? std::exp(std::log(p.lo) + t * (std::log(p.hi) - std::log(p.lo))) : p.lo + t * (p.hi - p.lo);
    v.push_back(p.integer ? json(std::llround(x)) : json(x));
  }
  return v;
}

// Which run parameters need a workload that runs (the others are estimate parameters, or both).
bool run_only(const std::string& name) {
  return name == "noise_scale" || name == "seed" || name == "seeds" || name == "batch" || name == "length" || name == "optics";
}

// The metric groups and their columns (docs/scenarios.md). `runs`: the group needs a workload
// that runs on the backends; `task`: one with a task's labels; `problem`: an optimisation problem
// (whose only group is `optimisation`).
struct Group {
  std::string name;
  bool runs, task;
  std::vector<MetricColumn> columns;
  bool problem = false;
  bool retina = false;  // a retina model's scores (workload.retina)
};

const char* const kLatencyLines[] = {"loop", "settle", "readout", "conversions", "digital", "weight_reload"};

std::vector<Group> groups(bool runs) {
  std::vector<Group> g{
      {"accuracy", true, true, {{"accuracy", "1", "max"}, {"accuracy_min", "1", "max"}}},
      {"agreement", true, false, {{"agreement", "1", "max"}, {"agreement_min", "1", "max"}, {"max_abs_error", "1", "min"}}},
      {"iterations", false, false, {{"iterations", "1", "min"}}},
      {"energy", false, false, {{"energy", "J", "min"}, {"energy_min", "J", "min"}, {"energy_max", "J", "min"}}},
      {"latency", false, false, {{"latency", "s", "min"}}},
      {"area", false, false, {{"area", "mm2", "min"}, {"area_min", "mm2", "min"}, {"area_max", "mm2", "min"}}},
      {"tops_per_w", false, false, {{"tops_per_w", "TOPS/W", "max"}, {"tops_per_w_min", "TOPS/W", "max"}, {"tops_per_w_max", "TOPS/W", "max"}}},
      {"gpu_ratio", false, false, {{"gpu_ratio", "1", "max"}}},
      {"breakdown", false, false, {}},
      {"mapping", false, false,
       {{"tiles", "1", ""}, {"cores", "1", ""}, {"modules_used", "1", ""}, {"passes", "1", ""}, {"weight_reloads", "1", ""},
        {"dac_conversions", "1", ""}, {"adc_conversions", "1", ""}, {"digital_ops", "1", ""}}},
  };
  g.push_back({"optimisation", true, false,
               {{"p", "1", "max"}, {"ops_to_solution", "1", "min"}, {"tts99", "s", "min"}, {"energy_to_solution", "J", "min"},
                {"best_objective", "1", ""}, {"programming_residual", "1", "min"}},
               true});
  g.push_back({"retina", true, false, {{"cc", "1", "max"}, {"fev", "1", "max"}, {"nll", "1", "min"}}, false, true});
  const auto named = [&](const char* n) -> Group& { return *std::find_if(g.begin(), g.end(), [&](const Group& x) { return x.name == n; }); };
  if (runs) named("iterations").columns.insert(named("iterations").columns.end(), {{"reference_iterations", "1", "min"}, {"failures", "1", "min"}});
  for (const char* c : kEnergyComponents) named("breakdown").columns.push_back({std::string("energy.") + c, "J", ""});
  for (const char* c : kLatencyLines) named("breakdown").columns.push_back({std::string("latency.") + c, "s", ""});
  return g;
}

// A path in the scenario: relative to the scenario file's folder.
std::string resolve(const Scenario& s, const std::string& p) {
  const fs::path q(p);
  return q.is_absolute() ? p : (fs::path(s.path).parent_path() / q).lexically_normal().string();
}

std::string need_file(const Reader& r, const Scenario& s, const json& j, const std::string& field, const std::string& what) {
  const std::string p = resolve(s, r.text(j, field, true));
  std::error_code ec;
  if (!fs::exists(p, ec)) r.fail(field, p + ": no such " + what);
  return p;
}

void read_workload(const Reader& r, const json& j, Scenario& s) {
  r.object(j, "workload");
  r.only_keys(j, "workload", {"model", "graph", "config", "problem", "retina", "weights", "inputs", "task", "batch", "length", "data_seed", "sequence",
                              "calibrate", "quantize", "optics", "samples", "iterations", "data", "frames"});
  Workload& w = s.workload;
  const int kinds = j.contains("model") + j.contains("graph") + j.contains("config") + j.contains("problem") + j.contains("retina");
  if (kinds != 1)
    r.fail("workload", "expected one of model (a trained model folder), graph (a graph JSON), config (an importer config), problem (an "
                       "optimisation instance) or retina (a retina model folder)");
  for (const char* k : {"data", "frames"})
    if (j.contains(k) && !j.contains("retina")) r.fail(std::string("workload.") + k, "only for a retina model");
  if (const json* v = r.find(j, "retina")) {
    w.kind = Workload::Kind::Retina;
    w.path = need_file(r, s, *v, "workload.retina", "retina model folder");
    for (const char* f : {"graph.json", "weights.h5"})
      if (!fs::exists(fs::path(w.path) / f)) r.fail("workload.retina", w.path + ": no " + f + " (a retina model folder holds graph.json and weights.h5)");
    for (const char* k : {"weights", "inputs", "task", "batch", "length", "data_seed", "samples", "iterations"})
      if (j.contains(k)) r.fail(std::string("workload.") + k, "not for a retina model");
    if (const json* d = r.find(j, "data")) w.data = need_file(r, s, *d, "workload.data", "retina file");
    if (const json* n = r.find(j, "frames")) w.frames = static_cast<int>(r.integer(*n, "workload.frames", 0, 1 << 24));
    if (const json* v2 = r.find(j, "sequence"))
      w.mode = r.choice(*v2, "workload.sequence", {"sequential", "simultaneous"}) == "sequential" ? ir::Mode::Sequential : ir::Mode::Simultaneous;
    if (const json* v2 = r.find(j, "calibrate")) w.calibrate = r.boolean(*v2, "workload.calibrate");
    if (const json* v2 = r.find(j, "quantize")) w.quantize = r.boolean(*v2, "workload.quantize");
    if (const json* v2 = r.find(j, "optics")) w.optics = r.boolean(*v2, "workload.optics");
    return;
  }
  for (const char* k : {"samples", "iterations"})
    if (j.contains(k) && !j.contains("problem")) r.fail(std::string("workload.") + k, "only for a problem");
  if (const json* v = r.find(j, "problem")) {
    w.kind = Workload::Kind::Problem;
    w.path = need_file(r, s, *v, "workload.problem", "problem file");
    try {
      read_problem(w.path);
    } catch (const Error& e) {
      r.fail("workload.problem", e.what());
    }
    for (const char* k : {"weights", "inputs", "task", "batch", "length", "data_seed", "sequence", "calibrate"})
      if (j.contains(k)) r.fail(std::string("workload.") + k, "not for a problem");
    if (const json* n = r.find(j, "samples")) w.samples = static_cast<int>(r.integer(*n, "workload.samples", 1, 1 << 20));
    if (const json* n = r.find(j, "iterations")) w.iterations = static_cast<int>(r.integer(*n, "workload.iterations", 1, 1 << 24));
    if (const json* v = r.find(j, "quantize")) w.quantize = r.boolean(*v, "workload.quantize");
    if (const json* v = r.find(j, "optics")) w.optics = r.boolean(*v, "workload.optics");
    return;
  }
  if (const json* m = r.find(j, "model")) {
    w.kind = Workload::Kind::Model;
    w.path = need_file(r, s, *m, "workload.model", "model folder");
    for (const char* f : {"config.json", "weights.h5"})
      if (!fs::exists(fs::path(w.path) / f)) r.fail("workload.model", w.path + ": no " + f + " (a model folder holds config.json and weights.h5)");
    // The task the model was trained on, unless the scenario names one.
    if (fs::exists(fs::path(w.path) / "train.json")) {
      const json t = jsonr::parse_file(fs::path(w.path / fs::path("train.json")).string());
      if (t.contains("scenario") && t["scenario"].contains("task") && t["scenario"]["task"].is_string()) w.task = t["scenario"]["task"];
    }
  } else if (const json* g = r.find(j, "graph")) {
    w.kind = Workload::Kind::Graph;
    w.path = need_file(r, s, *g, "workload.graph", "graph file");
  } else {
    w.kind = Workload::Kind::Config;
    w.path = need_file(r, s, j["config"], "workload.config", "config file");
  }
  if (const json* v = r.find(j, "weights")) {
    if (w.kind != Workload::Kind::Graph) r.fail("workload.weights", "only for a graph (a model folder has its weights)");
    w.weights = need_file(r, s, *v, "workload.weights", "weights file");
  }
  if (const json* v = r.find(j, "inputs")) {
    if (w.kind != Workload::Kind::Graph) r.fail("workload.inputs", "only for a graph (a model runs its task)");
    w.inputs = need_file(r, s, *v, "workload.inputs", "inputs file");
  }
  if (w.kind == Workload::Kind::Graph && w.weights.empty() != w.inputs.empty())
    r.fail("workload", "a graph runs with both weights and inputs; with neither it is estimated only");
  for (const char* k : {"task", "batch", "length", "data_seed"})
    if (j.contains(k) && w.kind != Workload::Kind::Model) r.fail(std::string("workload.") + k, "only for a model");
  if (const json* v = r.find(j, "task")) w.task = r.text(*v, "workload.task", true);
  if (w.kind == Workload::Kind::Model) {
    if (w.task.empty()) r.fail("workload.task", "missing (the model folder's train.json names none)");
    try {
      tasks::parse_task(w.task);
    } catch (const Error& e) {
      r.fail("workload.task", e.what());
    }
  }
  if (const json* v = r.find(j, "batch")) w.batch = static_cast<int>(r.integer(*v, "workload.batch", 1, 1 << 16));
  if (const json* v = r.find(j, "length")) w.length = static_cast<int>(r.integer(*v, "workload.length", 1, 1 << 20));
  if (const json* v = r.find(j, "data_seed"))
    w.data_seed = static_cast<std::uint64_t>(r.integer(*v, "workload.data_seed", 0, std::numeric_limits<long long>::max()));
  if (const json* v = r.find(j, "sequence"))
    w.mode = r.choice(*v, "workload.sequence", {"sequential", "simultaneous"}) == "sequential" ? ir::Mode::Sequential : ir::Mode::Simultaneous;
  if (const json* v = r.find(j, "calibrate")) w.calibrate = r.boolean(*v, "workload.calibrate");
  if (const json* v = r.find(j, "quantize")) w.quantize = r.boolean(*v, "workload.quantize");
  if (const json* v = r.find(j, "optics")) w.optics = r.boolean(*v, "workload.optics");
}

// The hardware path must exist in the base file and end at a value: a number, a string, a list, or
// an entry {"value", "source"} (what load_hardware's overrides replace).
void check_hardware_path(const Reader& r, const json& doc, const std::string& field, const std::string& path) {
  const json* node = &doc;
  std::string at;
  for (std::size_t start = 0; start <= path.size();) {
    const auto dot = path.find('.', start);
    const std::string key = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    at = jsonr::sub(at, key);
    if (!node->is_object() || !node->contains(key))
      r.fail(field, "no such hardware field: " + at + " (neither a field of the hardware file nor a run parameter: " +
                        jsonr::join(run_parameters(), ", ") + ")");
    node = &(*node)[key];
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  if (node->is_object() && !node->contains("value"))
    r.fail(field, path + " is a section, not a value" + (node->contains("typ") ? " (vary its min, typ or max)" : ""));
  if (path == "name" || path == "format" || path == "version") r.fail(field, path + " cannot be varied");
}

// Run parameters that take whole numbers.
bool whole_number(const std::string& n) {
  return n == "seq_len" || n == "seed" || n == "seeds" || n == "batch" || n == "length" || n == "channels";
}

// A run parameter's value: a number in the parameter's range.
void check_run_value(const Reader& r, const json& v, const std::string& field, const std::string& name) {
  if (name == "optics") {  // the machine as measured (true) or ideal optics (false)
    if (!v.is_boolean()) r.fail(field, "expected true (the machine as measured) or false (ideal optics), got " + jsonr::got(v));
    return;
  }
  if (!v.is_number()) r.fail(field, "expected a number, got " + jsonr::got(v));
  const double x = v.get<double>();
  const double least = name == "noise_scale" || name == "seed" || name == "photons_per_sample" ? 0 : 1;
  const bool ok = std::isfinite(x) && (name == "photons_per_sample" ? x > least : x >= least);
  if (!ok) r.fail(field, jsonr::num(x) + " is out of range for " + name + (name == "photons_per_sample" ? " (more than 0)" : " (at least " + jsonr::num(least) + ")"));
  // whole numbers become ints: at most what the workload itself takes (workload.batch, .length)
  const double most = name == "batch" ? 65536.0 : name == "seed" ? 9007199254740992.0 : whole_number(name) ? 1048576.0 : HUGE_VAL;
  if (x > most) r.fail(field, jsonr::num(x) + " is out of range for " + name + " (at most " + jsonr::num(most) + ")");
  if (whole_number(name) && !v.is_number_integer()) r.fail(field, name + " takes whole numbers, got " + jsonr::got(v));
}

Param read_param(const Reader& r, const json& doc, const Scenario& s, const std::string& name, const json& spec, bool fixed) {
  const std::string field = std::string(fixed ? "fixed." : "parameters.") + name;
  Param p;
  p.name = name;
  p.fixed = fixed;
  const auto& rp = run_parameters();
  p.hardware = std::find(rp.begin(), rp.end(), name) == rp.end();
  if (p.hardware) check_hardware_path(r, doc, field, name);
  else if (run_only(name) && !s.workload.runs())
    r.fail(field, name + " is for a workload that runs (a model, or a graph with weights and inputs)");
  else if (name == "channels" && s.workload.runs())
    r.fail(field, "channels is for estimates only (the calibration is not resized; a workload that runs needs a machine file of that size)");
  else if ((name == "batch" || name == "length") && s.workload.kind != Workload::Kind::Model)
    r.fail(field, name + " is for a model's task");
  else if ((name == "seeds" || name == "iterations" || name == "seq_len") && s.workload.kind == Workload::Kind::Retina)
    r.fail(field, name + " is not for a retina model (one noise seed per point; its iterations are measured, a frame is a token)");
  if (fixed) {
    p.values = {spec};
  } else {
    r.object(spec, field);
    r.only_keys(spec, field, {"values", "range", "scale", "steps", "integer"});
    if (spec.contains("values") == spec.contains("range")) r.fail(field, "expected either values (a list) or range ([lo, hi])");
    if (const json* v = r.find(spec, "values")) {
      if (!v->is_array() || v->empty()) r.fail(field + ".values", "expected a non-empty list, got " + jsonr::got(*v));
      for (const json& x : *v) p.values.push_back(x);
      for (const char* k : {"scale", "steps", "integer"})
        if (spec.contains(k)) r.fail(field + "." + k, "only for a range");
    } else {
      const auto lohi = r.numbers(spec["range"], field + ".range", 2);
      p.lo = lohi[0], p.hi = lohi[1];
      if (!(p.lo <= p.hi)) r.fail(field + ".range", "expected [lo, hi] with lo <= hi");
      if (const json* v = r.find(spec, "scale")) p.log = r.choice(*v, field + ".scale", {"lin", "log"}) == "log";
      if (p.log && !(p.lo > 0)) r.fail(field + ".range", "a log range must be above 0");
      if (const json* v = r.find(spec, "integer")) p.integer = r.boolean(*v, field + ".integer");
      if (p.integer && !(std::abs(p.lo) <= 9007199254740992.0 && std::abs(p.hi) <= 9007199254740992.0))
        r.fail(field + ".range", "an integer range must lie within +-2^53 (whole numbers a double holds exactly)");
      if (const json* v = r.find(spec, "steps")) p.steps = static_cast<int>(r.integer(*v, field + ".steps", 1, 1 << 20));
      if (s.sampling == Sampling::Grid && p.steps == 0) r.fail(field, "a range on a grid needs steps (how many values)");
      if (s.sampling != Sampling::Grid && s.sampling != Sampling::Nsga2 && p.steps) r.fail(field + ".steps", "only for a grid or a search");
    }
  }
  if (!p.hardware) {
    if (p.values.empty() && name == "optics") r.fail(field, "optics takes values, not a range: {\"values\": [true, false]}");
    if (p.values.empty()) {
      if (whole_number(name) && !p.integer) r.fail(field, name + " takes whole numbers: give \"integer\": true");
      for (const double end : {p.lo, p.hi}) check_run_value(r, p.integer ? json(std::llround(end)) : json(end), field + ".range", name);
    }
    for (std::size_t i = 0; i < p.values.size(); ++i) check_run_value(r, p.values[i], fixed ? field : jsonr::elem(field + ".values", i), name);
  }
  return p;
}

// The objectives and constraints (docs/scenarios.md, "Searches"): metric columns of the scenario.
void read_goals(const Reader& r, const json& j, Scenario& s, const json& machine) {
  const auto column = [&](const json& v, const std::string& field) {
    const std::string name = r.text(v, field, true);
    for (std::size_t k = 0; k < s.columns.size(); ++k)
      if (s.columns[k].name == name) return k;
    std::vector<std::string> names;
    for (const MetricColumn& c : s.columns) names.push_back(c.name);
    r.fail(field, "no metric column " + name + " in this scenario (its columns: " + jsonr::join(names, ", ") + "; add its group to metrics)");
  };
  if (const json* o = r.find(j, "objectives")) {
    if (!o->is_array() || o->empty()) r.fail("objectives", "expected a list of {\"metric\": NAME} objects");
    for (std::size_t i = 0; i < o->size(); ++i) {
      const std::string f = jsonr::elem("objectives", i);
      const json& e = (*o)[i];
      r.object(e, f);
      r.only_keys(e, f, {"metric", "scale"});
      Objective ob;
      ob.column = column(r.need(e, f, "metric"), f + ".metric");
      ob.metric = s.columns[ob.column].name;
      const std::string& better = s.columns[ob.column].better;
      if (better.empty()) r.fail(f + ".metric", ob.metric + " has no better direction (neither smaller nor larger is better): not an objective");
      ob.maximise = better == "max";
      if (const json* v = r.find(e, "scale")) ob.log = r.choice(*v, f + ".scale", {"lin", "log"}) == "log";
      for (const Objective& x : s.objectives)
        if (x.column == ob.column) r.fail(f + ".metric", ob.metric + " is listed twice");
      s.objectives.push_back(ob);
    }
  }
  if (const json* c = r.find(j, "constraints")) {
    if (!c->is_array()) r.fail("constraints", "expected a list of {\"metric\": NAME, \"min\": X} or {..., \"max\": X} objects");
    for (std::size_t i = 0; i < c->size(); ++i) {
      const std::string f = jsonr::elem("constraints", i);
      const json& e = (*c)[i];
      r.object(e, f);
      r.only_keys(e, f, {"metric", "min", "max"});
      Constraint k;
      k.column = column(r.need(e, f, "metric"), f + ".metric");
      k.metric = s.columns[k.column].name;
      if (!e.contains("min") && !e.contains("max")) r.fail(f, "expected min, max or both");
      if (const json* v = r.find(e, "min")) k.min = r.number(*v, f + ".min");
      if (const json* v = r.find(e, "max")) k.max = r.number(*v, f + ".max");
      if (!(k.min <= k.max)) r.fail(f, "min is above max");
      s.constraints.push_back(k);
    }
  }
  if (s.screen.fraction > 0) {
    if (s.constraints.empty()) r.fail("sampling.screen", "a screen stops the points that miss the constraints: this search has none");
    // A model's test sequences are independent draws: the accuracy on some estimates the whole's. A
    // retina's score over its movie's first frames does not (docs/scenarios.md, "Screens").
    if (s.workload.kind != Workload::Kind::Model)
      r.fail("sampling.screen", "only for a model's workload (a screen scores a share of its independent test sequences)");
  }
  if (s.sampling == Sampling::Nsga2 && s.objectives.size() < 2)
    r.fail("objectives", "a search needs two or more objectives (NSGA-II finds a front; one objective has a best point, not a front)");
  if (std::find(s.metrics.begin(), s.metrics.end(), "area") != s.metrics.end() && !machine.contains("area"))
    r.fail("metrics", "area: the hardware file has no area section (docs/energy.md, \"Area\")");
}

}  // namespace

Scenario read_scenario(const std::string& path) {
  const json j = jsonr::parse_file(path);
  const Reader r(path);
  r.object(j, "");
  r.only_keys(j, "", {"format", "version", "name", "description", "workload", "hardware", "sampling", "seed", "fixed", "parameters", "metrics",
                      "objectives", "constraints"});
  if (r.text(r.need(j, "", "format"), "format", true) != "aoc-sweep") r.fail("format", "expected \"aoc-sweep\"");
  if (r.integer(r.need(j, "", "version"), "version", 1, 1) != 1) r.fail("version", "expected 1");
  Scenario s;
  s.path = path;
  s.text = j.dump();
  s.name = r.text(r.need(j, "", "name"), "name", true);
  if (const json* d = r.find(j, "description")) s.description = r.text(*d, "description", false);
  read_workload(r, r.need(j, "", "workload"), s);

  s.hardware = r.text(r.need(j, "", "hardware"), "hardware", true);
  // A file next to the scenario, else a bundled machine's name (aoc-48, aoc-scale).
  const std::string local = resolve(s, s.hardware);
  std::error_code ec;
  s.hardware_path = fs::is_regular_file(local, ec) ? local : s.hardware.find('/') == std::string::npos ? s.hardware : local;
  try {
    s.hardware_path = resolve_hardware_path(s.hardware_path);
  } catch (const Error& e) {
    r.fail("hardware", e.what());
  }
  std::optional<HardwareFile> machine;
  try {
    machine.emplace(s.hardware_path);  // the base machine must load on its own
  } catch (const Error& e) {
    r.fail("hardware", e.what());
  }
  const json& doc = machine->document();

  if (const json* v = r.find(j, "seed")) s.seed = static_cast<std::uint64_t>(r.integer(*v, "seed", 0, std::numeric_limits<long long>::max()));
  const json& sm = r.need(j, "", "sampling");
  r.object(sm, "sampling");
  r.only_keys(sm, "sampling", {"method", "points", "population", "screen"});
  const std::string method = r.choice(r.need(sm, "sampling", "method"), "sampling.method", {"grid", "random", "lhs", "nsga2"});
  s.sampling = method == "grid" ? Sampling::Grid : method == "random" ? Sampling::Random : method == "lhs" ? Sampling::Lhs : Sampling::Nsga2;
  if (const json* n = r.find(sm, "population")) {
    if (s.sampling != Sampling::Nsga2) r.fail("sampling.population", "only for a search (method nsga2)");
    s.population = static_cast<int>(r.integer(*n, "sampling.population", 8, 1 << 16));
    if (s.population % 4) r.fail("sampling.population", "NSGA-II pairs its parents: a multiple of 4");
  } else if (s.sampling == Sampling::Nsga2) {
    r.fail("sampling.population", "missing (points per generation, a multiple of 4: 20 or more for six parameters)");
  }
  if (const json* n = r.find(sm, "points")) {
    if (s.sampling == Sampling::Grid) r.fail("sampling.points", "a grid has the product of its parameters' values; points is for random and lhs");
    s.samples = static_cast<int>(r.integer(*n, "sampling.points", 1, kMaxPoints));
  } else if (s.sampling != Sampling::Grid) {
    r.fail("sampling.points", "missing (how many points to draw)");
  }
  if (const json* sc = r.find(sm, "screen")) {
    if (s.sampling != Sampling::Nsga2) r.fail("sampling.screen", "only for a search (method nsga2)");
    r.object(*sc, "sampling.screen");
    r.only_keys(*sc, "sampling.screen", {"fraction", "margin"});
    s.screen.fraction = r.number(r.need(*sc, "sampling.screen", "fraction"), "sampling.screen.fraction");
    if (!(s.screen.fraction > 0 && s.screen.fraction < 1)) r.fail("sampling.screen.fraction", "expected a number above 0 and below 1");
    if (const json* m = r.find(*sc, "margin")) s.screen.margin = r.number(*m, "sampling.screen.margin");
    if (!(s.screen.margin >= 0)) r.fail("sampling.screen.margin", "expected a number >= 0 (the constraints' shortfall, relative to their bounds)");
  }
  if (s.sampling == Sampling::Nsga2 && s.samples % s.population)
    r.fail("sampling.points", "a search's evaluations come a generation at a time: a multiple of the population (" + std::to_string(s.population) + ")");

  std::vector<std::string> seen;
  const auto add = [&](const char* section, bool fixed) {
    const json* sec = r.find(j, section);
    if (!sec) return;
    r.object(*sec, section);
    for (const auto& [name, spec] : sec->items()) {
      if (std::find(seen.begin(), seen.end(), name) != seen.end()) r.fail(std::string(section) + "." + name, "given twice (fixed and varied)");
      seen.push_back(name);
      s.params.push_back(read_param(r, doc, s, name, spec, fixed));
    }
  };
  add("fixed", true);
  add("parameters", false);
  if (std::none_of(s.params.begin(), s.params.end(), [](const Param& p) { return !p.fixed; }))
    r.fail("parameters", "missing: nothing to vary");
  // A fixed hardware value would fail every point: say so once, here.
  for (const Param& p : s.params)
    if (p.fixed && p.hardware) try {
        machine->load({p.name + "=" + p.values[0].dump()});
      } catch (const Error& e) {
        r.fail("fixed." + p.name, e.what());
      }

  const bool problem = s.workload.kind == Workload::Kind::Problem, retina = s.workload.kind == Workload::Kind::Retina;
  const std::vector<Group> gs = groups(s.workload.runs() && !retina);  // a retina run has no reference to compare iterations with
  const auto usable = [&](const Group& g) {
    if (g.retina || retina) return g.retina == retina || (!g.runs && !g.problem);  // a retina model: its scores and the estimates
    return g.problem == problem && (!g.runs || s.workload.runs()) && (!g.task || s.workload.kind == Workload::Kind::Model);
  };
  if (const json* m = r.find(j, "metrics")) {
    if (!m->is_array() || m->empty()) r.fail("metrics", "expected a non-empty list of metric names");
    for (std::size_t i = 0; i < m->size(); ++i) {
      std::vector<std::string> names;
      for (const Group& g : gs) names.push_back(g.name);
      const std::string name = r.choice((*m)[i], jsonr::elem("metrics", i), names);
      const Group& g = *std::find_if(gs.begin(), gs.end(), [&](const Group& x) { return x.name == name; });
      if (!usable(g))
        r.fail(jsonr::elem("metrics", i), name + (g.retina ? " needs a retina model (workload.retina)"
                                                  : retina    ? " is not for a retina model (its metrics: retina and the estimates)"
                                                  : g.problem ? " needs an optimisation problem (workload.problem)"
                                                  : problem   ? " is not for an optimisation problem (its metrics: optimisation)"
                                                  : g.task    ? " needs a model with a task"
                                                              : " needs a workload that runs (a model, or a graph with weights and inputs)"));
      if (std::find(s.metrics.begin(), s.metrics.end(), name) != s.metrics.end()) r.fail(jsonr::elem("metrics", i), name + " is listed twice");
      s.metrics.push_back(name);
    }
  } else {
    for (const Group& g : gs)
      if (usable(g) && g.name != "breakdown" && g.name != "mapping" && g.name != "area") s.metrics.push_back(g.name);
  }
  for (const Group& g : gs)
    if (std::find(s.metrics.begin(), s.metrics.end(), g.name) != s.metrics.end())
      s.columns.insert(s.columns.end(), g.columns.begin(), g.columns.end());

  read_goals(r, j, s, doc);

  if (s.sampling == Sampling::Grid) {
    double n = 1;
    for (const Param& p : s.params) n *= p.fixed ? 1.0 : static_cast<double>(grid_values(p).size());
    if (n > kMaxPoints) r.fail("parameters", "the grid has " + jsonr::num(n) + " points, more than " + jsonr::num(kMaxPoints));
  }

  // The config hash: the scenario and every file it reads, so that a resumed sweep is the same sweep.
  std::string h = s.text + "\n" + file_digest(s.hardware_path);
  const Workload& w = s.workload;
  if (w.kind == Workload::Kind::Model) h += file_digest((fs::path(w.path) / "config.json").string()) + file_digest((fs::path(w.path) / "weights.h5").string());
  else if (w.kind == Workload::Kind::Retina)
    h += file_digest((fs::path(w.path) / "graph.json").string()) + file_digest((fs::path(w.path) / "weights.h5").string()) +
         (w.data.empty() ? std::string(" default synthetic retina ") + AOC_VERSION : file_digest(w.data)) + " frames " + std::to_string(w.frames);
  else h += file_digest(w.path);
  if (!w.weights.empty()) h += file_digest(w.weights) + file_digest(w.inputs);
  // and the settings as resolved, so that a default that changes between versions is a new sweep
  h += "\nresolved batch " + std::to_string(w.batch) + " length " + std::to_string(w.length) + " sequential " +
       std::to_string(w.mode == ir::Mode::Sequential) + " calibrate " + std::to_string(w.calibrate) + " quantize " +
       std::to_string(w.quantize) + " optics " + std::to_string(w.optics);
  s.config_hash = digest_hex(h.data(), h.size());
  return s;
}

// ---------------------------------------------------------------------------------------------
// Points

const char* sampling_name(Sampling s) {
  switch (s) {
    case Sampling::Grid: return "grid";
    case Sampling::Random: return "random";
    case Sampling::Lhs: return "lhs";
    case Sampling::Nsga2: return "nsga2";
  }
  return "?";
}

json value_at(const Param& p, double u) {
  u = std::clamp(u, 0.0, 1.0);
  if (!p.values.empty()) return p.values[std::min(p.values.size() - 1, static_cast<std::size_t>(u * static_cast<double>(p.values.size())))];
  if (p.integer && !p.log) {
    const double lo = std::ceil(p.lo), hi = std::floor(p.hi);
    return json(std::llround(std::min(hi, lo + std::floor(u * (hi - lo + 1)))));
  }
  const double x = p.log ? std::exp(std::log(p.lo) + u * (std::log(p.hi) - std::log(p.lo))) : p.lo + u * (p.hi - p.lo);
  return p.integer ? json(std::llround(x)) : json(x);
}

std::vector<std::vector<double>> unit_samples(Sampling method, std::size_t n, std::size_t d, std::uint64_t seed) {
  std::vector<std::vector<double>> u(n, std::vector<double>(d));
  for (std::size_t k = 0; k < d; ++k) {
    const auto dim = static_cast<std::uint32_t>(k);
    if (method == Sampling::Lhs) {
      // One stratum per point in each dimension: a seeded Fisher-Yates permutation of the strata.
      std::vector<std::size_t> perm(n);
      std::iota(perm.begin(), perm.end(), std::size_t{0});
      for (std::size_t i = n; i > 1; --i) {
        const auto j = static_cast<std::size_t>(uniform(seed, kPermute, dim, static_cast<std::uint32_t>(i)) * static_cast<double>(i));
        std::swap(perm[i - 1], perm[std::min(j, i - 1)]);
      }
      for (std::size_t i = 0; i < n; ++i)
        u[i][k] = (static_cast<double>(perm[i]) + uniform(seed, kJitter, dim, static_cast<std::uint32_t>(i))) / static_cast<double>(n);
    } else {
      for (std::size_t i = 0; i < n; ++i) u[i][k] = uniform(seed, kDraw, dim, static_cast<std::uint32_t>(i));
    }
  }
  return u;
}

std::vector<Point> points(const Scenario& s) {
  if (s.sampling == Sampling::Nsga2) throw Error(s.path + ": sampling: a search's points follow from its evaluations: run it with aoc explore");
  std::vector<Point> out;
  if (s.sampling == Sampling::Grid) {
    std::vector<std::vector<json>> grid;
    std::size_t n = 1;
    for (const Param& p : s.params) grid.push_back(p.fixed ? p.values : grid_values(p)), n *= grid.back().size();
    for (std::size_t i = 0; i < n; ++i) {
      // The last parameter varies fastest (nested loops in file order).
      Point pt{i, std::vector<json>(s.params.size())};
      std::size_t rest = i;
      for (std::size_t k = s.params.size(); k-- > 0;) {
        pt.values[k] = grid[k][rest % grid[k].size()];
        rest /= grid[k].size();
      }
      out.push_back(std::move(pt));
    }
    return out;
  }
  std::size_t free = 0;
  for (const Param& p : s.params) free += !p.fixed;
  const auto u = unit_samples(s.sampling, static_cast<std::size_t>(s.samples), free, s.seed);
  for (std::size_t i = 0; i < u.size(); ++i) {
    Point pt{i, {}};
    std::size_t k = 0;
    for (const Param& p : s.params) pt.values.push_back(p.fixed ? p.values[0] : value_at(p, u[i][k++]));
    out.push_back(std::move(pt));
  }
  return out;
}

}  // namespace aoc::sweep
