// Optimisation problems (runtime/optimize/ising.hpp) and the sampler on the machine (runtime/optimize/optimize.hpp).
#include <cmath>
#include <fstream>
#include <random>

#include "graph_support.hpp"
#include "runtime/optimize/ising.hpp"
#include "runtime/optimize/optimize.hpp"
#include "sim/error.hpp"
#include "support.hpp"

using namespace aoc;
using aoc::test::hw48;

namespace {

// Every +-1 state of n variables as the rows of a 2^n x n matrix.
MatrixXdR all_states(int n) {
  MatrixXdR S(1 << n, n);
  for (int k = 0; k < (1 << n); ++k)
    for (int j = 0; j < n; ++j) S(k, j) = (k >> j) & 1 ? 1.0 : -1.0;
  return S;
}

std::string write_text(const std::string& name, const std::string& text) {
  const auto p = aoc::test::temp_dir() / name;
  std::ofstream(p) << text;
  return p.string();
}

LoopSettings machine(const std::string& mode, bool converters_and_noise) {
  LoopSettings s;
  s.hw = "aoc-48", s.mode = mode, s.quantize = s.noise = converters_and_noise, s.seed = 1;
  return s;
}

double planted_p(const IsingProblem& p) {
  OptimizeSettings s;
  s.loop = machine("default", true);
  s.sa_sweeps = s.sb_steps = 0;
  const OptimizeResult r = optimize(p, load_machine(s.loop), s, false);
  return r.aoc_success.p;
}

}  // namespace

TEST_CASE("ising: the energy of a state is minus half s'Js minus h's plus the offset") {
  IsingProblem p;
  p.J = MatrixXdR{{0, 2}, {2, 0}};
  p.h = Eigen::Vector2d(1, -1);
  p.binary = {1, 1};
  p.offset = 0.5;
  CHECK(ising_energy(p, Eigen::VectorXd(Eigen::Vector2d(1, 1))) == -2 - 0 + 0.5);
  CHECK(ising_energy(p, Eigen::VectorXd(Eigen::Vector2d(1, -1))) == 2 - 2 + 0.5);
}

TEST_CASE("ising: a QUBO converts to the mixed-Ising form with its objective at every state, minimised or maximised") {
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> u(-2, 2);
  const int n = 6;
  MatrixXdR Q(n, n);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j <= i; ++j) Q(i, j) = Q(j, i) = u(rng);
  Eigen::VectorXd b(n);
  for (double& v : b) v = u(rng);
  const std::vector<std::uint8_t> bin(n, 1);
  for (int sense : {1, -1}) {
    const IsingProblem p = from_quadratic(Q, b, 0.75, bin, Eigen::VectorXd::Zero(n), Eigen::VectorXd::Ones(n), sense);
    check_ising(p, "qubo");
    const MatrixXdR S = all_states(n);
    const Eigen::VectorXd e = ising_energy(p, S);
    for (Eigen::Index k = 0; k < S.rows(); ++k) {
      const Eigen::VectorXd x = (S.row(k).transpose().array() + 1) / 2;
      CHECK(objective_of(p, e(k)) == Approx(0.5 * x.dot(Q * x) + b.dot(x) + 0.75).margin(1e-12));
    }
  }
}

TEST_CASE("ising: continuous variables in a box map to the unit interval with the same objective") {
  MatrixXdR Q{{2, -1, 0.5}, {-1, 3, 0}, {0.5, 0, -1}};
  const Eigen::VectorXd b = Eigen::Vector3d(1, -2, 0.5), lo = Eigen::Vector3d(0, -3, 2), hi = Eigen::Vector3d(1, 1, 5);
  const IsingProblem p = from_quadratic(Q, b, -1, {1, 0, 0}, lo, hi, 1);
  check_ising(p, "box");
  for (double s0 : {-1.0, 1.0})
    for (double y1 : {-1.0, -0.3, 0.8})
      for (double y2 : {-0.5, 1.0}) {
        const Eigen::Vector3d y(s0, y1, y2);
        const Eigen::Vector3d x((s0 + 1) / 2, -1 + 2 * y1, 3.5 + 1.5 * y2);
        CHECK(objective_of(p, ising_energy(p, Eigen::VectorXd(y))) == Approx(0.5 * x.dot(Q * x) + b.dot(x) - 1).margin(1e-12));
      }
}

TEST_CASE("ising: a Max-Cut's energy converts to the cut of the state") {
  MatrixXdR A = MatrixXdR::Zero(4, 4);
  const std::vector<std::array<int, 3>> edges{{0, 1, 1}, {1, 2, 2}, {2, 3, 1}, {0, 3, 3}, {0, 2, 1}};
  for (auto [i, j, w] : edges) A(i, j) = A(j, i) = w;
  const IsingProblem p = from_maxcut(A);
  const MatrixXdR S = all_states(4);
  const Eigen::VectorXd e = ising_energy(p, S);
  for (Eigen::Index k = 0; k < S.rows(); ++k) {
    double cut = 0;
    for (auto [i, j, w] : edges) cut += S(k, i) != S(k, j) ? w : 0;
    CHECK(objective_of(p, e(k)) == cut);
  }
}

TEST_CASE("ising: the G-set reader reads an edge list as a Max-Cut") {
  const IsingProblem p = read_problem(write_text("g.txt", "4 3\n1 2 1\n2 3 -1\n3 4 1\n"));
  CHECK(p.n() == 4);
  CHECK(p.J(0, 1) == -1);
  CHECK(p.J(2, 1) == 1);
  CHECK(*p.maxcut_total == 1);
  CHECK(p.name == "g");
}

TEST_CASE("ising: a bad edge list is one line naming the file, the line and the field") {
  const std::string path = write_text("bad.txt", "3 2\n1 2 1\n2 x 1\n");
  CHECK_THROWS_WITH(read_problem(path), Catch::Contains("bad.txt: line 3: edge 2 of 2: j: expected a number, got 'x'"));
  CHECK_THROWS_WITH(read_problem(write_text("short.txt", "3 2\n1 2 1\n")), Catch::Contains("the file ends early"));
  CHECK_THROWS_WITH(read_problem(write_text("range.txt", "3 1\n1 4 1\n")), Catch::Contains("expected a whole number in [1, 3], got 4"));
  CHECK_THROWS_WITH(read_problem(write_text("nan.txt", "3 1\n1 2 nan\n")), Catch::Contains("is not a finite number"));
}

TEST_CASE("ising: a QPLIB file of binary variables reads with its objective") {
  // maximise (1/2) x'Q0x + b'x + 1 with Q0 = [[2, -3, 0], [-3, 0, 4], [0, 4, 0]] (lower triangle) and b = [1, 0, -1]
  const std::string path = write_text("t.qplib",
                                      "TINY # name\nQBN # type\nmaximize\n3 # variables\n3 # quadratic terms\n1 1 2\n2 1 -3\n3 2 4\n"
                                      "0 # default b\n2\n1 1\n3 -1\n1 # constant\n1e30 # infinity\n0\n0\n");
  const IsingProblem p = read_problem(path);
  CHECK(p.name == "TINY");
  REQUIRE(p.n() == 3);
  const MatrixXdR Q{{2, -3, 0}, {-3, 0, 4}, {0, 4, 0}};
  const Eigen::Vector3d b(1, 0, -1);
  const MatrixXdR S = all_states(3);
  const Eigen::VectorXd e = ising_energy(p, S);
  for (Eigen::Index k = 0; k < S.rows(); ++k) {
    const Eigen::VectorXd x = (S.row(k).transpose().array() + 1) / 2;
    CHECK(objective_of(p, e(k)) == Approx(0.5 * x.dot(Q * x) + b.dot(x) + 1).margin(1e-12));
  }
  CHECK_THROWS_WITH(read_problem(write_text("c.qplib", "X\nQBL\nminimize\n2\n")), Catch::Contains("constraints 'L' are not supported"));
}

TEST_CASE("ising: the exhaustive search finds the minimum over every state") {
  IsingProblem p = generate_sk(10, 4);
  p.h = Eigen::VectorXd::LinSpaced(10, -1, 1);  // a field: no symmetry to use
  solve_exhaustive(p);
  CHECK(*p.best_known == Approx(ising_energy(p, all_states(10)).minCoeff()).margin(1e-12));
  CHECK(objective_of(p, ising_energy(p, *p.best_state)) == Approx(*p.best_known).margin(1e-12));
}

TEST_CASE("ising: the Wishart ensemble's planted state is a ground state") {
  IsingProblem p = generate_wishart(14, 0.5, 2);
  const double planted = *p.best_known;
  solve_exhaustive(p);
  CHECK(*p.best_known == Approx(planted).margin(1e-9));
}

TEST_CASE("ising: a generator gives the same instance for a seed and another for another seed") {
  CHECK(generate_sk(12, 5).J == generate_sk(12, 5).J);
  CHECK(generate_sk(12, 5).J != generate_sk(12, 6).J);
  CHECK(generate_maxcut(12, 0.5, 5).J == generate_maxcut(12, 0.5, 5).J);
  CHECK(generate_wishart(12, 1, 5).J == generate_wishart(12, 1, 5).J);
}

TEST_CASE("ising: an instance written as JSON reads back the same") {
  IsingProblem p = generate_maxcut(9, 0.5, 2);
  solve_exhaustive(p);
  const std::string path = (aoc::test::temp_dir() / "mc.json").string();
  write_ising_json(p, path, "test");
  const IsingProblem q = read_problem(path);
  CHECK(q.J == p.J);
  CHECK(q.h == p.h);
  CHECK(*q.maxcut_total == *p.maxcut_total);
  CHECK(*q.best_known == *p.best_known);
}

TEST_CASE("optimize: success probability and the repeats for 99 percent confidence") {
  const Success s = success_of(Eigen::Vector4d(-3, -2, -3, -1), -3);
  CHECK(s.hits == 2);
  CHECK(s.p == 0.5);
  CHECK(s.repeats99 == Approx(std::log(0.01) / std::log(0.5)));
  CHECK(std::isinf(success_of(Eigen::Vector2d(-1, -2), -3).repeats99));
  CHECK(success_of(Eigen::Vector2d(-3, -3), -3).repeats99 == 1);
}

TEST_CASE("optimize: programming the machine's chain as measured makes its product J") {
  const IsingProblem p = generate_wishart(48, 1, 1);
  LoopSettings s = machine("all-off", false);
  const auto programming = [&](const std::string& mode) {
    CoreConfig cfg = loop_config(machine(mode, false), hw48());
    const DriveCalibration cal = drive_calibration(hw48(), cfg);  // the electronics' own swing
    cfg.nonlinearity = Nonlinearity::Ising;
    cfg.ising_level = cal.level;
    return program_couplings(hw48(), cfg, p.J, cal);
  };
  const ChainProgramming prog = programming("all-off");
  CHECK(prog.residual < 1e-3);
  CHECK(prog.dark == 0);
  CHECK(programming("default").dark > 0);  // the 48-variable SLM's dark pixels
}

TEST_CASE("optimize: the ideal loop reaches the optimum of a small spin glass") {
  IsingProblem p = generate_sk(16, 1);
  solve_exhaustive(p);
  OptimizeSettings s;
  s.loop = machine("ideal", false);
  s.sa_sweeps = 50;
  s.sa_samples = 50;
  const OptimizeResult r = optimize(p, load_machine(s.loop), s, false);
  CHECK(r.aoc_success.p > 0.2);
  CHECK(objective_of(p, r.aoc.best_energy) == *p.best_known);
  REQUIRE(r.baselines.size() == 2);
  CHECK(r.baselines[0].name == "simulated annealing");
  CHECK(r.baselines[0].success.samples == 50);
  CHECK(r.baselines[1].name == "simulated bifurcation");
}

TEST_CASE("optimize: the digital baselines find a small spin glass's optimum, the same for any thread count") {
  IsingProblem p = generate_sk(16, 1);
  solve_exhaustive(p);
  const double target = energy_of(p, *p.best_known);
  const SampleSet sa = run_annealing(p, 40, 100, 1, 1), sb = run_bifurcation(p, 40, 200, 1, 1);
  CHECK(success_of(sa.energies, target).p > 0.2);
  CHECK(success_of(sb.energies, target).p > 0);
  CHECK(run_annealing(p, 40, 100, 1, 2).energies == sa.energies);
  CHECK(run_bifurcation(p, 40, 200, 1, 2).energies == sb.energies);
}

TEST_CASE("optimize: a G-set graph in its published format solves on the at-scale machine with its cut") {
  IsingProblem p = read_problem(std::string(AOC_TEST_DATA) + "/optimize/maxcut20.txt");
  p.best_known = 39;  // exhaustive search (aoc problem --exhaustive)
  OptimizeSettings s;
  s.loop = machine("default", true);
  s.loop.hw = "aoc-scale";
  s.sa_sweeps = s.sb_steps = 0;
  const OptimizeResult r = optimize(p, load_machine(s.loop), s, false);
  CHECK(objective_of(p, r.aoc.best_energy) == 39);
  CHECK(r.aoc_success.p > 0);
}

TEST_CASE("optimize: the noisy quantized aoc-48 reaches known optima at 16, 32 and 48 variables") {
  IsingProblem sk = generate_sk(16, 1);
  solve_exhaustive(sk);
  CHECK(planted_p(sk) > 0);
  CHECK(planted_p(generate_wishart(32, 1, 1)) > 0);
  CHECK(planted_p(generate_wishart(48, 1, 1)) > 0);
}

TEST_CASE("optimize: a sample's result does not depend on the batch split or the thread count") {
  const IsingProblem p = generate_wishart(24, 1, 3);
  LoopSettings s = machine("default", true);
  const SamplerParams sp{0.8, 0.5 / coupling_scale(p.J), 0.96};
  const SampleSet whole = run_sampler(p, hw48(), s, sp, 0.5, 8, 60, 0);
  const SampleSet first = run_sampler(p, hw48(), s, sp, 0.5, 3, 60, 0);
  const SampleSet rest = run_sampler(p, hw48(), s, sp, 0.5, 5, 60, 3);
  for (int b = 0; b < 3; ++b) CHECK(first.energies(b) == whole.energies(b));
  for (int b = 0; b < 5; ++b) CHECK(rest.energies(b) == whole.energies(3 + b));
  s.threads = 2;
  CHECK(run_sampler(p, hw48(), s, sp, 0.5, 8, 60, 0).energies == whole.energies);
}

TEST_CASE("optimize: a problem larger than the machine is one line naming it") {
  CHECK_THROWS_WITH(run_sampler(generate_sk(49, 1), hw48(), machine("default", false), {1, 1, 0.95}, 0.5, 2, 10, 0),
                    Catch::Contains("the problem's 49 variables do not fit the machine's 48 channels"));
}

TEST_CASE("cli: aoc problem writes an instance and aoc optimize solves it, with a JSON summary and an HDF5 file") {
  const auto dir = aoc::test::temp_dir();
  const std::string inst = (dir / "sk12.json").string(), out = (dir / "sk12.h5").string();
  const aoc::test::Run made = aoc::test::run_aoc("problem sk --n 12 --seed 2 --exhaustive -o " + inst);
  INFO(made.out);
  REQUIRE(made.status == 0);
  CHECK_THAT(made.out, Catch::Contains("best known") && Catch::Contains("exhaustive search over 2^11 states"));
  const aoc::test::Run r = aoc::test::run_aoc("optimize " + inst + " --mode ideal --samples 40 --search-configs 4 --sa-samples 20 --json -o " + out);
  INFO(r.out);
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out.substr(r.out.find('{')));
  CHECK(j["aoc"]["samples"] == 40);
  CHECK(j["aoc"]["success"]["p"].get<double>() > 0);
  CHECK(j["baselines"][0]["samples"] == 20);
  CHECK(j["baselines"][1]["name"] == "simulated bifurcation");
  CHECK(j["target_source"] == "exhaustive search over 2^11 states");
  CHECK(std::filesystem::exists(out));
}

TEST_CASE("cli: aoc optimize of a bad instance or bad parameters is one line and writes nothing") {
  const auto dir = aoc::test::temp_dir();
  const std::string out = (dir / "never.h5").string();
  const aoc::test::Run bad = aoc::test::run_aoc("optimize " + write_text("broken.json", "{\"format\": \"aoc-ising\", \"version\": 1,") + " -o " + out);
  CHECK(bad.status != 0);
  CHECK_THAT(bad.out, Catch::Contains("broken.json: line 1") && Catch::Contains("malformed JSON"));
  const std::string inst = write_text("g2.txt", "3 2\n1 2 1\n2 3 1\n");
  const aoc::test::Run nan = aoc::test::run_aoc("optimize " + inst + " --params 0.5 nan 0.9 -o " + out);
  CHECK(nan.status != 0);
  CHECK_THAT(nan.out, Catch::Contains("--params A G M"));
  CHECK_FALSE(std::filesystem::exists(out));
}
