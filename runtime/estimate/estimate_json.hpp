// The JSON records of energy and latency estimates (`aoc estimate --json`, the Python module's
// Program.estimate): each line with its count, figure and source, the GPU roofline beside them.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runtime/estimate/program_estimate.hpp"
#include "sim/energy.hpp"

namespace aoc {

nlohmann::ordered_json band_json(const Band& b);  // {"min", "typ", "max"}
// The GPU line's record: the roofline of the same work, `what` naming it.
nlohmann::ordered_json gpu_json(const EnergyReport& r, const std::string& what);
// Every energy line: its count, the figure per action, joules per token and per sequence (x scale), the source.
nlohmann::ordered_json energy_json(const EnergyReport& r, double scale);
// The machine's area by component (area_report), or null where its file gives no area section.
nlohmann::ordered_json area_json(const Hardware& hw);
// A program's estimate as `aoc estimate PROG --json` writes it; `source` says what was estimated.
nlohmann::ordered_json program_estimate_json(const ProgramEstimate& e, const Hardware& hw, const std::string& hw_path,
                                             const std::vector<std::string>& overrides, const std::string& source);

}  // namespace aoc
