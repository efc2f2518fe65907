#include <iostream>

#include "runtime/cli/commands.hpp"
#include "sim/hardware.hpp"

namespace aoc::cli {

void add_hw(CLI::App& app) {
  auto* hw = app.add_subcommand("hw", "Inspect hardware description files (docs/hardware.md)");
  hw->require_subcommand(1);
  auto* show = hw->add_subcommand("show", "Validate a hardware file and print a readable summary");
  static std::string file;
  show->add_option("FILE", file, "hardware file, or a bundled machine: aoc-48, aoc-16")->required();
  show->footer("Example:\n  aoc hw show aoc-48\n  aoc hw show scenarios/hardware/aoc-16.json");
  show->callback([] { std::cout << describe(load_hardware(resolve_hardware_path(file))); });
}

}  // namespace aoc::cli
