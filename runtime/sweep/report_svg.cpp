#include "runtime/sweep/report_svg.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace aoc::svg {

namespace {

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}
std::string px1(double v) { return fmt("%.1f", v); }

// 1, 2 or 5 times a power of ten, near x: round tick steps.
double nice(double x) {
  const double e = std::pow(10.0, std::floor(std::log10(x))), f = x / e;
  return (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * e;
}

// Where a value lies along an axis before scaling: the value, or its log10. A 0 on a log axis sits
// 0.6 decade left of lo, past a break mark, so a noise scale of 0 and 1 .. 100 share one plot.
constexpr double kZeroGap = 0.6;
double t_of(const Axis& a, double v) {
  if (!a.log) return v;
  return v > 0 ? std::log10(v) : std::log10(a.lo) - kZeroGap;
}
double t_lo(const Axis& a) { return a.log ? std::log10(a.lo) - (a.zero ? kZeroGap : 0) : a.lo; }
double t_hi(const Axis& a) { return a.log ? std::log10(a.hi) : a.hi; }

bool si_unit(const std::string& u) { return u == "J" || u == "s" || u == "W"; }

std::vector<double> finite(const std::vector<double>& v) {
  std::vector<double> f;
  for (double x : v)
    if (std::isfinite(x)) f.push_back(x);
  return f;
}

}  // namespace

std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      default: o += c;
    }
  }
  return o;
}

std::string num(double v, const std::string& unit) {
  if (!std::isfinite(v)) return "n/a";
  if (si_unit(unit)) {
    if (v == 0) return "0 " + unit;
    static const char* prefix[] = {"f", "p", "n", "µ", "m", "", "k", "M", "G", "T"};
    const int e = std::clamp(static_cast<int>(std::floor(std::log10(std::fabs(v)) / 3)), -5, 4);
    return fmt("%.3g", v / std::pow(1000.0, e)) + " " + prefix[e + 5] + unit;
  }
  const double a = std::fabs(v);
  if (v == std::round(v) && a < 1e5) return fmt("%.0f", v);
  std::string s = fmt("%.3g", v);
  // 1e+06 -> 1e6, 1e-05 -> 1e-5
  const auto e = s.find('e');
  if (e != std::string::npos) {
    std::string exp = s.substr(e + 1);
    const bool neg = exp[0] == '-';
    exp = exp.substr(1);
    while (exp.size() > 1 && exp[0] == '0') exp.erase(0, 1);
    s = s.substr(0, e) + "e" + (neg ? "-" : "") + exp;
  }
  return s;
}

Axis fit(const std::vector<double>& values, const std::string& label, const std::string& unit) {
  Axis a;
  a.label = label, a.unit = unit;
  const std::vector<double> v = finite(values);
  if (v.empty()) return a;
  const double mn = *std::min_element(v.begin(), v.end()), mx = *std::max_element(v.begin(), v.end());
  double minpos = INFINITY;
  for (double x : v)
    if (x > 0) minpos = std::min(minpos, x);
  if (mn >= 0 && std::isfinite(minpos) && mx / minpos >= 10) {
    a.log = true;
    a.zero = mn == 0;
    a.lo = std::pow(10.0, std::floor(std::log10(minpos) + 1e-9));
    a.hi = std::pow(10.0, std::ceil(std::log10(mx) - 1e-9));
    return a;
  }
  double lo = mn, hi = mx;
  if (lo == hi) {
    const double pad = lo == 0 ? 1 : std::fabs(lo) * 0.1;
    lo -= pad, hi += pad;
  }
  const double step = nice((hi - lo) / 5);
  a.lo = std::floor(lo / step + 1e-9) * step;
  a.hi = std::ceil(hi / step - 1e-9) * step;
  return a;
}

std::vector<std::pair<double, std::string>> ticks(const Axis& a) {
  if (!a.categories.empty()) return a.categories;
  std::vector<std::pair<double, std::string>> t;
  if (a.log) {
    if (a.zero) t.push_back({0, "0"});
    const int k0 = static_cast<int>(std::lround(std::log10(a.lo))), k1 = static_cast<int>(std::lround(std::log10(a.hi)));
    const int every = std::max(1, (k1 - k0 + 7) / 8);  // at most ~8 labelled decades
    for (int k = k0; k <= k1; k += every) {
      const double d = std::pow(10.0, k);
      t.push_back({d, num(d, a.unit)});
      if (k1 - k0 <= 2 && k < k1)  // few decades: 2 and 5 as well
        for (double m : {2.0, 5.0}) t.push_back({m * d, num(m * d, a.unit)});
    }
    return t;
  }
  const double step = nice((a.hi - a.lo) / 5);
  for (double v = std::ceil(a.lo / step - 1e-9) * step; v <= a.hi + step * 1e-6; v += step) {
    const double r = std::fabs(v) < step * 1e-9 ? 0 : std::round(v / step) * step;
    t.push_back({r, num(r, a.unit)});
  }
  // Labels of three significant digits repeat where the step is finer than that (an accuracy
  // axis from 0.9994 to 1): as many decimals as the step has, then.
  bool repeat = false;
  for (std::size_t i = 1; i < t.size(); ++i) repeat = repeat || t[i].second == t[i - 1].second;
  if (repeat && !si_unit(a.unit)) {
    const int decimals = std::max(0, -static_cast<int>(std::floor(std::log10(step) + 1e-9)));
    for (auto& [v, text] : t) text = fmt(("%." + std::to_string(decimals) + "f").c_str(), v);
  } else if (repeat) {
    const int digits = 1 + static_cast<int>(std::ceil(std::log10(std::max(std::fabs(a.lo), std::fabs(a.hi)) / step)));
    for (auto& [v, text] : t) text = fmt(("%." + std::to_string(std::max(3, digits)) + "g").c_str(), v) + " " + a.unit;
  }
  return t;
}

double Frame::px(double v) const {
  return left + (t_of(x, v) - t_lo(x)) / (t_hi(x) - t_lo(x)) * (width - left - right);
}
double Frame::py(double v) const {
  return height - bottom - (t_of(y, v) - t_lo(y)) / (t_hi(y) - t_lo(y)) * (height - top - bottom);
}

std::string open(const Frame& f, const std::string& title) {
  const double x0 = f.left, x1 = f.width - f.right, y0 = f.top, y1 = f.height - f.bottom;
  std::string s = "<svg class=\"plot\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 " + px1(f.width) + " " + px1(f.height) +
                  "\" width=\"" + px1(f.width) + "\" height=\"" + px1(f.height) +
                  "\" font-family=\"sans-serif\" font-size=\"11\" role=\"img\">\n<title>" + esc(title) + "</title>\n";
  // A title wider than the plot is squeezed to fit, never cut (about 8.8 px per bold 14 px character).
  const double room = f.width - x0 - 8, wide = 8.8 * static_cast<double>(title.size());
  s += "<text x=\"" + px1(x0) + "\" y=\"20\" font-size=\"14\" font-weight=\"bold\"" +
       (wide > room ? " textLength=\"" + px1(room) + "\" lengthAdjust=\"spacingAndGlyphs\"" : std::string()) + ">" + esc(title) + "</text>\n";
  s += "<rect x=\"" + px1(x0) + "\" y=\"" + px1(y0) + "\" width=\"" + px1(x1 - x0) + "\" height=\"" + px1(y1 - y0) +
       "\" fill=\"#fff\" stroke=\"#888\"/>\n";
  // Rotated tick labels when many named ticks would overlap.
  const bool slant = f.x.categories.size() > 8;
  for (const auto& [v, text] : ticks(f.x)) {
    const double p = f.px(v);
    s += "<line x1=\"" + px1(p) + "\" x2=\"" + px1(p) + "\" y1=\"" + px1(y0) + "\" y2=\"" + px1(y1 + 4) + "\" stroke=\"#e4e4e4\"/>\n";
    if (slant)
      s += "<text transform=\"translate(" + px1(p + 3) + "," + px1(y1 + 10) + ") rotate(-45)\" text-anchor=\"end\">" + esc(text) + "</text>\n";
    else
      s += "<text x=\"" + px1(p) + "\" y=\"" + px1(y1 + 16) + "\" text-anchor=\"middle\">" + esc(text) + "</text>\n";
  }
  for (const auto& [v, text] : ticks(f.y)) {
    const double p = f.py(v);
    s += "<line x1=\"" + px1(x0 - 4) + "\" x2=\"" + px1(x1) + "\" y1=\"" + px1(p) + "\" y2=\"" + px1(p) + "\" stroke=\"#e4e4e4\"/>\n";
    s += "<text x=\"" + px1(x0 - 7) + "\" y=\"" + px1(p + 4) + "\" text-anchor=\"end\">" + esc(text) + "</text>\n";
  }
  // A break mark between 0 and the first decade of a log axis.
  if (f.x.log && f.x.zero) {
    const double p = (f.px(0) + f.px(f.x.lo)) / 2;
    s += "<path d=\"M" + px1(p - 5) + " " + px1(y1 + 4) + "l4 -8 M" + px1(p) + " " + px1(y1 + 4) + "l4 -8\" stroke=\"#555\"/>\n";
  }
  if (f.y.log && f.y.zero) {
    const double p = (f.py(0) + f.py(f.y.lo)) / 2;
    s += "<path d=\"M" + px1(x0 - 4) + " " + px1(p + 3) + "l8 -4 M" + px1(x0 - 4) + " " + px1(p - 2) + "l8 -4\" stroke=\"#555\"/>\n";
  }
  s += "<text x=\"" + px1((x0 + x1) / 2) + "\" y=\"" + px1(f.height - 8) + "\" text-anchor=\"middle\" font-size=\"12\">" + esc(f.x.label) +
       (f.x.log ? " (log scale)" : "") + "</text>\n";
  s += "<text transform=\"translate(16," + px1((y0 + y1) / 2) + ") rotate(-90)\" text-anchor=\"middle\" font-size=\"12\">" + esc(f.y.label) +
       (f.y.log ? " (log scale)" : "") + "</text>\n";
  return s;
}

std::string close() { return "</svg>\n"; }

std::string points(const Frame& f, const std::vector<double>& x, const std::vector<double>& y, const std::string& color, double radius,
                   const std::vector<std::string>& tips) {
  std::string s;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (!std::isfinite(x[i]) || !std::isfinite(y[i])) continue;
    s += "<circle cx=\"" + px1(f.px(x[i])) + "\" cy=\"" + px1(f.py(y[i])) + "\" r=\"" + px1(radius) + "\" fill=\"" + color +
         "\" stroke=\"#fff\" stroke-width=\"0.6\">";
    if (i < tips.size()) s += "<title>" + esc(tips[i]) + "</title>";
    s += "</circle>\n";
  }
  return s;
}

std::string line(const Frame& f, const std::vector<double>& x, const std::vector<double>& y, const std::string& color, double width, bool dashed) {
  std::string pts;
  for (std::size_t i = 0; i < x.size(); ++i)
    if (std::isfinite(x[i]) && std::isfinite(y[i])) pts += px1(f.px(x[i])) + "," + px1(f.py(y[i])) + " ";
  if (pts.empty()) return "";
  pts.pop_back();
  return "<polyline points=\"" + pts + "\" fill=\"none\" stroke=\"" + color + "\" stroke-width=\"" + px1(width) + "\"" +
         (dashed ? " stroke-dasharray=\"5 3\"" : "") + "/>\n";
}

std::string rect(const Frame& f, double x0, double x1, double y0, double y1, const std::string& color, const std::string& tip, double opacity) {
  const double a = f.px(x0), b = f.px(x1), c = f.py(y1), d = f.py(y0);
  std::string s = "<rect x=\"" + px1(std::min(a, b)) + "\" y=\"" + px1(std::min(c, d)) + "\" width=\"" + px1(std::fabs(b - a)) +
                  "\" height=\"" + px1(std::fabs(d - c)) + "\" fill=\"" + color + "\"" +
                  (opacity < 1 ? " fill-opacity=\"" + fmt("%.2f", opacity) + "\"" : "") + ">";
  if (!tip.empty()) s += "<title>" + esc(tip) + "</title>";
  return s + "</rect>\n";
}

std::string legend(const Frame& f, const std::vector<std::pair<std::string, std::string>>& items) {
  std::string s;
  const double x = f.width - f.right + 14;
  for (std::size_t i = 0; i < items.size(); ++i) {
    const double y = f.top + 4 + 17.0 * static_cast<double>(i);
    s += "<rect x=\"" + px1(x) + "\" y=\"" + px1(y) + "\" width=\"12\" height=\"12\" fill=\"" + items[i].first + "\"/>";
    // a label wider than the margin is squeezed to fit, never cut (about 6.6 px per 11 px character)
    const double room = f.width - x - 17 - 4, wide = 6.6 * static_cast<double>(items[i].second.size());
    s += "<text x=\"" + px1(x + 17) + "\" y=\"" + px1(y + 10) + "\"" +
         (wide > room ? " textLength=\"" + px1(room) + "\" lengthAdjust=\"spacingAndGlyphs\"" : std::string()) + ">" +
         esc(items[i].second) + "</text>\n";
  }
  return s;
}

const std::string& color(std::size_t i) {
  static const std::vector<std::string> c = {"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000",
                                             "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1",
                                             "#ff9da7", "#9c755f", "#bab0ac"};
  return c[i % c.size()];
}

std::string stacked_bars(const std::string& title, const std::vector<std::string>& bars, const std::vector<std::string>& parts,
                         const std::vector<std::vector<double>>& value, const std::string& ylabel, const std::string& unit, bool shares,
                         const std::vector<std::string>& tips, const std::string& xlabel, const std::vector<std::size_t>& hue) {
  const auto colour = [&](std::size_t k) { return color((k < hue.size() ? hue[k] : k) + 7); };
  const std::size_t n = bars.size();
  std::vector<double> total(n, 0.0);
  for (const auto& p : value)
    for (std::size_t b = 0; b < n; ++b) total[b] += p[b];
  Frame f;
  f.width = 700;
  for (std::size_t b = 0; b < n; ++b) f.x.categories.push_back({static_cast<double>(b), bars[b]});
  f.x.lo = -0.5, f.x.hi = static_cast<double>(n) - 0.5, f.x.label = xlabel;
  if (n > 8) f.bottom = 70;
  f.y = shares ? fit({0.0, 1.0}, "share of " + ylabel, "") : fit({0.0, *std::max_element(total.begin(), total.end())}, ylabel, unit);
  std::string s = open(f, title);
  for (std::size_t b = 0; b < n; ++b) {
    double base = 0;
    const double scale = shares && total[b] > 0 ? 1 / total[b] : 1;
    for (std::size_t k = 0; k < parts.size(); ++k) {
      const double v = value[k][b] * scale;
      if (v <= 0) continue;
      const std::string tip = (b < tips.size() ? tips[b] + "\n" : bars[b] + ": ") + parts[k] + " " + num(value[k][b], unit) + " (" +
                              fmt("%.1f", total[b] > 0 ? 100 * value[k][b] / total[b] : 0) + " % of " + num(total[b], unit) + ")";
      s += rect(f, b - 0.36, b + 0.36, base, base + v, colour(k), tip);
      base += v;
    }
  }
  std::vector<std::pair<std::string, std::string>> items;
  for (std::size_t k = parts.size(); k-- > 0;) items.push_back({colour(k), parts[k]});  // top of the stack first
  return s + legend(f, items) + close();
}

std::string histogram(const std::string& title, const std::vector<std::pair<std::string, std::vector<double>>>& series,
                      const std::string& xlabel, const std::string& unit) {
  std::vector<double> all;
  for (const auto& [name, v] : series)
    for (double x : finite(v)) all.push_back(x);
  double lo = all.empty() ? 0 : *std::min_element(all.begin(), all.end()), hi = all.empty() ? 1 : *std::max_element(all.begin(), all.end());
  // Values over decades (iterations up to a solver's cap): bins equal in log, on a log axis.
  const Axis ax = fit(all, xlabel, unit);
  const bool logb = ax.log && !ax.zero;
  // Whole numbers over a short range (a fixed K per point): one bin per value; else ~sqrt(n) bins.
  const bool whole = !logb && std::all_of(all.begin(), all.end(), [](double x) { return x == std::round(x); }) && hi - lo <= 40;
  std::size_t bins;
  if (whole) {
    bins = static_cast<std::size_t>(hi - lo) + 1, lo -= 0.5, hi += 0.5;
  } else {
    bins = std::clamp<std::size_t>(static_cast<std::size_t>(std::ceil(std::sqrt(static_cast<double>(all.size())))), 5, 30);
    if (hi == lo) lo -= 0.5, hi += 0.5;
  }
  const auto T = [&](double v) { return logb ? std::log10(v) : v; };
  const auto edge = [&](double t) { return logb ? std::pow(10.0, t) : t; };
  const double w = (T(hi) - T(lo)) / static_cast<double>(bins);
  std::vector<std::vector<double>> count(series.size(), std::vector<double>(bins, 0.0));
  double most = 1;
  for (std::size_t s = 0; s < series.size(); ++s)
    for (double x : finite(series[s].second)) {
      const std::size_t b = std::min(bins - 1, static_cast<std::size_t>((T(x) - T(lo)) / w));
      most = std::max(most, ++count[s][b]);
    }
  Frame f;
  f.x = logb ? ax : fit({lo, hi}, xlabel, unit);
  f.x.lo = std::min(f.x.lo, lo), f.x.hi = std::max(f.x.hi, hi);
  f.y = fit({0.0, most}, "points", "");
  std::string s = open(f, title);
  std::vector<std::pair<std::string, std::string>> items;
  for (std::size_t k = 0; k < series.size(); ++k) {
    for (std::size_t b = 0; b < bins; ++b) {
      if (count[k][b] == 0) continue;
      const double a = edge(T(lo) + w * static_cast<double>(b)), e = edge(T(lo) + w * static_cast<double>(b + 1));
      const std::string tip = series[k].first + ": " + num(count[k][b]) + " points in [" + num(a, unit) + ", " + num(e, unit) + ")";
      if (k == 0) {
        s += rect(f, a, e, 0, count[k][b], color(k), tip, 0.75);
      } else {  // outlined, so it does not hide the first series
        const double x0 = f.px(a), x1 = f.px(e), y0 = f.py(count[k][b]), y1 = f.py(0);
        s += "<rect x=\"" + px1(x0) + "\" y=\"" + px1(y0) + "\" width=\"" + px1(x1 - x0) + "\" height=\"" + px1(y1 - y0) +
             "\" fill=\"none\" stroke=\"" + color(k) + "\" stroke-width=\"2\"><title>" + esc(tip) + "</title></rect>\n";
      }
    }
    items.push_back({color(k), series[k].first});
  }
  return s + legend(f, items) + close();
}

}  // namespace aoc::svg
