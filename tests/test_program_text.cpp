// The printed form of a program parses back, so each pass can be tested alone on a hand-written
// input (compiler/program_text.cpp), as MLIR tests a pass with mlir-opt on a .mlir file.
#include <catch2/catch.hpp>
#include <string>

#include "compiler/import_config.hpp"
#include "compiler/op_def.hpp"
#include "compiler/passes.hpp"
#include "compiler/program.hpp"
#include "graph_support.hpp"
#include "sim/error.hpp"
#include "support.hpp"

using namespace aoc;
using namespace aoc::ir;
using namespace aoc::test;

namespace {

// A DEQ z* = tanh(z W + u) on a 4-channel, 2-module core, as the printer writes it before any pass.
const char* kDeq = R"(program "deq" for aoc-48 (4 channels, 2 modules)
  input %u : f64[B, 6]
  weight @W : f64[6, 6]
  weight @V : f64[3, 6]
  %z = FixedPoint(%u) {name = "deq", like = "u", max_iter = 50, tol = 1e-06} : f64[B, 6] {
    ^(%z0, %u0):
      %wz = MatMul(%z0, @W) {name = "mix"} : f64[B, 6]
      %s = Add(%wz, %u0) {name = "s"} : f64[B, 6]
      %t = Tanh(%s) {name = "t"} : f64[B, 6]
      yield %t
  }
  %y = Linear(%z, @V) {name = "head"} : f64[B, 3]
  return %y
)";

// The 48-variable machine's compiler facts with a smaller core, as the header of kDeq says.
Program parsed(const std::string& text) {
  Program p = parse_program(text, "deq.aoc");
  const std::string hw = p.target.hardware;
  const int channels = p.target.channels, modules = p.target.modules;
  p.target = target_of(hw48(), hw, {});
  p.target.channels = channels, p.target.modules = modules;
  return p;
}

std::string error_of(const std::string& text) {
  try {
    parse_program(text, "bad.aoc");
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("program text: a hand-written program parses and prints back unchanged") {
  const Program p = parse_program(kDeq, "deq.aoc");
  CHECK(p.graph.name == "deq");
  CHECK(p.target.hardware == "aoc-48");
  CHECK(p.target.channels == 4);
  CHECK(p.target.modules == 2);
  REQUIRE(p.graph.ops.size() == 2);
  CHECK(attr_number(p.graph.ops[0], "tol") == 1e-6);
  CHECK(std::holds_alternative<double>(p.graph.ops[0].attrs.at("tol")));  // a Number by its record, whatever the text
  CHECK(p.graph.ops[0].body->ops.size() == 3);
  CHECK(print_program(p) == kDeq);
}

TEST_CASE("program text: every pass's output parses back to the same text") {
  Imported m = import_config(tiny_mamba2(), ImportOptions{});
  Program p;
  p.graph = m.graph;
  p.target = target_of(hw48(), "aoc-48", {});
  p.target.channels = 8;  // many tiles
  PassOptions o;
  int checked = 0;
  run_pipeline(p, o, [&](const NamedPass& pass, const Program& q, const PassStats&) {
    INFO("after " << pass.name);
    const std::string text = print_program(q, true);
    CHECK(print_program(parse_program(text), true) == text);
    ++checked;
  });
  CHECK(checked == 6);
}

TEST_CASE("program text: the partition pass alone, on a hand-written input") {
  Program p = parsed(kDeq);
  PassStats stats;
  pass_loop_form(p, {}, stats);
  pass_partition(p, {}, stats);
  CHECK(stats.text() == "native loops 1, DACs 1, optical 2, analog 2, ADCs 1");
  // The capture converted once before the loop; the loop's state stays analog (Add and Tanh are
  // aoc-48's analog functions); the head reads it optically; only the result goes through an ADC.
  CHECK(print_program(p) == R"(program "deq" for aoc-48 (4 channels, 2 modules)
  input %u : f64[B, 6]
  weight @W : f64[6, 6]
  weight @V : f64[3, 6]
  %u.dac = Convert(%u) {name = "u.dac", bits = 8, hi = 1.3, lo = -1.3, to = "analog"} : f64[B, 6]
  %z = FixedPoint(%u.dac) {name = "deq", layout = "native", like = "u.dac", max_iter = 50, tol = 1e-06} : f64[B, 6] {
    ^(%z0, %u0):
      %wz = MatMul(%z0, @W) {name = "mix", place = "optical"} : f64[B, 6]
      %s = Add(%wz, %u0) {name = "s", place = "analog"} : f64[B, 6]
      %t = Tanh(%s) {name = "t", place = "analog"} : f64[B, 6]
      yield %t
  }
  %y.analog = Linear(%z, @V) {name = "head", place = "optical"} : f64[B, 3]
  %y = Convert(%y.analog) {name = "y.adc", bits = 10, hi = 3.3, lo = -3.3, to = "digital"} : f64[B, 3]
  return %y
)");
}

TEST_CASE("program text: the tile pass alone, with its tile_size option") {
  Program p = parsed(kDeq);
  PassStats none;
  pass_loop_form(p, {}, none);
  pass_partition(p, {}, none);
  PassOptions o;
  o.tile_size = 3;
  PassStats stats;
  pass_tile(p, o, stats);
  CHECK(p.target.channels == 3);
  CHECK(stats.text() == "plans 2, tiles 6, reload passes 2");
  const std::string text = print_program(p, true);
  CHECK(print_program(parse_program(text), true) == text);
  o.tile_size = 5;
  Program q = parsed(kDeq);
  CHECK_THROWS_WITH(pass_tile(q, o, stats), "compile: tile: tile_size 5 is not in 1..4, the channels of aoc-48");
}

TEST_CASE("program text: a malformed line is an error naming the source, line and column") {
  std::string t = kDeq;
  t.replace(t.find("Tanh(%s)"), 4, "Tanx");
  CHECK(error_of(t) == "bad.aoc:9:12: unknown op \"Tanx\"");
  CHECK(error_of("program \"x\"\n  input %u : f64[B, 6]\n") == "bad.aoc:2:23: expected the ops and \"return\" before the end of the text");
  std::string attr = kDeq;
  attr.replace(attr.find("max_iter = 50"), 13, "maxiter = 50");
  CHECK(error_of(attr) == "bad.aoc:5:50: FixedPoint has no attribute 'maxiter'");
}

TEST_CASE("program text: a plan with elided tiles or SLM codes does not parse, and says why") {
  const std::string head = std::string(kDeq);
  CHECK_THAT(error_of(head + "plan 'head' @V [3 x 6] top level: 6 tiles\n  tile 0: rows 0..1, cols 0..1 -> module 0, pass 0, core 0, 0\n  ... 5 more\n"),
             Catch::Contains("its tiles are elided"));
  CHECK_THAT(error_of(head + "plan 'head' @V [3 x 6] top level: 1 tile, SLM 5 bit (codes)\n"), Catch::Contains("SLM codes are not in the printed form"));
}
