// A training checkpoint (`aoc train`, DIR/checkpoint.h5; docs/models.md): the weights, the
// optimizer's moments, the next step, the hardware-aware noise counter and the run's log so far
// (loss curve, seconds). `aoc train --resume` continues from it and ends with the weights an unbroken
// run gives, bit for bit. Written to a temporary file and renamed, so a kill leaves the previous one.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "models/train.hpp"

namespace aoc {

void write_train_checkpoint(const std::string& path, models::SequenceModel& m, const models::TrainState& state,
                            const std::string& config_hash, const nlohmann::ordered_json& log);

// Restores m's weights, its noise counter and `state`; returns the log. An error names the file and
// what does not fit: another scenario (its config hash), another model's shapes, a damaged file.
nlohmann::ordered_json read_train_checkpoint(const std::string& path, models::SequenceModel& m, models::TrainState& state,
                                             const std::string& config_hash);

}  // namespace aoc
