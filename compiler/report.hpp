// The mapping report of a compiled program (`aoc compile`): what runs where, the loops and their
// layouts, the tiles on the modules, the weight programming rounds, the conversions per token and the
// core utilisation. Energy and latency are `aoc estimate PROG`'s (runtime/estimate/program_estimate.hpp).
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "compiler/program.hpp"

namespace aoc::ir {

// Conversions per token count the Convert ops' elements and, where the machine adds partial sums
// digitally, every tile output of a split matrix.

nlohmann::ordered_json mapping_report(const Program& p);
std::string mapping_report_text(const nlohmann::ordered_json& report);

}  // namespace aoc::ir
