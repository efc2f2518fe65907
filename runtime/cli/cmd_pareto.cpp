// aoc pareto RESULTS.h5 --x energy --y accuracy: the points of a sweep that no other point beats on
// both columns (runtime/sweep/sweep_results.hpp, docs/scenarios.md).
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "runtime/cli/commands.hpp"
#include "runtime/sweep/sweep_results.hpp"
#include "sim/error.hpp"
#include "sim/json_reader.hpp"

namespace aoc::cli {

namespace {

struct Opts {
  std::string results, x = "energy", y = "accuracy", x_better, y_better, json_out;
  bool json = false;
};

// Which way a column is better: the flag, else the metric's own direction.
bool maximise(const sweep::Results& r, const std::string& name, const std::string& flag, const char* option) {
  if (!flag.empty()) return flag == "max";
  for (const auto& m : r.header.metrics)
    if (m.name == name && !m.better.empty()) return m.better == "max";
  throw Error(std::string(option) + ": say whether " + name + " is better small or large (min or max): it is not a metric with a direction");
}

int run(const Opts& o) {
  const sweep::Results r = sweep::read_results_h5(o.results);
  const std::vector<double> x = sweep::column(r, o.x, o.results), y = sweep::column(r, o.y, o.results);
  const bool xmax = maximise(r, o.x, o.x_better, "--x-better"), ymax = maximise(r, o.y, o.y_better, "--y-better");
  const std::vector<std::size_t> front = sweep::pareto_front(x, y, xmax, ymax);
  std::size_t usable = 0;
  for (std::size_t i = 0; i < x.size(); ++i) usable += std::isfinite(x[i]) && std::isfinite(y[i]);
  // The parameters that vary are what tell the points apart.
  std::vector<std::size_t> varied;
  for (std::size_t k = 0; k < r.header.params.size(); ++k)
    if (!r.header.params[k].fixed) varied.push_back(k);

  if (o.json) {
    nlohmann::ordered_json j{{"tool", "aoc pareto"}, {"version", AOC_VERSION}, {"results", o.results}, {"config_hash", r.header.config_hash},
                             {"x", o.x}, {"y", o.y}, {"x_better", xmax ? "max" : "min"}, {"y_better", ymax ? "max" : "min"},
                             {"rows", r.rows.size()}, {"rows_used", usable}};
    j["points"] = nlohmann::ordered_json::array();
    for (std::size_t i : front) {
      nlohmann::ordered_json p{{"index", r.rows[i].index}, {"seed", r.rows[i].seed}, {o.x, x[i]}, {o.y, y[i]}};
      for (std::size_t k = 0; k < r.header.params.size(); ++k) p["parameters"][r.header.params[k].name] = r.rows[i].params[k];
      j["points"].push_back(p);
    }
    emit_json(j.dump(1), o.json_out);
    return 0;
  }
  std::printf("pareto: %s: %zu of %zu rows on the front of %s (%s) and %s (%s); %zu rows without both\n", o.results.c_str(), front.size(),
              r.rows.size(), o.x.c_str(), xmax ? "max" : "min", o.y.c_str(), ymax ? "max" : "min", r.rows.size() - usable);
  std::printf("\n%8s %14s %14s", "point", o.x.c_str(), o.y.c_str());
  for (std::size_t k : varied) std::printf("  %s", r.header.params[k].name.c_str());
  std::printf("\n");
  for (std::size_t i : front) {
    std::printf("%8zu %14.6g %14.6g", r.rows[i].index, x[i], y[i]);
    for (std::size_t k : varied) {
      const auto& v = r.rows[i].params[k];
      std::printf("  %*s", static_cast<int>(r.header.params[k].name.size()), v.is_string() ? v.get<std::string>().c_str() : v.is_number() ? jsonr::num(v.get<double>()).c_str() : v.dump().c_str());
    }
    std::printf("\n");
  }
  return 0;
}

}  // namespace

void add_pareto(CLI::App& app) {
  static Opts o;
  auto* c = app.add_subcommand("pareto", "List the Pareto-optimal points of a sweep's results on two columns");
  c->add_option("results", o.results, "the results of aoc sweep (HDF5)")->required()->check(CLI::ExistingFile);
  c->add_option("--x", o.x, "the first column: a metric or a numeric parameter")->capture_default_str();
  c->add_option("--y", o.y, "the second column")->capture_default_str();
  c->add_option("--x-better", o.x_better, "min or max (default: the metric's direction)")->check(CLI::IsMember({"min", "max"}));
  c->add_option("--y-better", o.y_better, "min or max (default: the metric's direction)")->check(CLI::IsMember({"min", "max"}));
  c->add_flag("--json", o.json, "print a JSON record");
  c->add_option("-o,--output", o.json_out, "write the JSON record to this file (with --json)");
  c->footer(
      "A point is on the front when no other point is at least as good on both columns and better\n"
      "on one. Directions: energy, latency, iterations, errors and failures are better small;\n"
      "accuracy, agreement and tops_per_w large. Points that failed (NaN) are left out.\n"
      "Examples:\n"
      "  aoc pareto parity.h5 --x energy --y accuracy\n"
      "  aoc pareto cores.h5 --x latency --y energy --json\n"
      "  aoc pareto scale.h5 --x energy_max --y tops_per_w_min");
  c->callback([c] {
    require_json_for_output(c, "pareto");
    exit_status() = run(o);
  });
}

}  // namespace aoc::cli
