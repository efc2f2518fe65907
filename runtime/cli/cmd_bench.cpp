#include <cstdio>

#include "bench/loop_bench.hpp"
#include "runtime/cli/commands.hpp"

namespace aoc::cli {

void add_bench(CLI::App& app) {
  static BenchOptions o;
  static bool json = false;
  static std::string out;
  auto* c = app.add_subcommand("bench", "Time the optical loop against a matrix-product-only loop and the twin");
  c->add_option("--hw", o.hardware, "hardware file or bundled machine")->capture_default_str();
  c->add_option("--batches", o.batches, "batch sizes")->delimiter(',')->capture_default_str();
  c->add_option("--iterations", o.iterations, "iterations per timed run")->check(CLI::PositiveNumber)->capture_default_str();
  c->add_option("--min-seconds", o.min_seconds, "time spent per measurement (at least 5 runs)")->capture_default_str();
  c->add_option("--threads", o.threads, "threads for every loop timed")->check(CLI::PositiveNumber)->capture_default_str();
  c->add_flag("--f64", o.f64, "time double precision (default: float, as the twin)");
  c->add_option("--seed", o.seed, "seed of the weights and inputs")->capture_default_str();
  c->add_flag("--json", json, "print JSON instead of the table");
  c->add_option("-o,--output", out, "write the JSON to this file (with --json)");
  c->footer(
      "Cells: the twin's default switches, every switch off, the ideal tanh loop (all in the\n"
      "simulator), the digital reference (double), and an Eigen loop of only the two matrix\n"
      "products of one iteration. '/matmul' is the ratio to that loop; 'twin' is the twin's own\n"
      "figure on this kind of machine (docs/bench.md).\n"
      "Example:\n  aoc bench --batches 1,64,1024 --json -o bench.json");
  c->callback([] {
    const auto rows = run_loop_bench(o, !json);
    if (json) emit_json(bench_json(o, rows).dump(1), out);
    else std::printf("%s", bench_table(o, rows).c_str());
  });
}

}  // namespace aoc::cli
