// aoc report RESULTS.h5 -o report.html: one self-contained HTML page of a sweep's results, its plots
// inline SVG (runtime/sweep/report.hpp, docs/scenarios.md "Report").
#include <cstdio>

#include "runtime/cli/commands.hpp"
#include "runtime/io/output.hpp"
#include "runtime/sweep/report.hpp"

namespace aoc::cli {

namespace {

struct Opts {
  std::string results, output = "report.html";
  bool quiet = false;
};

int run(const Opts& o) {
  check_outputs({{"-o", o.output}}, {{"the results", o.results}});
  const report::Page p = report::write_report(o.results, o.output);
  if (o.quiet) return 0;
  std::printf("report: %s: %zu plots from %s\n", o.output.c_str(), p.plots.size(), o.results.c_str());
  for (const auto& t : p.plots) std::printf("  plot   %s\n", t.c_str());
  for (const auto& n : p.notes) std::printf("  absent %s\n", n.c_str());
  return 0;
}

}  // namespace

void add_report(CLI::App& app) {
  static Opts o;
  auto* c = app.add_subcommand("report", "Write an HTML report of a sweep's results: plots, Pareto fronts, failed points");
  // No CLI11 existence check: a missing file is then the same one-line error as a bad one.
  c->add_option("results", o.results, "the results of aoc sweep (HDF5)")->required();
  c->add_option("-o,--output", o.output, "the HTML page to write (replaced atomically)")->capture_default_str();
  c->add_flag("-q,--quiet", o.quiet, "print nothing");
  c->footer(
      "One self-contained page (inline SVG, no script libraries, no network): accuracy against noise\n"
      "and weight bits, energy against latency and accuracy against energy with their Pareto fronts,\n"
      "energy and latency per token by component, iterations per point, the scenario, config hash,\n"
      "seed and tool version, and the failed points with their errors. A plot whose columns the\n"
      "results lack is a note instead (add the metric group to the scenario).\n"
      "Example:\n"
      "  aoc sweep scenarios/sweeps/parity-noise-bits.json -o parity.h5\n"
      "  aoc report parity.h5 -o report.html");
  c->callback([] { exit_status() = run(o); });
}

}  // namespace aoc::cli
