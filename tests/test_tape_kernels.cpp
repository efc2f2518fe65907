// The training tape (models/autodiff.hpp) against the compiler's kernels (compiler/kernels.hpp and the
// op records of compiler/ops/) op by op (issue 46): a model is trained on the tape and run through the
// kernels, so every op both implement must compute the same values. Each table row builds small seeded
// operands in the tape's layout (2-D, sequences as rows b*L + t, frames as rows [H, W, C]), maps them to
// the kernels' tensors ([B, L, ...] row-major: the same doubles in the same order, only the shape
// differs) and compares every element to 1e-12 relative.
//
// Gradients are not checked here: tests/test_autodiff.cpp checks the gradient of every tape op below
// against central differences (relu inside its conv2d + add_channels + relu chain), and the kernels
// have none.
//
// Not here, as one side alone has them: Softmax, Clip, AvgPool2d, GatedRMSNorm, Reshape and
// CausalAttention (the kernels; the tape has at most a composition of its ops for them), gp_kl and
// poisson_nll (the tape). ssd is one fused op on the tape and three in the compiler (Einsum, Scan,
// Einsum: the lowering of compiler/import_config.cpp); its row compares the tape's op with that chain.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <iomanip>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "compiler/ir.hpp"
#include "compiler/kernels.hpp"
#include "compiler/op_def.hpp"
#include "models/autodiff.hpp"

namespace {

using aoc::ad::Mat;
using aoc::ad::Tape;
using aoc::ad::Var;
using aoc::ir::OpKind;
using aoc::ir::Tensor;
namespace kn = aoc::ir::kernels;

constexpr std::uint64_t kSeed = 46;  // the number: any fixed seed does
constexpr double kTol = 1e-12;
const std::string kWhere = "tape and kernels";

Mat uniform(std::mt19937_64& rng, int rows, int cols, double lo = -1.0, double hi = 1.0) {
  std::uniform_real_distribution<double> u(lo, hi);
  Mat m(rows, cols);
  for (Eigen::Index k = 0; k < m.size(); ++k) m.data()[k] = u(rng);
  return m;
}

Mat row(std::initializer_list<double> v) {
  Mat m(1, static_cast<Eigen::Index>(v.size()));
  std::copy(v.begin(), v.end(), m.data());
  return m;
}

// The tape's matrix as a kernel tensor: a row-major Mat's data is already the tensor's row-major data.
Tensor tensor(const Mat& m, kn::Dims shape) {
  REQUIRE(kn::numel(shape) == m.size());
  Tensor t;
  t.shape = std::move(shape);
  t.data.assign(m.data(), m.data() + m.size());
  return t;
}

// An elementwise op through its record's eval (they have no kernels:: function of their own), as the
// interpreter runs it.
Tensor record(OpKind kind, const std::vector<const Tensor*>& in) {
  aoc::ir::EvalCtx ctx;
  ctx.where = kWhere;
  const aoc::ir::Op op = aoc::ir::make_op(kind, std::vector<std::string>(in.size(), "x"), {"y"});
  std::vector<Tensor> out = aoc::ir::op_def(kind).eval(ctx, op, in);
  REQUIRE(out.size() == 1);
  return std::move(out[0]);
}

// One row of a table: the operands in the tape's layout, the op on the tape, and the kernel's
// version, which maps the same operands to the kernels' layout itself.
struct Case {
  std::string name;
  std::vector<Mat> in;
  std::function<Var(Tape&, const std::vector<Var>&)> tape;
  std::function<Tensor(const std::vector<Mat>&)> kernel;
  // A sum of products: the two sides add in different orders (Eigen's blocks, the kernels' fmadd
  // lanes), so an element that cancels to near zero keeps the rounding of its terms, not a rounding
  // of its own size. Its error is measured against the sum of its terms' magnitudes, which is the
  // tape's op on the operands' absolute values.
  bool sums = false;
};

Mat tape_value(const Case& c, bool absolute) {
  Tape t(false);
  std::vector<Var> vs;
  for (const Mat& m : c.in) vs.push_back(t.constant(absolute ? Mat(m.cwiseAbs()) : m));
  return t.value(c.tape(t, vs));
}

// Every element of the tape's value against the kernel's: |t - k| / max(|t|, |k|, scale).
void check_case(const Case& c) {
  INFO(c.name);
  const Mat want = tape_value(c, false);
  const Tensor got = c.kernel(c.in);
  REQUIRE(kn::numel(got.shape) == want.size());
  const Mat scale = c.sums ? tape_value(c, true) : Mat::Zero(want.rows(), want.cols());
  double worst = 0.0;
  Eigen::Index at = 0;
  for (Eigen::Index k = 0; k < want.size(); ++k) {
    const double a = want.data()[k], b = got.data[static_cast<std::size_t>(k)];
    const double den = std::max({std::abs(a), std::abs(b), std::abs(scale.data()[k])});
    const double rel = a == b ? 0.0 : den > 0 ? std::abs(a - b) / den : std::numeric_limits<double>::infinity();
    if (!(rel <= worst)) {  // a NaN on either side is the worst
      worst = std::isnan(rel) ? std::numeric_limits<double>::infinity() : rel;
      at = k;
    }
  }
  INFO("worst relative difference " << worst << " at element " << at << ": tape " << std::setprecision(17) << want.data()[at] << ", kernel "
                                    << got.data[static_cast<std::size_t>(at)] << " (of " << want.size() << ")");
  CHECK(worst <= kTol);
}

void check_all(const std::vector<Case>& table) {
  REQUIRE(!table.empty());
  for (const Case& c : table) check_case(c);
}

}  // namespace

TEST_CASE("tape and kernels: matmul, linear and conv2d agree, with and without bias") {
  std::mt19937_64 rng(kSeed);
  std::vector<Case> table;
  const int B = 2, L = 3;
  for (const int k : {1, 8, 13, 37}) {  // below, at and beyond the kernels' eight lanes
    table.push_back({"matmul, k = " + std::to_string(k), {uniform(rng, B * L, k), uniform(rng, k, 5)},
                     [](Tape& t, const std::vector<Var>& v) { return t.matmul(v[0], v[1]); },
                     [=](const std::vector<Mat>& m) {
                       return kn::matmul(tensor(m[0], {B, L, k}), tensor(m[1], {k, 5}), 1, kWhere);
                     },
                     true});
    // the tape's linear has no bias: the bias is a row added to every row
    table.push_back({"linear, in = " + std::to_string(k), {uniform(rng, B * L, k), uniform(rng, 4, k)},
                     [](Tape& t, const std::vector<Var>& v) { return t.linear(v[0], v[1]); },
                     [=](const std::vector<Mat>& m) {
                       return kn::linear(tensor(m[0], {B, L, k}), tensor(m[1], {4, k}), nullptr, 1, kWhere);
                     },
                     true});
    table.push_back({"linear with bias, in = " + std::to_string(k), {uniform(rng, B * L, k), uniform(rng, 4, k), uniform(rng, 1, 4)},
                     [](Tape& t, const std::vector<Var>& v) { return t.add(t.linear(v[0], v[1]), v[2]); },
                     [=](const std::vector<Mat>& m) {
                       const Tensor b = tensor(m[2], {4});
                       return kn::linear(tensor(m[0], {B, L, k}), tensor(m[1], {4, k}), &b, 1, kWhere);
                     },
                     true});
  }
  // frames [6, 7, 2] as B * L rows; the kernels read W [out, kh, kw, C], the tape the same doubles as
  // [out, kh*kw*C], and add the bias per channel with add_channels
  struct Geometry {
    int kh, kw, stride;
  };
  for (const Geometry g : {Geometry{3, 2, 1}, Geometry{3, 2, 2}, Geometry{3, 3, 3}, Geometry{1, 1, 1}, Geometry{6, 7, 1}})
    for (const bool bias : {false, true}) {
      const Tape::Conv2dShape s{.height = 6, .width = 7, .channels = 2, .kh = g.kh, .kw = g.kw, .stride = g.stride};
      const int out = 3;
      std::vector<Mat> in = {uniform(rng, B * L, 6 * 7 * 2), uniform(rng, out, g.kh * g.kw * 2)};
      if (bias) in.push_back(uniform(rng, 1, out));
      table.push_back({"conv2d " + std::to_string(g.kh) + "x" + std::to_string(g.kw) + " stride " + std::to_string(g.stride) +
                           (bias ? " with bias" : ""),
                       in,
                       [=](Tape& t, const std::vector<Var>& v) {
                         const Var y = t.conv2d(v[0], v[1], s);
                         return bias ? t.add_channels(y, v[2]) : y;
                       },
                       [=](const std::vector<Mat>& m) {
                         const Tensor b = bias ? tensor(m[2], {out}) : Tensor{};
                         const Tensor x = tensor(m[0], {B, L, 6, 7, 2}), W = tensor(m[1], {out, g.kh, g.kw, 2});
                         return kn::conv2d(x, W, bias ? &b : nullptr, g.stride, 1, kWhere);
                       },
                       true});
    }
  check_all(table);
}

TEST_CASE("tape and kernels: the elementwise ops agree with their records, large magnitudes included") {
  std::mt19937_64 rng(kSeed);
  // rows of [-4, 4] and a row where sigmoid, silu and softplus must not overflow or lose their tails:
  // |x| ~ 50 (exp(-50) ~ 2e-22, far below 1's rounding), around 37 (where 1 + exp(-x) rounds to 1) and
  // +-1e-9 (where log1p, not log, keeps softplus's digits). No input goes below -708, where exp's
  // result leaves the normal doubles: there the tape flushes sigmoid and SiLU to 0 on purpose and its
  // vectorised exp clamps, while the records keep std::exp's subnormals (a difference under 1e-307).
  Mat x(5, 8);
  x.topRows(4) = uniform(rng, 4, 8, -4.0, 4.0);
  x.row(4) = row({-50.0, -49.5, -37.25, -1e-9, 0.0, 1e-9, 37.25, 50.0});
  const Mat y = uniform(rng, 5, 8, -4.0, 4.0), r = uniform(rng, 1, 8, -4.0, 4.0), col = uniform(rng, 5, 1, -4.0, 4.0);
  std::vector<Case> table;
  using Unary = Var (Tape::*)(Var);
  const std::vector<std::tuple<const char*, Unary, OpKind>> unary = {
      {"tanh", &Tape::tanh, OpKind::Tanh}, {"sigmoid", &Tape::sigmoid, OpKind::Sigmoid}, {"silu", &Tape::silu, OpKind::SiLU},
      {"softplus", &Tape::softplus, OpKind::Softplus}, {"exp", &Tape::exp, OpKind::Exp}, {"neg", &Tape::neg, OpKind::Neg},
      {"relu", &Tape::relu, OpKind::Relu}};
  for (const auto& [name, op, kind] : unary)
    table.push_back({name, {x}, [op](Tape& t, const std::vector<Var>& v) { return (t.*op)(v[0]); },
                     [kind](const std::vector<Mat>& m) {
                       const Tensor a = tensor(m[0], {5, 8});
                       return record(kind, {&a});
                     }});
  using Binary = Var (Tape::*)(Var, Var);
  const std::vector<std::tuple<const char*, Binary, OpKind>> binary = {
      {"add", &Tape::add, OpKind::Add}, {"sub", &Tape::sub, OpKind::Sub}, {"mul", &Tape::mul, OpKind::Mul}};
  for (const auto& [name, op, kind] : binary) {
    // the same shape, and b a row broadcast over a's rows: the records' trailing-dim broadcasting of b [8]
    table.push_back({name, {x, y}, [op](Tape& t, const std::vector<Var>& v) { return (t.*op)(v[0], v[1]); },
                     [kind](const std::vector<Mat>& m) {
                       const Tensor a = tensor(m[0], {5, 8}), b = tensor(m[1], {5, 8});
                       return record(kind, {&a, &b});
                     }});
    table.push_back({std::string(name) + ", b a row", {x, r}, [op](Tape& t, const std::vector<Var>& v) { return (t.*op)(v[0], v[1]); },
                     [kind](const std::vector<Mat>& m) {
                       const Tensor a = tensor(m[0], {5, 8}), b = tensor(m[1], {8});
                       return record(kind, {&a, &b});
                     }});
  }
  // the tape's shorthands for what a graph writes as a binary op with a broadcast operand
  table.push_back({"scale as Mul by [1]", {x}, [](Tape& t, const std::vector<Var>& v) { return t.scale(v[0], -1.7); },
                   [](const std::vector<Mat>& m) {
                     const Tensor a = tensor(m[0], {5, 8}), s = tensor(row({-1.7}), {1});
                     return record(OpKind::Mul, {&a, &s});
                   }});
  table.push_back({"add_scalar as Add of [1]", {x}, [](Tape& t, const std::vector<Var>& v) { return t.add_scalar(v[0], 0.3); },
                   [](const std::vector<Mat>& m) {
                     const Tensor a = tensor(m[0], {5, 8}), s = tensor(row({0.3}), {1});
                     return record(OpKind::Add, {&a, &s});
                   }});
  table.push_back({"square as Mul of x by x", {x}, [](Tape& t, const std::vector<Var>& v) { return t.square(v[0]); },
                   [](const std::vector<Mat>& m) {
                     const Tensor a = tensor(m[0], {5, 8});
                     return record(OpKind::Mul, {&a, &a});
                   }});
  table.push_back({"mul_col as Mul by [5, 1]", {x, col}, [](Tape& t, const std::vector<Var>& v) { return t.mul_col(v[0], v[1]); },
                   [](const std::vector<Mat>& m) {
                     const Tensor a = tensor(m[0], {5, 8}), c = tensor(m[1], {5, 1});
                     return record(OpKind::Mul, {&a, &c});
                   }});
  check_all(table);
}

TEST_CASE("tape and kernels: rmsnorm, embedding, concat, split and the reductions agree") {
  std::mt19937_64 rng(kSeed);
  const int B = 2, L = 3, D = 7;
  std::vector<Case> table;
  // a zero row (the norm is 1/sqrt(eps) times nothing) and a row of |x| ~ 1e3, where eps is nothing
  Mat x = uniform(rng, B * L, D, -2.0, 2.0);
  x.row(1).setZero();
  x.row(4) *= 1e3;
  for (const double eps : {1e-5, 1e-2})
    table.push_back({"rmsnorm, eps " + std::to_string(eps), {x, uniform(rng, 1, D, 0.5, 1.5)},
                     [eps](Tape& t, const std::vector<Var>& v) { return t.rmsnorm(v[0], v[1], eps); },
                     [=](const std::vector<Mat>& m) { return kn::rmsnorm(tensor(m[0], {B, L, D}), tensor(m[1], {D}), eps, kWhere); }});
  // ids repeat and miss some rows of the table; the kernels read ids as doubles [B, L]
  std::vector<int> ids;
  std::uniform_int_distribution<int> pick(0, 5);
  for (int i = 0; i < B * L; ++i) ids.push_back(pick(rng));
  table.push_back({"embedding", {uniform(rng, 6, 4)}, [ids](Tape& t, const std::vector<Var>& v) { return t.embedding(v[0], ids); },
                   [=](const std::vector<Mat>& m) {
                     Tensor id;
                     id.shape = {B, L};
                     id.data.assign(ids.begin(), ids.end());
                     return kn::embedding(id, tensor(m[0], {6, 4}), kWhere);
                   }});
  for (const int axis : {-1, 2})
    table.push_back({"concat, axis " + std::to_string(axis), {uniform(rng, B * L, 2), uniform(rng, B * L, 3), uniform(rng, B * L, 1)},
                     [](Tape& t, const std::vector<Var>& v) { return t.concat_cols({v[0], v[1], v[2]}); },
                     [=](const std::vector<Mat>& m) {
                       const Tensor a = tensor(m[0], {B, L, 2}), b = tensor(m[1], {B, L, 3}), c = tensor(m[2], {B, L, 1});
                       return kn::concat({&a, &b, &c}, axis, kWhere);
                     }});
  // slice_cols is one result of a Split along the last axis
  const Mat wide = uniform(rng, B * L, 6);
  for (const auto& [piece, c0, n] : std::vector<std::tuple<int, int, int>>{{0, 0, 1}, {1, 1, 4}, {2, 5, 1}})
    table.push_back({"slice_cols as Split's result " + std::to_string(piece), {wide},
                     [c0, n](Tape& t, const std::vector<Var>& v) { return t.slice_cols(v[0], c0, n); },
                     [=](const std::vector<Mat>& m) { return kn::split(tensor(m[0], {B, L, 6}), {1, 4, 1}, -1, 3, kWhere)[piece]; }});
  table.push_back({"row_sum as Einsum blc->bl", {wide}, [](Tape& t, const std::vector<Var>& v) { return t.row_sum(v[0]); },
                   [=](const std::vector<Mat>& m) {
                     const Tensor a = tensor(m[0], {B, L, 6});
                     return kn::einsum("blc->bl", {&a}, 1, kWhere);
                   },
                   true});
  // the training loss and the evaluated one: the next token is row t's target, the last row of each
  // sequence has none (masked on the tape, not counted by the kernels' side)
  const int V = 5, Ls = 4;
  std::vector<int> tokens, targets;
  std::uniform_int_distribution<int> token(0, V - 1);
  for (int i = 0; i < B * Ls; ++i) tokens.push_back(token(rng));
  for (int i = 0; i < B * Ls; ++i) targets.push_back(i % Ls == Ls - 1 ? -1 : tokens[static_cast<std::size_t>(i + 1)]);
  table.push_back({"cross_entropy as next_token_cross_entropy", {uniform(rng, B * Ls, V, -3.0, 3.0)},
                   [targets](Tape& t, const std::vector<Var>& v) { return t.cross_entropy(v[0], targets); },
                   [=](const std::vector<Mat>& m) {
                     Tensor tok;
                     tok.shape = {B, Ls};
                     tok.data.assign(tokens.begin(), tokens.end());
                     const std::optional<double> ce = aoc::ir::next_token_cross_entropy(tensor(m[0], {B, Ls, V}), tok);
                     REQUIRE(ce);
                     return tensor(row({*ce}), {1});
                   }});
  check_all(table);
}

TEST_CASE("tape and kernels: shift_rows, conv1d_causal and ssd agree with Delay, Conv1dCausal and Scan") {
  std::mt19937_64 rng(kSeed);
  std::vector<Case> table;
  const int B = 2, C = 3;
  for (const int L : {4, 1}) {  // L = 1: nothing before any token
    table.push_back({"shift_rows as delay, L = " + std::to_string(L), {uniform(rng, B * L, C)},
                     [L](Tape& t, const std::vector<Var>& v) { return t.shift_rows(v[0], L); },
                     [=](const std::vector<Mat>& m) { return kn::delay(tensor(m[0], {B, L, C}), kWhere); }});
    // M positions of C channels per token (the tape's columns j use filter j % C, the kernels'
    // positions between L and C share channel c's taps); K > L reads only zeros before the block
    for (const int M : {1, 3})
      for (const int K : {1, 3, 6})
        for (const bool bias : {false, true}) {
          std::vector<Mat> in = {uniform(rng, B * L, M * C), uniform(rng, C, K)};
          if (bias) in.push_back(uniform(rng, 1, C));
          table.push_back({"conv1d_causal, L = " + std::to_string(L) + ", M = " + std::to_string(M) + ", K = " + std::to_string(K) +
                               (bias ? " with bias" : ""),
                           in,
                           [=](Tape& t, const std::vector<Var>& v) {
                             const Var y = t.conv1d_causal(v[0], v[1], L);
                             return bias ? t.add_channels(y, v[2]) : y;
                           },
                           [=](const std::vector<Mat>& m) {
                             const Tensor b = bias ? tensor(m[2], {C}) : Tensor{};
                             const Tensor xs = M == 1 ? tensor(m[0], {B, L, C}) : tensor(m[0], {B, L, M, C});
                             return kn::conv1d_causal(xs, tensor(m[1], {C, K}), bias ? &b : nullptr, kWhere);
                           },
                           true});
        }
    // the tape's fused selective scan against the compiler's lowering of it: the state input
    // delta x B (Einsum), the recurrence h_t = a_t h_{t-1} + u_t (Scan, a [B, L, H] broadcast over
    // [P, N]) and the readout C h (Einsum); a in (-1, 1), as a tanh transition gives
    const int H = 2, P = 3, N = 4;
    table.push_back({"ssd as Einsum, Scan, Einsum, L = " + std::to_string(L),
                     {uniform(rng, B * L, H, 0.1, 1.0), uniform(rng, B * L, H, -0.95, 0.95), uniform(rng, B * L, H * P),
                      uniform(rng, B * L, N), uniform(rng, B * L, N)},
                     [L](Tape& t, const std::vector<Var>& v) { return t.ssd(v[0], v[1], v[2], v[3], v[4], L); },
                     [=](const std::vector<Mat>& m) {
                       const Tensor delta = tensor(m[0], {B, L, H}), a = tensor(m[1], {B, L, H}), xh = tensor(m[2], {B, L, H, P});
                       const Tensor Bm = tensor(m[3], {B, L, N}), Cm = tensor(m[4], {B, L, N});
                       const Tensor u = kn::einsum("blh,bln,blhp->blhpn", {&delta, &Bm, &xh}, 1, kWhere);
                       const Tensor h = kn::scan(a, u, nullptr, 1, kWhere);
                       return kn::einsum("bln,blhpn->blhp", {&Cm, &h}, 1, kWhere);
                     },
                     true});
  }
  check_all(table);
}

TEST_CASE("tape and kernels: max_pool2d and upsample2d agree with MaxPool2d and Upsample2d") {
  std::mt19937_64 rng(kSeed);
  std::vector<Case> table;
  const int B = 2, L = 2;
  // frames as B * L rows, [B, L, H, W, C] for the kernels; 5 x 7 leaves a remainder at size 2 and 3
  const Tape::Grid g{.height = 5, .width = 7, .channels = 3};
  const Mat x = uniform(rng, B * L, 5 * 7 * 3);
  Mat ties = uniform(rng, B * L, 5 * 7 * 3, -2.0, 2.0);  // small integers: windows with equal largest values
  ties = ties.array().round().matrix();
  for (const auto& [what, in] : std::vector<std::pair<std::string, Mat>>{{"", x}, {", ties", ties}})
    for (const int size : {1, 2, 3, 5})
      table.push_back({"max_pool2d, size " + std::to_string(size) + what, {in},
                       [=](Tape& t, const std::vector<Var>& v) { return t.max_pool2d(v[0], g, size); },
                       [=](const std::vector<Mat>& m) { return kn::pool2d(tensor(m[0], {B, L, 5, 7, 3}), size, true, kWhere); }});
  for (const int scale : {1, 2, 3})
    table.push_back({"upsample2d, scale " + std::to_string(scale), {x},
                     [=](Tape& t, const std::vector<Var>& v) { return t.upsample2d(v[0], g, scale); },
                     [=](const std::vector<Mat>& m) { return kn::upsample2d(tensor(m[0], {B, L, 5, 7, 3}), scale, kWhere); }});
  check_all(table);
}
