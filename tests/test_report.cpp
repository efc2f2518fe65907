// The sweep report (runtime/sweep/report.hpp): the plots it draws from the columns a results file has,
// the notes where columns are absent, the Pareto table against sweep::pareto_front, escaping, the
// axes' scales and ticks, and one-line errors. The browser's view of it: tests/report_render.sh.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "runtime/sweep/report.hpp"
#include "runtime/sweep/report_svg.hpp"
#include "sim/error.hpp"
#include "tests/graph_support.hpp"
#include "tests/support.hpp"

using namespace aoc;
using sweep::json;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::size_t count(const std::string& s, const std::string& what) {
  std::size_t n = 0;
  for (auto p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

// A parity-like sweep: SLM bits x noise scale, every metric group; one point failed with an error
// that needs escaping.
sweep::Results model_results() {
  sweep::Results r;
  auto& h = r.header;
  h.scenario = "s.json", h.name = "model <test>", h.config_hash = "0123456789abcdef", h.tool_version = "0.1.0";
  h.sampling = "grid", h.workload = "model", h.hardware = "aoc-48", h.seed = 7;
  h.scenario_json = json{{"description", "a & b"}, {"workload", {{"model", "models/trained/parity-implicit"}}}}.dump();
  h.params = {{"seeds", "run", true}, {"converters.slm_bits", "hardware", false}, {"noise_scale", "run", false}};
  for (const char* m : {"accuracy", "agreement"}) h.metrics.push_back({m, "1", "max"});
  h.metrics.push_back({"iterations", "1", "min"});
  h.metrics.push_back({"reference_iterations", "1", "min"});
  h.metrics.push_back({"energy", "J", "min"});
  h.metrics.push_back({"latency", "s", "min"});
  for (const char* m : {"energy.led_drive", "energy.slm_static", "energy.adc", "energy.control"}) h.metrics.push_back({m, "J", ""});
  for (const char* m : {"latency.loop", "latency.readout"}) h.metrics.push_back({m, "s", ""});
  std::size_t i = 0;
  for (int bits : {9, 4, 3})
    for (double noise : {0.0, 1.0, 10.0, 100.0}) {
      sweep::Row w;
      w.index = i++, w.seed = 7, w.params = {2, bits, noise};
      const double acc = std::max(0.5, 1.0 - noise * (10 - bits) / 2000), it = 4 + noise / 20 + (9 - bits) * 0.1;
      const double led = 1e-9 * it, slm = 2e-6 * it, adc = 3e-8;
      w.metrics = {acc, acc, it, 4.2, led + slm + adc, 20e-9 * it + 1e-6, led, slm, adc, 0.0, 20e-9 * it, 1e-6};
      r.rows.push_back(w);
    }
  r.rows[5].status = "error", r.rows[5].error = "converters.slm_bits: 4 < 5 & \"x\"";
  for (double& m : r.rows[5].metrics) m = kNaN;
  h.points = r.rows.size();
  return r;
}

// An estimates-only sweep: energy and latency, nothing runs, no breakdown.
sweep::Results estimate_results() {
  sweep::Results r;
  auto& h = r.header;
  h.scenario = "e.json", h.name = "estimate", h.config_hash = "fedcba9876543210", h.tool_version = "0.1.0";
  h.sampling = "lhs", h.workload = "config", h.hardware = "aoc-scale", h.seed = 1, h.scenario_json = "{}";
  h.params = {{"architecture.modules", "hardware", false}, {"iterations", "run", false}};
  h.metrics = {{"iterations", "1", "min"}, {"energy", "J", "min"}, {"latency", "s", "min"}};
  for (std::size_t i = 0; i < 200; ++i) {
    sweep::Row w;
    const double m = 25.0 * static_cast<double>(1 + i % 8), k = 5 + static_cast<double>(i % 13);
    w.index = i, w.params = {m, k};
    w.metrics = {k, k * 1e-3 * (1 + 0.01 * static_cast<double>(i)), k * 1e-4 / m * 1e2};
    r.rows.push_back(w);
  }
  h.points = r.rows.size();
  return r;
}

// A Latin-hypercube sweep over three parameters: accuracy falls with the noise, energy rises with
// the modules, the iterations move neither.
sweep::Results lhs3_results() {
  sweep::Results r;
  auto& h = r.header;
  h.scenario = "l.json", h.name = "lhs3", h.config_hash = "00112233445566ff", h.tool_version = "0.1.0";
  h.sampling = "lhs", h.workload = "model", h.hardware = "aoc-48", h.seed = 3, h.scenario_json = "{}";
  h.params = {{"architecture.modules", "hardware", false}, {"noise_scale", "run", false}, {"iterations", "run", false}};
  h.metrics = {{"accuracy", "1", "max"}, {"energy", "J", "min"}, {"latency", "s", "min"}};
  for (std::size_t i = 0; i < 60; ++i) {
    sweep::Row w;
    const double m = 10 + static_cast<double>((i * 37) % 60), noise = static_cast<double>((i * 17) % 60) / 2, k = 5 + static_cast<double>((i * 11) % 60);
    w.index = i, w.params = {m, noise, k};
    w.metrics = {1 - noise / 40, 1e-6 * m, 1e-7 * (1 + static_cast<double>((i * 29) % 7))};
    r.rows.push_back(w);
  }
  h.points = r.rows.size();
  return r;
}

}  // namespace

TEST_CASE("report: a three-parameter Latin-hypercube sweep shows every parameter and which one moves which metric") {
  const report::Page p = report::render(lhs3_results(), "lhs3.h5");
  for (const char* title : {"Accuracy against architecture.modules, every point", "Accuracy against noise_scale, every point",
                            "Accuracy against iterations, every point", "Sensitivity of each metric to each parameter"})
    CHECK(std::find(p.plots.begin(), p.plots.end(), title) != p.plots.end());
  // the tornado's bars say their correlation: accuracy falls with the noise (-1), energy rises with the modules (+1)
  CHECK(p.html.find("noise_scale and accuracy: rank correlation -1 over 60 points") != std::string::npos);
  CHECK(p.html.find("architecture.modules and energy: rank correlation 1 over 60 points") != std::string::npos);
  CHECK(p.html.find("\"nan") == std::string::npos);
}

TEST_CASE("report: a grid over two parameters gets no per-parameter panels and no sensitivity plot") {
  const report::Page p = report::render(model_results(), "results.h5");
  for (const auto& t : p.plots) {
    CHECK(t.find("every point") == std::string::npos);
    CHECK(t.find("Sensitivity") == std::string::npos);
  }
}

TEST_CASE("report: a model sweep gets every plot, the header, the failed point and the Pareto points") {
  const sweep::Results r = model_results();
  const report::Page p = report::render(r, "results.h5");
  REQUIRE(p.plots.size() == 8);
  CHECK(p.notes.empty());
  // the SLMs' static power is 98 % of the energy: a second chart shows the other components
  CHECK(std::find(p.plots.begin(), p.plots.end(), "Energy per token by component, without slm static") != p.plots.end());
  CHECK(p.plots[0] == "Accuracy against noise_scale and converters.slm_bits");
  CHECK(p.plots[1] == "Energy per token against noise_scale and converters.slm_bits");
  CHECK(count(p.html, "<svg class=\"plot\"") == 8);
  CHECK(p.html.find("data-plots=\"8\"") != std::string::npos);
  // header
  for (const char* s : {"0123456789abcdef", "aoc 0.1.0", "model &lt;test&gt;", "a &amp; b", "12 in the scenario; 12 rows: 11 ok, 1 failed",
                        "models/trained/parity-implicit"})
    CHECK(p.html.find(s) != std::string::npos);
  // the failed point and its error, escaped
  CHECK(p.html.find("Failed points (1)") != std::string::npos);
  CHECK(p.html.find("converters.slm_bits: 4 &lt; 5 &amp; &quot;x&quot;") != std::string::npos);
  // a line per bit setting, 9 bits first; noise 0 on the log axis
  CHECK(p.html.find(">9 bits</text>") < p.html.find(">3 bits</text>"));
  CHECK(p.html.find("(log scale)") != std::string::npos);
  // no coordinate from a failed point
  CHECK(p.html.find("\"nan") == std::string::npos);
  CHECK(p.html.find("\"inf") == std::string::npos);
  // only the components some point uses (energy.control is 0 everywhere)
  CHECK(p.html.find(">slm static</text>") != std::string::npos);
  CHECK(p.html.find(">control</text>") == std::string::npos);
  // the energy-latency front's points are in the table
  const auto front = sweep::pareto_front(sweep::column(r, "energy", "x"), sweep::column(r, "latency", "x"), false, false);
  REQUIRE(!front.empty());
  CHECK(p.html.find("Energy against latency per token: the Pareto points") != std::string::npos);
  CHECK(p.html.find("Pareto front (" + std::to_string(front.size()) + ")") != std::string::npos);
  CHECK(p.html.find("<tr><td>" + std::to_string(r.rows[front[0]].index) + "</td>") != std::string::npos);
}

TEST_CASE("report: every point is in a table, and the component bars are named by the varied parameters' values") {
  const sweep::Results r = model_results();
  const report::Page p = report::render(r, "results.h5");
  const std::size_t table = p.html.find("<h2>Every point</h2>");
  REQUIRE(table != std::string::npos);
  CHECK(p.html.find("<details open><summary>12 points", table) != std::string::npos);  // a small sweep: open
  for (const auto& w : r.rows) CHECK(p.html.find("<tr><td>" + std::to_string(w.index) + "</td>", table) != std::string::npos);
  // bars named "bits/noise", the axis says so
  CHECK(p.html.find(">9/10</text>") != std::string::npos);
  CHECK(p.html.find("converters.slm_bits / noise_scale") != std::string::npos);
  CHECK(p.html.find(">#3</text>") == std::string::npos);
}

TEST_CASE("report: a plot that cannot be drawn is one line under the plots, not an empty panel") {
  const report::Page e = report::render(estimate_results(), "e.h5");
  REQUIRE(!e.notes.empty());
  CHECK(e.html.find("<h2>Not plotted</h2>") != std::string::npos);
  CHECK(e.html.find("figure class=\"absent\"") == std::string::npos);
  CHECK(e.html.find("<details><summary>") != std::string::npos);  // 200 points: the table a click away
}

TEST_CASE("report: plots whose columns are absent are notes, and a sweep whose points all failed still renders") {
  const report::Page e = report::render(estimate_results(), "e.h5");
  // x: the parameter with the most values; lines: the one with fewer
  // a Latin hypercube: the sensitivity of energy and latency to each parameter, and a panel per parameter
  CHECK(e.plots == std::vector<std::string>{"Energy per token against iterations and architecture.modules", "Energy against latency per token",
                                            "Iterations per solve", "Sensitivity of each metric to each parameter",
                                            "Energy per token against architecture.modules, every point",
                                            "Energy per token against iterations, every point"});
  REQUIRE(e.notes.size() == 3);
  CHECK(e.notes[0].find("No accuracy or agreement column") != std::string::npos);
  CHECK(e.notes[1].find("\"breakdown\"") != std::string::npos);
  CHECK(count(e.html, "<svg class=\"plot\"") == 6);
  CHECK(e.html.find("200 values from") == std::string::npos);  // modules: 8 values, listed
  CHECK(e.html.find("13 values from 5 to 17") != std::string::npos);  // K: a range

  sweep::Results all = model_results();
  for (auto& w : all.rows) {
    w.status = "error", w.error = "no";
    for (double& m : w.metrics) m = kNaN;
  }
  const report::Page f = report::render(all, "f.h5");
  CHECK(f.plots.empty());
  CHECK(f.notes.size() == 7);
  CHECK(f.html.find("Failed points (12)") != std::string::npos);
  CHECK(f.html.find("data-plots=\"0\"") != std::string::npos);
}

TEST_CASE("report: many points are drawn as a sample of bars and as points, not lines") {
  sweep::Results r = model_results();
  r.header.sampling = "random";
  const sweep::Row base = r.rows[0];
  r.rows.clear();
  for (std::size_t i = 0; i < 500; ++i) {
    sweep::Row w = base;
    w.index = i, w.params[2] = 0.01 * static_cast<double>(i + 1);
    for (std::size_t k : {4, 6, 7, 8}) w.metrics[k] *= 1 + static_cast<double>(i);
    r.rows.push_back(w);
  }
  const report::Page p = report::render(r, "m.h5");
  CHECK(p.plots.size() == 9);  // the eight, and the sensitivity of a random sweep
  CHECK(p.html.find("30 of the 500 points, evenly spread") != std::string::npos);
  CHECK(p.html.find("(shares)") != std::string::npos);  // totals over decades
  CHECK(p.html.find("<polyline points=\"") != std::string::npos);  // the Pareto staircase, at least
}

TEST_CASE("report svg: axes are log where values span decades, with 0 on a tick of its own, and ticks read well") {
  const svg::Axis noise = svg::fit({0, 1, 10, 30, 100}, "noise", "");
  CHECK(noise.log);
  CHECK(noise.zero);
  CHECK(noise.lo == 1);
  CHECK(noise.hi == 100);
  const auto t = svg::ticks(noise);
  REQUIRE(!t.empty());
  CHECK(t[0].second == "0");
  CHECK(t.back().second == "100");
  svg::Frame f;
  f.x = noise, f.y = svg::fit({0.5, 1}, "accuracy", "");
  CHECK(f.px(0) < f.px(1));
  CHECK(f.px(1) < f.px(10));
  CHECK(std::fabs((f.px(10) - f.px(1)) - (f.px(100) - f.px(10))) < 1e-9);  // a decade is a decade
  CHECK(f.py(1) < f.py(0.5));  // up is more

  const svg::Axis bits = svg::fit({3, 4, 9}, "bits", "");
  CHECK(!bits.log);
  CHECK(bits.lo <= 3);
  CHECK(bits.hi >= 9);
  const svg::Axis energy = svg::fit({2e-6, 3e-4}, "energy", "J");
  CHECK(energy.log);
  CHECK(!energy.zero);
  CHECK(svg::num(1e-5, "J") == "10 µJ");
  CHECK(svg::num(1.5e-3, "s") == "1.5 ms");
  CHECK(svg::num(0, "J") == "0 J");
  CHECK(svg::num(65536) == "65536");
  CHECK(svg::num(1e-5) == "1e-5");
  CHECK(svg::num(0.25) == "0.25");
  CHECK(svg::num(kNaN) == "n/a");
  CHECK(svg::esc("a<b & \"c\"") == "a&lt;b &amp; &quot;c&quot;");
  // one value: a range around it, not a zero-width axis
  const svg::Axis one = svg::fit({4, 4}, "k", "");
  CHECK(one.lo < 4);
  CHECK(one.hi > 4);
  // an accuracy axis finer than three significant digits: every tick its own label
  for (const auto& [lo, hi] : std::vector<std::pair<double, double>>{{0.9994, 1.0}, {0.99961, 0.99997}, {12345.1, 12345.9}, {2.0001e-3, 2.0009e-3}}) {
    const auto fine = svg::ticks(svg::fit({lo, hi}, "accuracy", ""));
    INFO(lo << " .. " << hi);
    REQUIRE(fine.size() >= 3);
    for (std::size_t i = 1; i < fine.size(); ++i) CHECK(fine[i].second != fine[i - 1].second);
  }
}

TEST_CASE("report: written atomically, and a file that is not sweep results is a one-line error naming it") {
  const auto dir = test::temp_dir() / "report";
  std::filesystem::create_directories(dir);
  const std::string h5 = (dir / "r.h5").string(), html = (dir / "r.html").string();
  sweep::write_results_h5(h5, model_results());
  const report::Page p = report::write_report(h5, html);
  std::ifstream in(html);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(text == p.html);
  for (const auto& e : std::filesystem::directory_iterator(dir)) CHECK(e.path().extension() != ".tmp");

  const std::string bad = (dir / "bad.h5").string();
  std::ofstream(bad) << "not hdf5";
  std::string what;
  try {
    report::write_report(bad, html);
  } catch (const Error& e) {
    what = e.what();
  }
  CHECK(what.rfind(bad, 0) == 0);
  CHECK(what.find('\n') == std::string::npos);
  CHECK(std::filesystem::exists(html));  // the old page is untouched

  const test::Run run = test::run_aoc("report " + bad + " -o " + html);
  CHECK(run.status == 1);
  CHECK(run.out.find("aoc: error: " + bad) == 0);
  CHECK(std::count(run.out.begin(), run.out.end(), '\n') == 1);
  const test::Run missing = test::run_aoc("report " + (dir / "none.h5").string() + " -o " + html);
  CHECK(missing.status == 1);
  CHECK(missing.out == "aoc: error: " + (dir / "none.h5").string() + ": no such file\n");
  const test::Run ok = test::run_aoc("report " + h5 + " -o " + html);
  CHECK(ok.status == 0);
  CHECK(ok.out.find("8 plots") != std::string::npos);
}
