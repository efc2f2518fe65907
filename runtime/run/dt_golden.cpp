#include "runtime/run/dt_golden.hpp"

#include <cmath>
#include <fstream>
#include <sstream>
#include <nlohmann/json.hpp>

#include "sim/core.hpp"
#include "sim/error.hpp"
#include "sim/json_reader.hpp"
#include "sim/solver.hpp"

namespace aoc {

using nlohmann::json;

namespace {

struct Ctx {
  std::string file, where;
  [[noreturn]] void fail(const std::string& field, const std::string& msg) const {
    throw Error(file + ": " + where + "." + field + ": " + msg);
  }
};

double number(const Ctx& cx, const json& v, const std::string& field) {
  if (!v.is_number()) cx.fail(field, "expected a number");
  const double d = v.get<double>();
  if (!std::isfinite(d)) cx.fail(field, "not a finite number");
  return d;
}

// A whole number in [lo, hi], checked before it becomes an int.
int integer(const Ctx& cx, const json& v, const std::string& field, int lo, int hi) {
  const double d = number(cx, v, field);
  if (d != std::floor(d) || d < lo || d > hi) cx.fail(field, "expected a whole number from " + std::to_string(lo) + " to " + std::to_string(hi));
  return static_cast<int>(d);
}

std::vector<double> numbers(const Ctx& cx, const json& v, const std::string& field) {
  if (v.is_number()) return {number(cx, v, field)};
  if (!v.is_array()) cx.fail(field, "expected a number or a list of numbers");
  std::vector<double> out;
  for (size_t i = 0; i < v.size(); ++i) out.push_back(number(cx, v[i], field + "[" + std::to_string(i) + "]"));
  return out;
}

MatrixXdR matrix(const Ctx& cx, const json& v, const std::string& field, long rows, long cols) {
  if (!v.is_array() || v.empty() || !v[0].is_array()) cx.fail(field, "expected a list of rows");
  const long R = static_cast<long>(v.size()), C = static_cast<long>(v[0].size());
  if ((rows >= 0 && R != rows) || (cols >= 0 && C != cols))
    cx.fail(field, "expected shape " + std::to_string(rows) + "x" + std::to_string(cols) + ", got " + std::to_string(R) + "x" + std::to_string(C));
  MatrixXdR m(R, C);
  for (long r = 0; r < R; ++r) {
    if (!v[r].is_array() || static_cast<long>(v[r].size()) != C) cx.fail(field + "[" + std::to_string(r) + "]", "ragged rows");
    for (long c = 0; c < C; ++c) m(r, c) = number(cx, v[r][c], field + "[" + std::to_string(r) + "][" + std::to_string(c) + "]");
  }
  return m;
}

const json& need(const Ctx& cx, const json& obj, const std::string& key) {
  if (!obj.contains(key)) cx.fail(key, "missing");
  return obj.at(key);
}

// The twin's constructor defaults (what a bare AOCCell(...) uses) and the names of its switches.
CoreConfig config_from_flags(const Ctx& cx, const json& flags) {
  CoreConfig cfg;  // Switches{} holds the constructor defaults
  cfg.gain = GainMode::MaxAbs;  // normalise_matrix=False in the constructor
  if (flags.is_string()) return cfg;  // e.g. "AOCCell ctor defaults (...)"
  if (!flags.is_object()) cx.fail("flags", "expected an object of switches or a description string");
  static const std::map<std::string, bool Switches::*> names = {
      {"apply_weight_distortion", &Switches::weight_distortion}, {"apply_input_efficiencies", &Switches::input_efficiencies},
      {"apply_output_efficiencies", &Switches::output_efficiencies}, {"apply_pd_crosstalk", &Switches::pd_crosstalk},
      {"apply_pbs_crosstalk", &Switches::pbs_crosstalk}, {"apply_slm_darkness", &Switches::slm_darkness}};
  for (const auto& [k, v] : flags.items()) {
    if (!v.is_boolean()) cx.fail("flags." + k, "expected true or false");
    if (k == "normalise_matrix") cfg.gain = v.get<bool>() ? GainMode::ScaleOverN : GainMode::MaxAbs;
    else if (auto it = names.find(k); it != names.end()) cfg.switches.*(it->second) = v.get<bool>();
    else cx.fail("flags." + k, "unknown switch");
  }
  return cfg;
}

}  // namespace

std::vector<DtCase> load_dt_golden(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(path + ": cannot open");
  std::ostringstream text;
  text << in.rdbuf();
  json doc = jsonr::parse_text<json>(text.str(), path);
  if (!doc.is_object() || !doc.contains("cases") || !doc["cases"].is_array() || doc["cases"].empty())
    throw Error(path + ": cases: expected a non-empty list of cases");
  std::vector<DtCase> out;
  for (size_t i = 0; i < doc["cases"].size(); ++i) {
    const json& j = doc["cases"][i];
    Ctx cx{path, "cases[" + std::to_string(i) + "]"};
    if (!j.is_object()) cx.fail("", "expected an object");
    DtCase c;
    c.name = "case " + std::to_string(i);
    if (j.contains("name")) {
      if (!j["name"].is_string()) cx.fail("name", "expected text");
      c.name = j["name"].get<std::string>();
    }
    c.hw_n_variables = integer(cx, need(cx, j, "hw_n_variables"), "hw_n_variables", 1, 1 << 20);
    if (c.hw_n_variables != 48 && c.hw_n_variables != 16) cx.fail("hw_n_variables", "must be 48 or 16");
    c.cfg = config_from_flags(cx, need(cx, j, "flags"));
    if (j.contains("scale") && !j["scale"].is_null()) c.cfg.scale = number(cx, j["scale"], "scale");
    if (j.contains("alpha") && !j["alpha"].is_null()) c.cfg.alpha = numbers(cx, j["alpha"], "alpha");
    if (j.contains("beta") && !j["beta"].is_null()) c.cfg.beta = numbers(cx, j["beta"], "beta");
    if (j.contains("gamma") && !j["gamma"].is_null()) c.cfg.gamma = number(cx, j["gamma"], "gamma");
    c.W = matrix(cx, need(cx, j, "W_aoc"), "W_aoc", -1, -1);
    const long N = c.W.cols();
    if (c.W.rows() != N) cx.fail("W_aoc", "must be square");
    if (j.contains("n") && number(cx, j["n"], "n") != static_cast<double>(N)) cx.fail("n", "differs from the size of W_aoc");
    c.z0 = matrix(cx, need(cx, j, "z0"), "z0", -1, N);
    const long B = c.z0.rows();
    c.x = j.contains("x") && !j["x"].is_null() ? matrix(cx, j["x"], "x", B, N) : MatrixXdR::Zero(B, N);
    c.bias = Eigen::VectorXd::Zero(N);
    if (j.contains("bias") && !j["bias"].is_null()) {
      const std::vector<double> b = numbers(cx, j["bias"], "bias");
      if (static_cast<long>(b.size()) != N) cx.fail("bias", "expected " + std::to_string(N) + " values");
      c.bias = Eigen::Map<const Eigen::VectorXd>(b.data(), N);
    }
    for (const auto* v : {&c.cfg.alpha, &c.cfg.beta})
      if (v->size() > 1 && static_cast<long>(v->size()) != N) cx.fail(v == &c.cfg.alpha ? "alpha" : "beta", "expected 1 or " + std::to_string(N) + " values");
    c.one_step = matrix(cx, need(cx, j, "one_step"), "one_step", B, N);
    if (j.contains("after_n_iter") && !j["after_n_iter"].is_null()) {
      c.n_iter = integer(cx, need(cx, j, "n_iter"), "n_iter", 1, 1 << 20);
      c.after_n_iter = matrix(cx, j["after_n_iter"], "after_n_iter", B, N);
    }
    if (j.contains("stages_one_step") && !j["stages_one_step"].is_null() && !j["stages_one_step"].is_object())
      cx.fail("stages_one_step", "expected an object of stage name -> rows");
    if (j.contains("stages_one_step") && j["stages_one_step"].is_object())
      for (const auto& [k, v] : j["stages_one_step"].items()) c.stages[k] = matrix(cx, v, "stages_one_step." + k, -1, N);
    out.push_back(std::move(c));
  }
  return out;
}

namespace {

template <class T>
DtCaseReport run_case(const DtCase& c, const Hardware& hw, const DtTolerance& tol) {
  DtCaseReport r;
  r.name = c.name;
  r.hardware = hw.name;
  r.N = static_cast<int>(c.W.cols());
  r.B = static_cast<int>(c.z0.rows());
  r.n_iter = c.n_iter;
  OpticalCore<T> core(hw, c.cfg);
  core.load_weights(c.W, c.bias);
  const Batch<T> x = Batch<T>::from(c.x), z0 = Batch<T>::from(c.z0);
  const Batch<T> inj = core.injection(x);
  Batch<T> out;
  core.step(z0, inj, nullptr, out);
  r.err_one_step = (out.to_double() - c.one_step).cwiseAbs().maxCoeff();
  if (c.n_iter > 0) {
    const SolveResult res = solve_fixed_point<T>(core.step_fn(), inj, z0, SolverOptions::fixed(c.n_iter));
    r.err_n_iter = (res.z - c.after_n_iter).cwiseAbs().maxCoeff();
  }
  if (!c.stages.empty()) {
    const StepStages s = twin_step_stages(hw, c.cfg, c.W, c.bias, c.z0, c.x);
    const auto named = s.named();
    const std::map<std::string, const MatrixXdR*> ours(named.begin(), named.end());
    for (const auto& [name, ref] : c.stages) {
      auto it = ours.find(name);
      if (it == ours.end() || it->second->rows() != ref.rows() || it->second->cols() != ref.cols()) {
        r.stages_not_compared.push_back(name);
        continue;
      }
      r.stage_errors.emplace_back(name, (*it->second - ref).cwiseAbs().maxCoeff());
    }
  }
  r.pass = r.err_one_step <= tol.one_step && (c.n_iter == 0 || r.err_n_iter <= tol.n_iter);
  for (const auto& [name, e] : r.stage_errors) r.pass = r.pass && e <= tol.one_step;
  return r;
}

}  // namespace

DtCaseReport verify_dt_case(const DtCase& c, const Hardware& hw, Precision p, const DtTolerance& tol) {
  return p == Precision::F32 ? run_case<float>(c, hw, tol) : run_case<double>(c, hw, tol);
}

}  // namespace aoc
