// aoc sweep SCENARIO -o RESULTS.h5: every point of a design-space scenario on all cores (and under
// mpirun on every rank), each finished point kept at once, resumable (runtime/sweep/sweep_run.hpp,
// docs/scenarios.md).
#include <cstdio>
#include <nlohmann/json.hpp>

#include "runtime/cli/commands.hpp"
#include "runtime/io/output.hpp"
#include "runtime/sweep/sweep_run.hpp"

namespace aoc::cli {

namespace {

struct Opts {
  std::string scenario;
  sweep::SweepOptions run;
  bool json = false;
};

int run(const Opts& o) {
  check_outputs({{"-o", o.run.output}, {"--csv", o.run.csv}}, {{"the scenario", o.scenario}});
  const sweep::SweepSummary s = sweep::run_sweep(o.scenario, o.run);
  if (s.stopped) return 1;
  if (!s.root) return 0;
  if (o.json) {
    emit_json(nlohmann::ordered_json{{"tool", "aoc sweep"}, {"version", AOC_VERSION}, {"scenario", o.scenario}, {"output", o.run.output},
                                     {"csv", o.run.csv}, {"points", s.points}, {"ran", s.ran}, {"done_before", s.done_before},
                                     {"failed", s.failed}, {"seconds", s.seconds}, {"threads", s.threads}, {"ranks", s.ranks}}
                  .dump(1),
              "");
    return 0;
  }
  if (s.ran == 0 && s.done_before == s.points) {
    std::printf("sweep: %s: all %zu points were done before (%zu failed); %s is complete\n", o.scenario.c_str(), s.points, s.failed,
                o.run.output.c_str());
    return 0;
  }
  std::printf("sweep: %s: %zu points, %zu run now", o.scenario.c_str(), s.points, s.ran);
  if (s.done_before) std::printf(" (%zu done before)", s.done_before);
  std::printf(" in %.3g s (%.3g points/s) on %d thread(s)", s.seconds, s.seconds > 0 ? static_cast<double>(s.ran) / s.seconds : 0.0,
              s.threads);
  if (s.ranks > 1) std::printf(" x %d ranks", s.ranks);
  std::printf("; %zu failed\nwrote %s", s.failed, o.run.output.c_str());
  if (!o.run.csv.empty()) std::printf(" and %s", o.run.csv.c_str());
  std::printf("\n");
  return 0;
}

}  // namespace

void add_sweep(CLI::App& app) {
  static Opts o;
  auto* c = app.add_subcommand("sweep", "Run a design-space sweep (scenario JSON) on all cores, or under mpirun on many machines");
  c->add_option("scenario", o.scenario, "the sweep scenario (JSON, \"format\": \"aoc-sweep\"; docs/scenarios.md)")
      ->required()->check(CLI::ExistingFile);
  c->add_option("-o,--output", o.run.output, "the results file (HDF5)")->required();
  c->add_option("--csv", o.run.csv, "also write the rows as CSV to this file");
  c->add_flag("--resume", o.run.resume,
              "finish an interrupted sweep: keep the points in RESULTS.h5.partial, run only the others");
  c->add_option("--threads", o.run.threads, "threads per process (default: the machine's cores, shared by the ranks on it)")
      ->check(positive());
  c->add_flag("--quiet", o.run.quiet,
              "no progress meter (default: on stderr once a sweep runs over about 1 s: points done, rate, time left, failures; "
              "a line every 10 s when stderr is not a terminal)");
  c->add_flag("--json", o.json, "print the summary as a JSON record (points run, done before, failed, seconds, threads, ranks, files)");
  c->footer(
      "Each finished point is appended at once to RESULTS.h5.partial (one JSON line, synced to disk);\n"
      "when every point is done the HDF5 file is written (temporary file, renamed into place) and the\n"
      "journal removed. A point that fails records its error and the sweep goes on. The file is the\n"
      "same for any --threads and any number of MPI ranks.\n"
      "Examples:\n"
      "  aoc sweep scenarios/sweeps/parity-noise-bits.json -o parity.h5 --csv parity.csv\n"
      "  aoc sweep scenarios/sweeps/mamba2-1.3b-cores.json -o cores.h5 --resume     (after a kill)\n"
      "  mpirun -np 4 aoc sweep scenarios/sweeps/mamba2-1.3b-analytic.json -o scale.h5   (as root: mpirun --allow-run-as-root)\n"
      "  aoc pareto parity.h5 --x energy --y accuracy");
  c->callback([] { exit_status() = run(o); });
}

}  // namespace aoc::cli
