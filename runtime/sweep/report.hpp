// The report of a sweep (`aoc report RESULTS.h5 -o report.html`, docs/scenarios.md "Report"): one
// self-contained HTML page, its plots inline SVG (runtime/sweep/report_svg.hpp), chosen from the columns
// the results hold: accuracy against noise and weight bits, energy against latency and accuracy
// against energy with their Pareto fronts, the energy and latency per token by component, the
// iterations per point; a header (scenario, config hash, seed, tool version, points ok and failed
// with the failures' errors) and the Pareto points as tables. A plot whose columns are absent is a
// one-line note instead.
#pragma once
#include <string>
#include <vector>

#include "runtime/sweep/sweep_results.hpp"

namespace aoc::report {

struct Page {
  std::string html;
  std::vector<std::string> plots;  // the titles of the plots drawn, in page order
  std::vector<std::string> notes;  // the plots left out, and why
};

// The page; `source` names the results file in the header.
Page render(const sweep::Results& r, const std::string& source);

// Reads the results, renders them and writes the page atomically (temp file, then rename). A file
// that is not a readable sweep results file is a one-line aoc::Error naming it.
Page write_report(const std::string& results, const std::string& output);

}  // namespace aoc::report
