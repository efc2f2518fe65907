#include "runtime/cli/retina_report.hpp"

#include <cmath>
#include <cstdio>

namespace aoc::cli {

std::string fixed(double v, int digits) {
  if (!std::isfinite(v)) return "nan";
  char b[32];
  std::snprintf(b, sizeof b, "%.*f", digits, v);
  return b;
}

nlohmann::ordered_json scores_json(const retina::Scores& s) {
  const auto finite = [](double v) { return std::isfinite(v) ? nlohmann::ordered_json(v) : nlohmann::ordered_json(nullptr); };
  nlohmann::ordered_json cc = nlohmann::ordered_json::array(), fev = cc, nll = cc;
  for (std::size_t i = 0; i < s.cc.size(); ++i) cc.push_back(finite(s.cc[i])), fev.push_back(finite(s.fev[i])), nll.push_back(finite(s.nll[i]));
  return {{"cc_mean", finite(s.cc_mean)}, {"fev_mean", finite(s.fev_mean)}, {"nll_mean", finite(s.nll_mean)}, {"cc", cc}, {"fev", fev}, {"nll", nll}};
}

void print_scores(const retina::Dataset& d, const retina::Scores& s, const std::vector<ScoreRow>& more) {
  std::printf("cell  type  CC      FEV     NLL/bin\n");
  for (std::size_t i = 0; i < s.cc.size(); ++i)
    std::printf("%4zu  %-4s  %-6s  %-6s  %s\n", i + 1, d.polarity.empty() ? "-" : d.polarity[i] > 0 ? "ON" : "OFF", fixed(s.cc[i], 3).c_str(),
                fixed(s.fev[i], 3).c_str(), fixed(s.nll[i], 4).c_str());
  std::printf("mean        %-6s  %-6s  %s\n", fixed(s.cc_mean, 3).c_str(), fixed(s.fev_mean, 3).c_str(), fixed(s.nll_mean, 4).c_str());
  for (const ScoreRow& r : more)
    std::printf("%-10s  %-6s  %-6s  %s%s%s\n", r.label.c_str(), fixed(r.scores.cc_mean, 3).c_str(), fixed(r.scores.fev_mean, 3).c_str(),
                fixed(r.scores.nll_mean, 4).c_str(), r.note.empty() ? "" : "   ", r.note.c_str());
}

std::optional<ScoreRow> ceiling_row(const retina::Split& test, int skip) {
  if (!test.true_rate.size()) return std::nullopt;
  return ScoreRow{"ceiling", retina::score(test, test.true_rate, skip), "(the generator's true_rate)"};
}

}  // namespace aoc::cli
