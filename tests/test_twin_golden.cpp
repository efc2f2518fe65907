// The twin's golden cases (tests/data/dt_golden.json, computed by Microsoft's AOC digital twin in
// float32): the fast core reproduces every case in both precisions, and the readable staged
// iteration (sim/stages.hpp) reproduces every intermediate stage the twin recorded.
#include <catch2/catch.hpp>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "tests/support.hpp"
#include "runtime/run/dt_golden.hpp"
#include "sim/hardware.hpp"
#include "sim/stages.hpp"

namespace {

using namespace aoc;
using namespace aoc::test;

const std::vector<DtCase>& golden_cases() {
  static const std::vector<DtCase> cases = load_dt_golden(AOC_TEST_DATA "/dt_golden.json");
  return cases;
}

void check_case_passes(Precision p) {
  const auto& cases = golden_cases();
  REQUIRE(cases.size() == 6);
  for (const DtCase& c : cases) {
    INFO("case " << c.name << (p == Precision::F32 ? " (float)" : " (double)"));
    const DtCaseReport r = verify_dt_case(c, machine(c.hw_n_variables), p, DtTolerance{});
    CHECK(r.err_one_step >= 0);
    CHECK(r.err_one_step <= 1e-4);
    if (c.n_iter > 0) {
      CHECK(r.n_iter == c.n_iter);
      CHECK(r.err_n_iter >= 0);
      CHECK(r.err_n_iter <= 1e-3);
    } else {
      CHECK(r.err_n_iter == -1);
    }
    CHECK(r.pass);
  }
}

}  // namespace

TEST_CASE("golden: the bundled golden file holds the six twin cases, five with a 100-step reference and three with stages") {
  const auto& cases = golden_cases();
  REQUIRE(cases.size() == 6);
  int with_n_iter = 0, with_stages = 0;
  for (const DtCase& c : cases) {
    with_n_iter += c.n_iter > 0;
    with_stages += !c.stages.empty();
    if (c.n_iter > 0) CHECK(c.n_iter == 100);
  }
  CHECK(with_n_iter == 5);
  CHECK(with_stages == 3);
}

TEST_CASE("golden: every twin case passes in double: one step within 1e-4 and n_iter steps within 1e-3") {
  check_case_passes(Precision::F64);
}

TEST_CASE("golden: every twin case passes in float: one step within 1e-4 and n_iter steps within 1e-3") {
  check_case_passes(Precision::F32);
}

TEST_CASE("golden: every recorded stage of the staged twin iteration is within 1e-4 of the twin's stage") {
  static const std::set<std::string> expected = {
      "after_tanh", "after_led_pos", "after_led_neg", "after_fanin_pos", "after_fanin_neg",
      "W_pos_distorted_norm", "W_neg_distorted_norm", "after_vmm_chain_pos", "after_vmm_chain_neg",
      "after_closed_loop", "step_output"};
  int cases_with_stages = 0;
  for (const DtCase& c : golden_cases()) {
    if (c.stages.empty()) continue;
    ++cases_with_stages;
    const StepStages s = twin_step_stages(machine(c.hw_n_variables), c.cfg, c.W, c.bias, c.z0, c.x);
    const auto named = s.named();
    const std::map<std::string, const MatrixXdR*> ours(named.begin(), named.end());
    std::set<std::string> seen;
    for (const auto& [name, ref] : c.stages) {
      INFO("case " << c.name << ", stage " << name);
      const auto it = ours.find(name);
      REQUIRE(it != ours.end());  // every stage the twin recorded is one we compute
      const MatrixXdR& mine = *it->second;
      REQUIRE(mine.rows() == ref.rows());
      REQUIRE(mine.cols() == ref.cols());
      const double err = (mine - ref).cwiseAbs().maxCoeff();
      INFO("max abs error " << err);
      CHECK(err <= 1e-4);
      seen.insert(name);
    }
    INFO("case " << c.name);
    CHECK(seen == expected);
  }
  CHECK(cases_with_stages == 3);
}
