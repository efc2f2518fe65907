// The GPU the estimates compare with (sim/gpu.hpp, scenarios/gpus.json): a roofline of compute at the
// dense peak and weights from memory, the catalogue's figures and errors, and the estimate's GPU line.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>

#include "sim/energy.hpp"
#include "sim/error.hpp"
#include "sim/gpu.hpp"
#include "sim/hardware.hpp"
#include "tests/support.hpp"

namespace {

namespace fs = std::filesystem;
using Catch::Matchers::Contains;

std::string write_catalogue(const std::string& name, const std::string& text) {
  const fs::path p = fs::temp_directory_path() / name;
  std::ofstream(p) << text;
  return p.string();
}

}  // namespace

TEST_CASE("gpu: the bundled catalogue has the H100 SXM, H200 SXM, B200 and an INT8 TPU with their figures and sources") {
  const std::vector<aoc::GpuSpec> gpus = aoc::read_gpus(aoc::bundled_gpus_path());
  REQUIRE(gpus.size() == 4);
  const aoc::GpuSpec h100 = aoc::find_gpu("h100-sxm"), h200 = aoc::find_gpu("h200-sxm"), b200 = aoc::find_gpu("b200");
  CHECK(h100.dense_tops.at("bf16") == 989.4);
  CHECK(h100.dense_tops.at("fp8") == 1978.9);
  CHECK(h100.memory_tb_per_s == 3.35);
  CHECK(h200.dense_tops == h100.dense_tops);  // the same Hopper tensor cores
  CHECK(h200.memory_tb_per_s == 4.8);
  CHECK(b200.dense_tops.at("fp8") == 4500);
  CHECK(b200.board_watts == 1000);
  for (const auto& g : gpus) CHECK_THAT(g.source, Contains(g.key == "tpu-v1" ? "Jouppi et al." : "physics.md"));
  // The digital INT8 baseline: an 8-bit systolic array only, its weights streamed from DDR3, so a
  // module's 4.2 MB of weights at batch 1 is memory-bound, and asking it for fp8 names what it has.
  const aoc::GpuSpec tpu = aoc::find_gpu("tpu-v1");
  CHECK(tpu.dense_tops.size() == 1);
  CHECK(tpu.dense_tops.at("int8") == 92);
  const double w = 2048.0 * 2048.0;
  const aoc::GpuRoofline r = aoc::gpu_roofline(tpu, "int8", 1, w, w, w, 1);
  CHECK_FALSE(r.weights_in_l2);
  CHECK(r.bound() == "memory");
  CHECK_THROWS_WITH(aoc::gpu_roofline(tpu, "fp8", 1, w, w, w, 1), Contains("tpu-v1 has no fp8") && Contains("int8"));
}

TEST_CASE("gpu: weights larger than the L2 make batch-1 work memory-bound, and a large batch compute-bound") {
  const aoc::GpuSpec h100 = aoc::find_gpu("h100-sxm");
  const double weights = 1.3e9;  // one pass over a 1.3B-parameter model, one MAC per weight
  const aoc::GpuRoofline one = aoc::gpu_roofline(h100, "fp8", 1, weights, weights, weights, 100);
  CHECK_FALSE(one.weights_in_l2);
  CHECK(one.weight_bytes == weights);
  CHECK(one.l2_bytes == 0);
  CHECK(one.memory_seconds == Approx(weights / 3.35e12));
  CHECK(one.compute_seconds == Approx(2 * weights / 1978.9e12));
  CHECK(one.kernels == 100);
  CHECK(one.launch_seconds == Approx(100 * 2e-6));
  CHECK(one.bound() == "memory");
  CHECK(one.seconds == Approx(one.memory_seconds + one.launch_seconds));
  CHECK(one.joules == Approx(700 * one.seconds));
  const aoc::GpuRoofline many = aoc::gpu_roofline(h100, "fp8", 4096, 4096 * weights, 4096 * weights, weights, 4096 * 100);
  CHECK(many.weight_bytes == Approx(weights));  // one pass serves the batch
  CHECK(many.kernels == Approx(100));           // and so does each kernel
  CHECK(many.bound() == "compute");
  CHECK(many.seconds == Approx(many.compute_seconds + many.launch_seconds));
}

TEST_CASE("gpu: weights that fit in the L2 are read from memory once and stream from the L2 on every pass") {
  const double w = 2048.0 * 2048;
  const aoc::GpuRoofline r = aoc::gpu_roofline(aoc::find_gpu("h100-sxm"), "bf16", 1, 7 * w, 7 * w, w, 7);  // one fixed point, K = 7
  CHECK(r.weights_in_l2);
  CHECK(r.weight_bytes == 2 * w);
  CHECK(r.l2_bytes == 7 * 2 * w);
  CHECK(r.l2_seconds == Approx(7 * 2 * w / 7e12));
  CHECK(r.l2_seconds > 100 * r.compute_seconds);  // a GEMV per step: the L2, not the tensor cores
  // seven dependent GEMVs: their launches bound a batch-1 fixed point
  CHECK(r.launch_seconds == Approx(7 * 2e-6));
  CHECK(r.bound() == "launch");
  // a batch of 1024 fixed points shares every pass and every kernel
  const aoc::GpuRoofline b = aoc::gpu_roofline(aoc::find_gpu("h100-sxm"), "bf16", 1024, 7 * 1024 * w, 7 * 1024 * w, w, 7 * 1024);
  CHECK(b.kernels == Approx(7));
  CHECK(b.seconds < r.seconds * 1024 / 100);
}

TEST_CASE("gpu: the precision follows the machine's weight bits unless one is given") {
  aoc::Hardware hw;
  CHECK(aoc::gpu_precision(hw, {}) == "bf16");  // no converters section
  aoc::ConverterSpec c;
  c.slm_bits = 9;
  hw.converters = c;
  CHECK(aoc::gpu_precision(hw, {}) == "bf16");
  hw.converters->slm_bits = 8;
  CHECK(aoc::gpu_precision(hw, {}) == "fp8");
  CHECK(aoc::gpu_precision(hw, {"b200", "bf16", 1}) == "bf16");
  CHECK(aoc::gpu_precision(aoc::load_hardware(aoc::resolve_hardware_path("aoc-scale")), {}) == "fp8");
}

TEST_CASE("gpu: an unknown GPU, a precision it lacks or a batch under 1 is an error naming the option") {
  CHECK_THROWS_WITH(aoc::find_gpu("a100"), Contains("--gpu: unknown GPU 'a100'") && Contains("h100-sxm, h200-sxm, b200"));
  aoc::GpuSpec g = aoc::find_gpu("b200");
  g.dense_tops.erase("int8");
  CHECK_THROWS_WITH(aoc::gpu_roofline(g, "int8", 1, 1, 1, 1, 1), Contains("--gpu-precision: b200 has no int8"));
  CHECK_THROWS_WITH(aoc::gpu_roofline(g, "fp8", 0.5, 1, 1, 1, 1), Contains("--gpu-batch"));
  CHECK_THROWS_WITH(aoc::gpu_roofline(g, "fp8", 1, 1, 1, 1, -1), Contains("dependent passes"));
}

TEST_CASE("gpu: a malformed catalogue is a one-line error naming the file and the field") {
  const std::string bad = write_catalogue("aoc_gpus_bad.json",
                                          R"({"gpus": {"x": {"name": "X", "dense_tops": {"fp8": -1}, "memory_tb_per_s": 1,
                                              "memory_gb": 1, "l2_mb": 1, "l2_tb_per_s": 1, "launch_us": 1, "board_watts": 1, "source": "s"}}})");
  CHECK_THROWS_WITH(aoc::read_gpus(bad), Contains("aoc_gpus_bad.json: gpus.x.dense_tops.fp8: -1 must be > 0"));
  const std::string typo = write_catalogue("aoc_gpus_typo.json", R"({"gpus": {"x": {"name": "X", "dense_tops": {"fp8": 1},
                                              "memory_tb_per_s": 1, "memory_gb": 1, "l2_mb": 1, "l2_tb_per_s": 1, "launch_us": 1, "board_wats": 1, "source": "s"}}})");
  CHECK_THROWS_WITH(aoc::read_gpus(typo), Contains("gpus.x.board_wats: unknown key (did you mean board_watts?)"));
  const std::string broken = write_catalogue("aoc_gpus_broken.json", "{\"gpus\": ");
  CHECK_THROWS_WITH(aoc::read_gpus(broken), Contains("aoc_gpus_broken.json: line 1, column 10: malformed JSON"));
  fs::remove(bad), fs::remove(typo), fs::remove(broken);
}

TEST_CASE("gpu: aoc estimate of the 1.3B implicit Mamba2 says batch-1 decode is memory-bound with its kernels counted, batch 1024 compute-bound") {
  const fs::path g = fs::temp_directory_path() / "aoc_gpu_mamba2_1p3b.json";
  const aoc::test::Run imp = aoc::test::run_aoc("import " + std::string(AOC_TEST_DATA) +
                                                "/implicit-lm/mamba2-1.3b-implicit/config.json --shapes-only -o " + g.string());
  REQUIRE(imp.status == 0);
  const aoc::test::Run one = aoc::test::run_aoc("estimate " + g.string() + " --hw aoc-scale --iterations 20");
  INFO(one.out);
  CHECK(one.status == 0);
  CHECK_THAT(one.out, Contains("NVIDIA H100 SXM at fp8, batch 1") && Contains("MEMORY-BOUND") && Contains("over its L2") && Contains("dependent kernels at 2 us each"));
  const aoc::test::Run many = aoc::test::run_aoc("estimate " + g.string() + " --hw aoc-scale --iterations 20 --gpu h200-sxm --gpu-batch 1024");
  INFO(many.out);
  CHECK_THAT(many.out, Contains("NVIDIA H200 SXM at fp8, batch 1024") && Contains("COMPUTE-BOUND"));
  fs::remove(g);
}
