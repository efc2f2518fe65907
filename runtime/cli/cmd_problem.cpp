// aoc problem: an optimisation instance as aoc's canonical JSON (runtime/optimize/ising.hpp): generated from
// a seeded ensemble with its known optimum (exhaustive search or a planted state), or converted
// from a G-set / Biq Mac edge list or a QPLIB file. `aoc optimize` reads what it writes.
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "runtime/cli/commands.hpp"
#include "runtime/optimize/ising.hpp"
#include "runtime/io/output.hpp"
#include "sim/error.hpp"
#include "sim/json_reader.hpp"

namespace aoc::cli {

namespace {

struct Opts {
  std::string what, output;
  int n = 16;
  std::uint64_t seed = 1;
  double density = 0.5, alpha = 0.5;
  bool exhaustive = false, json = false;
};

int run(const Opts& o) {
  check_outputs({{"-o", o.output}}, {});
  IsingProblem p;
  std::string provenance;
  if (o.what == "sk" || o.what == "maxcut" || o.what == "wishart") {
    p = o.what == "sk" ? generate_sk(o.n, o.seed) : o.what == "maxcut" ? generate_maxcut(o.n, o.density, o.seed) : generate_wishart(o.n, o.alpha, o.seed);
    provenance = "aoc problem " + o.what + " --n " + std::to_string(o.n) + " --seed " + std::to_string(o.seed) +
                 (o.what == "maxcut" ? " --density " + jsonr::num(o.density) : o.what == "wishart" ? " --alpha " + jsonr::num(o.alpha) : "") +
                 " (aoc " AOC_VERSION ")";
  } else if (std::filesystem::exists(o.what)) {
    p = read_problem(o.what);
    provenance = "aoc problem " + o.what + " (aoc " AOC_VERSION ")";
  } else {
    throw Error("problem: '" + o.what + "' is neither a generator (sk, maxcut, wishart) nor a file");
  }
  if (o.exhaustive) solve_exhaustive(p);
  write_ising_json(p, o.output, provenance);
  if (o.json) {
    nlohmann::ordered_json j{{"tool", "aoc problem"}, {"version", AOC_VERSION}, {"name", p.name}, {"n", p.n()}, {"output", o.output}};
    if (p.best_known) j["best_known"] = *p.best_known, j["best_known_source"] = p.best_known_source;
    emit_json(j.dump(1), "");
    return 0;
  }
  std::printf("%s: %d variables (%s)", p.name.c_str(), p.n(), p.all_binary() ? "binary" : "binary and continuous");
  if (p.best_known) std::printf(", best known %s (%s)", jsonr::num(*p.best_known).c_str(), p.best_known_source.c_str());
  std::printf(": wrote %s\n", o.output.c_str());
  return 0;
}

}  // namespace

void add_problem(CLI::App& app) {
  static Opts o;
  auto* c = app.add_subcommand("problem", "Write an optimisation instance (aoc's JSON): a seeded ensemble with its optimum, or a converted file");
  c->add_option("what", o.what,
                "sk (+-1 spin glass), maxcut (G(n, density), unit weights), wishart (planted ground state, docs/optimisation.md), "
                "or a file: a G-set / Biq Mac edge list, a .qplib, an aoc JSON")
      ->required();
  c->add_option("--n", o.n, "generators: variables")->check(between(2, 4096))->capture_default_str();
  c->add_option("--seed", o.seed, "generators: the seed")->check(seed_value())->capture_default_str();
  c->add_option("--density", o.density, "maxcut: edge probability")->check(between(1e-9, 1.0))->capture_default_str();
  c->add_option("--alpha", o.alpha, "wishart: columns per variable (hardness peaks near 0.2-0.5)")->check(between(1e-9, 16.0))->capture_default_str();
  c->add_flag("--exhaustive", o.exhaustive, "find the optimum by exhaustive search (all-binary, at most 30 variables; 2^(n-1) states)");
  c->add_option("-o,--output", o.output, "the JSON instance to write")->required();
  c->add_flag("--json", o.json, "print what was written as a JSON record");
  c->footer("Examples:\n  aoc problem sk --n 16 --seed 1 --exhaustive -o sk16.json\n  aoc problem wishart --n 48 --alpha 0.5 --seed 1 -o w48.json\n"
            "  aoc problem G1.txt -o g1.json      a G-set graph (n m, then i j w per edge)\n  aoc optimize sk16.json --hw aoc-48 --quantize --noise");
  c->callback([] { exit_status() = run(o); });
}

}  // namespace aoc::cli
