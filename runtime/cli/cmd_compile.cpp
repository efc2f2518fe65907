// aoc compile: a graph (and its weights) lowered onto a machine: the program file and its mapping
// report (compiler/passes.hpp, compiler/report.hpp, docs/program.md).
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "compiler/graph_json.hpp"
#include "compiler/passes.hpp"
#include "compiler/program_h5.hpp"
#include "compiler/report.hpp"
#include "runtime/backend/backend.hpp"
#include "runtime/io/progress.hpp"
#include "runtime/run/program_run.hpp"
#include "runtime/cli/commands.hpp"
#include "runtime/io/output.hpp"
#include "sim/error.hpp"
#include "sim/hardware.hpp"

namespace aoc::cli {

namespace {

struct Opts {
  std::string graph, weights, hw = "aoc-48", output, report_json, calibrate;
  double margin = 1.0, balance = 0, trim_range = kDetectorTrimRange;
  std::vector<std::string> set;
  int tile_size = 0;
  bool json = false, shapes_only = false, no_quantize = false, no_tile = false, no_gather = false, no_compensate = false, print_after_all = false, print = false, quiet = false;
};

int run(const Opts& o) {
  if (o.json && (o.print || o.print_after_all)) throw Error("compile: --json prints the JSON record alone, not with --print or --print-after-all");
  if (o.quiet && o.calibrate.empty()) throw Error("compile: --quiet applies only with --calibrate (it silences the calibration run's meter)");
  const std::string hw_path = resolve_hardware_path(o.hw);
  const Hardware hw = load_hardware(hw_path, o.set);
  ir::Program p;
  p.graph = ir::read_graph(o.graph);
  // Default weights: the file aoc import writes next to the graph (G.json -> G.h5).
  std::string weights = o.weights;
  const std::filesystem::path beside = std::filesystem::path(o.graph).replace_extension(".h5");
  if (weights.empty() && !o.shapes_only && !p.graph.weights.empty() && std::filesystem::is_regular_file(beside)) {
    weights = beside.string();
  }
  check_outputs({{"-o", o.output}, {"--report-json", o.report_json}},
                {{"the graph", o.graph}, {"--weights", weights}, {"--calibrate", o.calibrate}});
  if (!weights.empty()) p.weights = ir::read_weights_h5(weights);
  else if (!p.graph.weights.empty() && !o.shapes_only)
    throw Error(o.graph + ": the graph has " + std::to_string(p.graph.weights.size()) + " weights and there is no " + beside.string() +
                ": give them with --weights W.h5, or compile --shapes-only (a program for estimates only)");
  p.target = ir::target_of(hw, o.hw, o.set);
  ir::PassOptions po;
  po.quantize = !o.no_quantize;
  po.tile = !o.no_tile;
  po.tile_size = o.tile_size;
  po.gather = !o.no_gather;
  if (!o.no_compensate) po.compensate = &hw;
  po.trim_range = o.trim_range;
  if (!o.calibrate.empty())
    po.calibrate = [&](ir::Program& q) {
      Progress meter("steps", !o.quiet);  // the calibration run: the exact reference, simultaneous mode
      meter.phase("calibrate");
      return calibrate_converters(q, read_program_inputs(o.calibrate, q), o.margin, ir::Mode::Simultaneous, meter.counter(true));
    };
  if (o.balance > 0) {
    if (o.calibrate.empty()) throw Error("compile: --balance needs --calibrate (the sample inputs give each channel's range)");
    po.balance = o.balance;
    po.channel_largest = [&](const ir::Program& q) {
      Progress meter("steps", !o.quiet);
      meter.phase("balance");
      return converter_channel_largest(q, read_program_inputs(o.calibrate, q), ir::Mode::Simultaneous, meter.counter(true));
    };
  }
  long long calibrated = 0;
  ir::run_pipeline(p, po, [&](const ir::NamedPass& pass, const ir::Program& q, const ir::PassStats& stats) {
    if (pass.name == std::string("calibrate")) calibrated = stats.get("ranges set");
    if (o.print_after_all)
      std::printf("// ----- after %s%s%s -----\n// statistics: %s\n%s\n", pass.name, pass.options.empty() ? "" : " ", pass.options.c_str(),
                  stats.text().empty() ? "none" : stats.text().c_str(), ir::print_program(q).c_str());
  });
  if (!o.calibrate.empty() && !o.json)
    std::printf("calibrated %lld converter range(s) on %s (margin %g)\n", calibrated, o.calibrate.c_str(), o.margin);
  if (o.print && !o.print_after_all) std::printf("%s\n", ir::print_program(p).c_str());
  const auto report = ir::mapping_report(p);
  if (!o.output.empty()) ir::write_program_h5(o.output, p);
  if (!o.report_json.empty()) emit_json(report.dump(1), o.report_json);
  if (o.json) {
    nlohmann::ordered_json j{{"tool", "aoc compile"}, {"version", AOC_VERSION}, {"graph", o.graph}, {"weights", weights},
                             {"hardware", hw.name}, {"set", o.set}, {"output", o.output}, {"calibrated_ranges", calibrated}};
    j["mapping"] = report;
    emit_json(j.dump(1), "");
    return 0;
  }
  std::printf("%s", ir::mapping_report_text(report).c_str());
  if (!o.output.empty())
    std::printf("wrote %s (%s)\n", o.output.c_str(),
                p.weights.empty() ? "shapes only: aoc estimate can use it, aoc run cannot" : ("with the weights of " + weights).c_str());
  return 0;
}

}  // namespace

void add_compile(CLI::App& app) {
  static Opts o;
  auto* c = app.add_subcommand("compile", "Lower a graph onto a machine: a program (HDF5) and its mapping report");
  c->add_option("graph", o.graph, "the graph JSON (docs/ir.md; aoc import writes one)")->required()->check(CLI::ExistingFile);
  c->add_option("--weights", o.weights, "the weights HDF5 (default: the graph's path with .h5, as aoc import writes it, when it exists)")
      ->check(CLI::ExistingFile);
  c->add_flag("--shapes-only", o.shapes_only, "compile without weights: a program for aoc estimate only");
  c->add_option("--hw", o.hw, "hardware file or bundled machine with an architecture section (aoc-48, aoc-16, aoc-scale)")
      ->capture_default_str();
  c->add_option("--set", o.set, "override a hardware value, e.g. --set architecture.modules=100 (repeatable)");
  c->add_option("-o,--output", o.output, "write the program to this HDF5 file");
  c->add_option("--report-json", o.report_json, "write the mapping report as JSON to this file");
  c->add_option("--tile-size", o.tile_size, "the tile pass's tile_size: a what-if machine whose cores have this many channels (at most the machine's)")
      ->check(positive());
  c->add_option("--calibrate", o.calibrate,
                 "sample inputs (HDF5, as aoc run --inputs): set each converter's range to the largest |value| it sees "
                 "on the exact reference, times --calibrate-margin")
      ->check(CLI::ExistingFile);
  c->add_option("--calibrate-margin", o.margin, "headroom of the calibrated ranges")->check(positive())->capture_default_str();
  c->add_option("--balance", o.balance,
                 "with --calibrate: a scale per DAC channel before optical products, of strength ALPHA in (0, 1]: channel c "
                 "divided by (m_c / max m)^ALPHA before the DAC (m_c its largest |value| on the sample inputs) and the "
                 "products' weights of input c multiplied by it, so that small channels use more DAC codes (0: off)")
      ->check(between(0.0, 1.0))
      ->capture_default_str();
  c->add_flag("--quiet", o.quiet, "no progress meter on stderr for the calibration and balance runs");
  c->add_flag("--no-quantize", o.no_quantize, "keep exact weights (no SLM codes)");
  c->add_flag("--no-compensate", o.no_compensate,
              "program each tile's weights as they are: the machine's measured optical chain then distorts them (the raw chain)");
  c->add_option("--trim-range", o.trim_range,
                 "how far compensate may turn each detector's gain down so that its column of the tile is "
                 "programmed on the SLM's whole code range (1: no trims)")
      ->check(between(1.0, 1e6))
      ->capture_default_str();
  c->add_flag("--no-tile", o.no_tile, "one tile per matrix, whatever its size (the untiled reference)");
  c->add_flag("--no-gather", o.no_gather, "keep Linears that read one value as separate products");
  c->add_flag("--print-after-all", o.print_after_all, "print the program after every pass, with the pass's options and statistics");
  c->add_flag("--print", o.print, "print the final program");
  c->add_flag("--json", o.json, "print the mapping report and what was written as a JSON record (instead of the text report)");
  c->footer(
      "Passes (each followed by the program verifier): name-ops, gather-linear, loop-form,\n"
      "partition, tile, balance with --balance, compensate, quantize, and calibrate with --calibrate\n"
      "(docs/program.md).\n"
      "compensate programs each tile for the machine's measured optical chain (SLM distortion,\n"
      "fan-in, gains, crosstalk): the SLM values whose product through the chain is the tile's\n"
      "weights, the chain's offset taken out at the detectors, and each detector's gain trimmed\n"
      "down (up to --trim-range) so that its column uses the SLM's whole code range and more\n"
      "light; --print shows each tile's residual and trims.\n"
      "--print-after-all shows each pass's options and statistics and the program after it.\n"
      "The report says what runs optically, in the analog electronics and digitally, the ADC/DAC\n"
      "conversions per token, the tiles on the modules and whether weights must be reloaded.\n"
      "Examples:\n"
      "  aoc import tests/data/implicit-lm/mamba2-state-tracking-implicit/config.json -o m.json\n"
      "  aoc compile m.json --weights m.h5 --hw aoc-48 -o m.aocp.h5\n"
      "  aoc compile m.json --shapes-only --hw aoc-scale --print-after-all\n"
      "  aoc run m.aocp.h5 --inputs tokens.h5 --backend sim --quantize -o out.h5");
  c->callback([] { exit_status() = run(o); });
}

}  // namespace aoc::cli
