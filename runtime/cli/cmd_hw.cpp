#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <vector>

#include "runtime/cli/commands.hpp"
#include "sim/hardware.hpp"

namespace aoc::cli {

void add_hw(CLI::App& app) {
  auto* hw = app.add_subcommand("hw", "Inspect hardware description files (docs/hardware.md)");
  hw->require_subcommand(1);
  auto* list = hw->add_subcommand("list", "List the bundled machines, with their channels, modules and description");
  list->callback([] { print_machines(); });
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
