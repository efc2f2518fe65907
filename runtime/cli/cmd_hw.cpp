#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <vector>

#include "runtime/cli/commands.hpp"
#include "sim/hardware.hpp"

namespace aoc::cli {

namespace {

// The bundled machines: every scenarios/hardware/*.json, by name, with its size and what it is.
void list_machines() {
  const std::filesystem::path dir = bundled_path("scenarios/hardware");
  std::printf("%-12s %8s %8s  %s\n", "machine", "channels", "modules", "description (aoc hw show NAME: every section)");
  for (const std::string& name : bundled_machines()) {
    const Hardware hw = load_hardware(resolve_hardware_path(name));
    std::string what = hw.description.substr(0, hw.description.find(". ") == std::string::npos ? std::string::npos : hw.description.find(". ") + 1);
    if (what.size() > 100) what = what.substr(0, 97) + "...";
    std::printf("%-12s %8d %8d  %s\n", name.c_str(), hw.channels, hw.architecture ? hw.architecture->modules : 1, what.c_str());
  }
  std::printf("(in %s; any other file: its path)\n", dir.string().c_str());
}

}  // namespace

void add_hw(CLI::App& app) {
  auto* hw = app.add_subcommand("hw", "Inspect hardware description files (docs/hardware.md)");
  hw->require_subcommand(1);
  auto* list = hw->add_subcommand("list", "List the bundled machines, with their channels, modules and description");
  list->callback([] { list_machines(); });
  auto* show = hw->add_subcommand("show", "Validate a hardware file and print a readable summary");
  static std::string file, json_out;
  static std::vector<std::string> set;
  static bool json = false;
  show->add_option("FILE", file, "hardware file, or a bundled machine (aoc hw list: aoc-48, aoc-16, aoc-scale)")->required();
  show->add_option("--set", set, "override a hardware value first, e.g. --set noise.thermal_sigma=0.002 (repeatable): what a run with it sees");
  show->add_flag("--json", json, "print the description (overrides applied, validated) as JSON");
  show->add_option("-o,--output", json_out, "with --json: write the JSON to this file");
  show->footer(
      "Examples:\n  aoc hw list\n  aoc hw show aoc-48\n  aoc hw show scenarios/hardware/aoc-16.json\n"
      "  aoc hw show aoc-scale --set architecture.modules=100 --set noise.thermal_sigma=0.002\n"
      "  aoc hw show aoc-48 --json -o aoc-48.resolved.json");
  show->callback([show] {
    require_json_for_output(show, "hw show");
    const std::string path = resolve_hardware_path(file);
    if (json) return emit_json(hardware_document(path, set).dump(1), json_out);
    std::cout << describe(load_hardware(path, set));
  });
}

}  // namespace aoc::cli
