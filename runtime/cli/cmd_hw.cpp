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

  auto* make = hw->add_subcommand("new", "Make a machine of any channel count from another's device figures (a stand-in calibration, named as one)");
  static std::string name, from = "aoc-scale", out;
  static int channels = 0;
  static std::vector<std::string> new_set;
  make->add_option("NAME", name, "the new machine's name (written into the file; what reports and sweeps call it)")->required();
  make->add_option("--channels", channels, "channels per module: its core holds channels x channels weights")->required();
  make->add_option("--from", from,
                   "the machine whose timing, converters, energy, area, noise and architecture it keeps, and whose calibration's "
                   "per-channel means stand in for its own: a bundled name or a file (default: aoc-scale, the projected module)");
  make->add_option("--set", new_set, "then override a value, e.g. --set architecture.modules=4 --set converters.adc_bits=6 (repeatable)");
  make->add_option("-o,--output", out, "write the file here (atomically; default: print the JSON)");
  make->footer(
      "No module of a new size has been measured: its calibration (LED fan-in, SLM response, TIA gains, crosstalk,\n"
      "closed-loop correction) is the source machine's, each per-channel vector replaced by its mean. Each such entry's\n"
      "source and the file's provenance say so. The device figures (timing, converters, energy, area, noise) are kept\n"
      "as they are, with their sources; change them with --set.\n\n"
      "Examples:\n  aoc hw new aoc-256 --channels 256 -o aoc-256.json\n  aoc estimate --hw aoc-256.json\n"
      "  aoc hw new aoc-1k-x8 --channels 1024 --set architecture.modules=8 --set converters.adc_bits=6 -o aoc-1k.json\n"
      "  aoc hw new aoc-96 --channels 96 --from aoc-48 -o aoc-96.json");
  make->callback([] {
    const std::string src = resolve_hardware_path(from);
    std::string command = "aoc hw new " + name + " --channels " + std::to_string(channels) + " --from " + from;
    for (const auto& s : new_set) command += " --set " + s;
    const auto doc = resized_hardware(src, channels, name, command, new_set);
    emit_json(doc.dump(1), out);
    if (!out.empty())
      std::cerr << "wrote " << out << ": " << name << ", " << channels << " channels, from " << from
                << " (calibration: its per-channel means, a stand-in); aoc hw show " << out << " to read it\n";
  });
}

}  // namespace aoc::cli
