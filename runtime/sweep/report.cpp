#include "runtime/sweep/report.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <set>

#include "runtime/explore/explore.hpp"
#include "runtime/explore/front.hpp"
#include "runtime/sweep/report_svg.hpp"
#include "sim/error.hpp"
#include "sim/files.hpp"
#include "sim/json_reader.hpp"

namespace aoc::report {

namespace {

using sweep::json;
using svg::esc;
using svg::num;

// The results with what the plots ask of them.
struct Data {
  const sweep::Results& r;
  std::string source;

  const sweep::MetricColumn* metric(const std::string& name) const {
    for (const auto& m : r.header.metrics)
      if (m.name == name) return &m;
    return nullptr;
  }
  std::vector<double> metric_values(const std::string& name) const { return sweep::column(r, "metrics/" + name, source); }
  std::vector<double> param_values(std::size_t k) const { return sweep::column(r, "parameters/" + r.header.params[k].name, source); }
  bool ok(std::size_t i) const { return r.rows[i].status == "ok"; }
  std::size_t distinct(std::size_t k) const {
    std::set<double> v;
    for (double x : param_values(k))
      if (std::isfinite(x)) v.insert(x);
    return v.size();
  }
  std::size_t with_status(const char* status) const {
    return static_cast<std::size_t>(std::count_if(r.rows.begin(), r.rows.end(), [&](const sweep::Row& w) { return w.status == status; }));
  }
  std::size_t failed() const { return with_status("error"); }

  // The free parameters that take more than one number: what tells the points apart.
  std::vector<std::size_t> varied() const {
    std::vector<std::size_t> v;
    for (std::size_t k = 0; k < r.header.params.size(); ++k)
      if (!r.header.params[k].fixed && distinct(k) > 1) v.push_back(k);
    return v;
  }

  std::string value_text(const json& v) const {
    return v.is_string() ? v.get<std::string>() : v.is_number() ? num(v.get<double>()) : v.dump();
  }
  // "point 12: converters.slm_bits 4, noise_scale 10": a tooltip's first line.
  std::string point_text(std::size_t i) const {
    std::string s = "point " + std::to_string(r.rows[i].index);
    const char* sep = ": ";
    for (std::size_t k = 0; k < r.header.params.size(); ++k) {
      if (r.header.params[k].fixed) continue;
      s += sep + r.header.params[k].name + " " + value_text(r.rows[i].params[k]);
      sep = ", ";
    }
    return s;
  }
};

// What a metric or parameter means on an axis, with its unit for the ticks.
std::pair<std::string, std::string> axis_name(const Data& d, const std::string& name) {
  static const std::map<std::string, std::string> words = {
      {"accuracy", "accuracy (fraction of decisions right)"},
      {"agreement", "argmax agreement with the reference"},
      {"p", "success probability (samples at the known optimum)"},
      {"cc", "correlation with the recorded rates (CC)"},
      {"energy", "energy per token"},
      {"latency", "latency per token"},
      {"iterations", "iterations per solve"},
      {"tops_per_w", "TOPS/W"},
      {"noise_scale", "noise (x every level of the file's noise section)"},
      {"photons_per_sample", "photons per detector sample"},
      {"converters.slm_bits", "SLM weight bits"}};
  const auto w = words.find(name);
  const sweep::MetricColumn* m = d.metric(name);
  return {w != words.end() ? w->second : name, m ? m->unit : ""};
}

bool noise_like(const std::string& n) { return n == "noise_scale" || n.rfind("noise.", 0) == 0 || n == "photons_per_sample"; }
bool bits_like(const std::string& n) { return n.find("bits") != std::string::npos; }

// A plot or the note that stands in for it.
struct Figure {
  explicit Figure(std::string t = "") : title(std::move(t)) {}
  std::string title, svg, note, caption, table;
  std::string dominant;  // a stacked chart's component of more than 90 %, which hides the others
};

// A stacked chart, and where one component dominates it, the chart of the others beside it.
std::vector<Figure> breakdown_plots(const Data& d, const std::string& prefix, const std::string& what, const std::string& unit);

// Keeps an accuracy-like axis within [0, 1], where the data are.
void clamp_fraction(svg::Axis& a, const std::vector<double>& v) {
  const double mx = *std::max_element(v.begin(), v.end()), mn = *std::min_element(v.begin(), v.end());
  if (!a.log && mx <= 1 && mn >= 0) a.hi = std::min(a.hi, 1.0), a.lo = std::max(a.lo, 0.0);
}

// The frame of an x-y plot of named columns: each axis fitted to its data, with its label and unit;
// an accuracy-like y axis kept within [0, 1].
svg::Frame frame_of(const Data& d, const std::vector<double>& xs, const std::vector<double>& ys, const std::string& xname,
                    const std::string& yname) {
  svg::Frame fr;
  const auto [xl, xu] = axis_name(d, xname);
  const auto [yl, yu] = axis_name(d, yname);
  fr.x = svg::fit(xs, xl, xu);
  fr.y = svg::fit(ys, yl, yu);
  if (yname == "accuracy" || yname == "agreement" || yname == "p") clamp_fraction(fr.y, ys);
  return fr;
}

// The parameter along x and the one whose values make the lines (kNone: none): the noise against the
// weight bits when both vary (what a model tolerates); else the parameter with the most values
// along x and the one with the fewest as lines.
constexpr std::size_t kNone = static_cast<std::size_t>(-1);
std::pair<std::size_t, std::size_t> choose_axes(const Data& d) {
  const auto& params = d.r.header.params;
  const std::vector<std::size_t> var = d.varied();
  std::size_t xk = kNone, sk = kNone;
  for (std::size_t k : var)
    if (xk == kNone && noise_like(params[k].name)) xk = k;
  for (std::size_t k : var)
    if (xk == kNone || (!noise_like(params[xk].name) && d.distinct(k) > d.distinct(xk))) xk = k;
  for (std::size_t k : var)
    if (sk == kNone && k != xk && bits_like(params[k].name)) sk = k;
  for (std::size_t k : var)
    if (k != xk && d.distinct(k) <= 10 && (sk == kNone || (!bits_like(params[sk].name) && d.distinct(k) < d.distinct(sk)))) sk = k;
  return {xk, sk};
}

// A metric against the parameters: accuracy against the noise with a line per weight-bit setting
// shows how much noise and how few bits a model tolerates; energy per token against module count
// with a line per core size, what a machine costs. Points that differ in other parameters are
// averaged.
Figure metric_plot(const Data& d, const std::string& y, const std::string& what) {
  Figure f{what + " against the parameters"};
  const auto& params = d.r.header.params;
  const std::vector<std::size_t> var = d.varied();
  const auto [xk, sk] = choose_axes(d);
  if (xk == kNone) {
    f.note = "No parameter varies between the points, so there is nothing to plot " + y + " against.";
    return f;
  }
  const std::vector<double> X = d.param_values(xk), Y = d.metric_values(y);
  const std::vector<double> S = sk != kNone ? d.param_values(sk) : std::vector<double>(X.size(), 0.0);
  // series value -> x -> (sum, count)
  std::map<double, std::map<double, std::pair<double, int>>, std::greater<>> mean;
  std::vector<double> xs, ys;
  for (std::size_t i = 0; i < X.size(); ++i) {
    if (!d.ok(i) || !std::isfinite(X[i]) || !std::isfinite(Y[i])) continue;
    auto& c = mean[S[i]][X[i]];
    c.first += Y[i], c.second += 1;
    xs.push_back(X[i]), ys.push_back(Y[i]);
  }
  if (xs.empty()) {
    f.note = "Every point failed: no " + y + " to plot.";
    return f;
  }
  const std::string xname = params[xk].name, sname = sk != kNone ? params[sk].name : "";
  f.title = what + " against " + xname + (sk != kNone ? " and " + sname : "");
  svg::Frame fr = frame_of(d, xs, ys, xname, y);
  f.svg = svg::open(fr, f.title);
  // Sampled (random, Latin hypercube) x values rarely repeat: points then, not lines.
  std::set<double> distinct_x(xs.begin(), xs.end());
  const bool lines = distinct_x.size() <= 16;
  std::vector<std::pair<std::string, std::string>> items;
  std::size_t c = 0;
  for (const auto& [s, by_x] : mean) {
    std::vector<double> lx, ly;
    std::vector<std::string> tips;
    for (const auto& [x, sum] : by_x) {
      lx.push_back(x), ly.push_back(sum.first / sum.second);
      tips.push_back((sk != kNone ? sname + " " + num(s) + ", " : "") + xname + " " + num(x) + ": " + y + " " + num(ly.back()) +
                     (sum.second > 1 ? " (mean of " + std::to_string(sum.second) + " points)" : ""));
    }
    if (lines) f.svg += svg::line(fr, lx, ly, svg::color(c));
    // each series' marks a size smaller than the one before, drawn over it: series that coincide
    // show as rings, not as the last one alone
    const double shrink = 1.5 * static_cast<double>(std::min<std::size_t>(mean.size() - 1, 4)) - 1.5 * static_cast<double>(std::min<std::size_t>(c, 4));
    f.svg += svg::points(fr, lx, ly, svg::color(c), (lines ? 4 : 3) + shrink, tips);
    items.push_back({svg::color(c), sk == kNone ? y : bits_like(sname) ? num(s) + " bits" : sname + " = " + num(s)});
    if (++c == 17) break;  // more series than colours: the rest would be unreadable anyway
  }
  f.svg += svg::legend(fr, items) + svg::close();
  std::vector<std::string> others;
  for (std::size_t k : var)
    if (k != xk && k != sk) others.push_back(params[k].name);
  f.caption = y == "accuracy"    ? "Fraction of the task's positions whose decision (argmax) is the label, mean over the noise seeds."
              : y == "agreement" ? "Fraction of positions whose argmax is the exact reference's, mean over the noise seeds."
              : y == "p"         ? "Fraction of the optimiser's samples that reach the problem's known optimum (docs/optimisation.md)."
              : y == "cc"        ? "Correlation of the retina model's predicted rates with the recorded ones, mean over cells (docs/retina.md)."
                                 : "Typical energy of the machine's energy model per token of the program.";
  if (!others.empty()) {
    f.caption += " Each mark is the mean over the points that differ only in ";
    for (std::size_t i = 0; i < others.size(); ++i) f.caption += (i ? ", " : "") + others[i];
    f.caption += ".";
  }
  return f;
}

// Accuracy (else agreement with the reference; for an optimisation problem, the success
// probability; for a retina model, its CC) against noise and weight bits.
Figure accuracy_plot(const Data& d) {
  if (d.metric("p")) return metric_plot(d, "p", "Success probability");
  if (d.metric("cc")) return metric_plot(d, "cc", "Correlation with the recorded rates (CC)");
  const std::string y = d.metric("accuracy") ? "accuracy" : d.metric("agreement") ? "agreement" : "";
  if (y.empty()) {
    Figure f{"Accuracy against noise and weight bits"};
    f.note = "No accuracy or agreement column: this sweep's workload is only estimated (a published config, or a graph without "
             "weights and inputs), nothing ran on the simulator.";
    return f;
  }
  return metric_plot(d, y, y == "accuracy" ? "Accuracy" : "Agreement with the reference");
}

// The headline metric: accuracy, else agreement with the reference, else a retina model's CC, else
// energy per token ("": none).
std::string headline(const Data& d) {
  for (const char* m : {"accuracy", "agreement", "cc", "energy"})
    if (d.metric(m)) return m;
  return "";
}

// The headline metric against each varied parameter in turn, every point a mark: where three or more
// parameters vary (or the points are sampled, not a grid) the plots above average the others away,
// and these small panels show each one. Empty when the plots above already show every parameter.
std::vector<Figure> parameter_plots(const Data& d) {
  const std::vector<std::size_t> var = d.varied();
  const std::string y = headline(d);
  if (y.empty() || (var.size() < 3 && d.r.header.sampling == "grid") || var.size() < 2) return {};
  std::vector<Figure> out;
  const std::vector<double> Y = d.metric_values(y);
  for (std::size_t k : var) {
    const std::string xname = d.r.header.params[k].name;
    Figure f{y == "energy" ? "Energy per token against " + xname + ", every point"
                                     : (y == "accuracy" ? "Accuracy" : "Agreement") + std::string(" against ") + xname + ", every point"};
    const std::vector<double> X = d.param_values(k);
    std::vector<double> xs, ys;
    std::vector<std::string> tips;
    for (std::size_t i = 0; i < X.size(); ++i)
      if (d.ok(i) && std::isfinite(X[i]) && std::isfinite(Y[i])) {
        xs.push_back(X[i]), ys.push_back(Y[i]);
        tips.push_back(d.point_text(i) + ": " + y + " " + num(Y[i]));
      }
    if (xs.empty()) continue;
    svg::Frame fr = frame_of(d, xs, ys, xname, y);
    fr.right = 24;
    f.svg = svg::open(fr, f.title) + svg::points(fr, xs, ys, svg::color(out.size()), 3, tips) + svg::close();
    f.caption = "Every point of the sweep, whatever its other parameters: the spread at one value of " + xname +
                " is what the other parameters do.";
    out.push_back(f);
  }
  return out;
}

// Spearman's rank correlation of x and y (ties get their mean rank); NaN when either is constant.
double rank_correlation(const std::vector<double>& x, const std::vector<double>& y) {
  const auto ranks = [](const std::vector<double>& v) {
    std::vector<std::size_t> order(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return v[a] < v[b]; });
    std::vector<double> r(v.size());
    for (std::size_t i = 0; i < order.size();) {
      std::size_t j = i;
      while (j + 1 < order.size() && v[order[j + 1]] == v[order[i]]) ++j;
      for (std::size_t k = i; k <= j; ++k) r[order[k]] = 0.5 * static_cast<double>(i + j);
      i = j + 1;
    }
    return r;
  };
  const std::vector<double> rx = ranks(x), ry = ranks(y);
  const double n = static_cast<double>(x.size());
  double mx = 0, my = 0;
  for (std::size_t i = 0; i < x.size(); ++i) mx += rx[i] / n, my += ry[i] / n;
  double sxy = 0, sxx = 0, syy = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    sxy += (rx[i] - mx) * (ry[i] - my), sxx += (rx[i] - mx) * (rx[i] - mx), syy += (ry[i] - my) * (ry[i] - my);
  }
  return sxx > 0 && syy > 0 ? sxy / std::sqrt(sxx * syy) : std::numeric_limits<double>::quiet_NaN();
}

// Which parameter moves which metric (random and Latin-hypercube sweeps, where the points spread
// over every parameter at once): the rank correlation of each parameter with accuracy, energy and
// latency over the points that ran, one bar each, from -1 to 1 (a tornado).
Figure sensitivity_plot(const Data& d) {
  Figure f{"Sensitivity of each metric to each parameter"};
  if (d.r.header.sampling == "grid") return Figure{};
  const std::vector<std::size_t> var = d.varied();
  std::vector<std::string> metrics;
  for (const char* m : {"accuracy", "agreement", "cc", "energy", "latency"})
    if (d.metric(m) && !(std::string(m) == "agreement" && d.metric("accuracy"))) metrics.push_back(m);
  if (var.empty() || metrics.empty()) {
    f.note = var.empty() ? "No parameter varies between the points." : "The results hold no accuracy, energy or latency.";
    return f;
  }
  svg::Frame fr;
  fr.x.label = "Spearman rank correlation", fr.x.lo = -1, fr.x.hi = 1;
  const double rows = static_cast<double>(var.size());
  fr.y.lo = -0.5, fr.y.hi = rows - 0.5;
  for (std::size_t r = 0; r < var.size(); ++r) fr.y.categories.push_back({static_cast<double>(var.size() - 1 - r), d.r.header.params[var[r]].name});
  fr.height = std::max(220.0, 70 + 60 * rows), fr.left = 190;
  f.svg = svg::open(fr, f.title);
  std::vector<std::pair<std::string, std::string>> items;
  const double band = 0.8 / static_cast<double>(metrics.size());
  for (std::size_t m = 0; m < metrics.size(); ++m) {
    const std::vector<double> Y = d.metric_values(metrics[m]);
    for (std::size_t r = 0; r < var.size(); ++r) {
      const std::vector<double> X = d.param_values(var[r]);
      std::vector<double> xs, ys;
      for (std::size_t i = 0; i < X.size(); ++i)
        if (d.ok(i) && std::isfinite(X[i]) && std::isfinite(Y[i])) xs.push_back(X[i]), ys.push_back(Y[i]);
      const double rho = xs.size() > 2 ? rank_correlation(xs, ys) : std::numeric_limits<double>::quiet_NaN();
      if (!std::isfinite(rho)) continue;
      const double yc = static_cast<double>(var.size() - 1 - r) + 0.4 - band * (static_cast<double>(m) + 0.5);
      f.svg += svg::rect(fr, std::min(0.0, rho), std::max(0.0, rho), yc - band / 2, yc + band / 2, svg::color(m),
                         d.r.header.params[var[r]].name + " and " + metrics[m] + ": rank correlation " + num(rho) + " over " +
                             std::to_string(xs.size()) + " points");
    }
    items.push_back({svg::color(m), metrics[m]});
  }
  f.svg += svg::line(fr, {0, 0}, {fr.y.lo, fr.y.hi}, "#444", 1) + svg::legend(fr, items) + svg::close();
  f.caption = "How each parameter orders each metric over the sampled points: +1, the metric rises with the parameter "
              "everywhere; -1, falls; near 0, the parameter does not move it (or moves it both ways).";
  return f;
}

// A table of rows: the point, the two columns, the other headline metrics and the free parameters.
std::string points_table(const Data& d, const std::vector<std::size_t>& rows, const std::vector<std::string>& cols, std::size_t cap = 60) {
  std::vector<std::string> shown = cols;
  for (const char* m : {"accuracy", "energy", "latency", "iterations", "tops_per_w"})
    if (d.metric(m) && std::find(shown.begin(), shown.end(), m) == shown.end()) shown.push_back(m);
  std::vector<std::size_t> free;
  for (std::size_t k = 0; k < d.r.header.params.size(); ++k)  // a parameter shown as a metric already (K) once
    if (!d.r.header.params[k].fixed && std::find(shown.begin(), shown.end(), d.r.header.params[k].name) == shown.end()) free.push_back(k);
  std::string t = "<table><tr><th>point</th>";
  for (const auto& c : shown) t += "<th>" + esc(c) + "</th>";
  for (std::size_t k : free) t += "<th>" + esc(d.r.header.params[k].name) + "</th>";
  t += "</tr>\n";
  std::map<std::string, std::vector<double>> values;
  for (const auto& c : shown) values[c] = d.metric_values(c);
  for (std::size_t n = 0; n < rows.size() && n < cap; ++n) {
    const std::size_t i = rows[n];
    t += "<tr><td>" + std::to_string(d.r.rows[i].index) + (d.r.rows[i].status == "screened" ? " (screened)" : "") + "</td>";
    for (const auto& c : shown) t += "<td>" + esc(num(values[c][i], d.metric(c)->unit)) + "</td>";
    for (std::size_t k : free) t += "<td>" + esc(d.value_text(d.r.rows[i].params[k])) + "</td>";
    t += "</tr>\n";
  }
  t += "</table>\n";
  if (rows.size() > cap) t += "<p class=\"note\">" + std::to_string(rows.size() - cap) + " more rows not shown.</p>\n";
  return t;
}

// Every point's parameters and metrics, so that nothing in the plots is only in a tooltip: open
// where the sweep is small, a click away where it is long.
std::string every_point(const Data& d) {
  std::vector<std::size_t> rows(d.r.rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) rows[i] = i;
  constexpr std::size_t kOpen = 60, kCap = 5000;
  return "<h2>Every point</h2>\n<details" + std::string(rows.size() <= kOpen ? " open" : "") + "><summary>" + std::to_string(rows.size()) +
         " points: their parameters and metrics (a failed point has none, a screened one its screen's)</summary>\n" + points_table(d, rows, {}, kCap) +
         "</details>\n";
}

// Every point of two metrics, and the Pareto front (sweep::pareto_front, as `aoc pareto`) drawn as
// the staircase that bounds the region no point reaches.
Figure pareto_plot(const Data& d, const std::string& xn, const std::string& yn, const std::string& title) {
  Figure f{title};
  const sweep::MetricColumn *mx = d.metric(xn), *my = d.metric(yn);
  if (!mx || !my) {
    f.note = std::string("No ") + (!mx ? xn : yn) + " column: add the \"" + (!mx ? xn : yn) + "\" metric group to the scenario.";
    return f;
  }
  const std::vector<double> X = d.metric_values(xn), Y = d.metric_values(yn);
  const bool xmax = mx->better == "max", ymax = my->better == "max";
  const std::vector<std::size_t> front = sweep::pareto_front(X, Y, xmax, ymax);
  if (front.empty()) {
    f.note = "No point has both " + xn + " and " + yn + " (every point failed).";
    return f;
  }
  std::vector<double> xs, ys;
  std::vector<std::string> tips;
  for (std::size_t i = 0; i < X.size(); ++i)
    if (std::isfinite(X[i]) && std::isfinite(Y[i])) {
      xs.push_back(X[i]), ys.push_back(Y[i]);
      tips.push_back(d.point_text(i) + "\n" + xn + " " + num(X[i], mx->unit) + ", " + yn + " " + num(Y[i], my->unit));
    }
  const svg::Frame fr = frame_of(d, xs, ys, xn, yn);
  f.svg = svg::open(fr, title) + svg::points(fr, xs, ys, "#8da0b6", 3.5, tips);
  std::vector<double> sx, sy, fx, fy;
  std::vector<std::string> ftips;
  for (std::size_t n = 0; n < front.size(); ++n) {
    const std::size_t i = front[n];
    if (n) sx.push_back(X[i]), sy.push_back(sy.back());  // along x first, then to the next point
    sx.push_back(X[i]), sy.push_back(Y[i]);
    fx.push_back(X[i]), fy.push_back(Y[i]);
    ftips.push_back("Pareto: " + d.point_text(i) + "\n" + xn + " " + num(X[i], mx->unit) + ", " + yn + " " + num(Y[i], my->unit));
  }
  f.svg += svg::line(fr, sx, sy, "#D55E00", 1.5) + svg::points(fr, fx, fy, "#D55E00", 5, ftips);
  f.svg += svg::legend(fr, {{"#8da0b6", std::to_string(xs.size()) + " points"}, {"#D55E00", "Pareto front (" + std::to_string(front.size()) + ")"}});
  f.svg += svg::close();
  f.caption = "A point is on the front when no other point is at least as good on both (" + xn + ": " + (xmax ? "more" : "less") + " is better; " +
              yn + ": " + (ymax ? "more" : "less") + " is better). The same front as aoc pareto --x " + xn + " --y " + yn + ".";
  f.table = points_table(d, front, {xn, yn});
  return f;
}

// The per-token energy (or latency) of each point by component, stacked. Many points: an even
// spread of them by total, so the chart stays readable. `without`: a component left out (the one
// that dominates, so the second chart shows the small ones).
Figure breakdown_plot(const Data& d, const std::string& prefix, const std::string& what, const std::string& unit,
                      const std::string& without = "") {
  Figure f{what + " per token by component" + (without.empty() ? "" : ", without " + without)};
  std::vector<std::string> parts;
  std::vector<std::vector<double>> cols;
  std::vector<std::size_t> hue;  // the colour of each part: its place among all parts, in both charts
  std::size_t used = 0;
  for (const auto& m : d.r.header.metrics) {
    if (m.name.rfind(prefix, 0) != 0) continue;
    std::vector<double> v = d.metric_values(m.name);
    if (std::none_of(v.begin(), v.end(), [](double x) { return std::isfinite(x) && x > 0; })) continue;  // a line no point uses
    std::string p = m.name.substr(prefix.size());
    std::replace(p.begin(), p.end(), '_', ' ');
    if (p != without) parts.push_back(p), cols.push_back(std::move(v)), hue.push_back(used);
    ++used;
  }
  if (parts.empty()) {
    f.note = "No per-component " + what + " columns (" + prefix + "*): add the \"breakdown\" metric group to the scenario.";
    return f;
  }
  std::vector<std::pair<double, std::size_t>> by_total;
  for (std::size_t i = 0; i < d.r.rows.size(); ++i) {
    if (!d.ok(i)) continue;
    double t = 0;
    for (const auto& c : cols) t += std::isfinite(c[i]) ? c[i] : 0;
    by_total.push_back({t, i});
  }
  if (by_total.empty()) {
    f.note = "Every point failed: no " + what + " to break down.";
    return f;
  }
  constexpr std::size_t kBars = 30;
  std::vector<std::size_t> rows;
  if (by_total.size() <= kBars) {
    for (const auto& [t, i] : by_total) rows.push_back(i);
  } else {
    std::sort(by_total.begin(), by_total.end());
    for (std::size_t b = 0; b < kBars; ++b) rows.push_back(by_total[b * (by_total.size() - 1) / (kBars - 1)].second);
    f.caption = std::to_string(kBars) + " of the " + std::to_string(by_total.size()) + " points, evenly spread from the lowest total to the highest. ";
  }
  // Bars named by the values of the varied parameters ("4096 / 400") where the names stay short,
  // else by point number (the table "Every point" below gives its values).
  const std::vector<std::size_t> varied = d.varied();
  std::vector<std::string> bars, tips, named;
  std::string xlabel;
  for (std::size_t k : varied) xlabel += (xlabel.empty() ? "" : " / ") + d.r.header.params[k].name;
  for (std::size_t i : rows) {
    std::string b;
    for (std::size_t k : varied) b += (b.empty() ? "" : "/") + d.value_text(d.r.rows[i].params[k]);
    named.push_back(b);
  }
  const bool by_value = !varied.empty() && varied.size() <= 3 &&
                        std::all_of(named.begin(), named.end(), [](const std::string& b) { return b.size() <= 14; });
  if (!by_value) xlabel = "point (its values: the table of every point)";
  std::vector<std::vector<double>> value(parts.size());
  double lo = INFINITY, hi = 0;
  for (std::size_t n = 0; n < rows.size(); ++n) {
    const std::size_t i = rows[n];
    bars.push_back(by_value ? named[n] : "#" + std::to_string(d.r.rows[i].index));
    tips.push_back(d.point_text(i));
    double t = 0;
    for (std::size_t k = 0; k < parts.size(); ++k) {
      const double v = std::isfinite(cols[k][i]) ? cols[k][i] : 0;
      value[k].push_back(v), t += v;
    }
    if (t > 0) lo = std::min(lo, t), hi = std::max(hi, t);
  }
  // Totals over decades would leave the small bars flat: shares then, the totals in the tooltips.
  const bool shares = hi > 20 * lo;
  f.svg = svg::stacked_bars(f.title + (shares ? " (shares)" : ""), bars, parts, value, what == "Energy" ? "energy per token" : "latency per token",
                            unit, shares, tips, xlabel, hue);
  f.caption += shares ? "The totals span more than a factor of 20, so each bar shows the shares; hover a bar for its values."
                      : "Hover a bar for its values.";
  // The mix in words: a small part is invisible next to a dominant one.
  std::vector<double> bar_total(rows.size(), 0.0);
  for (const auto& v : value)
    for (std::size_t b = 0; b < rows.size(); ++b) bar_total[b] += v[b];
  std::vector<std::pair<double, std::string>> share;
  for (std::size_t k = 0; k < parts.size(); ++k) {
    double sum = 0;
    for (std::size_t b = 0; b < rows.size(); ++b) sum += bar_total[b] > 0 ? value[k][b] / bar_total[b] : 0;
    share.push_back({sum / static_cast<double>(rows.size()), parts[k]});
  }
  std::sort(share.rbegin(), share.rend());
  if (share.size() > 2 && share[0].first > 0.9) f.dominant = share[0].second;
  f.caption += " Mean shares over these points:";
  for (std::size_t k = 0; k < share.size() && k < 4; ++k) f.caption += (k ? ", " : " ") + share[k].second + " " + num(100 * share[k].first) + " %";
  f.caption += ".";
  if (what == "Latency") f.caption += " The lines are serial: their sum is the latency per token.";
  return f;
}

std::vector<Figure> breakdown_plots(const Data& d, const std::string& prefix, const std::string& what, const std::string& unit) {
  std::vector<Figure> f{breakdown_plot(d, prefix, what, unit)};
  if (!f[0].dominant.empty()) f.push_back(breakdown_plot(d, prefix, what, unit, f[0].dominant));
  return f;
}

// How many iterations each point's solves took (mean per point): a histogram over the points.
Figure iterations_plot(const Data& d) {
  Figure f{"Iterations per solve"};
  if (!d.metric("iterations")) {
    f.note = "No iterations column: add the \"iterations\" metric group to the scenario.";
    return f;
  }
  std::vector<std::pair<std::string, std::vector<double>>> series{{"simulator (mean per point)", d.metric_values("iterations")}};
  if (!d.r.header.params.empty() && std::any_of(d.r.header.params.begin(), d.r.header.params.end(), [](const auto& p) { return p.name == "iterations"; })) {
    series[0].first = "K per token (a parameter)";
    f.caption = "Estimates only: the iterations are the parameter K the estimate used. ";
  }
  if (d.metric("reference_iterations")) series.push_back({"reference (mean per point)", d.metric_values("reference_iterations")});
  std::set<double> seen;
  for (double x : series[0].second)
    if (std::isfinite(x)) seen.insert(x);
  if (seen.empty()) {
    f.note = "Every point failed: no iterations to count.";
    return f;
  }
  if (seen.size() == 1 && series.size() == 1) {
    f.note = "Every point has the same iterations per solve, " + num(*seen.begin()) + ": nothing to histogram.";
    return f;
  }
  f.svg = svg::histogram(f.title, series, "iterations per solve (mean over a point's tokens and sequences)", "");
  f.caption += "A histogram over the points of each point's mean iterations per fixed-point solve.";
  if (d.metric("failures")) {
    std::size_t n = 0;
    for (double x : d.metric_values("failures")) n += std::isfinite(x) && x > 0;
    if (n) f.caption += " " + std::to_string(n) + " point(s) had solves that missed their tolerance (metric failures), such as those stopped by the iteration cap.";
  }
  return f;
}

// A search's (or any scenario with objectives) hypervolume after each evaluation, beside the
// unscreened search's, the grid's and the random sample's of `aoc explore --compare` where their files sit next to this one; and the
// machine it would choose. Absent (no figure, no note) where the scenario names no objectives.
Figure hypervolume_plot(const Data& d) {
  Figure f{"Hypervolume against evaluations"};
  const sweep::Scenario g = explore::goals_of(d.r);
  if (g.objectives.size() < 2) return Figure{};
  std::vector<std::pair<std::string, sweep::Results>> designs{{d.r.header.sampling, d.r}};
  if (d.r.header.sampling == "nsga2")
    for (const char* other : {"unscreened", "grid", "random"}) {
      const std::string path = explore::design_output(d.source, other);
      std::error_code ec;
      if (!std::filesystem::exists(path, ec)) continue;
      try {
        sweep::Results o = sweep::read_results_h5(path);
        if (o.header.config_hash == d.r.header.config_hash) designs.emplace_back(other, std::move(o));
      } catch (const Error&) {
        // not a results file of this search: left out
      }
    }
  std::vector<const std::vector<sweep::Row>*> all;
  for (const auto& [n, r] : designs) all.push_back(&r.rows);
  const explore::Box box = explore::box_of(g, all);
  svg::Frame fr;
  std::vector<std::vector<double>> xs, ys;
  double most = 1, top = 0;
  for (const auto& [n, r] : designs) {
    std::vector<double> x, y;
    for (const auto& [m, hv] : explore::hypervolume_curve(g, r.rows, box, explore::every(r.rows.size() / 60, r.rows.size())))
      x.push_back(static_cast<double>(m)), y.push_back(hv);
    most = std::max(most, static_cast<double>(r.rows.size())), top = std::max(top, y.empty() ? 0.0 : y.back());
    xs.push_back(std::move(x)), ys.push_back(std::move(y));
  }
  if (!(top > 0)) {
    f.note = "No feasible point: nothing on the front to measure.";
    return f;
  }
  fr.x.label = "evaluations", fr.x.lo = 0, fr.x.hi = most;
  fr.y.label = "hypervolume", fr.y.lo = 0, fr.y.hi = top * 1.05;
  std::string marks;
  std::vector<std::pair<std::string, std::string>> legend;
  for (std::size_t i = 0; i < designs.size(); ++i) {
    marks += svg::line(fr, xs[i], ys[i], svg::color(i), 2, i > 0);
    legend.emplace_back(svg::color(i), designs[i].first + " (" + std::to_string(designs[i].second.rows.size()) + ")");
  }
  f.svg = svg::open(fr, f.title) + marks + svg::legend(fr, legend) + svg::close();
  std::string objectives;
  for (const auto& o : g.objectives) objectives += (objectives.empty() ? "" : ", ") + o.metric + (o.log ? " (decades)" : "");
  f.caption = "The volume the feasible front of the first n evaluations dominates, each objective (" + objectives +
              ") mapped onto [0, 1] by the best and worst feasible value of the designs shown, the reference point at 1.1 on each axis.";
  const std::vector<std::size_t> front = explore::front(g, d.r.rows);
  if (!front.empty()) {
    const std::size_t c = g.objectives[0].column;
    const auto best = *std::min_element(front.begin(), front.end(), [&](std::size_t a, std::size_t b) {
      const double x = d.r.rows[a].metrics[c], y = d.r.rows[b].metrics[c];
      return g.objectives[0].maximise ? x > y : x < y;
    });
    std::string what;
    for (std::size_t k = 0; k < d.r.header.params.size(); ++k)
      if (!d.r.header.params[k].fixed) what += (what.empty() ? "" : ", ") + d.r.header.params[k].name + " " + d.r.rows[best].params[k].dump();
    f.caption += " The machine of the front's best " + g.objectives[0].metric + ": point " + std::to_string(d.r.rows[best].index) + " (" + what + "), " +
                 g.objectives[0].metric + " " + svg::num(d.r.rows[best].metrics[c], d.r.header.metrics[c].unit) + ".";
  }
  return f;
}

std::string header_html(const Data& d, const json& scenario) {
  const sweep::Header& h = d.r.header;
  const std::size_t failed = d.failed(), screened = d.with_status("screened"), rows = d.r.rows.size();
  std::string s = "<h1>Sweep report: " + esc(h.name) + "</h1>\n";
  if (scenario.contains("description") && scenario.at("description").is_string())
    s += "<p class=\"desc\">" + esc(scenario.at("description").get<std::string>()) + "</p>\n";
  std::string workload = h.workload;
  if (scenario.contains("workload") && scenario.at("workload").is_object())
    for (const char* key : {"model", "graph", "config", "problem", "retina"})
      if (scenario.at("workload").contains(key) && scenario.at("workload").at(key).is_string())
        workload += ": " + scenario.at("workload").at(key).get<std::string>();
  const std::vector<std::pair<std::string, std::string>> facts = {
      {"results", d.source},
      {"scenario", h.scenario},
      {"workload", workload},
      {"hardware", h.hardware},
      {"sampling", h.sampling},
      {"points", std::to_string(h.points) + " in the scenario; " + std::to_string(rows) + " rows" + (rows == h.points ? "" : " (incomplete)") + ": " +
                     std::to_string(rows - failed - screened) + " ok, " + (screened ? std::to_string(screened) + " stopped by the search's screen, " : "") +
                     std::to_string(failed) + " failed"},
      {"seed", std::to_string(h.seed)},
      {"config hash", h.config_hash},
      {"tool version", "aoc " + h.tool_version}};
  s += "<div class=\"head\"><div>\n<table class=\"facts\">\n";
  for (const auto& [k, v] : facts) s += "<tr><th>" + esc(k) + "</th><td>" + esc(v) + "</td></tr>\n";
  s += "</table>\n</div><div>\n";
  // What varies and what is held.
  s += "<h2 class=\"first\">Parameters</h2>\n<table><tr><th>parameter</th><th>kind</th><th></th><th>values</th></tr>\n";
  for (std::size_t k = 0; k < h.params.size(); ++k) {
    std::set<std::string> seen;
    std::vector<std::string> vals;
    std::vector<double> nums;
    for (const auto& row : d.r.rows) {
      const std::string t = d.value_text(row.params[k]);
      if (seen.insert(t).second) vals.push_back(t);
      if (row.params[k].is_number()) nums.push_back(row.params[k].get<double>());
    }
    std::string text;
    if (vals.size() > 12 && nums.size() == d.r.rows.size())
      text = std::to_string(vals.size()) + " values from " + num(*std::min_element(nums.begin(), nums.end())) + " to " +
             num(*std::max_element(nums.begin(), nums.end()));
    else
      for (std::size_t i = 0; i < vals.size(); ++i) text += (i ? ", " : "") + vals[i];
    s += "<tr><td>" + esc(h.params[k].name) + "</td><td>" + esc(h.params[k].kind) + "</td><td>" + (h.params[k].fixed ? "fixed" : "free") +
         "</td><td>" + esc(text) + "</td></tr>\n";
  }
  s += "</table>\n</div></div>\n";
  if (failed) {
    s += "<h2 class=\"failed\">Failed points (" + std::to_string(failed) + ")</h2>\n<table><tr><th>point</th><th>error</th></tr>\n";
    std::size_t n = 0;
    for (std::size_t i = 0; i < rows; ++i) {
      if (d.r.rows[i].status != "error") continue;
      if (++n > 100) break;
      s += "<tr><td>" + esc(d.point_text(i)) + "</td><td class=\"err\">" + esc(d.r.rows[i].error) + "</td></tr>\n";
    }
    s += "</table>\n";
    if (failed > 100) s += "<p class=\"note\">" + std::to_string(failed - 100) + " more failed points not shown.</p>\n";
  }
  return s;
}

const char* kStyle = R"(body{font-family:sans-serif;margin:24px;color:#222;max-width:1480px}
h1{font-size:22px;margin:0 0 6px}h2{font-size:16px;margin:22px 0 8px}p.desc{max-width:1000px;color:#444}
table{border-collapse:collapse;font-size:12px;margin:4px 0}th,td{border:1px solid #ccc;padding:3px 7px;text-align:left}
th{background:#f2f2f2}.head{display:flex;flex-wrap:wrap;gap:36px}h2.first{margin-top:0}table.facts th{width:120px}td.err{color:#a00;font-family:monospace}h2.failed{color:#a00}
.grid{display:flex;flex-wrap:wrap;gap:18px;align-items:flex-start}figure{margin:0;border:1px solid #ddd;padding:10px;flex:1 1 520px;max-width:720px}
svg.plot{width:100%;height:auto}figcaption{font-size:12px;color:#555;margin-top:4px}p.note{color:#777;font-style:italic;font-size:13px}
h3{font-size:14px;margin:0 0 6px}svg text{fill:#222}ul.notes{font-size:13px;color:#555}summary{cursor:pointer;font-size:13px}
)";

// The headless-browser test reads these body attributes from the rendered DOM (chromium --dump-dom):
// the plots the browser laid out with a nonzero size, and the errors it met (a script error, or an
// SVG coordinate that is not a number). The page needs no script to be read.
const char* kCheckScript = R"(<script>
(function () {
  var drawn = 0, bad = window.aocErrors || 0;
  document.querySelectorAll('svg.plot').forEach(function (s) {
    var b = s.getBBox();
    if (b.width > 0 && b.height > 0) drawn++;
    s.querySelectorAll('*').forEach(function (e) {
      for (var i = 0; i < e.attributes.length; i++) {
        var a = e.attributes[i];
        if (/^(x|y|x1|x2|y1|y2|cx|cy|r|width|height|points|d)$/.test(a.name) && /nan|inf/i.test(a.value)) bad++;
      }
    });
  });
  document.body.setAttribute('data-plots-rendered', drawn);
  document.body.setAttribute('data-render-errors', bad);
})();
</script>
)";

}  // namespace

Page render(const sweep::Results& r, const std::string& source) {
  const Data d{r, source};
  json scenario = json::object();
  try {
    scenario = jsonr::parse_text<json>(r.header.scenario_json, "scenario");
  } catch (const Error&) {
    // the header still has the name and the hash; the description is optional
  }
  std::vector<Figure> figures = {
      accuracy_plot(d),
      d.metric("energy") ? metric_plot(d, "energy", "Energy per token") : Figure{},
      pareto_plot(d, "energy", "latency", "Energy against latency per token"),
      d.metric("accuracy") ? pareto_plot(d, "energy", "accuracy", "Accuracy against energy per token") : Figure{}};
  const auto append = [&](std::vector<Figure>&& more) {
    for (Figure& f : more) figures.push_back(std::move(f));
  };
  figures.push_back(hypervolume_plot(d));
  append(breakdown_plots(d, "energy.", "Energy", "J"));
  append(breakdown_plots(d, "latency.", "Latency", "s"));
  figures.push_back(iterations_plot(d));
  figures.push_back(sensitivity_plot(d));
  append(parameter_plots(d));
  Page p;
  std::string body, tables, notes;
  for (const Figure& f : figures) {
    if (f.title.empty()) continue;
    if (!f.svg.empty()) {
      p.plots.push_back(f.title);
      body += "<figure>\n" + f.svg + "<figcaption>" + esc(f.caption) + "</figcaption>\n</figure>\n";
    } else {  // a plot that cannot be drawn: one line below the plots, not an empty panel among them
      p.notes.push_back(f.title + ": " + f.note);
      notes += "<li><b>" + esc(f.title) + "</b>: " + esc(f.note) + "</li>\n";
    }
    if (!f.table.empty()) tables += "<h3>" + esc(f.title) + ": the Pareto points</h3>\n" + f.table;
  }
  p.html = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>aoc sweep report: " + esc(r.header.name) +
           "</title>\n<script>window.aocErrors = 0; window.addEventListener('error', function () { window.aocErrors++; });</script>\n<style>" +
           kStyle + "</style>\n</head>\n<body data-plots=\"" + std::to_string(p.plots.size()) + "\">\n" + header_html(d, scenario) +
           "<h2>Plots</h2>\n<div class=\"grid\">\n" + body + "</div>\n" +
           (notes.empty() ? "" : "<h2>Not plotted</h2>\n<ul class=\"notes\">\n" + notes + "</ul>\n") +
           (tables.empty() ? "" : "<h2>Pareto points</h2>\n" + tables) + every_point(d) +
           "<p class=\"note\">Written by aoc report (aoc " AOC_VERSION ") from " + esc(source) +
           ". Every mark's point is in the table above (hovering a mark shows it too).</p>\n" +
           kCheckScript + "</body>\n</html>\n";
  return p;
}

Page write_report(const std::string& results, const std::string& output) {
  const sweep::Results r = sweep::read_results_h5(results);
  Page p = render(r, results);
  write_file_atomic(output, p.html);
  return p;
}

}  // namespace aoc::report
