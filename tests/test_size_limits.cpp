// Sizes that come from a file are checked before anything is allocated or looped over: a shape
// beyond 2^50 elements, a program beyond 2^24 tiles, an HDF5 group that contains itself. Each is a
// one-line error naming the file and the value, fast (issue 19: no input may hang or crash aoc).
#include <H5Cpp.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <string>

#include "compiler/ir.hpp"
#include "compiler/graph_json.hpp"
#include "graph_support.hpp"
#include "sim/error.hpp"
#include "support.hpp"

using namespace aoc;
using namespace aoc::test;

namespace {

// tiny-deq with other shapes for U (the injection) and W (the loop's matrix).
std::string graph_with(const std::string& name, const std::string& u_cols, const std::string& w_shape) {
  const std::string text = R"({"format": "aoc-graph", "version": 1, "name": "g", "inputs": [{"name": "x", "dtype": "f64", "shape": ["B", "L", )" +
                           u_cols + R"(]}], "weights": [{"name": "U", "shape": [20, )" + u_cols + R"(]}, {"name": "W", "shape": )" + w_shape +
                           R"(}], "ops": [{"op": "Linear", "in": ["x", "U"], "out": ["u"]}, {"op": "FixedPoint", "name": "deq", "in": ["u"], "out": ["z"],
  "attrs": {"tol": 1e-06, "max_iter": 100, "like": "u"}, "body": {"args": ["zi", "uc"], "ops": [{"op": "Linear", "in": ["zi", "W"], "out": ["wz"]},
  {"op": "Add", "in": ["wz", "uc"], "out": ["zn"]}], "results": ["zn"]}}], "outputs": ["z"]})";
  const std::string path = (temp_dir() / name).string();
  std::ofstream(path) << text;
  return path;
}

std::string timed_error(const std::string& args, double& seconds) {
  const auto t0 = std::chrono::steady_clock::now();
  const Run r = run_aoc(args);
  seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(r.status == 1);
  CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 1);
  return r.out;
}

}  // namespace

TEST_CASE("limits: element counts beyond 2^50 are refused, never overflowed") {
  CHECK(ir::checked_elements({1 << 20, 1 << 20}) == std::int64_t{1} << 40);
  CHECK(ir::checked_elements({std::int64_t{1} << 32, std::int64_t{1} << 32}) == -1);
  CHECK(ir::checked_elements({3, -1}) == -1);
  CHECK_THROWS_WITH((ir::Tensor{{std::int64_t{1} << 40, std::int64_t{1} << 40}, {}}.size()), Catch::Contains("more than 2^50 elements"));
}

TEST_CASE("limits: a graph of 2^32 x 2^32 weights or 2^40-wide inputs is a one-line error, at once") {
  double s = 0;
  const std::string wide = graph_with("wide.json", "1099511627776", "[20, 20]");
  CHECK_THAT(timed_error("compile " + wide + " --shapes-only --hw aoc-48", s), Catch::Contains("tiles of 48 x 48, more than the 16777216 a program may hold"));
  CHECK(s < 5);  // generous for a loaded CI machine: without the limit it ran for minutes
  CHECK_THAT(timed_error("estimate " + wide + " --hw aoc-48", s), Catch::Contains("more than the 16777216 a program may hold"));
  const std::string huge = graph_with("huge.json", "20", "[4294967296, 4294967296]");
  CHECK_THAT(timed_error("compile " + huge + " --shapes-only --hw aoc-48", s),
             Catch::Contains("value 'W' f64[4294967296, 4294967296] has more than 2^50 elements"));
}

TEST_CASE("limits: a weights file declaring a 2^32 x 2^32 dataset, or a group that contains itself, is named") {
  const std::string big = (temp_dir() / "big.h5").string(), cycle = (temp_dir() / "cycle.h5").string();
  {
    H5::H5File f(big, H5F_ACC_TRUNC);
    const hsize_t dims[2] = {hsize_t{1} << 32, hsize_t{1} << 32}, chunk[2] = {1, 1};
    H5::DSetCreatPropList pl;
    pl.setChunk(2, chunk);  // chunked: HDF5 allocates nothing until written
    f.createDataSet("W", H5::PredType::IEEE_F64LE, H5::DataSpace(2, dims), pl);
  }
  {
    H5::H5File f(cycle, H5F_ACC_TRUNC);
    f.createGroup("loop");
    H5Lcreate_hard(f.getId(), "/", f.getId(), "loop/back", H5P_DEFAULT, H5P_DEFAULT);
  }
  CHECK_THROWS_WITH(ir::read_weights_h5(big), big + ": /W: shape [4294967296, 4294967296] has more than 2^40 elements");
  CHECK_THROWS_WITH(ir::read_weights_h5(cycle), Catch::StartsWith(cycle + ": /loop/back/") && Catch::EndsWith("groups nested deeper than 64 (a link cycle?)"));
}

TEST_CASE("limits: a run that needs more memory than --max-memory stops with one line, exit 1") {
#if defined(__SANITIZE_ADDRESS__)
  SUCCEED("the sanitizer build runs without the limit (AddressSanitizer's shadow memory)");
#else
  const aoc::test::Run r = aoc::test::run_aoc("--max-memory 0.3 loop --batch 2000000");
  INFO(r.out);
  CHECK(r.status == 1);
  CHECK(r.out == "aoc: error: out of memory: the run needed more than it may allocate (0.3 GiB; aoc --max-memory GIB raises it, 0 for no limit)\n");
  CHECK(aoc::test::run_aoc("--max-memory 0.3 loop --batch 64").status == 0);
#endif
}
