// Training checkpoints (DIR/checkpoint.h5): the weights, the optimizer's moments and where the run
// stands, so that a killed run goes on with --resume to the weights an unbroken run gives, bit for
// bit. Written to a temporary file and renamed, so a kill leaves the previous one.
//
// `aoc train` (docs/models.md): the next step, the hardware-aware noise counter and the run's log so
// far (loss curve, seconds). `aoc retina train` (docs/retina.md): after each epoch, the epochs'
// records and the best epoch's weights.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "models/retina_model.hpp"
#include "models/train.hpp"

namespace aoc {

void write_train_checkpoint(const std::string& path, models::SequenceModel& m, const models::TrainState& state,
                            const std::string& config_hash, const nlohmann::ordered_json& log);

// Restores m's weights, its noise counter and `state`; returns the log. An error names the file and
// what does not fit: another scenario (its config hash), another model's shapes, a damaged file.
nlohmann::ordered_json read_train_checkpoint(const std::string& path, models::SequenceModel& m, models::TrainState& state,
                                             const std::string& config_hash);

void write_retina_checkpoint(const std::string& path, retina::Model& m, const retina::TrainState& state, const std::string& config_hash);
// Restores m's weights and `state`; the same errors as read_train_checkpoint's.
void read_retina_checkpoint(const std::string& path, retina::Model& m, retina::TrainState& state, const std::string& config_hash);

}  // namespace aoc
