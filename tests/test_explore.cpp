// The design-space search as a library: fronts, hypervolume, the comparison grid, a search's
// scenario, and a search that gives the same rows whatever its threads and however often it is
// stopped and resumed (runtime/explore/*.hpp, docs/scenarios.md "Searches").
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include "runtime/explore/explore.hpp"
#include "runtime/explore/front.hpp"
#include "runtime/sweep/report.hpp"
#include "runtime/sweep/sweep.hpp"
#include "runtime/sweep/sweep_eval.hpp"
#include "runtime/sweep/sweep_results.hpp"
#include "sim/error.hpp"
#include "tests/support.hpp"
#include "tests/graph_support.hpp"

using namespace aoc;
using namespace aoc::sweep;
using test::error_of;
using test::scenario_file;

namespace {

const std::string kRoot = AOC_SOURCE_DIR;

// The tiny DEQ on the 16-variable machine, estimated only: a few milliseconds a point.
json tiny_search(int points = 40, int population = 8) {
  return {{"format", "aoc-sweep"},
          {"version", 1},
          {"name", "tiny-search"},
          {"workload", {{"graph", kRoot + "/models/graphs/tiny-deq.json"}}},
          {"hardware", "aoc-16"},
          {"seed", 5},
          {"sampling", {{"method", "nsga2"}, {"points", points}, {"population", population}}},
          {"fixed", {{"seq_len", 64}}},
          {"parameters",
           {{"iterations", {{"range", {5, 60}}}},
            {"timing.loop_period_ns", {{"range", {1, 40}}, {"scale", "log"}}},
            {"converters.dac_bits", {{"range", {4, 10}}, {"integer", true}}},
            {"energy.slm_static.typ", {{"values", {2, 5, 10}}}}}},
          {"metrics", {"energy", "latency"}},
          {"objectives", {{{"metric", "energy"}, {"scale", "log"}}, {{"metric", "latency"}, {"scale", "log"}}}}};
}

// A scenario whose two objectives are metric columns 0 (min) and 1 (max), with a constraint on 2.
Scenario two_objectives() {
  Scenario s;
  s.columns = {{"cost", "1", "min"}, {"score", "1", "max"}, {"accuracy", "1", "max"}};
  s.objectives = {{"cost", 0, false, false}, {"score", 1, true, false}};
  Constraint c;
  c.metric = "accuracy", c.column = 2, c.min = 0.9;
  s.constraints = {c};
  return s;
}

Row row(double cost, double score, double accuracy, std::size_t index = 0) {
  Row r;
  r.index = index;
  r.metrics = {cost, score, accuracy};
  return r;
}

}  // namespace

TEST_CASE("explore: the front holds the feasible rows no other beats") {
  const Scenario s = two_objectives();
  // cost (min), score (max), accuracy (>= 0.9)
  const std::vector<Row> rows{row(1, 1, 0.95), row(2, 3, 0.95), row(2, 2, 0.95), row(0.5, 9, 0.5), row(3, 3, 0.99), row(1, 1, 0.95),
                              row(NAN, 4, 0.95)};
  CHECK(explore::front(s, rows) == std::vector<std::size_t>{0, 1});  // 2 is beaten by 1, 3 infeasible, 4 beaten, 5 repeats 0, 6 NaN
  CHECK(explore::violation(s, rows[0]) == 0);
  CHECK(explore::violation(s, rows[3]) == Approx((0.9 - 0.5) / 0.9));
  Row broken = rows[0];
  broken.status = "error";
  CHECK(explore::violation(s, broken) == 1000);
  CHECK(explore::objectives_of(s, rows[1]) == std::vector<double>{2, -3});  // larger-is-better negated
  CHECK(explore::objectives_of(s, rows[3]).empty());
}

TEST_CASE("explore: hypervolume is the area the front dominates in the shared box") {
  const Scenario s = two_objectives();
  // Normalised by the box (cost 1..3, -score -3..-1): (0, 1) and (0.5, 0) and (1, 0), reference 1.1.
  const std::vector<Row> rows{row(1, 1, 1), row(2, 3, 1), row(3, 3, 1)};
  const explore::Box box = explore::box_of(s, {&rows});
  CHECK(box.lo == std::vector<double>{1, -3});
  CHECK(box.hi == std::vector<double>{3, -1});
  // the union of [0, 1.1] x [1, 1.1] and [0.5, 1.1] x [0, 1.1]
  CHECK(explore::hypervolume(s, rows, box) == Approx(1.1 * 0.1 + 0.6 * 1.0));
  // a design with only the first row dominates less in the same box; none feasible, nothing
  CHECK(explore::hypervolume(s, {rows[0]}, box) == Approx(1.1 * 0.1));
  CHECK(explore::hypervolume(s, {row(1, 1, 0.2)}, box) == 0);
}

TEST_CASE("explore: the comparison grid spreads at most n points evenly, ends included") {
  const Scenario s = read_scenario(scenario_file("grid.json", tiny_search()));
  const auto g = explore::grid_points(s, 40);
  // four free parameters: 3 x 3 x 2 x 2 = 36 <= 40 (one more value anywhere would pass 40)
  REQUIRE(g.size() == 36);
  std::set<double> iterations, period;
  std::set<long long> bits;
  for (const auto& p : g) iterations.insert(p.values[1].get<double>()), period.insert(p.values[2].get<double>()), bits.insert(p.values[3].get<long long>());
  CHECK(iterations == std::set<double>{5, 32.5, 60});
  CHECK(*period.begin() == Approx(1));
  CHECK(*period.rbegin() == Approx(40));
  CHECK(bits == std::set<long long>{4, 10});
  CHECK(explore::grid_points(s, 1).size() == 1);
  CHECK(explore::design_output("out/f.h5", "grid") == "out/f.grid.h5");
}

TEST_CASE("explore: a bad search scenario is one line naming the file and the field") {
  const auto err = [](const json& j) { return error_of([&] { read_scenario(scenario_file("bad.json", j)); }); };
  json j = tiny_search();
  j["objectives"] = {{{"metric", "energy"}}};
  CHECK(err(j).find("bad.json: objectives: a search needs two or more objectives") != std::string::npos);
  j = tiny_search(40, 10);
  CHECK(err(j).find("bad.json: sampling.population: NSGA-II pairs its parents: a multiple of 4") != std::string::npos);
  j = tiny_search(42, 8);
  CHECK(err(j).find("bad.json: sampling.points: a search's evaluations come a generation at a time") != std::string::npos);
  j = tiny_search();
  j["objectives"][1]["metric"] = "accuracy";
  CHECK(err(j).find("bad.json: objectives[1].metric: no metric column accuracy in this scenario") != std::string::npos);
  j = tiny_search();
  j["constraints"] = {{{"metric", "latency"}}};
  CHECK(err(j).find("bad.json: constraints[0]: expected min, max or both") != std::string::npos);
  j = tiny_search();
  j["metrics"] = {"energy", "latency", "area"};
  CHECK(err(j).find("bad.json: metrics: area: the hardware file has no area section") != std::string::npos);
  j = tiny_search();
  j["sampling"] = {{"method", "random"}, {"points", 10}, {"population", 8}};
  CHECK(err(j).find("sampling.population: only for a search") != std::string::npos);
  j = tiny_search();
  j["sampling"]["screen"] = {{"fraction", 0.25}};
  CHECK(err(j).find("bad.json: sampling.screen: a screen stops the points that miss the constraints: this search has none") != std::string::npos);
  j["constraints"] = {{{"metric", "latency"}, {"max", 1}}};
  CHECK(err(j).find("bad.json: sampling.screen: only for a model's workload") != std::string::npos);
  j["sampling"]["screen"] = {{"fraction", 1}};
  CHECK(err(j).find("bad.json: sampling.screen.fraction: expected a number above 0 and below 1") != std::string::npos);
  j["sampling"]["screen"] = {{"fraction", 0.5}, {"margin", -1}};
  CHECK(err(j).find("bad.json: sampling.screen.margin: expected a number >= 0") != std::string::npos);
  j["sampling"] = {{"method", "lhs"}, {"points", 10}, {"screen", {{"fraction", 0.5}}}};
  CHECK(err(j).find("bad.json: sampling.screen: only for a search") != std::string::npos);
  for (const std::string& e : {err(tiny_search(40, 10)), err(tiny_search(42, 8))}) CHECK(e.find('\n') == std::string::npos);
  // a search's points are not listed up front
  const Scenario s = read_scenario(scenario_file("ok.json", tiny_search()));
  CHECK(error_of([&] { points(s); }).find("run it with aoc explore") != std::string::npos);
}

TEST_CASE("explore: a search gives the same rows on any threads and when stopped and resumed, and another seed is another search") {
  const std::string sc = scenario_file("search.json", tiny_search());
  const auto out = [](const std::string& n) { return (test::temp_dir() / n).string(); };
  explore::ExploreOptions o;
  o.quiet = true;
  o.threads = 1;
  o.output = out("one.h5");
  const explore::ExploreSummary one = explore::run_explore(sc, o);
  o.threads = 2;
  o.output = out("two.h5");
  explore::run_explore(sc, o);
  const Results a = read_results_h5(out("one.h5")), b = read_results_h5(out("two.h5"));
  REQUIRE(a.rows.size() == b.rows.size());
  CHECK(a.rows.size() <= 40);
  CHECK(a.rows.size() > 20);  // generations found points the first one had not
  CHECK(a.header.sampling == "nsga2");
  for (std::size_t i = 0; i < a.rows.size(); ++i) {
    CHECK(a.rows[i].index == i);
    CHECK(a.rows[i].params == b.rows[i].params);
    CHECK(a.rows[i].metrics == b.rows[i].metrics);
  }
  // stopped twice and resumed: the same rows, the same front
  o.output = out("cut.h5");
  o.stop_after = 10;
  const explore::ExploreSummary stopped = explore::run_explore(sc, o);
  CHECK(stopped.stopped);
  CHECK(stopped.evaluations >= 10);
  CHECK(std::filesystem::exists(out("cut.h5.partial")));
  CHECK_FALSE(std::filesystem::exists(out("cut.h5")));
  o.resume = true;
  o.stop_after = 25;
  CHECK(explore::run_explore(sc, o).stopped);
  o.stop_after = 0;
  const explore::ExploreSummary resumed = explore::run_explore(sc, o);
  CHECK(resumed.done_before >= 25);
  const Results c = read_results_h5(out("cut.h5"));
  REQUIRE(c.rows.size() == a.rows.size());
  for (std::size_t i = 0; i < a.rows.size(); ++i) CHECK(c.rows[i].params == a.rows[i].params);
  REQUIRE(resumed.front.size() == one.front.size());
  for (std::size_t i = 0; i < one.front.size(); ++i) CHECK(resumed.front[i].index == one.front[i].index);
  // another seed is another search: its journal is refused by this one's hash, and it finds other points
  o.resume = false;
  o.seed = 6;
  o.output = out("seed6.h5");
  explore::run_explore(sc, o);
  CHECK(read_results_h5(out("seed6.h5")).header.config_hash != a.header.config_hash);
  CHECK(read_results_h5(out("seed6.h5")).rows[0].params != a.rows[0].params);
}

TEST_CASE("explore: with a constraint every front point meets it, and --compare scores three designs in one box") {
  json j = tiny_search();
  j["constraints"] = {{{"metric", "latency"}, {"max", 0.45}}};
  const std::string sc = scenario_file("constrained.json", j);
  explore::ExploreOptions o;
  o.quiet = true;
  o.compare = true;
  o.output = (test::temp_dir() / "constrained.h5").string();
  const explore::ExploreSummary s = explore::run_explore(sc, o);
  REQUIRE(s.designs.size() == 3);
  CHECK(s.designs[1].name == "grid");
  CHECK(s.designs[2].name == "random");
  CHECK(s.designs[1].evaluations <= s.designs[0].evaluations);
  CHECK(s.designs[2].evaluations == s.designs[0].evaluations);
  REQUIRE_FALSE(s.front.empty());
  for (const Row& r : s.front) CHECK(r.metrics[3] <= 0.45);  // latency (after energy, energy_min, energy_max)
  for (const auto& d : s.designs) {
    CHECK(std::filesystem::exists(d.output));
    CHECK(d.hypervolume >= 0);
    CHECK(d.hypervolume <= std::pow(1.1, 2));
    REQUIRE_FALSE(d.curve.empty());
    CHECK(d.curve.back().second == Approx(d.hypervolume));
    for (std::size_t k = 1; k < d.curve.size(); ++k) CHECK(d.curve[k].second >= d.curve[k - 1].second);  // more points never lose volume
  }
  // the feasible region is reached: some points fail the constraint, the front does not
  CHECK(s.designs[0].feasible < s.designs[0].evaluations);
  // the report draws the three designs' hypervolume against their evaluations, and names the chosen machine
  const report::Page page = report::write_report(o.output, (test::temp_dir() / "constrained.html").string());
  CHECK(std::count(page.plots.begin(), page.plots.end(), "Hypervolume against evaluations") == 1);
  for (const char* d : {"nsga2 (", "grid (", "random ("}) CHECK(page.html.find(d) != std::string::npos);
  CHECK(page.html.find("The machine of the front's best energy: point " + std::to_string(s.front[0].index)) != std::string::npos);
}

TEST_CASE("explore: a screen stops, on a quarter of the sequences, the points that miss the constraint by more than its margin") {
  // The trained parity model on aoc-48, 8 sequences of 8 tokens; at 1-2 ADC bits it loses decisions.
  const json j = {{"format", "aoc-sweep"},
                  {"version", 1},
                  {"name", "screened"},
                  {"workload", {{"model", kRoot + "/models/trained/parity-implicit"}, {"batch", 8}, {"length", 8}}},
                  {"hardware", "aoc-48"},
                  {"seed", 3},
                  {"sampling", {{"method", "nsga2"}, {"points", 16}, {"population", 8}, {"screen", {{"fraction", 0.25}, {"margin", 0.01}}}}},
                  {"parameters",
                   {{"converters.slm_bits", {{"range", {2, 8}}, {"integer", true}}},
                    {"converters.adc_bits", {{"range", {1, 5}}, {"integer", true}}},
                    {"noise_scale", {{"range", {0, 3}}}}}},
                  {"metrics", {"accuracy", "energy", "latency"}},
                  {"objectives", {{{"metric", "energy"}, {"scale", "log"}}, {{"metric", "latency"}, {"scale", "log"}}}},
                  {"constraints", {{{"metric", "accuracy"}, {"min", 0.99}}}}};
  const std::string sc = scenario_file("screened.json", j);
  const Scenario s = read_scenario(sc);
  const Evaluator ev(s);
  explore::ExploreOptions o;
  o.quiet = true;
  o.output = (test::temp_dir() / "screened.h5").string();
  const explore::ExploreSummary sum = explore::run_explore(sc, o);
  const Results res = read_results_h5(o.output);
  std::size_t stopped = 0, passed = 0;
  for (const Row& r : res.rows) {
    INFO("row " << r.index << " " << r.error);
    const Row screen = ev.evaluate(Point{r.index, r.params}, 0.25);
    REQUIRE(screen.status == "ok");
    CHECK(std::fmod(screen.metrics[0] * 16, 1.0) == 0);  // accuracy over 2 sequences of 8 decisions
    if (r.status == "screened") {
      ++stopped;
      CHECK(r.error.find("stopped by the screen on 0.25 of the test data: accuracy ") == 0);
      CHECK(explore::violation(s, r) > 0.01);
      CHECK(explore::objectives_of(s, r).empty());
      CHECK(r.metrics == screen.metrics);  // the screen's metrics, kept
    } else {
      REQUIRE(r.status == "ok");
      ++passed;
      CHECK(explore::violation(s, screen) <= 0.01);
      CHECK(r.metrics == ev.evaluate(Point{r.index, r.params}).metrics);  // then run in full
    }
  }
  CHECK(stopped > 0);
  CHECK(passed > 0);
  CHECK(sum.designs[0].screened == stopped);
  CHECK(sum.designs[0].cost == Approx(0.25 * static_cast<double>(stopped) + 1.25 * static_cast<double>(passed)));
  for (const Row& r : sum.front) CHECK(r.status == "ok");
  // stopped and resumed: the same rows, screened or not
  o.output = (test::temp_dir() / "screened-cut.h5").string();
  o.stop_after = 8;
  REQUIRE(explore::run_explore(sc, o).stopped);
  o.stop_after = 0, o.resume = true;
  explore::run_explore(sc, o);
  const Results cut = read_results_h5(o.output);
  REQUIRE(cut.rows.size() == res.rows.size());
  for (std::size_t i = 0; i < res.rows.size(); ++i) {
    CHECK(cut.rows[i].status == res.rows[i].status);
    CHECK(cut.rows[i].metrics == res.rows[i].metrics);
  }
  // --compare also runs the search without its screen, every row in full, in the same box
  o.resume = false, o.compare = true;
  o.output = (test::temp_dir() / "screened-compare.h5").string();
  const explore::ExploreSummary cmp = explore::run_explore(sc, o);
  REQUIRE(cmp.designs.size() == 4);
  CHECK(cmp.designs[1].name == "unscreened");
  CHECK(cmp.designs[1].output == explore::design_output(o.output, "unscreened"));
  CHECK(cmp.designs[1].screened == 0);
  CHECK(cmp.designs[1].cost == static_cast<double>(cmp.designs[1].evaluations));
  CHECK(cmp.designs[0].hypervolume == Approx(sum.designs[0].hypervolume).margin(0.5));  // another box, the same search
  const Results un = read_results_h5(cmp.designs[1].output);
  CHECK(un.header.sampling == "unscreened");
  for (const Row& r : un.rows) CHECK(r.status == "ok");
  CHECK(un.rows[0].metrics == ev.evaluate(Point{0, un.rows[0].params}).metrics);
  const report::Page page = report::write_report(o.output, (test::temp_dir() / "screened.html").string());
  CHECK(page.html.find(std::to_string(stopped) + " stopped by the search's screen, 0 failed") != std::string::npos);
  CHECK(page.html.find("Failed points") == std::string::npos);
  for (const char* d : {"nsga2 (", "unscreened (", "grid (", "random ("}) CHECK(page.html.find(d) != std::string::npos);
}

TEST_CASE("cli: aoc explore prints its front and the designs' hypervolumes, and refuses a sweep's scenario in one line") {
  const std::string sc = scenario_file("cli-search.json", tiny_search());
  const std::string out = (test::temp_dir() / "cli.h5").string();
  const test::Run r = test::run_aoc("explore " + sc + " -o " + out + " --compare --quiet");
  REQUIRE(r.status == 0);
  CHECK(r.out.find("explore: " + sc + ": ") == 0);
  CHECK(r.out.find("on the front") != std::string::npos);
  for (const char* d : {"nsga2", "grid", "random"}) CHECK(r.out.find(std::string("\n  ") + d) != std::string::npos);
  const json j = json::parse(test::run_aoc("explore " + sc + " -o " + out + " --resume --quiet --json").out);
  CHECK(j["tool"] == "aoc explore");
  CHECK(j["designs"].size() == 1);
  CHECK(j["designs"][0]["evaluations"] == j["done_before"]);
  CHECK(j["front"].size() >= 1);
  CHECK(j["front"][0]["objectives"].contains("energy"));
  // what aoc pareto and aoc report read
  CHECK(test::run_aoc("pareto " + out + " --x energy --y latency").status == 0);
  json sweep = tiny_search();
  sweep["sampling"] = {{"method", "random"}, {"points", 4}};
  const test::Run bad = test::run_aoc("explore " + scenario_file("cli-sweep.json", sweep) + " -o " + out);
  CHECK(bad.status == 1);
  CHECK(bad.out.find("sampling.method: aoc explore searches (\"nsga2\"); a random scenario runs with aoc sweep") != std::string::npos);
  CHECK(std::count(bad.out.begin(), bad.out.end(), '\n') == 1);
  const test::Run sweep_of_search = test::run_aoc("sweep " + sc + " -o " + out + ".sweep.h5");
  CHECK(sweep_of_search.status == 1);
  CHECK(sweep_of_search.out.find("run it with aoc explore") != std::string::npos);
}

#ifdef AOC_MPIRUN
TEST_CASE("explore cli: mpirun -np 2 gives the rows and front of one process", "[slow]") {
  const std::string sc = scenario_file("mpi-search.json", tiny_search());
  const std::string one = (test::temp_dir() / "mpi1.h5").string(), two = (test::temp_dir() / "mpi2.h5").string();
  REQUIRE(test::run_aoc("explore " + sc + " -o " + one + " --threads 1 --quiet").status == 0);
  // As root (CI containers) OpenMPI needs to be told that it may run; in the sanitizer build the ranks
  // run without the leak checker (test_sweep_cli.cpp says why).
#if defined(__SANITIZE_ADDRESS__)
  const std::string leaks = "LSAN_OPTIONS=detect_leaks=0 ";
#else
  const std::string leaks;
#endif
  const test::Run r = test::run_shell(leaks + "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 " AOC_MPIRUN " -np 2 --oversubscribe " +
                                      std::string(::geteuid() == 0 ? "--allow-run-as-root " : "") + AOC_BINARY + " explore " + sc + " -o " +
                                      two + " --threads 1 --quiet 2>&1");
  INFO(r.out);
  REQUIRE(r.status == 0);
  CHECK(r.out.find("x 2 ranks") != std::string::npos);
  const Results a = read_results_h5(one), b = read_results_h5(two);
  REQUIRE(a.rows.size() == b.rows.size());
  for (std::size_t i = 0; i < a.rows.size(); ++i) {
    CHECK(a.rows[i].params == b.rows[i].params);
    CHECK(a.rows[i].metrics == b.rows[i].metrics);
  }
}
#endif

TEST_CASE("explore: every bundled search scenario reads, with two objectives or more") {
  std::size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator(kRoot + "/scenarios/explore")) {
    INFO(e.path().string());
    const Scenario s = read_scenario(e.path().string());
    CHECK(s.sampling == Sampling::Nsga2);
    CHECK(s.objectives.size() >= 2);
    CHECK(s.samples % s.population == 0);
    ++n;
  }
  CHECK(n >= 4);
}
