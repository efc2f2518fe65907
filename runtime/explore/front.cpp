#include "runtime/explore/front.hpp"

#include <pagmo/utils/hypervolume.hpp>

#include <algorithm>
#include <cmath>

namespace aoc::explore {

using sweep::Row;
using sweep::Scenario;

std::vector<double> objectives_of(const Scenario& s, const Row& r) {
  if (r.status != "ok" || violation(s, r) > 0) return {};
  std::vector<double> f;
  for (const sweep::Objective& o : s.objectives) {
    double x = r.metrics[o.column];
    if (!std::isfinite(x) || (o.log && !(x > 0))) return {};
    if (o.log) x = std::log10(x);
    f.push_back(o.maximise ? -x : x);
  }
  return f;
}

double violation(const Scenario& s, const Row& r) {
  constexpr double kBroken = 1000;
  if (r.status != "ok" && r.status != "screened") return kBroken;  // a screened row's metrics are its screen's
  double v = 0;
  for (const sweep::Constraint& c : s.constraints) {
    const double x = r.metrics[c.column];
    if (!std::isfinite(x)) return kBroken;
    if (x < c.min) v += (c.min - x) / std::max(1e-300, std::fabs(c.min));
    if (x > c.max) v += (x - c.max) / std::max(1e-300, std::fabs(c.max));
  }
  return v;
}

namespace {

bool dominates(const std::vector<double>& a, const std::vector<double>& b) {
  bool better = false;
  for (std::size_t k = 0; k < a.size(); ++k) {
    if (a[k] > b[k]) return false;
    better |= a[k] < b[k];
  }
  return better;
}

}  // namespace

std::vector<std::size_t> front(const Scenario& s, const std::vector<Row>& rows) {
  std::vector<std::vector<double>> f(rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) f[i] = objectives_of(s, rows[i]);
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (f[i].empty()) continue;
    bool beaten = false;
    for (std::size_t j = 0; j < rows.size() && !beaten; ++j)
      beaten = !f[j].empty() && (dominates(f[j], f[i]) || (j < i && f[j] == f[i]));
    if (!beaten) out.push_back(i);
  }
  return out;
}

sweep::Scenario goals_of(const sweep::Results& r) {
  Scenario s;
  s.name = r.header.name;
  s.columns = r.header.metrics;
  sweep::json j;
  try {
    j = sweep::json::parse(r.header.scenario_json);
  } catch (const std::exception&) {
    return s;
  }
  const auto column = [&](const sweep::json& e, std::size_t& at) {
    if (!e.is_object() || !e.contains("metric") || !e["metric"].is_string()) return false;
    for (std::size_t k = 0; k < s.columns.size(); ++k)
      if (s.columns[k].name == e["metric"].get<std::string>()) return at = k, true;
    return false;
  };
  if (j.contains("objectives") && j["objectives"].is_array())
    for (const auto& e : j["objectives"]) {
      sweep::Objective o;
      if (!column(e, o.column) || s.columns[o.column].better.empty()) continue;
      o.metric = s.columns[o.column].name;
      o.maximise = s.columns[o.column].better == "max";
      o.log = e.contains("scale") && e["scale"] == "log";
      s.objectives.push_back(o);
    }
  if (j.contains("constraints") && j["constraints"].is_array())
    for (const auto& e : j["constraints"]) {
      sweep::Constraint c;
      if (!column(e, c.column)) continue;
      c.metric = s.columns[c.column].name;
      if (e.contains("min") && e["min"].is_number()) c.min = e["min"].get<double>();
      if (e.contains("max") && e["max"].is_number()) c.max = e["max"].get<double>();
      s.constraints.push_back(c);
    }
  return s;
}

Box box_of(const Scenario& s, const std::vector<const std::vector<Row>*>& designs) {
  const std::size_t k = s.objectives.size();
  Box b{std::vector<double>(k, HUGE_VAL), std::vector<double>(k, -HUGE_VAL)};
  for (const auto* rows : designs)
    for (const Row& r : *rows) {
      const std::vector<double> f = objectives_of(s, r);
      for (std::size_t j = 0; j < f.size(); ++j) b.lo[j] = std::min(b.lo[j], f[j]), b.hi[j] = std::max(b.hi[j], f[j]);
    }
  return b;
}

double hypervolume(const Scenario& s, const std::vector<Row>& rows, const Box& box) {
  constexpr double kReference = 1.1;
  std::vector<pagmo::vector_double> pts;
  for (const std::size_t i : front(s, rows)) {
    std::vector<double> f = objectives_of(s, rows[i]);
    bool inside = true;
    for (std::size_t j = 0; j < f.size(); ++j) {
      const double span = box.hi[j] - box.lo[j];
      f[j] = span > 0 ? (f[j] - box.lo[j]) / span : 0.0;
      inside &= f[j] < kReference;  // outside the box (a design not in it): adds nothing
    }
    if (inside) pts.push_back(std::move(f));
  }
  if (pts.empty()) return 0;
  return pagmo::hypervolume(pts, true).compute(pagmo::vector_double(s.objectives.size(), kReference));
}

}  // namespace aoc::explore

namespace aoc::explore {

std::vector<std::pair<std::size_t, double>> hypervolume_curve(const Scenario& s, const std::vector<Row>& rows, const Box& box,
                                                              const std::vector<std::size_t>& marks) {
  std::vector<std::pair<std::size_t, double>> curve;
  for (const std::size_t n : marks) {
    const std::vector<Row> first(rows.begin(), rows.begin() + static_cast<std::ptrdiff_t>(std::min(n, rows.size())));
    curve.emplace_back(n, hypervolume(s, first, box));
  }
  return curve;
}

std::vector<std::size_t> every(std::size_t step, std::size_t n) {
  std::vector<std::size_t> m;
  for (std::size_t k = std::max<std::size_t>(1, step); k < n; k += std::max<std::size_t>(1, step)) m.push_back(k);
  m.push_back(n);
  return m;
}

}  // namespace aoc::explore
