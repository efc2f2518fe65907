// The graph IR: its JSON and HDF5 forms and the verifier (docs/ir.md). Every malformed graph gives
// one error line that names the file and field, or the op at fault.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "compiler/graph_json.hpp"
#include "compiler/ir.hpp"
#include "compiler/verify.hpp"
#include "runtime/io/h5io.hpp"
#include "sim/error.hpp"

namespace fs = std::filesystem;
using namespace aoc::ir;

namespace {

fs::path fresh_dir(const std::string& name) {
  const auto d = fs::temp_directory_path() / ("aoc-ir-test-" + std::to_string(::getpid())) / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// A small DEQ: u = x U^T + b; z* = tanh(z W^T + u) from z = 0; the result reshaped to [B, 2, 2].
const std::string kGraph = R"({
  "format": "aoc-graph", "version": 1, "name": "tiny-deq",
  "inputs": [{"name": "x", "dtype": "f64", "shape": ["B", 4]}],
  "weights": [{"name": "W", "shape": [4, 4]}, {"name": "U", "shape": [4, 4]}, {"name": "b", "shape": [4]}],
  "ops": [
    {"op": "Linear", "name": "inj", "in": ["x", "U", "b"], "out": ["u"]},
    {"op": "FixedPoint", "name": "deq", "in": ["u"], "out": ["z"],
     "attrs": {"tol": 1e-9, "max_iter": 50, "like": "u", "damping": 0.5, "rule": "relative"},
     "body": {"args": ["zi", "uc"],
              "ops": [{"op": "Linear", "name": "mix", "in": ["zi", "W"], "out": ["wz"]},
                      {"op": "Add", "in": ["wz", "uc"], "out": ["pre"]},
                      {"op": "Tanh", "in": ["pre"], "out": ["zn"]}],
              "results": ["zn"]}},
    {"op": "Reshape", "in": ["z"], "out": ["zr"], "attrs": {"shape": [0, 2, -1]}}
  ],
  "outputs": ["zr"]
})";

// kGraph with one piece of text replaced (which must be there).
std::string with(const std::string& from, const std::string& to, std::string text = kGraph) {
  const auto at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

fs::path write_text(const std::string& name, const std::string& text) {
  const fs::path p = fresh_dir(name) / "graph.json";
  std::ofstream(p) << text;
  return p;
}

// The message of the aoc::Error that f throws; fails the test if it throws nothing.
template <class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const aoc::Error& e) {
    return e.what();
  }
  FAIL("expected an aoc::Error");
  return "";
}

std::string read_error(const std::string& text) {
  const fs::path p = write_text("read", text);
  const std::string msg = error_of([&] { read_graph(p.string()); });
  CHECK(msg.find('\n') == std::string::npos);
  CHECK(msg.rfind(p.string() + ": ", 0) == 0);  // names the file first
  return msg;
}

std::string verify_error(const std::string& text, const WeightStore* w = nullptr) {
  const Graph g = parse_graph(text, "g.json");
  const std::string msg = error_of([&] { verify(g, w); });
  CHECK(msg.find('\n') == std::string::npos);
  CHECK(msg.rfind("verify: ", 0) == 0);
  return msg;
}

WeightStore tiny_weights() {
  WeightStore w;
  w["W"] = {{4, 4}, std::vector<double>(16, 0.1)};
  w["U"] = {{4, 4}, std::vector<double>(16, 0.2)};
  w["b"] = {{4}, std::vector<double>(4, 0.0)};
  return w;
}

}  // namespace

TEST_CASE("ir: every op kind has one record with a shape rule and a kernel, found by its name") {
  for (int k = 0; k <= static_cast<int>(OpKind::FixedPoint); ++k) {
    const OpDef& d = op_def(static_cast<OpKind>(k));
    CHECK(static_cast<int>(d.kind) == k);
    CHECK(op_kind(d.name) == static_cast<OpKind>(k));
    CHECK(d.infer != nullptr);
    CHECK(d.eval != nullptr);
    for (const AttrSpec& a : d.attrs) CHECK_FALSE((a.required && a.dflt.has_value()));
  }
  CHECK(std::string(op_def(OpKind::GatedRMSNorm).name) == "GatedRMSNorm");
  CHECK_FALSE(op_kind("LayerNorm").has_value());
  CHECK(to_string(Type{DType::F64, {Dim::symbol("B"), Dim::symbol("L"), Dim::fixed(768)}}) == "f64[B, L, 768]");
  CHECK(to_string(Type{DType::I64, {}}) == "i64[]");
  CHECK(Tensor{{2, 3}, {}}.size() == 6);
  CHECK(Tensor{{}, {1.0}}.size() == 1);
}

TEST_CASE("ir: JSON round trip of a graph with a FixedPoint region") {
  const fs::path p = write_text("roundtrip", kGraph);
  const Graph g = read_graph(p.string());
  REQUIRE(g.ops.size() == 3);
  REQUIRE(g.ops[1].kind == OpKind::FixedPoint);
  REQUIRE(g.ops[1].body);
  CHECK(g.ops[1].body->args == std::vector<std::string>{"zi", "uc"});
  CHECK(g.ops[1].body->ops.size() == 3);
  CHECK(attr_number(g.ops[1], "tol") == 1e-9);
  CHECK(attr_int(g.ops[1], "max_iter") == 50);
  CHECK(attr_ints(g.ops[2], "shape") == std::vector<std::int64_t>{0, 2, -1});

  const auto types = verify(g);
  CHECK(to_string(types.at("u")) == "f64[B, 4]");
  CHECK(to_string(types.at("zn")) == "f64[B, 4]");
  CHECK(to_string(types.at("z")) == "f64[B, 4]");
  CHECK(to_string(types.at("zr")) == "f64[B, 2, 2]");
  const WeightStore w = tiny_weights();
  CHECK_NOTHROW(verify(g, &w));

  const std::string text = write_graph(g);
  const Graph g2 = parse_graph(text, "again.json");
  CHECK(write_graph(g2) == text);  // stable
  CHECK(g2.name == "tiny-deq");
  CHECK(g2.ops[1].body->results == std::vector<std::string>{"zn"});
  CHECK(g2.ops[1].attrs == g.ops[1].attrs);
  CHECK(verify(g2) == types);
  CHECK(nlohmann::json::parse(text)["ops"][2]["attrs"]["shape"] == nlohmann::json::parse("[0, 2, -1]"));

  // An integer in a number attribute reads as a number.
  const Graph g3 = parse_graph(with("\"tol\": 1e-9", "\"tol\": 1"));
  CHECK(std::holds_alternative<double>(g3.ops[1].attrs.at("tol")));

  // Reshape: 0 copies the input's dim (symbols included), -1 is inferred.
  const auto reshaped = [&](const std::string& shape) { return to_string(verify(parse_graph(with("[0, 2, -1]", shape))).at("zr")); };
  CHECK(reshaped("[0, 4, 1]") == "f64[B, 4, 1]");
  CHECK(reshaped("[-1, 2, 2]") == "f64[B, 2, 2]");

}

TEST_CASE("ir: an unknown op names the op index and the name") {
  CHECK_THAT(read_error(with("\"op\": \"Tanh\"", "\"op\": \"Tanhh\"")),
             Catch::EndsWith("ops[1].body.ops[2].op: unknown op \"Tanhh\" (did you mean Tanh?)"));
  CHECK_THAT(read_error(with("\"op\": \"Reshape\"", "\"op\": \"reshape\"")),
             Catch::EndsWith("ops[2].op: unknown op \"reshape\" (did you mean Reshape?)"));
  CHECK_THAT(read_error(with("\"op\": \"Reshape\"", "\"op\": \"Transpose\"")),
             Catch::Contains("ops[2].op: unknown op \"Transpose\" (expected one of Linear, MatMul"));
}

TEST_CASE("ir: malformed JSON and malformed fields are one-line errors naming the field") {
  CHECK_THAT(read_error(kGraph.substr(0, 200)), Catch::Contains(": malformed JSON: "));
  CHECK_THAT(read_error(with("[\"B\", 4]", "\"B\"")), Catch::EndsWith("inputs[0].shape: expected an array of sizes and symbols, got the string \"B\""));
  CHECK_THAT(read_error(with("\"attrs\": {\"tol\"", "\"atrs\": {\"tol\"")), Catch::EndsWith("ops[1].atrs: unknown key (did you mean attrs?)"));
  CHECK_THAT(read_error(with("\"damping\": 0.5", "\"dampng\": 0.5")), Catch::EndsWith("ops[1].attrs.dampng: unknown key (did you mean damping?)"));
  CHECK_THAT(read_error(with("\"max_iter\": 50", "\"max_iter\": 50.5")), Catch::EndsWith("ops[1].attrs.max_iter: expected an integer, got the number 50.5"));
  CHECK_THAT(read_error(with("\"max_iter\": 50, ", "")), Catch::EndsWith("ops[1].attrs.max_iter: missing required attribute of FixedPoint"));
  CHECK_THAT(read_error(with("\"in\": [\"zi\", \"W\"]", "\"in\": [\"zi\", 3]")), Catch::EndsWith("ops[1].body.ops[0].in[1]: expected a string, got the number 3"));
  CHECK_THAT(read_error(with("\"format\": \"aoc-graph\"", "\"format\": \"onnx\"")), Catch::Contains("format: \"onnx\" is not one of aoc-graph"));
  CHECK_THAT(error_of([] { read_graph("/nonexistent/g.json"); }), Catch::Equals("/nonexistent/g.json: no such file"));
}

TEST_CASE("ir: a shape mismatch names the op") {
  CHECK(verify_error(with("{\"name\": \"W\", \"shape\": [4, 4]}", "{\"name\": \"W\", \"shape\": [4, 3]}")) ==
        "verify: op #1 FixedPoint 'deq' body op #0 Linear 'mix': input W f64[4, 3] has 3 columns, x f64[B, 4] has 4");
  CHECK(verify_error(with("{\"name\": \"b\", \"shape\": [4]}", "{\"name\": \"b\", \"shape\": [5]}")) ==
        "verify: op #0 Linear 'inj': bias b f64[5] does not match W's 4 rows");
  CHECK(verify_error(with("[0, 2, -1]", "[0, 3, 2]")) ==
        "verify: op #2 Reshape: cannot reshape f64[B, 4] to [0, 3, 2]: the element counts differ");
  CHECK(verify_error(with("[0, 2, -1]", "[0, 3, -1]")) ==
        "verify: op #2 Reshape: cannot reshape f64[B, 4] to [0, 3, -1]: the -1 cannot be inferred");
  // The body's result must have the iterate's type.
  CHECK_THAT(verify_error(with("{\"op\": \"Tanh\", \"in\": [\"pre\"], \"out\": [\"zn\"]}",
                               "{\"op\": \"Split\", \"in\": [\"pre\"], \"out\": [\"zn\", \"rest\"], \"attrs\": {\"sizes\": [3, 1]}}")),
             Catch::Equals("verify: op #1 FixedPoint 'deq': the body's result 'zn' is f64[B, 3], the iterate is f64[B, 4]"));
  CHECK_THAT(verify_error(with("\"sizes\": [3, 1]", "\"sizes\": [3, 2]",
                               with("{\"op\": \"Tanh\", \"in\": [\"pre\"], \"out\": [\"zn\"]}",
                                    "{\"op\": \"Split\", \"in\": [\"pre\"], \"out\": [\"zn\", \"rest\"], \"attrs\": {\"sizes\": [3, 1]}}"))),
             Catch::Equals("verify: op #1 FixedPoint 'deq' body op #2 Split: sizes sum to 5, axis 1 of f64[B, 4] is 4"));
  // Broadcasting: trailing dims equal or 1.
  CHECK(verify_error(with("\"inputs\": [{\"name\": \"x\", \"dtype\": \"f64\", \"shape\": [\"B\", 4]}]",
                          "\"inputs\": [{\"name\": \"x\", \"dtype\": \"f64\", \"shape\": [\"B\", 4]}, {\"name\": \"y\", \"shape\": [3]}]",
                          with("\"outputs\": [\"zr\"]", "\"outputs\": [\"s\"]",
                               with("\"out\": [\"zr\"], \"attrs\": {\"shape\": [0, 2, -1]}}",
                                    "\"out\": [\"zr\"], \"attrs\": {\"shape\": [0, 2, -1]}}, {\"op\": \"Add\", \"in\": [\"x\", \"y\"], \"out\": [\"s\"]}")))) ==
        "verify: op #3 Add: cannot broadcast f64[B, 4] with f64[3] (trailing dims must be equal or 1)");
  // Ids must be integers.
  CHECK(verify_error(with("{\"op\": \"Linear\", \"name\": \"inj\", \"in\": [\"x\", \"U\", \"b\"], \"out\": [\"u\"]}",
                          "{\"op\": \"Embedding\", \"name\": \"inj\", \"in\": [\"x\", \"U\"], \"out\": [\"u\"]}")) ==
        "verify: op #0 Embedding 'inj': ids 'x' is f64[B, 4], expected i64");
}

TEST_CASE("ir: a missing weight names the op or the weight") {
  // Used by an op but not declared.
  CHECK(verify_error(with("{\"name\": \"U\", \"shape\": [4, 4]}, ", "")) ==
        "verify: op #0 Linear 'inj': undefined value 'U' (not a graph input, a weight or the result of an earlier op)");
  // Declared but not in the weight store, or with other data.
  WeightStore w = tiny_weights();
  w.erase("W");
  CHECK(verify_error(kGraph, &w) == "verify: weight 'W': declared as f64[4, 4] but not in the weight store");
  w = tiny_weights();
  w["U"].shape = {2, 8};
  CHECK(verify_error(kGraph, &w) == "verify: weight 'U': declared as f64[4, 4], the data have shape [2, 8]");
  w = tiny_weights();
  w["b"].data[2] = std::numeric_limits<double>::quiet_NaN();
  CHECK(verify_error(kGraph, &w) == "verify: weight 'b': NaN or infinite value at element 2");
}

TEST_CASE("ir: a cycle outside a FixedPoint region is a use before definition") {
  CHECK(verify_error(with("\"in\": [\"x\", \"U\", \"b\"]", "\"in\": [\"z\", \"U\", \"b\"]")) ==
        "verify: op #0 Linear 'inj': undefined value 'z' (used before its definition: a cycle outside a FixedPoint region?)");
  // A body sees only its args and the weights: an outer value must be captured.
  CHECK(verify_error(with("\"in\": [\"wz\", \"uc\"]", "\"in\": [\"wz\", \"u\"]")) ==
        "verify: op #1 FixedPoint 'deq' body op #1 Add: value 'u' is defined outside this FixedPoint body: pass it as an input "
        "of the FixedPoint op (a capture)");
}

TEST_CASE("ir: the verifier checks operand counts, attributes, definitions and outputs") {
  CHECK(verify_error(with("\"in\": [\"x\", \"U\", \"b\"]", "\"in\": [\"x\"]")) == "verify: op #0 Linear 'inj': takes 2 to 3 inputs, got 1");
  CHECK(verify_error(with("\"like\": \"u\"", "\"like\": \"x\"")) ==
        "verify: op #1 FixedPoint 'deq': attribute like \"x\" must name one of the op's inputs (the iterate has its type)");
  CHECK(verify_error(with("\"rule\": \"relative\"", "\"rule\": \"absolute\"")) ==
        "verify: op #1 FixedPoint 'deq': attribute rule \"absolute\" is not one of relative, fixed, twin, released");
  CHECK(verify_error(with("\"args\": [\"zi\", \"uc\"]", "\"args\": [\"zi\"]")) ==
        "verify: op #1 FixedPoint 'deq': the body has 1 args, expected 2 (the iterate, then one per input)");
  CHECK(verify_error(with("\"out\": [\"wz\"]", "\"out\": [\"u\"]")) ==
        "verify: op #1 FixedPoint 'deq' body op #0 Linear 'mix': value 'u' is defined twice (first by op #0 Linear; value names are "
        "unique in the whole graph)");
  CHECK(verify_error(with("\"outputs\": [\"zr\"]", "\"outputs\": [\"zq\"]")) == "verify: output 'zq' is not defined");
  CHECK(verify_error(with("\"outputs\": [\"zr\"]", "\"outputs\": [\"pre\"]")) ==
        "verify: output 'pre' is not defined at the top level (it is a value inside a FixedPoint body)");

  // Graphs built in C++ get the same checks as the JSON reader's.
  Graph g = parse_graph(kGraph);
  g.ops[2].attrs.clear();
  CHECK(error_of([&] { verify(g); }) == "verify: op #2 Reshape: missing attribute shape");
  g.ops[2].attrs["shape"] = std::string("B,4");
  CHECK(error_of([&] { verify(g); }) == "verify: op #2 Reshape: attribute shape must be a list of integers");
  g.ops[2].attrs["shape"] = std::vector<std::int64_t>{0, 4};
  g.ops[2].attrs["axis"] = std::int64_t{1};
  CHECK(error_of([&] { verify(g); }) == "verify: op #2 Reshape: unknown attribute axis");

  // Einsum: labels consistent with the operands.
  Graph e;
  e.inputs = {{"a", {DType::F64, {Dim::symbol("B"), Dim::fixed(3)}}}, {"c", {DType::F64, {Dim::symbol("B"), Dim::fixed(4)}}}};
  e.ops.push_back(Op{OpKind::Einsum, "outer", {"a", "c"}, {"y"}, {{"spec", std::string("bi,bj->bij")}}, nullptr});
  e.outputs = {"y"};
  CHECK(to_string(verify(e).at("y")) == "f64[B, 3, 4]");
  e.ops[0].attrs["spec"] = std::string("bi,bi->b");
  CHECK(error_of([&] { verify(e); }) == "verify: op #0 Einsum 'outer': label i is 3 in one operand and 4 in input 'c' f64[B, 4]");
}

TEST_CASE("ir: HDF5 weights round trip and a NaN weight names the file and the dataset") {
  const fs::path d = fresh_dir("weights");
  WeightStore w = tiny_weights();
  w["layer0/W"] = {{2, 3}, {1, 2, 3, 4, 5, 6}};
  w["scalar"] = {{}, {7.5}};
  const std::string path = (d / "w.h5").string();
  write_weights_h5(path, w);
  const WeightStore r = read_weights_h5(path);
  REQUIRE(r.size() == w.size());
  for (const auto& [name, t] : w) {
    CHECK(r.at(name).shape == t.shape);
    CHECK(r.at(name).data == t.data);
  }
  CHECK(std::distance(fs::directory_iterator(d), fs::directory_iterator()) == 1);  // no temporary file left

  const std::string bad = (d / "nan.h5").string();
  aoc::write_h5_arrays(bad, {{"W", {2, 2}, {1.0, std::nan(""), 3.0, 4.0}, false}});
  const std::string msg = error_of([&] { read_weights_h5(bad); });
  CHECK(msg == bad + ": /W: NaN or infinite value at element 1");
  CHECK(error_of([&] { read_weights_h5((d / "none.h5").string()); }) == (d / "none.h5").string() + ": no such file");
}

TEST_CASE("ir: the next-token cross-entropy is the mean of -log softmax at the following token, by hand") {
  // B 1, L 3, V 2: positions 0 and 1 predict tokens 1 (= 1) and 2 (= 0); position 2 predicts nothing
  const Tensor logits{{1, 3, 2}, {0.0, 0.0, 1.0, 3.0, 5.0, -5.0}};
  const Tensor tokens{{1, 3}, {0, 1, 0}};
  const double p0 = std::log(2.0);                    // uniform over 2
  const double p1 = std::log(1 + std::exp(2.0)) + 0;  // -log softmax([1, 3])[0] = log(e^1 + e^3) - 1
  const auto ce = next_token_cross_entropy(logits, tokens);
  REQUIRE(ce);
  CHECK(*ce == Approx((p0 + p1) / 2).epsilon(1e-14));
  CHECK_FALSE(next_token_cross_entropy(logits, Tensor{{1, 2}, {0, 1}}));        // not [B, L]
  CHECK_FALSE(next_token_cross_entropy(logits, Tensor{{1, 3}, {0, 2, 0}}));     // a token outside the vocabulary
  CHECK_FALSE(next_token_cross_entropy(Tensor{{1, 1, 2}, {0, 0}}, Tensor{{1, 1}, {0}}));  // one position: nothing to predict
}
