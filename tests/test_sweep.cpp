// Design-space sweeps as a library: scenario files, sampling, the journal, the results file, the
// Pareto front, and points evaluated (runtime/sweep/sweep*.hpp, docs/scenarios.md).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include "compiler/graph_json.hpp"
#include "models/retina_data.hpp"
#include "runtime/estimate/program_estimate.hpp"
#include "runtime/retina/retina_eval.hpp"
#include "runtime/sweep/sweep.hpp"
#include "runtime/sweep/sweep_eval.hpp"
#include "runtime/sweep/sweep_results.hpp"
#include "sim/error.hpp"
#include "sim/hardware.hpp"
#include "tests/graph_support.hpp"

using namespace aoc;
using namespace aoc::sweep;
using test::error_of;
using test::scenario_file;

namespace {

const std::string kRoot = AOC_SOURCE_DIR;

// The tiny DEQ on the 16-variable machine, estimated only: cheap points.
json tiny_estimate(const json& parameters, const json& sampling = {{"method", "grid"}}) {
  return {{"format", "aoc-sweep"}, {"version", 1}, {"name", "tiny"}, {"workload", {{"graph", kRoot + "/models/graphs/tiny-deq.json"}}},
          {"hardware", "aoc-16"}, {"sampling", sampling}, {"fixed", {{"iterations", 10}}}, {"parameters", parameters},
          {"metrics", {"energy", "latency", "tops_per_w", "mapping"}}};
}

bool same(double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

}  // namespace

TEST_CASE("sweep: a grid varies the last parameter fastest and holds the fixed ones") {
  const Scenario s = read_scenario(scenario_file("grid.json", tiny_estimate({{"converters.slm_bits", {{"values", {9, 6}}}},
                                                                              {"timing.loop_period_ns", {{"range", {1, 100}}, {"scale", "log"}, {"steps", 3}}}})));
  const auto pts = points(s);
  REQUIRE(pts.size() == 6);
  REQUIRE(s.params.size() == 3);
  CHECK(s.params[0].name == "iterations");
  CHECK(s.params[0].fixed);
  CHECK(pts[0].values[1] == 9);
  CHECK(pts[2].values[1] == 9);
  CHECK(pts[3].values[1] == 6);
  CHECK(pts[0].values[2].get<double>() == Approx(1));
  CHECK(pts[1].values[2].get<double>() == Approx(10));
  CHECK(pts[5].values[2].get<double>() == Approx(100));
  for (const Point& p : pts) CHECK(p.values[0] == 10);
}

TEST_CASE("sweep: random and Latin-hypercube points are a pure function of the seed") {
  for (const char* m : {"random", "lhs"}) {
    const json params = {{"timing.loop_period_ns", {{"range", {1, 100}}, {"scale", "log"}}}, {"converters.slm_bits", {{"values", {3, 4, 5, 6}}}},
                         {"architecture.modules", {{"range", {1, 8}}, {"integer", true}}}};
    json j = tiny_estimate(params, {{"method", m}, {"points", 50}});
    j["seed"] = 7;
    const auto a = points(read_scenario(scenario_file("a.json", j))), b = points(read_scenario(scenario_file("b.json", j)));
    j["seed"] = 8;
    const auto c = points(read_scenario(scenario_file("c.json", j)));
    REQUIRE(a.size() == 50);
    bool differ = false;
    for (std::size_t i = 0; i < a.size(); ++i) {
      CHECK(a[i].values == b[i].values);
      differ = differ || a[i].values != c[i].values;
      const double t = a[i].values[1].get<double>();
      CHECK(t >= 1);
      CHECK(t <= 100);
      CHECK(a[i].values[3].is_number_integer());
      CHECK(a[i].values[3].get<int>() >= 1);
      CHECK(a[i].values[3].get<int>() <= 8);
    }
    CHECK(differ);
  }
}

TEST_CASE("sweep: a Latin hypercube puts one point in each stratum of every dimension") {
  for (std::size_t n : {1u, 7u, 100u}) {
    const auto u = unit_samples(Sampling::Lhs, n, 4, 11);
    for (std::size_t d = 0; d < 4; ++d) {
      std::set<std::size_t> strata;
      for (std::size_t i = 0; i < n; ++i) {
        REQUIRE(u[i][d] >= 0);
        REQUIRE(u[i][d] < 1);
        strata.insert(static_cast<std::size_t>(u[i][d] * static_cast<double>(n)));
      }
      CHECK(strata.size() == n);
    }
  }
  // Through a scenario: a lin range [0, 1] keeps the strata; a list of 4 values gets n / 4 each.
  json j = tiny_estimate({{"energy.control.typ", {{"range", {400, 400}}}}, {"converters.slm_bits", {{"values", {3, 4, 5, 6}}}}},
                         {{"method", "lhs"}, {"points", 40}});
  std::map<int, int> count;
  for (const Point& p : points(read_scenario(scenario_file("lhs.json", j)))) ++count[p.values[2].get<int>()];
  for (int b : {3, 4, 5, 6}) CHECK(count[b] == 10);
}

TEST_CASE("sweep: a bad scenario is one line naming the file and the field") {
  const auto err = [](const json& j) { return error_of([&] { read_scenario(scenario_file("bad.json", j)); }); };
  std::string e = err(tiny_estimate({{"energy.slm_statc.typ", {{"values", {1}}}}}));
  CHECK(e.find("bad.json: parameters.energy.slm_statc.typ: no such hardware field: energy.slm_statc") != std::string::npos);
  CHECK(e.find('\n') == std::string::npos);
  json j = tiny_estimate({{"converters.slm_bits", {{"values", {9}}}}});
  j["metrics"] = {"energy", "acuracy"};
  e = err(j);
  CHECK(e.find("bad.json: metrics[1]: \"acuracy\" is not one of") != std::string::npos);
  j["metrics"] = {"accuracy"};
  CHECK(err(j).find("metrics[0]: accuracy needs a model with a task") != std::string::npos);
  CHECK(err(tiny_estimate({{"noise_scale", {{"values", {1}}}}})).find("parameters.noise_scale: noise_scale is for a workload that runs") !=
        std::string::npos);
  CHECK(err(tiny_estimate({{"energy.slm_static", {{"values", {1}}}}})).find("is a section, not a value (vary its min, typ or max)") !=
        std::string::npos);
  CHECK(err(tiny_estimate({{"timing.loop_period_ns", {{"range", {1, 2}}}}})).find("parameters.timing.loop_period_ns: a range on a grid needs steps") !=
        std::string::npos);
  j = tiny_estimate({{"converters.slm_bits", {{"values", {9}}}}});
  j["sampling"] = {{"method", "sobol"}};
  CHECK(err(j).find("sampling.method: \"sobol\" is not one of grid, random, lhs") != std::string::npos);
}

TEST_CASE("sweep: HardwareFile loads what load_hardware loads, for any overrides") {
  const std::string path = resolve_hardware_path("aoc-48");
  const HardwareFile f(path);
  for (const std::vector<std::string>& o : std::vector<std::vector<std::string>>{
           {}, {"timing.loop_period_ns=5"}, {"converters.slm_bits=4", "energy.slm_static.typ=3"}, {"defaults.alpha=0.25"}}) {
    const Hardware a = f.load(o), b = load_hardware(path, o);
    CHECK(a.timing->loop_period_ns == b.timing->loop_period_ns);
    CHECK(a.converters->slm_bits == b.converters->slm_bits);
    CHECK(a.energy->find("slm_static")->value.typ == b.energy->find("slm_static")->value.typ);
    CHECK(a.defaults.alpha == b.defaults.alpha);
    CHECK(a.sources == b.sources);
  }
  CHECK(error_of([&] { f.load({"timing.loop_period_ns=-1"}); }) == error_of([&] { load_hardware(path, {"timing.loop_period_ns=-1"}); }));
  CHECK(error_of([&] { f.load({"timing.nope=1"}); }).find("no such field to override") != std::string::npos);
}

TEST_CASE("sweep: an estimate point equals aoc estimate's, and a failing point records its error") {
  const Scenario s = read_scenario(scenario_file("est.json", tiny_estimate({{"architecture.modules", {{"values", {1, 0, 2}}}}})));
  const Evaluator ev(s);
  const auto pts = points(s);
  const Row ok = ev.evaluate(pts[0]), bad = ev.evaluate(pts[1]), two = ev.evaluate(pts[2]);
  CHECK(ok.status == "ok");
  CHECK(bad.status == "error");
  CHECK(bad.error.find("architecture.modules") != std::string::npos);
  CHECK(std::all_of(bad.metrics.begin(), bad.metrics.end(), [](double v) { return std::isnan(v); }));
  CHECK(two.status == "ok");
  // The same figures as the library's estimate of the graph, compiled for the machine.
  const Hardware hw = load_hardware(resolve_hardware_path("aoc-16"), {"architecture.modules=1"});
  const auto p = compile_for_estimate(ir::read_graph(kRoot + "/models/graphs/tiny-deq.json"), hw, "aoc-16", {});
  ProgramEstimateOptions eo;
  eo.iterations = 10;
  const ProgramEstimate e = estimate_program(p, hw, eo);
  const auto col = [&](const std::string& n) {
    for (std::size_t k = 0; k < s.columns.size(); ++k)
      if (s.columns[k].name == n) return k;
    FAIL("no column " << n);
    return std::size_t{0};
  };
  CHECK(ok.metrics[col("energy")] == e.token.total_joules.typ);
  CHECK(ok.metrics[col("energy_max")] == e.token.total_joules.max);
  CHECK(ok.metrics[col("latency")] == e.token.total_seconds);
  CHECK(ok.metrics[col("tiles")] == e.tiles);
}

TEST_CASE("sweep: the journal keeps every appended row, drops a line cut short, and refuses another scenario") {
  const Scenario s = read_scenario(scenario_file("j.json", tiny_estimate({{"architecture.modules", {{"values", {1, 2, 3}}}}})));
  const Header h = header_of(s);
  const std::string path = (test::temp_dir() / "j.h5.partial").string();
  std::filesystem::remove(path);
  const Evaluator ev(s);
  const auto pts = points(s);
  {
    Journal j(path, h, false);
    j.append({ev.evaluate(pts[0]), ev.evaluate(pts[2])});
  }
  { std::ofstream(path, std::ios::app) << "{\"index\": 1, \"seed\": 1, \"sta"; }  // a kill in the middle of a line
  CHECK(error_of([&] { Journal(path, h, false); }).find("run with --resume") != std::string::npos);
  {
    Journal j(path, h, true);
    REQUIRE(j.rows().size() == 2);
    CHECK(j.rows()[1].index == 2);
    CHECK(j.rows()[0].metrics == ev.evaluate(pts[0]).metrics);
    j.append({ev.evaluate(pts[1])});
  }
  Journal j(path, h, true);
  CHECK(j.rows().size() == 3);
  CHECK(error_of([&] { Journal(path, h, true); }).find("another aoc sweep is writing") != std::string::npos);
  Header other = h;
  other.config_hash = "0000000000000000";
  j.remove();
  { Journal(path, h, false); }
  CHECK(error_of([&] { Journal(path, other, true); }).find("written by another scenario") != std::string::npos);
}

TEST_CASE("sweep: the results file reads back as written") {
  const Scenario s = read_scenario(scenario_file("r.json", tiny_estimate({{"architecture.modules", {{"values", {1, 0}}}},
                                                                          {"architecture.partial_sums", {{"values", {"analog", "digital"}}}}})));
  const Evaluator ev(s);
  Results r{header_of(s), {}};
  for (const Point& p : points(s)) r.rows.push_back(ev.evaluate(p));
  const std::string path = (test::temp_dir() / "r.h5").string();
  write_results_h5(path, r);
  const Results b = read_results_h5(path);
  CHECK(b.header.config_hash == s.config_hash);
  CHECK(b.header.points == 4);
  REQUIRE(b.rows.size() == 4);
  REQUIRE(b.header.metrics.size() == s.columns.size());
  CHECK(b.header.params[2].name == "architecture.partial_sums");
  CHECK(b.header.params[2].kind == "hardware");
  CHECK(b.header.params[0].fixed);
  for (std::size_t i = 0; i < 4; ++i) {
    CHECK(b.rows[i].status == r.rows[i].status);
    CHECK(b.rows[i].error == r.rows[i].error);
    CHECK(b.rows[i].params[2] == r.rows[i].params[2]);
    for (std::size_t k = 0; k < r.rows[i].metrics.size(); ++k) CHECK(same(b.rows[i].metrics[k], r.rows[i].metrics[k]));
  }
  CHECK(b.rows[2].status == "error");
  CHECK(b.rows[2].error.find("architecture.modules") != std::string::npos);
}

TEST_CASE("sweep: the Pareto front keeps the rows no other row beats") {
  // (x, y), x minimised, y maximised: 1 and 3 are beaten by 0 and 2; 4 ties 2; 5 has a NaN.
  const std::vector<double> x{1, 2, 3, 4, 3, NAN}, y{0.5, 0.4, 0.9, 0.8, 0.9, 1.0};
  CHECK(pareto_front(x, y, false, true) == std::vector<std::size_t>{0, 2, 4});
  CHECK(pareto_front(x, y, true, true) == std::vector<std::size_t>{2, 4, 3});  // x maximised too (ascending x, then row)
  CHECK(pareto_front({}, {}, false, false).empty());
}

TEST_CASE("sweep: an optimisation problem runs at each point with the optimiser's metrics, as aoc optimize runs it") {
  const json j = {{"format", "aoc-sweep"},
                  {"version", 1},
                  {"name", "opt"},
                  {"workload", {{"problem", kRoot + "/scenarios/problems/wishart48.json"}, {"samples", 40}, {"iterations", 200}}},
                  {"hardware", "aoc-48"},
                  {"sampling", {{"method", "grid"}}},
                  {"parameters", {{"noise_scale", {{"values", {0, 100}}}}}},
                  {"metrics", {"optimisation"}}};
  const Scenario s = read_scenario(scenario_file("opt.json", j));
  REQUIRE(s.columns.front().name == "p");
  const Evaluator ev(s);
  const auto pts = points(s);
  const Row quiet = ev.evaluate(pts[0]), loud = ev.evaluate(pts[1]);
  INFO(quiet.error << loud.error);
  REQUIRE(quiet.status == "ok");
  REQUIRE(loud.status == "ok");
  CHECK(quiet.metrics[0] > 0);  // the planted optimum is reached without noise
  CHECK(loud.metrics[0] < quiet.metrics[0]);
  CHECK(quiet.metrics[4] == Approx(-23.550037569334364));  // best_objective: the planted ground state
}

TEST_CASE("sweep: an optimisation problem's scenario takes only the optimiser's metrics and options") {
  json j = {{"format", "aoc-sweep"},
            {"version", 1},
            {"name", "opt"},
            {"workload", {{"problem", kRoot + "/scenarios/problems/wishart48.json"}}},
            {"hardware", "aoc-48"},
            {"sampling", {{"method", "grid"}}},
            {"parameters", {{"noise_scale", {{"values", {0, 1}}}}}},
            {"metrics", {"accuracy"}}};
  CHECK_THAT(error_of([&] { read_scenario(scenario_file("o1.json", j)); }), Catch::Contains("metrics[0]: accuracy is not for an optimisation problem"));
  j["metrics"] = {"optimisation"};
  j["workload"]["task"] = "parity";
  CHECK_THAT(error_of([&] { read_scenario(scenario_file("o2.json", j)); }), Catch::Contains("workload.task: not for a problem"));
  j["workload"] = {{"graph", kRoot + "/models/graphs/tiny-deq.json"}, {"samples", 3}};
  CHECK_THAT(error_of([&] { read_scenario(scenario_file("o3.json", j)); }), Catch::Contains("workload.samples: only for a problem"));
}

namespace {

// A small SYNTHETIC retina of the shipped retina models' size (50 x 50, 9 cells), written once.
std::string small_retina_file() {
  static const std::string path = [] {
    retina::SynthConfig c;
    c.train_frames = 1000, c.test_frames = 240, c.repeats = 3;
    const auto p = (test::temp_dir() / "sweep-retina.h5").string();
    retina::write_dataset(p, retina::synthesize(c));
    return p;
  }();
  return path;
}

json retina_scenario(const json& parameters) {
  return {{"format", "aoc-sweep"},
          {"version", 1},
          {"name", "retina"},
          {"workload", {{"retina", kRoot + "/models/retina/implicit"}, {"data", small_retina_file()}, {"optics", false}}},
          {"hardware", "aoc-48"},
          {"sampling", {{"method", "grid"}}},
          {"parameters", parameters},
          {"metrics", {"retina", "energy"}}};
}

}  // namespace

TEST_CASE("sweep: a retina point is aoc retina eval on the point's machine", "[slow]") {
  const Scenario s = read_scenario(scenario_file("retina.json", retina_scenario({{"noise_scale", {{"values", {0, 100}}}}})));
  REQUIRE(s.columns[0].name == "energy");
  const auto cc = std::find_if(s.columns.begin(), s.columns.end(), [](const MetricColumn& c) { return c.name == "cc"; }) - s.columns.begin();
  REQUIRE(cc < static_cast<long>(s.columns.size()));
  const Evaluator ev(s);
  const auto pts = points(s);
  const Row quiet = ev.evaluate(pts[0]), loud = ev.evaluate(pts[1]);
  INFO(quiet.error << loud.error);
  REQUIRE(quiet.status == "ok");
  REQUIRE(loud.status == "ok");
  RetinaEvalSettings st;
  st.run.sequence = "sequential";
  st.run.quantize = true, st.run.noise = false, st.run.ideal_optics = true;
  const RetinaEval direct = evaluate_retina(read_retina_model(kRoot + "/models/retina/implicit"), retina::read_dataset(small_retina_file()), st);
  CHECK(quiet.metrics[cc] == direct.scores.cc_mean);
  CHECK(same(quiet.metrics[cc + 1], direct.scores.fev_mean));
  CHECK(quiet.metrics[0] == direct.estimate.token.total_joules.typ);
  CHECK(loud.metrics[cc] < quiet.metrics[cc] - 0.1);  // a hundred times the machine's noise loses the state
}

TEST_CASE("sweep: a retina workload takes the retina metrics and the estimates, and its options only") {
  json j = retina_scenario({{"noise_scale", {{"values", {0, 1}}}}});
  j["metrics"] = {"agreement"};
  CHECK_THAT(error_of([&] { read_scenario(scenario_file("r1.json", j)); }), Catch::Contains("metrics[0]: agreement is not for a retina model"));
  j["metrics"] = {"retina"};
  j["workload"]["task"] = "parity";
  CHECK_THAT(error_of([&] { read_scenario(scenario_file("r2.json", j)); }), Catch::Contains("workload.task: not for a retina model"));
  j = tiny_estimate({{"converters.slm_bits", {{"values", {9}}}}});
  j["metrics"] = {"retina"};
  CHECK_THAT(error_of([&] { read_scenario(scenario_file("r3.json", j)); }), Catch::Contains("metrics[0]: retina needs a retina model (workload.retina)"));
  j["workload"]["frames"] = 10;
  CHECK_THAT(error_of([&] { read_scenario(scenario_file("r4.json", j)); }), Catch::Contains("workload.frames: only for a retina model"));
  j = retina_scenario({{"seeds", {{"values", {1, 2}}}}});
  CHECK_THAT(error_of([&] { read_scenario(scenario_file("r5.json", j)); }), Catch::Contains("parameters.seeds: seeds is not for a retina model"));
}
