// aoc sweep and aoc pareto as a user meets them: a sweep killed midway and resumed gives the rows
// of an uninterrupted one, a failing point is recorded, mpirun gives the results of one process.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "runtime/sweep/sweep_results.hpp"
#include "tests/support.hpp"

using aoc::test::Run;
using aoc::test::run_aoc;
using namespace aoc::sweep;

namespace {

const std::string kRoot = AOC_SOURCE_DIR;

std::filesystem::path dir() {
  auto d = std::filesystem::temp_directory_path() / ("aoc-sweep-cli-" + std::to_string(::getpid()));
  std::filesystem::create_directories(d);
  return d;
}

std::string write_scenario(const std::string& name, const json& j) {
  const auto p = dir() / name;
  std::ofstream(p) << j.dump(1);
  return p.string();
}

// The trained parity model on aoc-48, 2 sequences of 8 tokens: a few tens of milliseconds a point.
std::string model_scenario(int n) {
  return write_scenario("model.json", {{"format", "aoc-sweep"}, {"version", 1}, {"name", "kill"},
                                       {"workload", {{"model", kRoot + "/models/trained/parity-implicit"}, {"batch", 2}, {"length", 8}}},
                                       {"hardware", "aoc-48"}, {"seed", 3}, {"sampling", {{"method", "random"}, {"points", n}}},
                                       {"parameters", {{"noise_scale", {{"range", {0, 3}}}}, {"converters.slm_bits", {{"values", {9, 6}}}}}},
                                       {"metrics", {"accuracy", "agreement", "iterations", "energy"}}});
}

std::size_t lines(const std::string& path) {
  std::ifstream in(path);
  std::size_t n = 0;
  for (std::string l; std::getline(in, l);) ++n;
  return n;
}

bool same(double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

void require_same_rows(const Results& a, const Results& b) {
  CHECK(a.header.config_hash == b.header.config_hash);
  REQUIRE(a.rows.size() == b.rows.size());
  for (std::size_t i = 0; i < a.rows.size(); ++i) {
    INFO("row " << i);
    CHECK(a.rows[i].index == b.rows[i].index);
    CHECK(a.rows[i].seed == b.rows[i].seed);
    CHECK(a.rows[i].status == b.rows[i].status);
    CHECK(a.rows[i].error == b.rows[i].error);
    CHECK(a.rows[i].params == b.rows[i].params);
    REQUIRE(a.rows[i].metrics.size() == b.rows[i].metrics.size());
    for (std::size_t k = 0; k < a.rows[i].metrics.size(); ++k) CHECK(same(a.rows[i].metrics[k], b.rows[i].metrics[k]));
  }
}

bool one_line(const std::string& s) { return !s.empty() && s.find('\n') == s.size() - 1; }

}  // namespace

TEST_CASE("sweep cli: a sweep killed midway (SIGKILL) and resumed gives the rows of an uninterrupted one", "[slow]") {
  const int n = 80;
  const std::string s = model_scenario(n);
  const std::string full = (dir() / "full.h5").string(), cut = (dir() / "cut.h5").string();
  for (const auto& f : {full, cut, journal_path(cut)}) std::filesystem::remove(f);
  const Run whole = run_aoc("sweep " + s + " -o " + full + " --threads 2 --quiet");
  INFO(whole.out);
  REQUIRE(whole.status == 0);

  // The same sweep on one thread, killed once ten points are in its journal.
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    const int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, 1), ::dup2(null, 2);
    ::execl(AOC_BINARY, "aoc", "sweep", s.c_str(), "-o", cut.c_str(), "--threads", "1", nullptr);
    ::_exit(127);
  }
  const auto start = std::chrono::steady_clock::now();
  while (lines(journal_path(cut)) < 11 && std::chrono::steady_clock::now() - start < std::chrono::seconds(60))
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  REQUIRE(WIFSIGNALED(status));
  const std::size_t kept = lines(journal_path(cut)) - 1;
  INFO("rows in the journal at the kill: " << kept);
  REQUIRE(kept >= 10);
  REQUIRE(kept < static_cast<std::size_t>(n));
  CHECK(!std::filesystem::exists(cut));

  const Run again = run_aoc("sweep " + s + " -o " + cut + " --quiet");
  CHECK(again.status == 1);
  CHECK(one_line(again.out));
  CHECK(again.out.find("--resume") != std::string::npos);

  const Run resumed = run_aoc("sweep " + s + " -o " + cut + " --resume --threads 2 --quiet");
  INFO(resumed.out);
  REQUIRE(resumed.status == 0);
  CHECK(resumed.out.find(std::to_string(n - kept) + " run now (" + std::to_string(kept) + " done before)") != std::string::npos);
  CHECK(!std::filesystem::exists(journal_path(cut)));
  require_same_rows(read_results_h5(full), read_results_h5(cut));

  const Run done = run_aoc("sweep " + s + " -o " + cut + " --resume");
  CHECK(done.status == 0);
  CHECK(done.out.find("all 80 points were done before") != std::string::npos);
}

TEST_CASE("sweep cli: the CSV header carries each metric's unit, none for dimensionless ones") {
  const std::string s = write_scenario(
      "units.json", {{"format", "aoc-sweep"}, {"version", 1}, {"name", "units"}, {"workload", {{"graph", kRoot + "/models/graphs/tiny-deq.json"}}},
                     {"hardware", "aoc-16"}, {"sampling", {{"method", "grid"}}}, {"fixed", {{"iterations", 10}}},
                     {"parameters", {{"timing.loop_period_ns", {{"values", {20, 40}}}}}}});
  const std::string out = (dir() / "units.h5").string(), csv = (dir() / "units.csv").string();
  const Run r = run_aoc("sweep " + s + " -o " + out + " --csv " + csv + " --quiet");
  INFO(r.out);
  REQUIRE(r.status == 0);
  std::ifstream in(csv);
  std::string header;
  std::getline(in, header);
  INFO(header);
  CHECK(header.rfind("index,seed,status,error,", 0) == 0);
  CHECK(header.find(",timing.loop_period_ns,") != std::string::npos);
  CHECK(header.find(",energy [J],") != std::string::npos);
  CHECK(header.find(",latency [s]") != std::string::npos);
  CHECK(header.find("[1]") == std::string::npos);
}

TEST_CASE("sweep cli: a failing point records its error and the others complete, and pareto lists the front") {
  const std::string s = write_scenario(
      "fail.json", {{"format", "aoc-sweep"}, {"version", 1}, {"name", "fail"}, {"workload", {{"graph", kRoot + "/models/graphs/tiny-deq.json"}}},
                    {"hardware", "aoc-16"}, {"sampling", {{"method", "grid"}}}, {"fixed", {{"iterations", 10}}},
                    {"parameters", {{"architecture.modules", {{"values", {1, 0, 2}}}}, {"timing.loop_period_ns", {{"values", {20, 1}}}}}}});
  const std::string out = (dir() / "fail.h5").string(), csv = (dir() / "fail.csv").string();
  const Run r = run_aoc("sweep " + s + " -o " + out + " --csv " + csv);
  INFO(r.out);
  REQUIRE(r.status == 0);
  CHECK(r.out.find("6 points, 6 run now") != std::string::npos);
  CHECK(r.out.find("2 failed") != std::string::npos);
  const Results res = read_results_h5(out);
  REQUIRE(res.rows.size() == 6);
  for (const Row& row : res.rows) {
    const bool bad = row.params[1].get<double>() == 0;
    CHECK(row.status == (bad ? "error" : "ok"));
    CHECK((row.error.find("architecture.modules") != std::string::npos) == bad);
  }
  CHECK(lines(csv) == 7);

  const Run p = run_aoc("pareto " + out + " --x latency --y energy --json");
  INFO(p.out);
  REQUIRE(p.status == 0);
  const auto j = nlohmann::json::parse(p.out);
  CHECK(j["rows_used"] == 4);
  REQUIRE(!j["points"].empty());
  // the failed points (0 modules) are not on the front; the fastest loop is (the lowest latency)
  bool fastest = false;
  for (const auto& pt : j["points"]) {
    CHECK(pt["parameters"]["architecture.modules"] != 0.0);
    fastest = fastest || pt["parameters"]["timing.loop_period_ns"] == 1.0;
  }
  CHECK(fastest);
  const Run table = run_aoc("pareto " + out + " --x latency --y energy");
  CHECK(table.status == 0);
  CHECK(table.out.find("on the front of latency (min) and energy (min)") != std::string::npos);
  const Run bad = run_aoc("pareto " + out + " --x latncy --y energy");
  CHECK(bad.status == 1);
  CHECK(one_line(bad.out));
  CHECK(bad.out.find("no column latncy") != std::string::npos);
}

TEST_CASE("sweep cli: a bad scenario is a one-line error naming the file and the field") {
  const std::string s = write_scenario(
      "bad.json", {{"format", "aoc-sweep"}, {"version", 1}, {"name", "bad"}, {"workload", {{"graph", kRoot + "/models/graphs/tiny-deq.json"}}},
                   {"hardware", "aoc-16"}, {"sampling", {{"method", "grid"}}}, {"parameters", {{"timing.loop_perod_ns", {{"values", {1}}}}}}});
  const Run r = run_aoc("sweep " + s + " -o " + (dir() / "bad.h5").string());
  CHECK(r.status == 1);
  CHECK(one_line(r.out));
  CHECK(r.out.find("bad.json: parameters.timing.loop_perod_ns: no such hardware field") != std::string::npos);
}

#ifdef AOC_MPIRUN
TEST_CASE("sweep cli: mpirun -np 2 gives the results of one process", "[slow]") {
  const std::string s = model_scenario(40);
  const std::string one = (dir() / "one.h5").string(), two = (dir() / "two.h5").string();
  const Run a = run_aoc("sweep " + s + " -o " + one + " --threads 1 --quiet");
  REQUIRE(a.status == 0);
  // As root (CI containers) OpenMPI needs to be told that it may run. In the sanitizer build the
  // ranks run without the leak checker: MPI_Finalize unloads Open MPI's plugins, whose allocations
  // it then reports with no module name a suppression could match (docs/reliability.md); the same
  // sweep in one process above is leak-checked.
#if defined(__SANITIZE_ADDRESS__)
  const std::string leaks = "LSAN_OPTIONS=detect_leaks=0 ";
#else
  const std::string leaks;
#endif
  const std::string cmd = leaks + "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 " AOC_MPIRUN " -np 2 --oversubscribe " +
                          std::string(::geteuid() == 0 ? "--allow-run-as-root " : "") + AOC_BINARY + " sweep " + s + " -o " + two +
                          " --threads 1 --quiet 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  std::string out;
  char buf[4096];
  for (std::size_t k; (k = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, k);
  const int st = ::pclose(p);
  INFO(out);
  REQUIRE(WIFEXITED(st));
  REQUIRE(WEXITSTATUS(st) == 0);
  CHECK(out.find("x 2 ranks") != std::string::npos);
  require_same_rows(read_results_h5(one), read_results_h5(two));
}
#endif

TEST_CASE("sweep cli: a workload runs the calibrated optics unless it sets optics false") {
  // One noiseless point of the trained parity model: its largest error against the reference.
  const auto max_abs_error = [](const std::string& name, json workload) {
    const std::string s = write_scenario(name + ".json", {{"format", "aoc-sweep"}, {"version", 1}, {"name", name}, {"workload", workload},
                                                          {"hardware", "aoc-48"}, {"seed", 3}, {"sampling", {{"method", "grid"}}},
                                                          {"fixed", {{"noise_scale", 0}}},
                                                          {"parameters", {{"converters.slm_bits", {{"values", {9}}}}}},
                                                          {"metrics", {"agreement"}}});
    const std::string out = (dir() / (name + ".h5")).string();
    const Run r = run_aoc("sweep " + s + " -o " + out + " --quiet");
    INFO(r.out);
    REQUIRE(r.status == 0);
    const Results res = read_results_h5(out);
    REQUIRE(res.rows.size() == 1);
    REQUIRE(res.rows[0].status == "ok");
    for (std::size_t k = 0; k < res.header.metrics.size(); ++k)
      if (res.header.metrics[k].name == "max_abs_error") return res.rows[0].metrics[k];
    FAIL("no max_abs_error column");
    return 0.0;
  };
  const json model = {{"model", kRoot + "/models/trained/parity-implicit"}, {"batch", 2}, {"length", 8}};
  json ideal = model;
  ideal["optics"] = false;
  const double measured = max_abs_error("optics-default", model), exact = max_abs_error("optics-false", ideal);
  CHECK(measured > exact);
}

TEST_CASE("sweep: optics is a parameter: the machine as measured against ideal optics, values only") {
  const std::string s = write_scenario(
      "optics.json", {{"format", "aoc-sweep"}, {"version", 1}, {"name", "optics"},
                      {"workload", {{"model", kRoot + "/models/trained/parity-implicit"}, {"batch", 2}, {"length", 8}}},
                      {"hardware", "aoc-48"}, {"seed", 3}, {"sampling", {{"method", "grid"}}},
                      {"parameters", {{"optics", {{"values", {true, false}}}}}}, {"metrics", {"accuracy", "agreement"}}});
  const std::string out = (dir() / "optics.h5").string(), csv = (dir() / "optics.csv").string();
  const Run r = run_aoc("sweep " + s + " -o " + out + " --csv " + csv + " --quiet");
  INFO(r.out);
  REQUIRE(r.status == 0);
  std::ifstream in(csv);
  std::string header, measured, ideal;
  std::getline(in, header), std::getline(in, measured), std::getline(in, ideal);
  CHECK_THAT(header, Catch::Contains(",optics,"));
  CHECK_THAT(measured, Catch::Contains(",true,"));
  CHECK_THAT(ideal, Catch::Contains(",false,"));
  CHECK(measured.substr(measured.find(",true,") + 6) != ideal.substr(ideal.find(",false,") + 7));  // two machines, two results
  const std::string bad = write_scenario(
      "optics-range.json", {{"format", "aoc-sweep"}, {"version", 1}, {"name", "optics"},
                            {"workload", {{"model", kRoot + "/models/trained/parity-implicit"}, {"batch", 2}, {"length", 8}}},
                            {"hardware", "aoc-48"}, {"seed", 3}, {"sampling", {{"method", "random"}, {"points", 2}}},
                            {"parameters", {{"optics", {{"range", {0, 1}}}}}}, {"metrics", {"accuracy"}}});
  const Run refused = run_aoc("sweep " + bad + " -o " + (dir() / "bad.h5").string());
  CHECK(refused.status == 1);
  CHECK_THAT(refused.out, Catch::Contains("parameters.optics: optics takes values, not a range"));
}
