// aoc list: what is bundled, with where it is: the machines (as aoc hw list), the trained models, the retina models,
// the training and sweep scenarios, the example graphs and the published models' configs. Read from
// the data beside the binary (bundled_path), so an installed aoc lists its installed copies.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runtime/cli/commands.hpp"
#include "sim/error.hpp"
#include "sim/hardware.hpp"
#include "sim/json_reader.hpp"

namespace aoc::cli {

namespace {

namespace fs = std::filesystem;

// The entries of a bundled folder, sorted; none when the folder is not there.
std::vector<fs::path> entries(const std::string& relative, bool dirs) {
  std::vector<fs::path> v;
  const fs::path dir = bundled_path(relative);
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return v;
  for (const auto& e : fs::directory_iterator(dir))
    if (dirs ? e.is_directory() : e.path().extension() == ".json") v.push_back(e.path());
  std::sort(v.begin(), v.end());
  return v;
}

// The first sentence of a description, at most `n` characters.
std::string first_sentence(const std::string& s, std::size_t n = 90) {
  std::string t = s.substr(0, s.find(". ") == std::string::npos ? std::string::npos : s.find(". ") + 1);
  return t.size() > n ? t.substr(0, n - 3) + "..." : t;
}

std::string text(const nlohmann::json& j, const char* key) { return j.contains(key) && j.at(key).is_string() ? j.at(key).get<std::string>() : ""; }

void section(const char* title, const std::string& relative) {
  std::printf("\n%s (%s)\n", title, bundled_path(relative).c_str());
}

void list_all() {
  print_machines();
  section("trained models: aoc import DIR/config.json; aoc check, aoc sweep", "models/trained");
  std::printf("  %-24s %-8s %10s  %s\n", "model", "task", "parameters", "accuracy at the training length (sequential)");
  for (const fs::path& d : entries("models/trained", true)) {
    const fs::path log = d / "train.json";
    if (!fs::exists(log)) continue;
    const nlohmann::json j = jsonr::parse_file(log.string());
    std::string acc = "-";
    if (j.contains("eval") && j.at("eval").is_array() && !j.at("eval").empty()) {
      const auto& e = j.at("eval").at(0);
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.3f at L %d", e.value("accuracy", 0.0), e.value("length", 0));
      acc = buf;
    }
    const std::string task = j.contains("scenario") ? text(j.at("scenario"), "task") : "";
    std::printf("  %-24s %-8s %10lld  %s\n", d.filename().string().c_str(), task.c_str(), j.value("parameters", 0LL), acc.c_str());
  }
  section("retina models (SYNTHETIC retina): aoc retina eval --model DIR --data retina.h5", "models/retina");
  std::printf("  %-24s %-8s %10s  %s\n", "model", "kind", "parameters", "test CC / FEV of the digital model");
  for (const fs::path& d : entries("models/retina", true)) {
    const fs::path log = d / "train.json";
    if (!fs::exists(log)) continue;
    const nlohmann::json j = jsonr::parse_file(log.string());
    std::string scores = "-";
    if (j.contains("test_digital") && j.at("test_digital").is_object()) {
      const auto& t = j.at("test_digital");
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.3f / %.3f", t.value("cc_mean", 0.0), t.value("fev_mean", 0.0));
      scores = buf;
    }
    const std::string kind = j.contains("model") ? text(j.at("model"), "kind") : "";
    std::printf("  %-24s %-8s %10lld  %s\n", d.filename().string().c_str(), kind.c_str(), j.value("parameters", 0LL), scores.c_str());
  }
  section("training scenarios: aoc train FILE -o DIR", "scenarios/train");
  for (const fs::path& f : entries("scenarios/train", false)) {
    const nlohmann::json j = jsonr::parse_file(f.string());
    std::printf("  %-28s %s\n", f.filename().string().c_str(), first_sentence(text(j, "description")).c_str());
  }
  section("sweep scenarios: aoc sweep FILE -o RESULTS.h5", "scenarios/sweeps");
  for (const fs::path& f : entries("scenarios/sweeps", false)) {
    const nlohmann::json j = jsonr::parse_file(f.string());
    std::printf("  %-28s %s\n", f.filename().string().c_str(), first_sentence(text(j, "description")).c_str());
  }
  section("published implicit models' configs: aoc import DIR/config.json --shapes-only", "tests/data/implicit-lm");
  for (const fs::path& d : entries("tests/data/implicit-lm", true)) std::printf("  %s\n", d.filename().string().c_str());
}

}  // namespace

void print_machines() {
  const fs::path dir = bundled_path("scenarios/hardware");
  std::printf("%-12s %8s %8s  %s\n", "machine", "channels", "modules", "description (aoc hw show NAME: every section)");
  for (const std::string& name : bundled_machines()) {
    const Hardware hw = load_hardware(resolve_hardware_path(name));
    std::string what = first_sentence(hw.description, 100);
    std::printf("%-12s %8d %8d  %s\n", name.c_str(), hw.channels, hw.architecture ? hw.architecture->modules : 1, what.c_str());
  }
  std::printf("(in %s; any other file: its path)\n", dir.string().c_str());
}

void add_list(CLI::App& app) {
  auto* c = app.add_subcommand("list", "List what is bundled: machines, trained models, training and sweep scenarios, published configs");
  c->footer("Example:\n  aoc list");
  c->callback([] { list_all(); });
}

}  // namespace aoc::cli
