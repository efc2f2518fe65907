#include <cstdio>
#include <nlohmann/json.hpp>

#include "runtime/cli/commands.hpp"
#include "runtime/run/dt_golden.hpp"
#include "sim/error.hpp"
#include "sim/hardware.hpp"

namespace aoc::cli {

namespace {

struct Opts {
  std::string file = bundled_path("tests/data/dt_golden.json");
  std::string precision = "both";
  std::string hw48 = "aoc-48", hw16 = "aoc-16";
  std::string json_out;
  bool json = false, stages = false;
  DtTolerance tol;
};

int run(const Opts& o) {
  const std::vector<DtCase> cases = load_dt_golden(o.file);
  const Hardware h48 = load_hardware(resolve_hardware_path(o.hw48));
  const Hardware h16 = load_hardware(resolve_hardware_path(o.hw16));
  std::vector<Precision> precisions;
  if (o.precision != "f64") precisions.push_back(Precision::F32);
  if (o.precision != "f32") precisions.push_back(Precision::F64);

  nlohmann::json j{{"tool", "aoc verify-dt"}, {"version", AOC_VERSION}, {"file", o.file},
                   {"tolerance", {{"one_step", o.tol.one_step}, {"n_iter", o.tol.n_iter}}}};
  if (!o.json) {
    std::printf("verify-dt: %s: %zu cases; max |error| against the twin (pass: one step <= %.0e, n_iter steps <= %.0e)\n\n",
                o.file.c_str(), cases.size(), o.tol.one_step, o.tol.n_iter);
    std::printf("%-48s %-7s %4s %3s %4s %10s %10s %6s\n", "case", "hw", "N", "B", "prec", "one step", "n_iter", "result");
  }
  int passed = 0, total = 0;
  for (const DtCase& c : cases) {
    const Hardware& hw = c.hw_n_variables == 16 ? h16 : h48;
    for (Precision p : precisions) {
      const DtCaseReport r = verify_dt_case(c, hw, p, o.tol);
      const char* prec = p == Precision::F32 ? "f32" : "f64";
      ++total;
      passed += r.pass;
      nlohmann::json e{{"name", r.name}, {"hardware", r.hardware}, {"N", r.N}, {"batch", r.B}, {"precision", prec},
                       {"err_one_step", r.err_one_step}, {"pass", r.pass}};
      if (r.n_iter > 0) e["n_iter"] = r.n_iter, e["err_n_iter"] = r.err_n_iter;
      for (const auto& [name, err] : r.stage_errors) e["stage_errors"][name] = err;
      if (!r.stages_not_compared.empty()) e["stages_not_compared"] = r.stages_not_compared;
      j["cases"].push_back(e);
      if (o.json) continue;
      char nit[32] = "-";
      if (r.n_iter > 0) std::snprintf(nit, sizeof nit, "%.2e@%d", r.err_n_iter, r.n_iter);
      std::printf("%-48s %-7s %4d %3d %4s %10.2e %10s %6s\n", r.name.c_str(), r.hardware.c_str(), r.N, r.B, prec,
                  r.err_one_step, nit, r.pass ? "PASS" : "FAIL");
      if (o.stages)
        for (const auto& [name, err] : r.stage_errors) std::printf("    stage %-28s %10.2e\n", name.c_str(), err);
      for (const auto& name : r.stages_not_compared)
        std::printf("    stage %-28s not compared: not a stage aoc computes, or another shape\n", name.c_str());
    }
  }
  j["passed"] = passed;
  j["total"] = total;
  if (o.json) emit_json(j.dump(1), o.json_out);
  else std::printf("\n%d of %d case runs within tolerance%s\n", passed, total, passed == total ? "" : ": FAILED");
  return passed == total ? 0 : 1;
}

}  // namespace

void add_verify_dt(CLI::App& app) {
  static Opts o;
  auto* c = app.add_subcommand("verify-dt", "Run every case of a twin golden file and compare with the simulator");
  c->add_option("FILE", o.file, "golden file (format of tests/data/dt_golden.json)")->capture_default_str();
  c->add_option("--precision", o.precision, "simulator precision: f32, f64 or both")
      ->check(CLI::IsMember({"f32", "f64", "both"}))->capture_default_str();
  c->add_option("--hw48", o.hw48, "hardware file for cases with hw_n_variables 48")->capture_default_str();
  c->add_option("--hw16", o.hw16, "hardware file for cases with hw_n_variables 16")->capture_default_str();
  c->add_option("--tol-one-step", o.tol.one_step, "max abs error allowed after one step")->capture_default_str();
  c->add_option("--tol-n-iter", o.tol.n_iter, "max abs error allowed after n_iter steps")->capture_default_str();
  c->add_flag("--stages", o.stages, "also print the error of every intermediate stage the file gives");
  c->add_flag("--json", o.json, "print a JSON report instead of the table");
  c->add_option("-o,--output", o.json_out, "write the JSON report to this file (with --json)");
  c->footer(
      "Each case gives W (AOC convention), bias, x, z0, the twin's switches and its output after one\n"
      "step and after n_iter steps. Exits 0 only if every case is within both tolerances.\n"
      "Example:\n  aoc verify-dt tests/data/dt_golden.json --precision f32 --stages");
  c->callback([c] {
    require_json_for_output(c, "verify-dt");
    exit_status() = run(o);
  });
}

}  // namespace aoc::cli
