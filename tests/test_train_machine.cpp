// Training for a machine (runtime/train/train_machine.hpp): the model's products are read on the tiles of
// the model compiled for the hardware file, as `aoc run` reads them, and `aoc train --from DIR --hw`
// fine-tunes a trained model folder for it.
#include <catch2/catch.hpp>

#include <filesystem>

#include "compiler/graph_json.hpp"
#include "models/mamba2.hpp"
#include "models/tasks.hpp"
#include "runtime/train/train_machine.hpp"
#include "sim/error.hpp"
#include "sim/files.hpp"
#include "sim/json_reader.hpp"
#include "tests/graph_support.hpp"
#include "tests/support.hpp"

using namespace aoc;
using aoc::test::Run;
using aoc::test::run_aoc;
using aoc::test::temp_dir;

namespace {

models::Mamba2Model tiny_model() {
  models::Mamba2Spec s;
  s.vocab = 2, s.d_model = 8, s.d_state = 4, s.expand = 2, s.headdim = 4, s.implicit = true;
  return models::Mamba2Model(s, 3);
}

ad::Mat inputs(int rows, int cols) {
  ad::Mat x(rows, cols);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) x(r, c) = 0.8 * std::sin(0.7 * r + 1.3 * c + 0.2);
  return x;
}

// The largest difference from the exact x W^T, relative to its largest value.
double off_exact(const ad::Mat& y, const ad::Mat& x, const ad::Mat& W) {
  const ad::Mat exact = x * W.transpose();
  return (y - exact).cwiseAbs().maxCoeff() / exact.cwiseAbs().maxCoeff();
}

}  // namespace

TEST_CASE("train machine: a product is the compiled program's, through the compensated chain, its converters and noise", "[slow]") {
  models::Mamba2Model m = tiny_model();
  const tasks::Task task = tasks::parse_task("parity");
  const ad::Mat W = [&] {
    for (ad::Param* p : m.params())
      if (p->name == "layer0.in_proj") return p->value;
    return ad::Mat();
  }();
  REQUIRE(W.size() > 0);
  const ad::Mat x = inputs(12, static_cast<int>(W.cols()));
  MachineTraining o;
  o.noise = false, o.optics = false;
  CompiledMachine ideal(o, m, task, 8, 0);
  ideal.program(m, 0);
  const double q = off_exact(ideal.product("layer0.in_proj", x, 0), x, W);
  CHECK(q > 1e-6);  // SLM codes and converters
  CHECK(q < 0.03);
  o.optics = true;
  CompiledMachine measured(o, m, task, 8, 0);
  measured.program(m, 0);
  REQUIRE(measured.compiled().optical.front().compensated());
  const ad::Mat y = measured.product("layer0.in_proj", x, 0);
  CHECK(off_exact(y, x, W) < 0.03);  // the chain compensated: as close as ideal optics
  CHECK(measured.product("layer0.in_proj", x, 1) == y);  // no noise: every read the same
  o.noise = true;
  CompiledMachine noisy(o, m, task, 8, 0);
  noisy.program(m, 0);
  const ad::Mat n0 = noisy.product("layer0.in_proj", x, 0);
  CHECK(n0 != y);
  CHECK(noisy.product("layer0.in_proj", x, 0) == n0);  // keyed by the read, not drawn by the call
  CHECK(noisy.product("layer0.in_proj", x, 1) != n0);  // a fresh read, fresh noise
  noisy.program(m, 1);
  CHECK(noisy.product("layer0.in_proj", x, 0) != n0);  // a new programming each step
  CHECK_THROWS_WITH(noisy.product("norm_f", x, 0), Catch::Contains("weight 'norm_f' is not the weight of an optical op"));
}

TEST_CASE("train machine: with balance, each product reads its DAC's channel scales and its own scaled weights", "[slow]") {
  models::Mamba2Model m = tiny_model();
  const tasks::Task task = tasks::parse_task("parity");
  ad::Mat W, E;
  for (ad::Param* p : m.params()) {
    if (p->name == "layer0.in_proj") W = p->value;
    if (p->name == "embedding") E = p->value;
  }
  REQUIRE(W.size() > 0);
  REQUIRE(E.size() > 0);
  MachineTraining o;
  o.noise = false, o.optics = false;
  CompiledMachine plain(o, m, task, 8, 0);
  o.balance = 1;
  CompiledMachine balanced(o, m, task, 8, 0);
  plain.program(m, 0), balanced.program(m, 0);
  // the tied embedding: the head's product reads a scaled copy, the lookup the model's own
  REQUIRE(balanced.compiled().weights.count("embedding.balanced"));
  CHECK(balanced.compiled().weights.at("embedding").data == plain.compiled().weights.at("embedding").data);
  const ad::Mat x = inputs(12, static_cast<int>(W.cols())), z = inputs(12, static_cast<int>(E.cols()));
  const ad::Mat a = balanced.product("layer0.in_proj", x, 0), h = balanced.product("embedding", z, 0);
  CHECK(a != plain.product("layer0.in_proj", x, 0));  // other DAC steps, other SLM codes
  CHECK(off_exact(a, x, W) < 0.03);                   // the same product
  CHECK(off_exact(h, z, E) < 0.03);
}

TEST_CASE("cli: aoc train --from --hw fine-tunes a model folder for a machine, the same weights on every run") {
  const auto dir = temp_dir() / "train-machine";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string scen = (dir / "tiny.json").string();
  aoc::write_file_atomic(scen, aoc::test::kTinyTrainScenario);
  const std::string base = (dir / "base").string();
  REQUIRE(run_aoc("train " + scen + " -o " + base + " --quiet").status == 0);
  const auto tune = [&](const std::string& out) { return run_aoc("train --from " + base + " --hw aoc-48 --steps 2 -o " + (dir / out).string()); };
  const Run a = tune("a");
  INFO(a.out);
  REQUIRE(a.status == 0);
  CHECK_THAT(a.out, Catch::Contains("for aoc-48: the machine as measured, every noise source of the file"));
  REQUIRE(tune("b").status == 0);
  const ir::WeightStore wa = ir::read_weights_h5((dir / "a" / "weights.h5").string());
  const ir::WeightStore wb = ir::read_weights_h5((dir / "b" / "weights.h5").string());
  const ir::WeightStore w0 = ir::read_weights_h5(base + "/weights.h5");
  CHECK(wa.at("layer0.in_proj").data == wb.at("layer0.in_proj").data);
  CHECK(wa.at("layer0.in_proj").data != w0.at("layer0.in_proj").data);
  const auto log = jsonr::parse_file((dir / "a" / "train.json").string());
  CHECK(log.at("machine").at("hardware") == "aoc-48");
  CHECK(log.at("machine").at("from") == base);
  CHECK(log.at("scenario").at("train").at("steps") == 2);
  CHECK_FALSE(log.at("machine").contains("balance"));  // off: the record (and hash) of earlier runs
  const Run no_hw = run_aoc("train --from " + base + " --ideal-optics -o " + (dir / "c").string());
  CHECK(no_hw.status != 0);
  CHECK_THAT(no_hw.out, Catch::Contains("change the machine of --hw: name one"));
  const Run both = run_aoc("train " + scen + " --from " + base + " --hw aoc-48 -o " + (dir / "c").string());
  CHECK(both.status != 0);
  CHECK_THAT(both.out, Catch::Contains("give a scenario, or --from a model folder (not both)"));
  CHECK(!std::filesystem::exists(dir / "c"));
  // a folder whose weights are not its model's: one line naming the file, nothing written
  std::filesystem::create_directories(dir / "other");
  std::filesystem::copy_file(base + "/train.json", dir / "other" / "train.json");
  ir::WeightStore wrong = w0;
  wrong.at("layer0.in_proj").shape[0] += 1;
  wrong.at("layer0.in_proj").data.resize(wrong.at("layer0.in_proj").data.size() + static_cast<std::size_t>(wrong.at("layer0.in_proj").shape[1]));
  ir::write_weights_h5((dir / "other" / "weights.h5").string(), wrong);
  const Run other = run_aoc("train --from " + (dir / "other").string() + " --hw aoc-48 -o " + (dir / "c").string());
  CHECK(other.status != 0);
  CHECK_THAT(other.out, Catch::Contains("other/weights.h5: model: weight 'layer0.in_proj'") && Catch::Contains("the weights of another model"));
  CHECK(!std::filesystem::exists(dir / "c"));
}
