// The graph interpreter against hand-computed values: one behaviour per test, graphs built directly.
#include <catch2/catch.hpp>

#include <cmath>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "compiler/interpret.hpp"
#include "compiler/kernels.hpp"
#include "compiler/verify.hpp"
#include "sim/error.hpp"

using namespace aoc::ir;

namespace {

Tensor tensor(std::vector<std::int64_t> shape, std::vector<double> data) {
  Tensor t;
  t.shape = std::move(shape);
  t.data = std::move(data);
  return t;
}

// A declaration with fixed dims, except where a symbol is named ("B" for dim 0, say).
Value decl(const std::string& name, const std::vector<std::int64_t>& shape, std::vector<std::string> syms = {}) {
  Value v{name, {}};
  for (size_t i = 0; i < shape.size(); ++i)
    v.type.shape.push_back(i < syms.size() && !syms[i].empty() ? Dim::symbol(syms[i]) : Dim::fixed(shape[i]));
  return v;
}


// A graph of one op over inputs given by tensor, output "y".
Tensor run1(OpKind k, const std::vector<std::pair<std::string, Tensor>>& ins, std::map<std::string, Attr> attrs = {}) {
  Graph g;
  std::map<std::string, Tensor> given;
  std::vector<std::string> names;
  for (const auto& [n, t] : ins) {
    g.inputs.push_back(decl(n, t.shape));
    given[n] = t;
    names.push_back(n);
  }
  g.ops.push_back(make_op(k, names, {"y"}, std::move(attrs), "op"));
  g.outputs = {"y"};
  return interpret(g, {}, given).values.at("y");
}

Tensor run_unary(OpKind k, std::vector<double> x, std::map<std::string, Attr> attrs = {}) {
  const auto n = static_cast<std::int64_t>(x.size());
  return run1(k, {{"x", tensor({n}, std::move(x))}}, std::move(attrs));
}

void check(const Tensor& t, const std::vector<std::int64_t>& shape, const std::vector<double>& want, double tol = 1e-12) {
  REQUIRE(t.shape == shape);
  REQUIRE(t.data.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    INFO("element " << i);
    CHECK(t.data[i] == Approx(want[i]).margin(tol).epsilon(0));
  }
}

std::string error_of(const Graph& g, const WeightStore& w, const std::map<std::string, Tensor>& in) {
  try {
    interpret(g, w, in);
  } catch (const aoc::Error& e) {
    return e.what();
  }
  return "(no error)";
}

// z = a*z + c solved by a FixedPoint over inputs c[B, 2] (and a[B, 1] when given; else the weight
// "half" = [0.5]).
Graph contraction(const std::string& rule, std::int64_t max_iter, double tol, bool per_sample_a = false, double damping = 1.0) {
  Graph g;
  g.name = "contraction";
  g.inputs.push_back(decl("c", {0, 2}, {"B"}));
  if (per_sample_a) g.inputs.push_back(decl("a", {0, 1}, {"B"}));
  else g.weights.push_back(decl("half", {1}));
  auto body = std::make_shared<Region>();
  body->args = {"z", "cc"};
  if (per_sample_a) body->args.push_back("aa");
  body->ops.push_back(make_op(OpKind::Mul, {per_sample_a ? "aa" : "half", "z"}, {"az"}));
  body->ops.push_back(make_op(OpKind::Add, {"az", "cc"}, {"fz"}));
  body->results = {"fz"};
  std::vector<std::string> ins{"c"};
  if (per_sample_a) ins.push_back("a");
  Op fp = make_op(OpKind::FixedPoint, ins, {"zstar"},
               {{"rule", rule}, {"max_iter", max_iter}, {"tol", tol}, {"like", std::string("c")}, {"damping", damping}}, "fp");
  fp.body = body;
  g.ops.push_back(fp);
  g.outputs = {"zstar"};
  return g;
}

const WeightStore half_store{{"half", tensor({1}, {0.5})}};

}  // namespace

TEST_CASE("interpret: Linear with bias computes x W^T + b") {
  Graph g;
  g.inputs.push_back(decl("x", {2, 3}, {"B"}));
  g.weights = {decl("W", {2, 3}), decl("b", {2})};
  g.ops.push_back(make_op(OpKind::Linear, {"x", "W", "b"}, {"y"}));
  g.outputs = {"y"};
  const WeightStore w{{"W", tensor({2, 3}, {1, 2, 3, 0, -1, 0.5})}, {"b", tensor({2}, {10, -10})}};
  const auto r = interpret(g, w, {{"x", tensor({2, 3}, {1, 1, 1, 2, 0, -2})}});
  // row 0: [1+2+3, -1+0.5] + b; row 1: [2-6, -1] + b
  check(r.values.at("y"), {2, 2}, {16, -10.5, 6, -11});
}

TEST_CASE("interpret: MatMul computes a b") {
  const Tensor y = run1(OpKind::MatMul, {{"a", tensor({1, 2}, {1, 2})}, {"b", tensor({2, 3}, {1, 0, 2, 0, 1, 3})}});
  check(y, {1, 3}, {1, 2, 8});
}

TEST_CASE("interpret: Add broadcasts trailing and size-1 dims") {
  const Tensor a = tensor({2, 3}, {1, 2, 3, 4, 5, 6});
  check(run1(OpKind::Add, {{"a", a}, {"b", tensor({3}, {10, 20, 30})}}), {2, 3}, {11, 22, 33, 14, 25, 36});
  check(run1(OpKind::Add, {{"a", a}, {"b", tensor({2, 1}, {100, 200})}}), {2, 3}, {101, 102, 103, 204, 205, 206});
  check(run1(OpKind::Add, {{"a", tensor({2, 1}, {1, 2})}, {"b", tensor({1, 3}, {10, 20, 30})}}), {2, 3},
        {11, 21, 31, 12, 22, 32});
  // [2, 1, 3] + [4, 1] -> [2, 4, 3]: y[i, j, k] = a[i, 0, k] + b[j, 0]
  std::vector<double> want;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 3; ++k) want.push_back((i * 3 + k + 1) + 100.0 * (j + 1));
  check(run1(OpKind::Add, {{"a", tensor({2, 1, 3}, {1, 2, 3, 4, 5, 6})}, {"b", tensor({4, 1}, {100, 200, 300, 400})}}), {2, 4, 3}, want);
  check(run1(OpKind::Add, {{"a", tensor({}, {5})}, {"b", tensor({2}, {1, 2})}}), {2}, {6, 7});
}

TEST_CASE("interpret: Add broadcasting over many elements is its definition on 1 and 3 threads") {
  // [3, 1, 70, 100] + [5, 70, 1] -> [3, 5, 70, 100]: 105,000 elements, split over the threads by rows
  std::vector<double> av(3 * 70 * 100), bv(5 * 70);
  for (size_t i = 0; i < av.size(); ++i) av[i] = 0.001 * static_cast<double>(i);
  for (size_t i = 0; i < bv.size(); ++i) bv[i] = 1000.0 * static_cast<double>(i);
  Graph g;
  g.inputs = {decl("a", {3, 1, 70, 100}), decl("b", {5, 70, 1})};
  g.ops.push_back(make_op(OpKind::Add, {"a", "b"}, {"y"}, {}, "add"));
  g.outputs = {"y"};
  const std::map<std::string, Tensor> in = {{"a", tensor({3, 1, 70, 100}, av)}, {"b", tensor({5, 70, 1}, bv)}};
  InterpretOptions three;
  three.threads = 3;
  const Tensor y1 = interpret(g, {}, in).values.at("y"), y3 = interpret(g, {}, in, three).values.at("y");
  REQUIRE(y1.shape == std::vector<std::int64_t>{3, 5, 70, 100});
  CHECK(y1.data == y3.data);
  bool all = true;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 5; ++j)
      for (int k = 0; k < 70; ++k)
        for (int l = 0; l < 100; ++l)
          all = all && y1.data[((i * 5 + j) * 70 + k) * 100 + l] == av[(i * 70 + k) * 100 + l] + bv[j * 70 + k];
  CHECK(all);
}

TEST_CASE("interpret: Sub and Mul are elementwise with broadcasting") {
  const Tensor a = tensor({2, 2}, {1, 2, 3, 4});
  const Tensor b = tensor({2}, {10, 0.5});
  check(run1(OpKind::Sub, {{"a", a}, {"b", b}}), {2, 2}, {-9, 1.5, -7, 3.5});
  check(run1(OpKind::Mul, {{"a", a}, {"b", b}}), {2, 2}, {10, 1, 30, 2});
}

TEST_CASE("interpret: Add of shapes that do not broadcast names the op") {
  Graph g;
  g.inputs = {decl("a", {2, 3}), decl("b", {2})};
  g.ops.push_back(make_op(OpKind::Add, {"a", "b"}, {"y"}, {}, "sum"));
  g.outputs = {"y"};
  const auto msg = error_of(g, {}, {{"a", tensor({2, 3}, {1, 2, 3, 4, 5, 6})}, {"b", tensor({2}, {1, 2})}});
  CHECK(msg == "interpret: op #0 Add 'sum': shapes [2, 3] and [2] do not broadcast");
}

TEST_CASE("interpret: Tanh at a few points") {
  check(run_unary(OpKind::Tanh, {0, 0.5, -2}), {3}, {0, 0.46211715726000974, -0.9640275800758169});
}

TEST_CASE("interpret: Sigmoid at a few points, stable for large arguments") {
  check(run_unary(OpKind::Sigmoid, {0, 1, -1, 800, -800}), {5}, {0.5, 0.7310585786300049, 0.2689414213699951, 1, 0}, 1e-15);
}

TEST_CASE("interpret: SiLU is x times sigmoid of x") {
  check(run_unary(OpKind::SiLU, {0, 1, -1, 2}), {4}, {0, 0.7310585786300049, -0.2689414213699951, 1.7615941559557649});
}

TEST_CASE("interpret: Softplus is log of 1 plus exp, stable for large arguments") {
  check(run_unary(OpKind::Softplus, {0, 1, -1, 800, -800}), {5},
        {0.6931471805599453, 1.3132616875182228, 0.31326168751822286, 800, 0}, 1e-15);
}

TEST_CASE("interpret: Exp and Neg at a few points") {
  check(run_unary(OpKind::Exp, {0, 1, -2}), {3}, {1, 2.718281828459045, 0.1353352832366127});
  check(run_unary(OpKind::Neg, {0, 1.5, -2}), {3}, {0, -1.5, 2});
}

TEST_CASE("interpret: Softmax normalizes exp over the last dim, stable for large arguments") {
  const Tensor x = tensor({2, 3}, {0, std::log(2.0), std::log(3.0), 1000, 1000, -1000});
  check(run1(OpKind::Softmax, {{"x", x}}), {2, 3}, {1.0 / 6, 2.0 / 6, 3.0 / 6, 0.5, 0.5, 0}, 1e-15);
}

TEST_CASE("interpret: Clip bounds by min and max") {
  check(run_unary(OpKind::Clip, {-3, -1, 0.25, 1, 7}, {{"min", -1.0}, {"max", 2.0}}), {5}, {-1, -1, 0.25, 1, 2});
}

TEST_CASE("interpret: RMSNorm scales the last dim by its root mean square") {
  // rows [3, 4] and [1, -1]: mean squares 12.5 and 1
  const Tensor y = run1(OpKind::RMSNorm, {{"x", tensor({2, 2}, {3, 4, 1, -1})}, {"g", tensor({2}, {1, 2})}});
  const double s0 = 1 / std::sqrt(12.5 + 1e-5), s1 = 1 / std::sqrt(1 + 1e-5);  // default eps 1e-5
  check(y, {2, 2}, {3 * s0, 8 * s0, s1, -2 * s1});
  const Tensor y0 = run1(OpKind::RMSNorm, {{"x", tensor({1, 2}, {3, 4})}, {"g", tensor({2}, {1, 1})}}, {{"eps", 0.0}});
  check(y0, {1, 2}, {3 / std::sqrt(12.5), 4 / std::sqrt(12.5)});
}

TEST_CASE("interpret: GatedRMSNorm normalises x times SiLU of the gate") {
  // u = x * silu(gate) = [1 * 0, 2 * silu(1)] = [0, u1]; rms = u1 / sqrt(2): y = [0, sqrt(2)] * g
  const Tensor y = run1(OpKind::GatedRMSNorm,
                        {{"x", tensor({1, 2}, {1, 2})}, {"gate", tensor({1, 2}, {0, 1})}, {"g", tensor({2}, {5, 3})}},
                        {{"eps", 0.0}});
  check(y, {1, 2}, {0, 3 * std::sqrt(2.0)});
}

TEST_CASE("interpret: Conv1dCausal with K 3 sees only the past") {
  // x[1, 4, 2]: channel 0 = 1 2 3 4, channel 1 = 10 20 30 40; w[0] = 1 2 3 (oldest first), w[1] = 0 0 1
  const Tensor x = tensor({1, 4, 2}, {1, 10, 2, 20, 3, 30, 4, 40});
  const Tensor w = tensor({2, 3}, {1, 2, 3, 0, 0, 1});
  const Tensor b = tensor({2}, {0.5, -1});
  // channel 0: t0 3*1, t1 2*1+3*2, t2 1+4+9, t3 2+6+12; channel 1: x itself
  check(run1(OpKind::Conv1dCausal, {{"x", x}, {"w", w}, {"b", b}}), {1, 4, 2}, {3.5, 9, 8.5, 19, 14.5, 29, 20.5, 39});
  check(run1(OpKind::Conv1dCausal, {{"x", x}, {"w", w}}), {1, 4, 2}, {3, 10, 8, 20, 14, 30, 20, 40});
}

TEST_CASE("interpret: Embedding looks up rows of the table") {
  const Tensor table = tensor({3, 2}, {0, 1, 10, 11, 20, 21});
  check(run1(OpKind::Embedding, {{"ids", tensor({1, 3}, {2, 0, 2})}, {"table", table}}), {1, 3, 2}, {20, 21, 0, 1, 20, 21});
}

TEST_CASE("interpret: Embedding of an id outside the table is an error naming the op") {
  Graph g;
  g.inputs = {decl("ids", {2})};
  g.inputs[0].type.dtype = DType::I64;
  g.weights = {decl("table", {3, 2})};
  g.ops.push_back(make_op(OpKind::Embedding, {"ids", "table"}, {"y"}, {}, "embed"));
  g.outputs = {"y"};
  const WeightStore w{{"table", tensor({3, 2}, {0, 1, 10, 11, 20, 21})}};
  CHECK(error_of(g, w, {{"ids", tensor({2}, {1, 3})}}) == "interpret: op #0 Embedding 'embed': id 3 at position 1 is outside [0, 3)");
  CHECK(error_of(g, w, {{"ids", tensor({2}, {-1, 0})}}) == "interpret: op #0 Embedding 'embed': id -1 at position 0 is outside [0, 3)");
}

TEST_CASE("interpret: Split then Concat along an axis gives back the input") {
  const Tensor x = tensor({2, 5}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  for (std::int64_t axis : {std::int64_t(-1), std::int64_t(1)}) {
    Graph g;
    g.inputs = {decl("x", {2, 5})};
    g.ops.push_back(make_op(OpKind::Split, {"x"}, {"p", "q"}, {{"sizes", std::vector<std::int64_t>{2, 3}}, {"axis", axis}}));
    g.ops.push_back(make_op(OpKind::Concat, {"p", "q"}, {"y"}, {{"axis", axis}}));
    g.outputs = {"p", "q", "y"};
    const auto r = interpret(g, {}, {{"x", x}});
    check(r.values.at("p"), {2, 2}, {0, 1, 5, 6});
    check(r.values.at("q"), {2, 3}, {2, 3, 4, 7, 8, 9});
    check(r.values.at("y"), {2, 5}, x.data);
  }
  Graph g;  // along axis 0
  g.inputs = {decl("x", {2, 5})};
  g.ops.push_back(make_op(OpKind::Split, {"x"}, {"p", "q"}, {{"sizes", std::vector<std::int64_t>{1, 1}}, {"axis", std::int64_t(0)}}));
  g.ops.push_back(make_op(OpKind::Concat, {"q", "p"}, {"y"}, {{"axis", std::int64_t(0)}}));
  g.outputs = {"y"};
  check(interpret(g, {}, {{"x", x}}).values.at("y"), {2, 5}, {5, 6, 7, 8, 9, 0, 1, 2, 3, 4});
}

TEST_CASE("interpret: Reshape keeps row-major data, 0 copies a dim and -1 infers one") {
  std::vector<double> d(24);
  for (int i = 0; i < 24; ++i) d[i] = i;
  const Tensor x = tensor({2, 3, 4}, d);
  using V = std::vector<std::int64_t>;
  check(run1(OpKind::Reshape, {{"x", x}}, {{"shape", V{0, -1}}}), {2, 12}, d);
  check(run1(OpKind::Reshape, {{"x", x}}, {{"shape", V{-1, 2}}}), {12, 2}, d);
  check(run1(OpKind::Reshape, {{"x", x}}, {{"shape", V{0, 0, 2, 2}}}), {2, 3, 2, 2}, d);
  CHECK_THROWS_WITH(run1(OpKind::Reshape, {{"x", x}}, {{"shape", V{-1, -1}}}),
                    "interpret: op #0 Reshape 'op': shape [-1, -1] has more than one -1");
  CHECK_THROWS_WITH(run1(OpKind::Reshape, {{"x", x}}, {{"shape", V{5, -1}}}),
                    "interpret: op #0 Reshape 'op': cannot reshape [2, 3, 4] to [5, -1]");
}

TEST_CASE("interpret: one einsum parser: spaces dropped, terms split, the implicit output sorted") {
  const kernels::EinsumSpec e = kernels::parse_einsum("bl h, b l n , blhp -> blhpn");
  CHECK(e.text == "blh,bln,blhp->blhpn");
  CHECK(e.terms == std::vector<std::string>{"blh", "bln", "blhp"});
  CHECK(e.arrow);
  CHECK(e.out == "blhpn");
  const kernels::EinsumSpec i = kernels::parse_einsum("ij,jk");  // implicit: j is summed, i and k stay, in order
  CHECK_FALSE(i.arrow);
  CHECK(i.out == "ik");
  CHECK(kernels::parse_einsum("ba").out == "ab");  // implicit form transposes to alphabetical order, as numpy
  CHECK(kernels::parse_einsum("ii").out.empty());  // a trace
}

TEST_CASE("interpret: Einsum computes a matrix product") {
  const Tensor a = tensor({2, 3}, {1, 2, 3, 4, 5, 6});
  const Tensor b = tensor({3, 2}, {1, 0, 0, 1, 1, 1});
  // [[1+3, 2+3], [4+6, 5+6]]
  check(run1(OpKind::Einsum, {{"a", a}, {"b", b}}, {{"spec", std::string("ij,jk->ik")}}), {2, 2}, {4, 5, 10, 11});
}

TEST_CASE("interpret: Einsum computes the Mamba2 state input dt B x") {
  // b=1, l=2, h=2, n=2, p=1: out[b,l,h,p,n] = dt[b,l,h] * B[b,l,n] * x[b,l,h,p]
  const Tensor dt = tensor({1, 2, 2}, {1, 2, 3, 4});
  const Tensor B = tensor({1, 2, 2}, {1, 10, -1, 0.5});
  const Tensor x = tensor({1, 2, 2, 1}, {2, 3, 5, 7});
  const Tensor y = run1(OpKind::Einsum, {{"dt", dt}, {"B", B}, {"x", x}}, {{"spec", std::string("blh,bln,blhp->blhpn")}});
  // l0: h0 = 1*2*[1, 10], h1 = 2*3*[1, 10]; l1: h0 = 3*5*[-1, 0.5], h1 = 4*7*[-1, 0.5]
  check(y, {1, 2, 2, 1, 2}, {2, 20, 6, 60, -15, 7.5, -28, 14});
  // and summing it against C over n reads the state out: y[b,l,h,p] = sum_n s[b,l,h,p,n] C[b,l,n]
  const Tensor C = tensor({1, 2, 2}, {1, 1, 2, 0});
  check(run1(OpKind::Einsum, {{"s", y}, {"C", C}}, {{"spec", std::string("blhpn,bln->blhp")}}), {1, 2, 2, 1}, {22, 66, -30, -56});
}

namespace {

// Einsum by its definition: every assignment of the letters, each adding the product of its
// operands' elements to the output element it names.
std::vector<double> einsum_by_definition(const std::vector<std::string>& ops, const std::string& out, const std::vector<Tensor>& xs) {
  std::map<char, std::int64_t> size;
  for (size_t o = 0; o < ops.size(); ++o)
    for (size_t i = 0; i < ops[o].size(); ++i) size[ops[o][i]] = xs[o].shape[i];
  std::vector<char> letters;
  std::int64_t total = 1, n_out = 1;
  for (auto [c, d] : size) letters.push_back(c), total *= d;
  for (char c : out) n_out *= size[c];
  std::vector<double> y(static_cast<size_t>(n_out), 0.0);
  for (std::int64_t a = 0; a < total; ++a) {
    std::map<char, std::int64_t> at;
    std::int64_t rem = a;
    for (auto it = letters.rbegin(); it != letters.rend(); ++it) at[*it] = rem % size[*it], rem /= size[*it];
    auto flat = [&](const std::string& ls) {
      std::int64_t f = 0;
      for (char c : ls) f = f * size[c] + at[c];
      return f;
    };
    double p = 1;
    for (size_t o = 0; o < ops.size(); ++o) p *= xs[o].data[static_cast<size_t>(flat(ops[o]))];
    y[static_cast<size_t>(flat(out))] += p;
  }
  return y;
}

}  // namespace

TEST_CASE("interpret: Einsum agrees with its definition for sums, diagonals, transposes and many operands, on any thread count") {
  struct Case {
    std::vector<std::string> ops;
    std::string out;
    std::vector<std::vector<std::int64_t>> shapes;
  };
  const std::vector<Case> cases = {
      {{"ij", "jk"}, "ik", {{3, 4}, {4, 5}}},
      {{"ii"}, "i", {{4, 4}}},                                     // a diagonal
      {{"ii"}, "", {{4, 4}}},                                      // a trace, to a scalar
      {{"ijk"}, "kji", {{2, 3, 4}}},                               // a transpose
      {{"abc", "cd", "de", "b"}, "ae", {{2, 3, 4}, {4, 3}, {3, 5}, {3}}},  // four operands, three summed letters
      {{"blh", "bln", "blhp"}, "blhpn", {{2, 3, 2}, {2, 3, 5}, {2, 3, 2, 3}}},
      {{"blhpn", "bln"}, "blhp", {{2, 3, 2, 3, 5}, {2, 3, 5}}},
      {{"ij", "ij"}, "", {{3, 7}, {3, 7}}},
  };
  std::uint64_t state = 7;
  auto next = [&] {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<double>(state >> 11) * 0x1p-53 * 2 - 1;
  };
  for (const Case& c : cases) {
    std::string spec;
    Graph g;
    std::map<std::string, Tensor> given;
    std::vector<std::string> names;
    std::vector<Tensor> xs;
    for (size_t o = 0; o < c.ops.size(); ++o) {
      spec += (o ? "," : "") + c.ops[o];
      std::int64_t n = 1;
      for (std::int64_t d : c.shapes[o]) n *= d;
      std::vector<double> v(static_cast<size_t>(n));
      for (double& e : v) e = next();
      xs.push_back(tensor(c.shapes[o], v));
      const std::string name = "x" + std::to_string(o);
      g.inputs.push_back(decl(name, c.shapes[o]));
      given[name] = xs.back();
      names.push_back(name);
    }
    spec += "->" + c.out;
    g.ops.push_back(make_op(OpKind::Einsum, names, {"y"}, {{"spec", spec}}, "op"));
    g.outputs = {"y"};
    INFO(spec);
    InterpretOptions one, three;
    three.threads = 3;
    const Tensor y1 = interpret(g, {}, given, one).values.at("y"), y3 = interpret(g, {}, given, three).values.at("y");
    CHECK(y1.data == y3.data);
    const std::vector<double> want = einsum_by_definition(c.ops, c.out, xs);
    REQUIRE(y1.data.size() == want.size());
    for (size_t k = 0; k < want.size(); ++k) CHECK(y1.data[k] == Approx(want[k]).margin(1e-12));
  }
}

TEST_CASE("interpret: Scan runs the diagonal recurrence from zeros") {
  // a[1, 3] broadcast over x[1, 3, 2]: h0 = x0, h1 = 2 h0 + x1, h2 = -h1 + x2
  const Tensor a = tensor({1, 3}, {0.5, 2, -1});
  const Tensor x = tensor({1, 3, 2}, {1, 2, 3, 4, 5, 6});
  check(run1(OpKind::Scan, {{"a", a}, {"x", x}}), {1, 3, 2}, {1, 2, 5, 8, 0, -2});
}

TEST_CASE("interpret: Scan starts from h0 when given") {
  const Tensor a = tensor({1, 3}, {0.5, 2, -1});
  const Tensor x = tensor({1, 3, 2}, {1, 2, 3, 4, 5, 6});
  const Tensor h0 = tensor({1, 2}, {10, 20});
  // 0.5*[10, 20] + [1, 2] = [6, 12]; 2*[6, 12] + [3, 4] = [15, 28]; -[15, 28] + [5, 6] = [-10, -22]
  check(run1(OpKind::Scan, {{"a", a}, {"x", x}, {"h0", h0}}), {1, 3, 2}, {6, 12, 15, 28, -10, -22});
}

TEST_CASE("interpret: Scan over many elements is the recurrence, the same for any thread count") {
  // x[2, 3, 5, 3000]: 15000 elements per step, so three threads split them (inside a head's run)
  const std::int64_t B = 2, L = 3, H = 5, P = 3000;
  std::vector<double> av(static_cast<size_t>(B * L * H)), xv(static_cast<size_t>(B * L * H * P)), hv(static_cast<size_t>(B * H * P));
  for (size_t k = 0; k < av.size(); ++k) av[k] = 0.9 - 0.1 * static_cast<double>(k % 7);
  for (size_t k = 0; k < xv.size(); ++k) xv[k] = std::sin(0.37 * static_cast<double>(k));
  for (size_t k = 0; k < hv.size(); ++k) hv[k] = std::cos(0.11 * static_cast<double>(k));
  Graph g;
  g.inputs = {decl("a", {B, L, H}), decl("x", {B, L, H, P}), decl("h0", {B, H, P})};
  g.ops.push_back(make_op(OpKind::Scan, {"a", "x", "h0"}, {"y"}, {}, "scan"));
  g.outputs = {"y"};
  const std::map<std::string, Tensor> given = {{"a", tensor({B, L, H}, av)}, {"x", tensor({B, L, H, P}, xv)}, {"h0", tensor({B, H, P}, hv)}};
  InterpretOptions one, three;
  three.threads = 3;
  const Tensor y1 = interpret(g, {}, given, one).values.at("y"), y3 = interpret(g, {}, given, three).values.at("y");
  CHECK(y1.data == y3.data);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t j = 0; j < H * P; ++j) {
      double h = hv[static_cast<size_t>(b * H * P + j)];
      for (std::int64_t t = 0; t < L; ++t) {
        h = av[static_cast<size_t>((b * L + t) * H + j / P)] * h + xv[static_cast<size_t>((b * L + t) * H * P + j)];
        REQUIRE(y1.data[static_cast<size_t>((b * L + t) * H * P + j)] == Approx(h).margin(1e-12));
      }
    }
}

TEST_CASE("interpret: Scan broadcasts a over the extra trailing dims of x per head") {
  // a[B=2, L=2, H=2], x[2, 2, 2, 2]: a[b,l,h] scales both x[b,l,h,:]
  const Tensor a = tensor({2, 2, 2}, {1, 1, 2, 3, 0, 0, -1, 0.5});
  const Tensor x = tensor({2, 2, 2, 2}, {1, 2, 3, 4, 1, 1, 1, 1, 1, 2, 3, 4, 1, 1, 1, 1});
  // b0: t0 = [1 2 | 3 4]; t1 = [2*1+1, 2*2+1 | 3*3+1, 3*4+1]
  // b1: t0 = [1 2 | 3 4]; t1 = [-1+1, -2+1 | 1.5+1, 2+1]
  check(run1(OpKind::Scan, {{"a", a}, {"x", x}}), {2, 2, 2, 2}, {1, 2, 3, 4, 3, 5, 10, 13, 1, 2, 3, 4, 0, -1, 2.5, 3});
}

TEST_CASE("interpret: CausalAttention by hand on 2 tokens, 1 head, d 2, without RoPE") {
  // token 0 sees only itself: v_0. token 1: scores q_1.k_0 / sqrt 2 = 0 and q_1.k_1 / sqrt 2 = 1/sqrt 2,
  // so p_1 = sigmoid(1/sqrt 2) and y_1 = (1 - p_1) v_0 + p_1 v_1.
  const Tensor q = tensor({1, 2, 2}, {1, 0, 0, 1});
  const Tensor k = tensor({1, 2, 2}, {1, 0, 1, 1});
  const Tensor v = tensor({1, 2, 2}, {1, 2, 3, 4});
  const double p1 = 1.0 / (1.0 + std::exp(-1.0 / std::sqrt(2.0)));
  check(run1(OpKind::CausalAttention, {{"q", q}, {"k", k}, {"v", v}}, {{"heads", std::int64_t{1}}}), {1, 2, 2},
        {1, 2, 1 + 2 * p1, 2 + 2 * p1});
}

TEST_CASE("interpret: CausalAttention by hand on 2 tokens, 1 head, d 2, with RoPE") {
  // d 2: one pair (i = 0), angle t * theta^0 = t for any theta. Token 0 is not rotated and sees only
  // itself: v_0. Token 1: q_1 = [0, 1] -> [-sin 1, cos 1], k_1 = [1, 1] -> [cos 1 - sin 1, cos 1 + sin 1],
  // k_0 = [1, 0]: scores -sin(1)/sqrt 2 and (q_1.k_1 unchanged by a common rotation) 1/sqrt 2.
  const Tensor q = tensor({1, 2, 2}, {1, 0, 0, 1});
  const Tensor k = tensor({1, 2, 2}, {1, 0, 1, 1});
  const Tensor v = tensor({1, 2, 2}, {1, 2, 3, 4});
  const double s0 = -std::sin(1.0) / std::sqrt(2.0), s1 = 1.0 / std::sqrt(2.0);
  const double p1 = std::exp(s1) / (std::exp(s0) + std::exp(s1));
  check(run1(OpKind::CausalAttention, {{"q", q}, {"k", k}, {"v", v}}, {{"heads", std::int64_t{1}}, {"rope_theta", 500000.0}}),
        {1, 2, 2}, {1, 2, 1 + 2 * p1, 2 + 2 * p1});
}

TEST_CASE("interpret: CausalAttention RoPE rotates the halves of each head with theta^(-2i/d)") {
  // d 4, theta 100: at t 1 the pairs (0, 2) and (1, 3) turn by 1 * 100^0 = 1 and 1 * 100^(-2/4) = 0.1.
  const Tensor q = tensor({1, 2, 4}, {0, 0, 0, 0, 1, 1, 0, 0});
  const Tensor k = tensor({1, 2, 4}, {1, 1, 0, 0, 0, 0, 0, 0});
  const Tensor v = tensor({1, 2, 4}, {1, 0, 0, 0, 0, 1, 0, 0});
  // q_1 = [1, 1, 0, 0] -> [cos 1, cos 0.1, sin 1, sin 0.1]; k_0 = [1, 1, 0, 0] is not rotated (t 0);
  // k_1 = 0. Scores: (cos 1 + cos 0.1) / 2 and 0 (scale 1/sqrt 4); token 0 (q_0 = 0) sees only v_0.
  const double s0 = (std::cos(1.0) + std::cos(0.1)) / 2.0;
  const double p0 = std::exp(s0) / (std::exp(s0) + 1.0);
  check(run1(OpKind::CausalAttention, {{"q", q}, {"k", k}, {"v", v}}, {{"heads", std::int64_t{1}}, {"rope_theta", 100.0}}),
        {1, 2, 4}, {1, 0, 0, 0, p0, 1 - p0, 0, 0});
}

TEST_CASE("interpret: CausalAttention is causal, changing a later token leaves earlier outputs") {
  std::vector<double> a(32), b(32), c(32);
  for (int i = 0; i < 32; ++i) a[i] = std::sin(1.3 * i), b[i] = std::cos(0.7 * i), c[i] = std::sin(0.4 * i + 1);
  const std::map<std::string, Attr> attrs{{"heads", std::int64_t{2}}, {"rope_theta", 10000.0}};
  // B 1, L 4, D 8, 2 heads of 4
  const Tensor y = run1(OpKind::CausalAttention, {{"q", tensor({1, 4, 8}, a)}, {"k", tensor({1, 4, 8}, b)}, {"v", tensor({1, 4, 8}, c)}}, attrs);
  for (int i = 24; i < 32; ++i) a[i] += 1, b[i] -= 2, c[i] *= 3;  // the last token
  const Tensor z = run1(OpKind::CausalAttention, {{"q", tensor({1, 4, 8}, a)}, {"k", tensor({1, 4, 8}, b)}, {"v", tensor({1, 4, 8}, c)}}, attrs);
  for (int i = 0; i < 24; ++i) CHECK(y.data[i] == z.data[i]);
  bool changed = false;
  for (int i = 24; i < 32; ++i) changed = changed || y.data[i] != z.data[i];
  CHECK(changed);
  for (int i = 0; i < 8; ++i) CHECK(y.data[i] == Approx(c[i]).margin(1e-15));  // token 0: v_0, per head
}

TEST_CASE("interpret: CausalAttention with heads not dividing D is rejected by the verifier and the interpreter") {
  Graph g;
  for (const char* n : {"q", "k", "v"}) g.inputs.push_back(decl(n, {1, 2, 6}, {"B", "L"}));
  g.ops.push_back(make_op(OpKind::CausalAttention, {"q", "k", "v"}, {"y"}, {{"heads", std::int64_t{4}}}, "attn"));
  g.outputs = {"y"};
  CHECK_THROWS_WITH(verify(g), Catch::Contains("is not divisible by heads 4"));
  const Tensor t = tensor({1, 2, 6}, std::vector<double>(12, 0.5));
  CHECK_THAT(error_of(g, {}, {{"q", t}, {"k", t}, {"v", t}}), Catch::Contains("heads 4 does not divide D 6"));
  g.ops[0].attrs["heads"] = std::int64_t{3};
  CHECK_NOTHROW(verify(g));
  g.ops[0].attrs["rope_theta"] = 500000.0;  // heads of 2: RoPE is fine
  CHECK_NOTHROW(verify(g));
  g.ops[0].attrs["heads"] = std::int64_t{2};  // heads of 3: RoPE needs pairs
  CHECK_THROWS_WITH(verify(g), Catch::Contains("even head dim"));
  g.ops[0].attrs.erase("rope_theta");
  g.inputs[1] = decl("k", {1, 3, 6}, {"B"});
  CHECK_THROWS_WITH(verify(g), Catch::Contains("must have one type"));
}

TEST_CASE("interpret: FixedPoint relative rule converges to 2c and stops at the tolerance") {
  // z_k = c (2 - 2^(1-k)) after k steps; step k's relative residual is 1 / (2^k - 1): below 1e-3
  // first at k = 10
  const auto r = interpret(contraction("relative", 100, 1e-3), half_store, {{"c", tensor({1, 2}, {3, 4})}});
  const double f = 2 - std::pow(2.0, -9);
  check(r.values.at("zstar"), {1, 2}, {3 * f, 4 * f}, 0);
  REQUIRE(r.fixed_points.size() == 1);
  CHECK(r.fixed_points[0].op == "fp");
  CHECK(r.fixed_points[0].iterations == std::vector<int>{10});
  CHECK(r.fixed_points[0].converged == std::vector<std::uint8_t>{1});
}

TEST_CASE("interpret: FixedPoint fixed rule runs exactly max_iter steps") {
  const auto r = interpret(contraction("fixed", 5, 1e-3), half_store, {{"c", tensor({1, 2}, {3, 4})}});
  check(r.values.at("zstar"), {1, 2}, {3 * 1.9375, 4 * 1.9375}, 0);  // 2 - 2^-4
  CHECK(r.fixed_points[0].iterations == std::vector<int>{5});
  CHECK(r.fixed_points[0].converged == std::vector<std::uint8_t>{0});  // residual 5 * 2^-4 >= tol
}

TEST_CASE("interpret: FixedPoint twin rule stops when the batch residual is below tol") {
  // residual of step k: ||c|| 2^(1-k) = 5 * 2^(1-k) < 1e-3 first at k = 14
  const auto r = interpret(contraction("twin", 100, 1e-3), half_store, {{"c", tensor({1, 2}, {3, 4})}});
  const double f = 2 - std::pow(2.0, -13);
  check(r.values.at("zstar"), {1, 2}, {3 * f, 4 * f}, 0);
  CHECK(r.fixed_points[0].iterations == std::vector<int>{14});
  CHECK(r.fixed_points[0].converged == std::vector<std::uint8_t>{1});
}

TEST_CASE("interpret: FixedPoint relative rule applies damping") {
  // z <- 0.5 z + 0.5 (0.5 z + c): z_k = 2c (1 - 0.75^k); step k+1's relative residual is
  // 0.75^k / (2 - 0.75^k), below 1e-2 first at k = 14, so 15 steps and z_15 is returned
  const auto r = interpret(contraction("relative", 100, 1e-2, false, 0.5), half_store, {{"c", tensor({1, 2}, {3, 4})}});
  const double f = 2 * (1 - std::pow(0.75, 15));
  check(r.values.at("zstar"), {1, 2}, {3 * f, 4 * f});
  CHECK(r.fixed_points[0].iterations == std::vector<int>{15});
}

TEST_CASE("interpret: FixedPoint samples stop at different iterations") {
  // sample 0: z = 0.5 z + c, relative residual 1 / (2^k - 1): 10 steps;
  // sample 1: z = 0.25 z + c, relative residual 3 / (4^k - 1): 6 steps
  const auto r = interpret(contraction("relative", 100, 1e-3, true), {},
                           {{"c", tensor({2, 2}, {3, 4, 1, -2})}, {"a", tensor({2, 1}, {0.5, 0.25})}});
  const double f0 = 2 - std::pow(2.0, -9), f1 = (1 - std::pow(0.25, 6)) / 0.75;
  check(r.values.at("zstar"), {2, 2}, {3 * f0, 4 * f0, f1, -2 * f1});
  CHECK(r.fixed_points[0].iterations == std::vector<int>{10, 6});
  CHECK(r.fixed_points[0].converged == std::vector<std::uint8_t>{1, 1});
}

namespace {
// The released implicit models' loop (microsoft/implicit_languagemodels, implicit_llm/implicit.py,
// _sequential_step, ema_alpha unset) written out for z = a z + c on a batch:
//   z = 0; for count in range(f_thres - 1): z_next = f(z); diff = ||z_next - z|| / (1e-6 + ||z||)
//   (norms over the whole batch); z = (1 - tau) z + tau z_next; if diff < f_tol: break
//   return f(z), count + 1
std::pair<std::vector<double>, int> released_loop(const std::vector<double>& a, const std::vector<double>& c, int f_thres, double f_tol,
                                                  double tau) {
  const std::size_t n = c.size(), per = n / a.size();
  auto f = [&](const std::vector<double>& z) {
    std::vector<double> out(n);
    for (std::size_t i = 0; i < n; ++i) out[i] = a[i / per] * z[i] + c[i];
    return out;
  };
  std::vector<double> z(n, 0.0);
  int steps = 0;
  for (int count = 0; count < f_thres - 1; ++count) {
    const std::vector<double> next = f(z);
    double dd = 0, zz = 0;
    for (std::size_t i = 0; i < n; ++i) dd += (next[i] - z[i]) * (next[i] - z[i]), zz += z[i] * z[i];
    const double diff = std::sqrt(dd) / (1e-6 + std::sqrt(zz));
    for (std::size_t i = 0; i < n; ++i) z[i] = (1 - tau) * z[i] + tau * next[i];
    steps = count + 1;
    if (diff < f_tol) break;
  }
  return {f(z), steps};
}
}  // namespace

TEST_CASE("interpret: FixedPoint released rule is the released loop: one batch residual, damped steps, then f(z) of a final call") {
  // f_thres 100 -> max_iter 99; sample 1 alone would stop much earlier, but the batch stops together
  const std::vector<double> a{0.5, 0.25}, c{3, 4, 1, -2};
  const auto [want, steps] = released_loop(a, c, 100, 1e-3, 0.8);
  const auto r = interpret(contraction("released", 99, 1e-3, true, 0.8), {}, {{"c", tensor({2, 2}, c)}, {"a", tensor({2, 1}, a)}});
  check(r.values.at("zstar"), {2, 2}, want, 1e-15);
  CHECK(steps < 99);
  CHECK(r.fixed_points[0].iterations == std::vector<int>{steps, steps});
  CHECK(r.fixed_points[0].converged == std::vector<std::uint8_t>{1, 1});
}

TEST_CASE("interpret: FixedPoint released rule runs at most max_iter steps before its final call") {
  const std::vector<double> a{0.5, 0.25}, c{3, 4, 1, -2};
  const auto [want, steps] = released_loop(a, c, 6, 1e-12, 1.0);
  CHECK(steps == 5);
  const auto r = interpret(contraction("released", 5, 1e-12, true), {}, {{"c", tensor({2, 2}, c)}, {"a", tensor({2, 1}, a)}});
  check(r.values.at("zstar"), {2, 2}, want, 1e-15);
  CHECK(r.fixed_points[0].iterations == std::vector<int>{5, 5});
  CHECK(r.fixed_points[0].converged == std::vector<std::uint8_t>{0, 0});
}

TEST_CASE("interpret: FixedPoint body sees its captures and the weights") {
  // z = z W^T + c with W = diag(0.5, 0.25) (a weight) and c (a capture of an outer value x + 1):
  // c = [1, 3] gives z* = [2, 4]
  Graph g;
  g.inputs = {decl("x", {1, 2})};
  g.weights = {decl("W", {2, 2}), decl("one", {1})};
  g.ops.push_back(make_op(OpKind::Add, {"x", "one"}, {"c"}));
  auto body = std::make_shared<Region>();
  body->args = {"z", "cc"};
  body->ops.push_back(make_op(OpKind::Linear, {"z", "W"}, {"zw"}));
  body->ops.push_back(make_op(OpKind::Add, {"zw", "cc"}, {"fz"}));
  body->results = {"fz"};
  Op fp = make_op(OpKind::FixedPoint, {"c"}, {"zstar"},
               {{"rule", std::string("fixed")}, {"max_iter", std::int64_t(80)}, {"tol", 1e-12}, {"like", std::string("c")}});
  fp.body = body;
  g.ops.push_back(fp);
  g.outputs = {"zstar"};
  const WeightStore w{{"W", tensor({2, 2}, {0.5, 0, 0, 0.25})}, {"one", tensor({1}, {1})}};
  const auto r = interpret(g, w, {{"x", tensor({1, 2}, {0, 2})}});
  check(r.values.at("zstar"), {1, 2}, {2, 4}, 1e-12);
  CHECK(r.fixed_points[0].op == "zstar");  // unnamed: its result's name
  CHECK(r.fixed_points[0].converged == std::vector<std::uint8_t>{1});

  // an outer value that is not a capture is not visible inside the body
  g.ops[1].body = std::make_shared<Region>(*body);
  g.ops[1].body->ops[1].inputs = {"zw", "x"};
  CHECK(error_of(g, w, {{"x", tensor({1, 2}, {0, 2})}}) ==
        "interpret: op #1 FixedPoint 'zstar' body op #1 Add 'fz': unknown value 'x'");
}

TEST_CASE("interpret: a FixedPoint in a body solves anew at each outer step, its captures those of that step") {
  // inner: w = 0.5 w + (c + 0.25 z), solved at the outer step's z: w* = 2 c + 0.5 z;
  // outer: z = 0.5 z + 0.5 w*(z) = 0.75 z + c: z* = 4 c
  Graph g;
  g.inputs = {decl("c", {1, 2})};
  g.weights = {decl("half", {1}), decl("quarter", {1})};
  auto inner = std::make_shared<Region>();
  inner->args = {"w", "cz"};
  inner->ops.push_back(make_op(OpKind::Mul, {"half", "w"}, {"hw"}));
  inner->ops.push_back(make_op(OpKind::Add, {"hw", "cz"}, {"fw"}));
  inner->results = {"fw"};
  auto outer = std::make_shared<Region>();
  outer->args = {"z", "cc"};
  outer->ops.push_back(make_op(OpKind::Mul, {"quarter", "z"}, {"qz"}));
  outer->ops.push_back(make_op(OpKind::Add, {"cc", "qz"}, {"cz"}));
  Op in_fp = make_op(OpKind::FixedPoint, {"cz"}, {"wstar"},
                     {{"rule", std::string("fixed")}, {"max_iter", std::int64_t(120)}, {"tol", 1e-12}, {"like", std::string("cz")}}, "inner");
  in_fp.body = inner;
  outer->ops.push_back(in_fp);
  outer->ops.push_back(make_op(OpKind::Mul, {"half", "z"}, {"hz"}));
  outer->ops.push_back(make_op(OpKind::Mul, {"half", "wstar"}, {"hws"}));
  outer->ops.push_back(make_op(OpKind::Add, {"hz", "hws"}, {"fz"}));
  outer->results = {"fz"};
  Op fp = make_op(OpKind::FixedPoint, {"c"}, {"zstar"},
                  {{"rule", std::string("relative")}, {"max_iter", std::int64_t(400)}, {"tol", 1e-12}, {"like", std::string("c")}}, "outer");
  fp.body = outer;
  g.ops.push_back(fp);
  g.outputs = {"zstar"};
  const WeightStore w{{"half", tensor({1}, {0.5})}, {"quarter", tensor({1}, {0.25})}};
  const auto r = interpret(g, w, {{"c", tensor({1, 2}, {1, -0.5})}});
  check(r.values.at("zstar"), {1, 2}, {4, -2}, 1e-10);
  REQUIRE(r.fixed_points.size() == 1);  // top-level FixedPoints only
  CHECK(r.fixed_points[0].op == "outer");
  CHECK(r.fixed_points[0].converged == std::vector<std::uint8_t>{1});
}

TEST_CASE("interpret: a value defined twice is an error naming the second op") {
  Graph g;
  g.inputs = {decl("x", {2})};
  g.ops.push_back(make_op(OpKind::Neg, {"x"}, {"y"}));
  g.ops.push_back(make_op(OpKind::Exp, {"x"}, {"y"}, {}, "again"));
  g.outputs = {"y"};
  CHECK(error_of(g, {}, {{"x", tensor({2}, {0, 1})}}) == "interpret: op #1 Exp 'again': value 'y' is already defined");
  g.ops[1].outputs = {"x"};  // an input's name
  CHECK(error_of(g, {}, {{"x", tensor({2}, {0, 1})}}) == "interpret: op #1 Exp 'again': value 'x' is already defined");
}

TEST_CASE("interpret: values freed after their last reader leave the outputs and the trace whole") {
  // y reads n twice (once late): n must live until then; every value is kept when tracing
  Graph g;
  g.inputs = {decl("x", {2})};
  g.ops.push_back(make_op(OpKind::Neg, {"x"}, {"n"}));
  g.ops.push_back(make_op(OpKind::Exp, {"n"}, {"e"}));
  g.ops.push_back(make_op(OpKind::Tanh, {"e"}, {"t"}));
  g.ops.push_back(make_op(OpKind::Add, {"t", "n"}, {"y"}));
  g.outputs = {"y", "e"};
  const std::map<std::string, Tensor> in{{"x", tensor({2}, {0, 1})}};
  const auto r = interpret(g, {}, in);
  check(r.values.at("y"), {2}, {std::tanh(1.0), std::tanh(std::exp(-1.0)) - 1});
  check(r.values.at("e"), {2}, {1, std::exp(-1.0)});
  InterpretOptions opt;
  opt.trace = true;
  const auto t = interpret(g, {}, in, opt);
  CHECK(t.values.size() == 5);
  check(t.values.at("t"), {2}, {std::tanh(1.0), std::tanh(std::exp(-1.0))});
}

TEST_CASE("interpret: trace returns every value") {
  Graph g;
  g.inputs = {decl("x", {2})};
  g.ops.push_back(make_op(OpKind::Neg, {"x"}, {"n"}));
  g.ops.push_back(make_op(OpKind::Exp, {"n"}, {"y"}));
  g.outputs = {"y"};
  const std::map<std::string, Tensor> in{{"x", tensor({2}, {0, 1})}};
  CHECK(interpret(g, {}, in).values.size() == 1);
  InterpretOptions opt;
  opt.trace = true;
  const auto r = interpret(g, {}, in, opt);
  CHECK(r.values.size() == 3);
  check(r.values.at("n"), {2}, {0, -1});
}

TEST_CASE("interpret: errors name the op") {
  Graph g;
  g.inputs = {decl("x", {1, 3}, {"B"})};
  g.weights = {decl("W", {2, 4})};
  g.ops.push_back(make_op(OpKind::Tanh, {"x"}, {"t"}));
  g.ops.push_back(make_op(OpKind::Linear, {"t", "W"}, {"y"}, {}, "proj"));
  g.outputs = {"y"};
  const WeightStore w{{"W", tensor({2, 4}, std::vector<double>(8, 1.0))}};
  CHECK(error_of(g, w, {{"x", tensor({1, 3}, {1, 2, 3})}}) ==
        "interpret: op #1 Linear 'proj': x [1, 3] and W [2, 4]: in dims differ");
}

TEST_CASE("interpret: an input that differs from its declaration is an error naming it") {
  Graph g;
  g.inputs = {decl("x", {0, 3}, {"B"}), decl("h", {0, 2}, {"B"})};
  g.ops.push_back(make_op(OpKind::Neg, {"x"}, {"y"}));
  g.outputs = {"y"};
  const std::string m1 = error_of(g, {}, {{"x", tensor({1, 4}, {1, 2, 3, 4})}, {"h", tensor({1, 2}, {0, 0})}});
  CHECK(m1.rfind("interpret: input 'x': declared f64[B, 3], got shape [1, 4]", 0) == 0);
  const std::string m2 = error_of(g, {}, {{"x", tensor({1, 3}, {1, 2, 3})}, {"h", tensor({2, 2}, {0, 0, 0, 0})}});
  CHECK(m2.rfind("interpret: input 'h': declared f64[B, 2], got shape [2, 2]: B is already 1", 0) == 0);
  CHECK(error_of(g, {}, {{"x", tensor({1, 3}, {1, 2, 3})}}) == "interpret: input 'h' is not given");
}

TEST_CASE("interpret: results do not depend on the thread count") {
  Graph g;
  g.inputs = {decl("x", {7, 5})};
  g.weights = {decl("W", {6, 5})};
  g.ops.push_back(make_op(OpKind::Linear, {"x", "W"}, {"h"}));
  g.ops.push_back(make_op(OpKind::Einsum, {"h", "h"}, {"y"}, {{"spec", std::string("bi,bj->bij")}}));
  g.outputs = {"y"};
  std::vector<double> xd(35), wd(30);
  for (int i = 0; i < 35; ++i) xd[i] = std::sin(0.7 * i);
  for (int i = 0; i < 30; ++i) wd[i] = std::cos(1.3 * i);
  const WeightStore w{{"W", tensor({6, 5}, wd)}};
  const std::map<std::string, Tensor> in{{"x", tensor({7, 5}, xd)}};
  InterpretOptions four;
  four.threads = 4;
  CHECK(interpret(g, w, in).values.at("y").data == interpret(g, w, in, four).values.at("y").data);
}
