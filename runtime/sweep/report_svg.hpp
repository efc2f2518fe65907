// A small SVG writer for the sweep report (runtime/sweep/report.hpp): axes with ticks and labels, on a
// linear or log scale, points, lines, rectangles, a legend, and two whole charts (stacked bars and a
// histogram). Every function returns SVG text; the page inlines it, so the report needs no
// JavaScript library, no network and no font of its own.
#pragma once
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace aoc::svg {

// One axis: the range it shows and how.
struct Axis {
  std::string label;
  std::string unit;          // "J", "s", "W": SI prefixes on the ticks ("10 µJ"); else plain numbers
  double lo = 0, hi = 1;     // the range shown (log: both > 0)
  bool log = false;          // decades
  bool zero = false;         // a log axis that also shows 0, to the left of lo (a noise scale of 0)
  std::vector<std::pair<double, std::string>> categories;  // named ticks instead of numbers (bars)
};

// An axis for these values (NaN ignored): log when they are positive and span a decade or more
// (zeros then get a tick of their own), else linear with round ticks.
Axis fit(const std::vector<double>& values, const std::string& label, const std::string& unit);

// Ticks of an axis: value and text.
std::vector<std::pair<double, std::string>> ticks(const Axis& a);

// A plot area inside an SVG of width x height; the right margin holds the legend.
struct Frame {
  Axis x, y;
  double width = 640, height = 380;
  double left = 78, right = 170, top = 34, bottom = 54;
  double px(double v) const;  // data to pixels
  double py(double v) const;
};

std::string esc(const std::string& s);                  // text for XML
std::string num(double v, const std::string& unit = "");  // 3 significant digits; SI prefix for J, s, W

// The <svg> element's opening with the title, grid, ticks and axis labels; then the marks; close().
std::string open(const Frame& f, const std::string& title);
std::string close();

// Marks. `tips` (one per point, or empty) become hover tooltips (<title>), no script needed.
std::string points(const Frame& f, const std::vector<double>& x, const std::vector<double>& y, const std::string& color, double radius,
                   const std::vector<std::string>& tips = {});
std::string line(const Frame& f, const std::vector<double>& x, const std::vector<double>& y, const std::string& color, double width = 2,
                 bool dashed = false);
std::string rect(const Frame& f, double x0, double x1, double y0, double y1, const std::string& color, const std::string& tip = "",
                 double opacity = 1);
std::string legend(const Frame& f, const std::vector<std::pair<std::string, std::string>>& items);  // (color, label)

// The i-th colour of a palette that stays distinguishable for colour-blind readers (Okabe-Ito, then
// Tableau 10).
const std::string& color(std::size_t i);

// Whole charts. Stacked bars: one bar per name, parts[k] stacked in order, value[k][bar] >= 0.
// `shares`: each bar scaled to 1 (when the totals span decades, so small bars still show their mix).
// `xlabel` says what the bar names are; `hue[k]`, part k's colour index (default k), keeps a part's
// colour when another chart leaves some parts out.
std::string stacked_bars(const std::string& title, const std::vector<std::string>& bars, const std::vector<std::string>& parts,
                         const std::vector<std::vector<double>>& value, const std::string& ylabel, const std::string& unit, bool shares,
                         const std::vector<std::string>& tips = {}, const std::string& xlabel = "point",
                         const std::vector<std::size_t>& hue = {});

// A histogram of one or more series over shared bins (the first filled, the others outlined).
std::string histogram(const std::string& title, const std::vector<std::pair<std::string, std::vector<double>>>& series,
                      const std::string& xlabel, const std::string& unit);

}  // namespace aoc::svg
