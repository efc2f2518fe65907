// Every HDF5 read goes through one checked reader (sim/h5file.hpp): the type class, the rank and the
// element count are checked before anything is read, so a hostile file gives a one-line error naming
// the file and the object, never a buffer overrun (issue 22: strings stored as arrays smashed the
// stack; a 2-D column of sweep results corrupted the heap).
#include <H5Cpp.h>

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "compiler/program_h5.hpp"
#include "graph_support.hpp"
#include "runtime/sweep/sweep_results.hpp"
#include "sim/error.hpp"
#include "sim/h5file.hpp"

using namespace aoc;
using namespace aoc::test;

namespace {

// n strings "s" as a 1-D dataset or attribute (n == 0: a scalar one), fixed-length as aoc writes
// them, or variable-length as other tools may.
void put_strings(H5::H5File& f, const std::string& name, int n, bool attribute = false, bool variable = false) {
  const H5::StrType t(H5::PredType::C_S1, variable ? H5T_VARIABLE : 1);
  const hsize_t dims = static_cast<hsize_t>(n);
  const H5::DataSpace space = n == 0 ? H5::DataSpace(H5S_SCALAR) : H5::DataSpace(1, &dims);
  std::vector<const char*> v(std::max(1, n), "s");
  std::vector<char> fixed(std::max(1, n), 's');
  const void* data = variable ? static_cast<const void*>(v.data()) : static_cast<const void*>(fixed.data());
  if (attribute) f.createAttribute(name, t, space).write(t, data);
  else f.createDataSet(name, t, space).write(data, t);
}

std::string file(const std::string& name) { return (temp_dir() / name).string(); }

// A sweep results file of two rows, as aoc sweep writes it.
std::string results_file(const std::string& name) {
  sweep::Results r;
  r.header.scenario = "s", r.header.name = "n", r.header.points = 2;
  r.header.params.push_back({"x", "run", false});
  r.header.metrics.push_back({"m", "J", "min"});
  for (std::size_t i = 0; i < 2; ++i) {
    sweep::Row row;
    row.index = i, row.seed = 7 + i, row.params = {sweep::json(1.5 * i)}, row.metrics = {2.0 * i};
    r.rows.push_back(row);
  }
  const std::string path = file(name);
  sweep::write_results_h5(path, r);
  return path;
}

// Replaces dataset `name` of an HDF5 file with a 2 x 2 array of unsigned integers.
void make_2d(const std::string& path, const std::string& name) {
  H5::H5File f(path, H5F_ACC_RDWR);
  f.unlink(name);
  const hsize_t dims[2] = {2, 2};
  const std::uint64_t v[4] = {0, 1, 2, 3};
  f.createDataSet(name, H5::PredType::STD_U64LE, H5::DataSpace(2, dims)).write(v, H5::PredType::NATIVE_UINT64);
}

}  // namespace

TEST_CASE("h5 reader: a program text stored as an array of 1000 strings is one line naming the dataset") {
  const std::string path = file("strings.aocp.h5");
  {
    H5::H5File f(path, H5F_ACC_TRUNC);
    const H5::StrType t(H5::PredType::C_S1, 11);
    f.createAttribute("format", t, H5::DataSpace(H5S_SCALAR)).write(t, std::string("aoc-program"));
    put_strings(f, "program", 1000);
  }
  CHECK(ir::is_program_h5(path));
  CHECK_THROWS_WITH(ir::read_program_h5(path), path + ": /program: expected one text, got 1000");
}

TEST_CASE("h5 reader: a format attribute of two strings is not a program, and no overrun") {
  const std::string path = file("format2.h5");
  {
    H5::H5File f(path, H5F_ACC_TRUNC);
    put_strings(f, "format", 2, true);
  }
  CHECK_FALSE(ir::is_program_h5(path));
}

TEST_CASE("h5 reader: fixed-length strings read with their padding dropped") {
  const std::string path = file("fixed.h5");
  {
    H5::H5File f(path, H5F_ACC_TRUNC);
    const H5::StrType fixed(H5::PredType::C_S1, 8);
    f.createDataSet("fixed", fixed, H5::DataSpace(H5S_SCALAR)).write(std::string("abc"), fixed);
  }
  CHECK(h5_string(open_h5_read(path).openDataSet("fixed"), "fixed") == "abc");
}

TEST_CASE("h5 reader: a fixed-length string that fills its size reads whole, as h5py writes it") {
  const std::string path = file("full.h5");
  {
    H5::H5File f(path, H5F_ACC_TRUNC);
    H5::StrType full(H5::PredType::C_S1, 5);  // NULLPAD, no room for a terminator: h5py's numpy.bytes_
    full.setStrpad(H5T_STR_NULLPAD);
    f.createAttribute("state", full, H5::DataSpace(H5S_SCALAR)).write(full, std::string("{\"a\"}"));
  }
  CHECK(h5_string(open_h5_read(path).openAttribute("state"), "state") == "{\"a\"}");
}

TEST_CASE("h5 reader: variable-length strings are refused, naming the object (HDF5 crashes on damaged ones)") {
  const std::string path = file("variable.h5");
  {
    H5::H5File f(path, H5F_ACC_TRUNC);
    put_strings(f, "v", 0, false, true);
  }
  CHECK_THROWS_WITH(h5_string(open_h5_read(path).openDataSet("v"), "F: /v"), Catch::StartsWith("F: /v: variable-length strings, which aoc does not read"));
}

TEST_CASE("h5 reader: text written by aoc reads back, UTF-8 and all") {
  const std::string path = file("texts.h5");
  {
    H5::H5File f(path, H5F_ACC_TRUNC);
    h5_put_text(f, "one", "µ-level noise");
    h5_put_texts(f, "many", {"", "ok", "a longer one"});
    h5_put_text_attr(f, "attr", "x");
  }
  const H5::H5File f = open_h5_read(path);
  CHECK(h5_string(f.openDataSet("one"), "one") == "µ-level noise");
  CHECK(h5_strings(f.openDataSet("many"), "many") == std::vector<std::string>{"", "ok", "a longer one"});
  CHECK(h5_string(f.openAttribute("attr"), "attr") == "x");
}

TEST_CASE("h5 reader: numbers where text is expected, and text where numbers are, name the object") {
  const std::string path = file("classes.h5");
  {
    H5::H5File f(path, H5F_ACC_TRUNC);
    const double v = 1;
    f.createDataSet("n", H5::PredType::IEEE_F64LE, H5::DataSpace(H5S_SCALAR)).write(&v, H5::PredType::NATIVE_DOUBLE);
    put_strings(f, "s", 3);
  }
  const H5::H5File f = open_h5_read(path);
  CHECK_THROWS_WITH(h5_strings(f.openDataSet("n"), "F: /n"), "F: /n: expected text, got floating-point numbers");
  CHECK_THROWS_WITH(h5_numbers(f.openDataSet("s"), "F: /s", 1), "F: /s: expected numbers, got strings");
  CHECK_THROWS_WITH(h5_u64s(f.openDataSet("n"), "F: /n"), "F: /n: expected integers, got floating-point numbers");
}

TEST_CASE("h5 reader: sweep results with a 2-D /index or /seed are refused, naming the column") {
  for (const std::string column : {"index", "seed"}) {
    const std::string path = results_file("r2d-" + column + ".h5");
    make_2d(path, column);
    CHECK_THROWS_WITH(sweep::read_results_h5(path), path + ": /" + column + ": expected at most 1 dimension(s), got 2 dimensions");
  }
}

TEST_CASE("h5 reader: a sweep results column shorter than /index names both") {
  const std::string path = results_file("short.h5");
  {
    H5::H5File f(path, H5F_ACC_RDWR);
    f.unlink("status");
    put_strings(f, "status", 1);
  }
  CHECK_THROWS_WITH(sweep::read_results_h5(path), path + ": /status: 1 values, /index has 2");
}

TEST_CASE("h5 reader: sweep results written by aoc read back whole") {
  const sweep::Results r = sweep::read_results_h5(results_file("whole.h5"));
  REQUIRE(r.rows.size() == 2);
  CHECK(r.rows[1].seed == 8);
  CHECK(r.rows[1].params[0].get<double>() == 1.5);
  CHECK(r.rows[1].metrics[0] == 2.0);
}

TEST_CASE("h5 reader: a dataset that declares more bytes than its file holds is refused before anything is allocated") {
  const std::string path = file("declares-8gb.h5");
  {
    H5::H5File f(path, H5F_ACC_TRUNC);
    const hsize_t n = hsize_t(1) << 30;  // 8 GiB of doubles, never written: the file stays small
    f.createDataSet("W", H5::PredType::IEEE_F64LE, H5::DataSpace(1, &n));
  }
  CHECK_THROWS_WITH(h5_numbers(open_h5_read(path).openDataSet("W"), "F: /W", 1),
                    Catch::StartsWith("F: /W: declares 8589934592 bytes of data, more than the file's"));
}
