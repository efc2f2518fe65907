// How the retina commands (aoc retina score, train, eval) print and record scores: one table, one
// JSON shape.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "models/retina_data.hpp"

namespace aoc::cli {

std::string fixed(double v, int digits);  // "nan" for NaN or inf
// {"cc_mean", "fev_mean", "nll_mean", "cc": [per cell], "fev", "nll"}, NaN as null.
nlohmann::ordered_json scores_json(const retina::Scores& s);
// The per-cell table, its mean row, and a row per (label, scores, note) below it (the ceiling, the
// digital model).
struct ScoreRow {
  std::string label;
  retina::Scores scores;
  std::string note;
};
void print_scores(const retina::Dataset& d, const retina::Scores& s, const std::vector<ScoreRow>& more = {});
// The ceiling row: the generator's true_rate scored as a prediction; nullopt for real data.
std::optional<ScoreRow> ceiling_row(const retina::Split& test, int skip);

}  // namespace aoc::cli
