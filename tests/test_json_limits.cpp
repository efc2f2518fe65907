// Every JSON document aoc reads goes through jsonr::parse_text: too deep, a number beyond a double
// and a duplicate key are one-line errors naming the file and the field, for every kind of file.
#include <catch2/catch.hpp>
#include <fstream>
#include <string>

#include "graph_support.hpp"
#include "sim/error.hpp"
#include "sim/json_reader.hpp"
#include "support.hpp"

using namespace aoc;
using namespace aoc::test;

namespace {

std::string parse_error(const std::string& text) {
  try {
    jsonr::parse_text(text, "f.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

std::string deep(int n) { return "{\"a\": " + std::string(static_cast<std::size_t>(n), '[') + std::string(static_cast<std::size_t>(n), ']') + "}"; }

std::string write(const std::string& name, const std::string& text) {
  const std::string path = (temp_dir() / name).string();
  std::ofstream(path) << text;
  return path;
}

}  // namespace

TEST_CASE("json: nesting deeper than the limit is an error naming where, not a stack overflow") {
  CHECK(parse_error(deep(jsonr::kMaxJsonDepth - 2)) == "no error");
  CHECK_THAT(parse_error(deep(100000)), Catch::StartsWith("f.json: a[0][0]") && Catch::EndsWith("...: nested deeper than 256 levels"));
}

TEST_CASE("json: a number beyond the range of a double is an error naming the field") {
  CHECK(parse_error(R"({"x": {"y": [1, 1e999]}})") == "f.json: x.y[1]: 1e999 is not a finite number (too large for a double)");
}

TEST_CASE("json: a duplicate key is an error naming it, at any depth") {
  CHECK(parse_error(R"({"a": 1, "a": 2})") == "f.json: a: duplicate key");
  CHECK(parse_error(R"({"a": [{"b": 1, "b": 1}]})") == "f.json: a[0].b: duplicate key");
}

TEST_CASE("json: malformed text gives the parser's line and column") {
  CHECK_THAT(parse_error("{\n  \"a\": ,\n}"), Catch::StartsWith("f.json: line 2, column 8: malformed JSON: "));
}

TEST_CASE("json: every command that reads a JSON file refuses a hostile one in one line", "[slow]") {
  const std::string too_deep = write("deep.json", deep(100000)), huge = write("huge.json", R"({"channels": 1e999})"),
                    twice = write("twice.json", R"({"format": "a", "format": "b"})");
  const std::string out = (temp_dir() / "limits-out.json").string();
  for (const std::string& cmd : {std::string("hw show"), std::string("compile"), "import -o " + out, "sweep -o " + out + ".h5", "train -o " + out}) {
    for (const auto& [file, why] : {std::pair{too_deep, std::string("nested deeper than 256 levels")},
                                    std::pair{huge, std::string("channels: 1e999 is not a finite number")},
                                    std::pair{twice, std::string("format: duplicate key")}}) {
      INFO("aoc " << cmd << " " << file);
      const Run r = run_aoc(cmd + " " + file);
      CHECK(r.status == 1);
      CHECK(r.out.rfind("aoc: error: " + file + ": ", 0) == 0);
      CHECK_THAT(r.out, Catch::Contains(why));
      CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 1);
    }
  }
}
