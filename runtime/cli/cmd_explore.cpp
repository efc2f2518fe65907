// aoc explore SCENARIO -o RESULTS.h5: a multi-objective search over a scenario's parameters (NSGA-II),
// every evaluation a sweep's row, resumable; --compare also runs a grid and a random sample of as
// many evaluations and prints the three hypervolumes (runtime/explore/explore.hpp, docs/scenarios.md).
#include <cstdio>
#include <nlohmann/json.hpp>

#include "runtime/cli/commands.hpp"
#include "runtime/explore/explore.hpp"
#include "runtime/io/output.hpp"
#include "sim/json_reader.hpp"

namespace aoc::cli {

namespace {

struct Opts {
  std::string scenario;
  explore::ExploreOptions run;
  std::uint64_t seed = 0;
  int stop_after = 0, compare_points = 0;
  bool json = false;
};

// A parameter's value in a column: numbers to 4 significant digits (the table is for reading; the
// results file keeps every digit).
std::string value_text(const nlohmann::ordered_json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_integer() || v.is_number_unsigned()) return v.dump();
  if (!v.is_number()) return v.dump();
  char b[32];
  std::snprintf(b, sizeof b, "%.4g", v.get<double>());
  return b;
}

int run(Opts& o, bool seed_given) {
  if (seed_given) o.run.seed = o.seed;
  o.run.stop_after = static_cast<std::size_t>(o.stop_after);
  o.run.compare_points = static_cast<std::size_t>(o.compare_points);
  std::vector<NamedPath> outs{{"-o", o.run.output}, {"--csv", o.run.csv}};
  if (o.run.compare)
    for (const char* d : {"unscreened", "grid", "random"}) outs.push_back({"-o (its " + std::string(d) + ")", explore::design_output(o.run.output, d)});
  check_outputs(outs, {{"the scenario", o.scenario}});
  const explore::ExploreSummary s = explore::run_explore(o.scenario, o.run);
  const sweep::Scenario& sc = s.scenario;
  if (!s.root) return 0;  // rank 0 reports
  if (s.stopped) {
    std::printf("explore: %s: stopped after %zu evaluations (--stop-after; %zu done before); --resume goes on from %s\n", o.scenario.c_str(),
                s.evaluations, s.done_before, sweep::journal_path(o.run.output).c_str());
    return 0;
  }
  if (o.json) {
    nlohmann::ordered_json j{{"tool", "aoc explore"}, {"version", AOC_VERSION}, {"scenario", o.scenario}, {"config_hash", sc.config_hash},
                             {"seed", sc.seed},       {"output", o.run.output},  {"generations", s.generations},
                             {"done_before", s.done_before}, {"seconds", s.seconds}, {"threads", s.threads}, {"ranks", s.ranks}};
    for (const auto& ob : sc.objectives) j["objectives"].push_back({{"metric", ob.metric}, {"better", ob.maximise ? "max" : "min"}, {"scale", ob.log ? "log" : "lin"}});
    j["designs"] = nlohmann::ordered_json::array();
    for (const auto& d : s.designs) {
      nlohmann::ordered_json c = nlohmann::ordered_json::array();
      for (const auto& [n, hv] : d.curve) c.push_back({n, hv});
      j["designs"].push_back({{"design", d.name}, {"output", d.output}, {"evaluations", d.evaluations}, {"feasible", d.feasible},
                              {"failed", d.failed}, {"screened", d.screened}, {"cost", d.cost}, {"seconds", d.seconds}, {"front", d.front},
                              {"hypervolume", d.hypervolume}, {"curve", c}});
    }
    j["front"] = nlohmann::ordered_json::array();
    for (const auto& r : s.front) {
      nlohmann::ordered_json p{{"index", r.index}};
      for (std::size_t k = 0; k < sc.params.size(); ++k)
        if (!sc.params[k].fixed) p["parameters"][sc.params[k].name] = r.params[k];
      for (const auto& ob : sc.objectives) p["objectives"][ob.metric] = r.metrics[ob.column];
      j["front"].push_back(p);
    }
    emit_json(j.dump(1), "");
    return 0;
  }
  const explore::Design& d = s.designs[0];
  std::printf("explore: %s: %zu evaluations (%zu generations of %d", o.scenario.c_str(), d.evaluations, s.generations + 1, sc.population);
  if (s.done_before) std::printf("; %zu done before", s.done_before);
  std::printf(") in %.3g s on %d thread(s)", s.seconds, s.threads);
  if (s.ranks > 1) std::printf(" x %d ranks", s.ranks);
  std::printf("; %zu feasible, %zu failed, %zu on the front\n", d.feasible, d.failed, d.front);
  if (sc.screen.fraction > 0)
    std::printf("screen: %zu of %zu stopped on %.3g of the test data; the search cost %.4g whole evaluations\n", d.screened, d.evaluations,
                sc.screen.fraction, d.cost);
  std::printf("\n%8s", "point");
  for (const auto& ob : sc.objectives) std::printf(" %14s", ob.metric.c_str());
  for (const auto& p : sc.params)
    if (!p.fixed) std::printf("  %s", p.name.c_str());
  std::printf("\n");
  for (const auto& r : s.front) {
    std::printf("%8zu", r.index);
    for (const auto& ob : sc.objectives) std::printf(" %14.6g", r.metrics[ob.column]);
    for (std::size_t k = 0; k < sc.params.size(); ++k)
      if (!sc.params[k].fixed) std::printf("  %*s", static_cast<int>(sc.params[k].name.size()), value_text(r.params[k]).c_str());
    std::printf("\n");
  }
  std::printf("\nhypervolume (objectives on [0, 1] over every design's feasible points, reference 1.1 each):\n");
  for (const auto& g : s.designs)
    std::printf("  %-10s %6zu evaluations  %6zu feasible  %4zu on the front  %.6f  %8.3g s  (%s)\n", g.name.c_str(), g.evaluations, g.feasible,
                g.front, g.hypervolume, g.seconds, g.output.c_str());
  return 0;
}

}  // namespace

void add_explore(CLI::App& app) {
  static Opts o;
  auto* c = app.add_subcommand("explore", "Search a design space for its Pareto front (NSGA-II over a scenario's parameters)");
  c->add_option("scenario", o.scenario, "the search scenario (JSON, \"sampling\": {\"method\": \"nsga2\", ...}; docs/scenarios.md)")
      ->required()->check(CLI::ExistingFile);
  c->add_option("-o,--output", o.run.output, "the results file (HDF5, a sweep's: aoc pareto and aoc report read it)")->required();
  c->add_option("--csv", o.run.csv, "also write the rows as CSV to this file");
  auto* seed = c->add_option("--seed", o.seed, "the search's seed instead of the scenario's (a new search: its own config hash)")->check(seed_value());
  c->add_flag("--compare", o.run.compare,
              "also evaluate a grid and a random sample of as many points (RESULTS.grid.h5, RESULTS.random.h5), and a scenario with a "
              "screen also without it (RESULTS.unscreened.h5), and print the hypervolumes in one box");
  c->add_option("--compare-points", o.compare_points,
                 "with --compare: the grid and random sample of this many points (default: as many as the search evaluated)")
      ->check(positive());
  c->add_option("--stop-after", o.stop_after,
                 "stop once this many evaluations are in the journal, before the next generation (jobs in time slices); --resume goes on")
      ->check(positive());
  c->add_flag("--resume", o.run.resume, "finish an interrupted search: its journal's evaluations are read back, not run again");
  c->add_option("--threads", o.run.threads, "threads (default: the machine's cores); the results do not depend on it")->check(positive());
  c->add_flag("--quiet", o.run.quiet, "no progress meter");
  c->add_flag("--json", o.json, "print the summary as JSON: each design's hypervolume and its curve, the front");
  c->footer(
      "The scenario is a sweep's (docs/scenarios.md) with \"sampling\": {\"method\": \"nsga2\", \"points\": N,\n"
      "\"population\": P}, \"objectives\" (two or more metric columns) and optional \"constraints\":\n"
      "  \"objectives\": [{\"metric\": \"energy\", \"scale\": \"log\"}, {\"metric\": \"latency\", \"scale\": \"log\"}],\n"
      "  \"constraints\": [{\"metric\": \"accuracy\", \"min\": 0.9}]\n"
      "It evaluates a Latin hypercube of P points, then N/P - 1 generations of P; a point asked for again\n"
      "is looked up, not evaluated or counted. With \"screen\": {\"fraction\": 0.25, \"margin\": 0.05} in\n"
      "sampling, each point of a model first runs on that share of its test sequences and stops\n"
      "there (status \"screened\") where its constraints miss by more than the margin (relative).\n"
      "Each evaluation is appended to RESULTS.h5.partial at once; a killed search resumes with\n"
      "--resume to the same front. The same rows for any --threads and under mpirun (each rank\n"
      "evaluates its share of every generation; rank 0 writes the files).\n"
      "Examples:\n"
      "  aoc explore scenarios/explore/mamba2-1.3b.json -o front.h5\n"
      "  aoc explore scenarios/explore/mamba2-1.3b.json -o front.h5 --compare   (against a grid and random points)\n"
      "  aoc explore scenarios/explore/mamba2-1.3b.json -o front.h5 --compare --compare-points 1000   (against 1,000 of each)\n"
      "  aoc explore scenarios/explore/a5.json -o a5.h5 --compare --compare-points 120   (also without its screen)\n"
      "  mpirun -np 4 aoc explore scenarios/explore/parity.json -o front.h5   (as root: mpirun --allow-run-as-root)\n"
      "  aoc pareto front.h5 --x energy --y latency\n"
      "  aoc report front.h5 -o front.html");
  c->callback([seed] { exit_status() = run(o, seed->count() > 0); });
}

}  // namespace aoc::cli
