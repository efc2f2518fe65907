// The reverse-mode autodiff tape (models/autodiff.hpp) and the optimiser (models/optim.hpp): every op's
// gradient against central differences (relative error < 1e-6), the sequence ops against their
// definitions, composites, the no-record tape, AdamW, the schedule, clipping and one-line shape errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "models/autodiff.hpp"
#include "models/optim.hpp"
#include "sim/error.hpp"

using namespace aoc::ad;

namespace {

constexpr double kTol = 1e-6;

Mat uniform(int rows, int cols, unsigned seed, double lo = -1.0, double hi = 1.0) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  Mat m(rows, cols);
  for (Eigen::Index k = 0; k < m.size(); ++k) m.data()[k] = u(g);
  return m;
}

Param param(const std::string& name, int rows, int cols, unsigned seed, double lo = -1.0, double hi = 1.0) {
  return Param{name, uniform(rows, cols, seed, lo, hi), Mat()};
}

// sum(y ⊙ R) with R fixed by y's shape, entries of magnitude in [0.5, 1.5] with random signs: a scalar
// whose gradient reaches every element of y with a size that central differences resolve.
Var weighted(Tape& t, Var y) {
  const Mat& v = t.value(y);
  Mat r = uniform(static_cast<int>(v.rows()), static_cast<int>(v.cols()), 1000u + 37u * v.rows() + v.cols(), 0.5, 1.5);
  std::mt19937 g(7u * v.rows() + v.cols());
  for (Eigen::Index k = 0; k < r.size(); ++k)
    if (g() & 1u) r.data()[k] = -r.data()[k];
  return t.sum(t.mul(y, t.constant(r)));
}

// Checks the gradient of f and that it is not vacuous (some gradient reaches every param).
void check_grad(const std::function<Var(Tape&)>& f, const std::vector<Param*>& ps) {
  const double err = grad_check(f, ps);
  INFO("max relative error " << err);
  CHECK(err < kTol);
  for (const Param* p : ps) {
    INFO(p->name);
    CHECK(p->grad.norm() > 0.0);
  }
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const aoc::Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("ad: matmul and linear gradients match central differences") {
  Param a = param("a", 3, 4, 1), b = param("b", 4, 2, 2), x = param("x", 5, 4, 3), W = param("W", 3, 4, 4);
  check_grad([&](Tape& t) { return weighted(t, t.matmul(t.leaf(a), t.leaf(b))); }, {&a, &b});
  check_grad([&](Tape& t) { return weighted(t, t.linear(t.leaf(x), t.leaf(W))); }, {&x, &W});
  Tape t;
  CHECK((t.value(t.linear(t.leaf(x), t.leaf(W))) - x.value * W.value.transpose()).norm() < 1e-14);
}

TEST_CASE("ad: add, sub and mul gradients match, same shape and row-broadcast") {
  Param a = param("a", 3, 4, 11), b = param("b", 3, 4, 12), r = param("r", 1, 4, 13);
  check_grad([&](Tape& t) { return weighted(t, t.add(t.leaf(a), t.leaf(b))); }, {&a, &b});
  check_grad([&](Tape& t) { return weighted(t, t.add(t.leaf(a), t.leaf(r))); }, {&a, &r});
  check_grad([&](Tape& t) { return weighted(t, t.sub(t.leaf(a), t.leaf(b))); }, {&a, &b});
  check_grad([&](Tape& t) { return weighted(t, t.sub(t.leaf(a), t.leaf(r))); }, {&a, &r});
  check_grad([&](Tape& t) { return weighted(t, t.mul(t.leaf(a), t.leaf(b))); }, {&a, &b});
  check_grad([&](Tape& t) { return weighted(t, t.mul(t.leaf(a), t.leaf(r))); }, {&a, &r});
  // the same leaf on both sides
  check_grad([&](Tape& t) {
    const Var v = t.leaf(a);
    return weighted(t, t.mul(v, v));
  }, {&a});
  Tape t;
  const Mat want = a.value.array().rowwise() * r.value.row(0).array();
  CHECK((t.value(t.mul(t.leaf(a), t.leaf(r))) - want).norm() == 0.0);
}

TEST_CASE("ad: scale, add_scalar, neg, square and exp gradients match") {
  Param a = param("a", 3, 4, 21);
  check_grad([&](Tape& t) { return weighted(t, t.scale(t.leaf(a), -1.7)); }, {&a});
  check_grad([&](Tape& t) { return weighted(t, t.add_scalar(t.leaf(a), 0.3)); }, {&a});
  check_grad([&](Tape& t) { return weighted(t, t.neg(t.leaf(a))); }, {&a});
  check_grad([&](Tape& t) { return weighted(t, t.square(t.leaf(a))); }, {&a});
  check_grad([&](Tape& t) { return weighted(t, t.exp(t.leaf(a))); }, {&a});
}

TEST_CASE("ad: tanh, sigmoid, silu and softplus gradients match") {
  Param a = param("a", 3, 5, 31, -3.0, 3.0);
  check_grad([&](Tape& t) { return weighted(t, t.tanh(t.leaf(a))); }, {&a});
  check_grad([&](Tape& t) { return weighted(t, t.sigmoid(t.leaf(a))); }, {&a});
  check_grad([&](Tape& t) { return weighted(t, t.silu(t.leaf(a))); }, {&a});
  check_grad([&](Tape& t) { return weighted(t, t.softplus(t.leaf(a))); }, {&a});
  Tape t;
  const Var v = t.leaf(a);
  const Mat s = a.value.unaryExpr([](double v) { return 1.0 / (1.0 + std::exp(-v)); });
  CHECK((t.value(t.sigmoid(v)) - s).norm() < 1e-14);
  CHECK((t.value(t.silu(v)) - Mat(a.value.array() * s.array())).norm() < 1e-14);
  CHECK((t.value(t.softplus(v)) - Mat(a.value.unaryExpr([](double v) { return std::log1p(std::exp(v)); }))).norm() < 1e-14);
}

TEST_CASE("ad: sigmoid, softplus and cross_entropy stay finite at large inputs") {
  Mat big(1, 4);
  big << -1000.0, -40.0, 40.0, 1000.0;
  Tape t;
  const Var v = t.constant(big);
  const Mat s = t.value(t.sigmoid(v)), sp = t.value(t.softplus(v)), si = t.value(t.silu(v));
  CHECK(s(0, 0) == 0.0);
  CHECK(s(0, 3) == 1.0);
  CHECK(sp(0, 0) == 0.0);
  CHECK(sp(0, 3) == 1000.0);
  CHECK(sp(0, 2) == Approx(40.0));
  CHECK(si(0, 0) == 0.0);
  CHECK(si(0, 3) == 1000.0);
  const double ce = t.value(t.cross_entropy(v, {0}))(0, 0);
  CHECK(ce == Approx(2000.0));
  CHECK(t.value(t.cross_entropy(v, {3}))(0, 0) == Approx(0.0).margin(1e-300));
}

TEST_CASE("ad: rmsnorm gradient matches for x and gain") {
  Param x = param("x", 4, 5, 41, -2.0, 2.0), g = param("g", 1, 5, 42, 0.5, 1.5);
  check_grad([&](Tape& t) { return weighted(t, t.rmsnorm(t.leaf(x), t.leaf(g))); }, {&x, &g});
  Tape t;
  const Mat y = t.value(t.rmsnorm(t.leaf(x), t.leaf(g), 1e-5));
  for (int i = 0; i < 4; ++i) {
    const double rms = std::sqrt(x.value.row(i).squaredNorm() / 5.0 + 1e-5);
    CHECK((y.row(i) - (x.value.row(i) / rms).cwiseProduct(g.value.row(0))).norm() < 1e-14);
  }
}

TEST_CASE("ad: slice_cols, concat_cols and embedding gradients match") {
  Param x = param("x", 3, 6, 51), y = param("y", 3, 2, 52), table = param("table", 5, 3, 53);
  check_grad([&](Tape& t) { return weighted(t, t.slice_cols(t.leaf(x), 1, 4)); }, {&x});
  check_grad([&](Tape& t) {
    const Var vx = t.leaf(x);
    // x appears twice: its slices' gradients add up
    return weighted(t, t.concat_cols({t.slice_cols(vx, 4, 2), t.leaf(y), vx}));
  }, {&x, &y});
  // ids repeat (1 three times) and miss row 4: its gradient is exactly zero
  const std::vector<int> ids = {1, 3, 1, 0, 2, 1};
  check_grad([&](Tape& t) { return weighted(t, t.embedding(t.leaf(table), ids)); }, {&table});
  CHECK(table.grad.row(4).norm() == 0.0);
  Tape t;
  const Mat e = t.value(t.embedding(t.leaf(table), ids));
  for (int i = 0; i < 6; ++i) CHECK(e.row(i) == table.value.row(ids[i]));
}

TEST_CASE("ad: shift_rows and conv1d_causal compute their definitions with B = 2") {
  const int B = 2, L = 4, C = 3;
  const Mat x = uniform(B * L, C, 61);
  Tape t;
  const Var vx = t.constant(x);
  const Mat sh = t.value(t.shift_rows(vx, L));
  for (int K : {1, 2, 4, 6}) {  // K > L: the taps beyond the block read zeros
    const Mat w = uniform(C, K, 63 + K);
    const Mat cv = t.value(t.conv1d_causal(vx, t.constant(w), L));
    for (int b = 0; b < B; ++b)
      for (int s = 0; s < L; ++s)
        for (int c = 0; c < C; ++c) {
          double want = 0.0;
          for (int k = 0; k < K; ++k) {
            const int src = s - K + 1 + k;
            if (src >= 0) want += w(c, k) * x(b * L + src, c);
          }
          CHECK(cv(b * L + s, c) == Approx(want).margin(1e-14));
        }
  }
  for (int b = 0; b < B; ++b)
    for (int c = 0; c < C; ++c)
      for (int s = 0; s < L; ++s) CHECK(sh(b * L + s, c) == (s == 0 ? 0.0 : x(b * L + s - 1, c)));
}

TEST_CASE("ad: ssd computes the selective scan's definition with B = 2, each sequence from a zero state") {
  const int B = 2, L = 4, H = 2, P = 3, N = 5;
  const Mat d = uniform(B * L, H, 64, 0.1, 1.0), a = uniform(B * L, H, 65, 0.2, 0.9), x = uniform(B * L, H * P, 66);
  const Mat Bm = uniform(B * L, N, 67), Cm = uniform(B * L, N, 68);
  Tape t;
  const Mat y = t.value(t.ssd(t.constant(d), t.constant(a), t.constant(x), t.constant(Bm), t.constant(Cm), L));
  REQUIRE(y.rows() == B * L);
  REQUIRE(y.cols() == H * P);
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h)
      for (int p = 0; p < P; ++p) {
        std::vector<double> state(N, 0.0);
        for (int s = 0; s < L; ++s) {
          const int r = b * L + s;
          double want = 0;
          for (int n = 0; n < N; ++n) {
            state[n] = a(r, h) * state[n] + d(r, h) * x(r, h * P + p) * Bm(r, n);
            want += Cm(r, n) * state[n];
          }
          CHECK(y(r, h * P + p) == Approx(want).margin(1e-14));
        }
      }
}

TEST_CASE("ad: shift_rows and conv1d_causal gradients match with B = 2") {
  const int B = 2, L = 3, C = 4;
  Param x = param("x", B * L, C, 71);
  Param w2 = param("w2", C, 2, 73), w4 = param("w4", C, 4, 74);
  // shift_rows: the last row of each block feeds nothing, its gradient is exactly zero
  check_grad([&](Tape& t) { return weighted(t, t.shift_rows(t.leaf(x), L)); }, {&x});
  CHECK(x.grad.row(L - 1).norm() == 0.0);
  CHECK(x.grad.row(2 * L - 1).norm() == 0.0);
  check_grad([&](Tape& t) { return weighted(t, t.conv1d_causal(t.leaf(x), t.leaf(w2), L)); }, {&x, &w2});
  check_grad([&](Tape& t) { return weighted(t, t.conv1d_causal(t.leaf(x), t.leaf(w4), L)); }, {&x, &w4});
}

TEST_CASE("ad: conv2d is the direct valid convolution of channels-last frames, at stride 1 and 2") {
  for (const int stride : {1, 2}) {
    const Tape::Conv2dShape sh{.height = 6, .width = 5, .channels = 2, .kh = 3, .kw = 2, .stride = stride};
    const Mat x = uniform(3, 6 * 5 * 2, 90 + stride), W = uniform(4, 3 * 2 * 2, 91);
    Tape t;
    const Mat y = t.value(t.conv2d(t.constant(x), t.constant(W), sh));
    REQUIRE(y.cols() == sh.out_h() * sh.out_w() * 4);
    CHECK(sh.out_h() == (stride == 1 ? 4 : 2));
    for (int n = 0; n < 3; ++n)
      for (int i = 0; i < sh.out_h(); ++i)
        for (int j = 0; j < sh.out_w(); ++j)
          for (int o = 0; o < 4; ++o) {
            double want = 0;
            for (int p = 0; p < 3; ++p)
              for (int q = 0; q < 2; ++q)
                for (int c = 0; c < 2; ++c) want += W(o, (p * 2 + q) * 2 + c) * x(n, ((i * stride + p) * 5 + j * stride + q) * 2 + c);
            CHECK(y(n, (i * sh.out_w() + j) * 4 + o) == Approx(want).margin(1e-13));
          }
  }
}

TEST_CASE("ad: conv2d, relu and add_channels gradients match, stride 2 included") {
  const Tape::Conv2dShape sh{.height = 5, .width = 6, .channels = 2, .kh = 3, .kw = 3, .stride = 2};
  Param x = param("x", 2, 5 * 6 * 2, 92), W = param("W", 3, 3 * 3 * 2, 93), b = param("b", 1, 3, 94);
  check_grad([&](Tape& t) { return weighted(t, t.relu(t.add_channels(t.conv2d(t.leaf(x), t.leaf(W), sh), t.leaf(b)))); }, {&x, &W, &b});
}

TEST_CASE("ad: conv1d_causal with fewer filters than columns shares each filter over the positions") {
  const int B = 2, L = 4, C = 2, reps = 3;
  Param x = param("x", B * L, C * reps, 95), w = param("w", C, 3, 96);
  Tape t;
  Mat wide(C * reps, 3);
  for (int r = 0; r < reps; ++r) wide.middleRows(r * C, C) = w.value;
  const Mat shared = t.value(t.conv1d_causal(t.constant(x.value), t.constant(w.value), L));
  const Mat full = t.value(t.conv1d_causal(t.constant(x.value), t.constant(wide), L));
  CHECK((shared - full).cwiseAbs().maxCoeff() == 0.0);
  check_grad([&](Tape& t2) { return weighted(t2, t2.conv1d_causal(t2.leaf(x), t2.leaf(w), L)); }, {&x, &w});
}

TEST_CASE("ad: max_pool2d keeps each window's largest and upsample2d repeats each pixel") {
  const Tape::Grid g{.height = 5, .width = 4, .channels = 2};
  const Mat x = uniform(2, 5 * 4 * 2, 97);
  Tape t;
  const Mat p = t.value(t.max_pool2d(t.constant(x), g, 2));
  REQUIRE(p.cols() == 2 * 2 * 2);  // floor(5 / 2) x 2, the last row of pixels dropped
  const Mat u = t.value(t.upsample2d(t.constant(x), g, 3));
  REQUIRE(u.cols() == 15 * 12 * 2);
  for (int n = 0; n < 2; ++n)
    for (int c = 0; c < 2; ++c) {
      for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 2; ++j) {
          double want = -1e300;
          for (int a = 0; a < 2; ++a)
            for (int b = 0; b < 2; ++b) want = std::max(want, x(n, ((2 * i + a) * 4 + 2 * j + b) * 2 + c));
          CHECK(p(n, (i * 2 + j) * 2 + c) == want);
        }
      for (int i = 0; i < 15; ++i)
        for (int j = 0; j < 12; ++j) CHECK(u(n, (i * 12 + j) * 2 + c) == x(n, ((i / 3) * 4 + j / 3) * 2 + c));
    }
}

TEST_CASE("ad: max_pool2d and upsample2d gradients match") {
  const Tape::Grid g{.height = 4, .width = 6, .channels = 3};
  Param x = param("x", 2, 4 * 6 * 3, 98);
  check_grad([&](Tape& t) { return weighted(t, t.max_pool2d(t.leaf(x), g, 2)); }, {&x});
  check_grad([&](Tape& t) { return weighted(t, t.upsample2d(t.leaf(x), g, 2)); }, {&x});
}

TEST_CASE("ad: gp_kl under an identity prior is the diagonal Gaussians' closed form") {
  const int B = 2, L = 5, D = 3;
  const Mat m = uniform(B * L, D, 99), v = uniform(B * L, D, 100);
  double want = 0;
  for (Eigen::Index k = 0; k < m.size(); ++k) want += 0.5 * (std::exp(v.data()[k]) + m.data()[k] * m.data()[k] - 1 - v.data()[k]);
  Tape t;
  CHECK(t.value(t.gp_kl(t.constant(m), t.constant(v), Mat::Identity(L, L), 0.0, L))(0, 0) == Approx(want).epsilon(1e-13));
}

TEST_CASE("ad: gp_kl's gradient matches under a correlated prior, where even the prior's marginals pay") {
  const int L = 4;
  Mat K(L, L);
  for (int i = 0; i < L; ++i)
    for (int j = 0; j < L; ++j) K(i, j) = 1.0 / (1.0 + (i - j) * (i - j)) + (i == j ? 1e-3 : 0.0);
  const Mat Kinv = K.inverse();
  const double logdet = std::log(K.determinant());
  // q with the prior's marginals still differs from it: q ignores the prior's correlations
  Tape t;
  const Mat marg = K.diagonal().array().log().matrix().replicate(1, 2);
  CHECK(t.value(t.gp_kl(t.constant(Mat::Zero(L, 2)), t.constant(marg), Kinv, logdet, L))(0, 0) > 0.01);
  CHECK(t.value(t.gp_kl(t.constant(Mat::Zero(L, 2)), t.constant(Mat::Zero(L, 2)), Mat::Identity(L, L), 0.0, L))(0, 0) == 0.0);
  Param m = param("m", 2 * L, 2, 101), v = param("v", 2 * L, 2, 102);
  check_grad([&](Tape& t2) { return t2.gp_kl(t2.leaf(m), t2.leaf(v), Kinv, logdet, L); }, {&m, &v});
}

TEST_CASE("ad: poisson_nll is the mean of r - y log r over the used rows, and its gradient matches") {
  Param r = param("r", 4, 3, 97, 0.2, 2.0);
  Mat y(4, 3);
  y << 0, 1, 2, 3, 0, 1, 5, 0, 0, 1, 1, 1;
  const std::vector<char> use{1, 0, 1, 1};
  Tape t;
  double want = 0;
  for (int i : {0, 2, 3})
    for (int j = 0; j < 3; ++j) want += r.value(i, j) - y(i, j) * std::log(r.value(i, j));
  CHECK(t.value(t.poisson_nll(t.constant(r.value), y, use))(0, 0) == Approx(want / 9).epsilon(1e-14));
  check_grad([&](Tape& t2) { return t2.poisson_nll(t2.leaf(r), y, use); }, {&r});
  CHECK(r.grad.row(1).norm() == 0.0);
}

TEST_CASE("ad: ssd gradients match for every operand with B = 2, and with L = 1") {
  const int B = 2, H = 2, P = 3, N = 4;
  for (int L : {3, 1}) {
    Param d = param("delta", B * L, H, 75, 0.1, 1.0), a = param("a", B * L, H, 76, 0.2, 0.9), x = param("x", B * L, H * P, 77);
    Param Bm = param("B", B * L, N, 78), Cm = param("C", B * L, N, 79);
    INFO("L " << L);
    const auto f = [&](Tape& t) { return weighted(t, t.ssd(t.leaf(d), t.leaf(a), t.leaf(x), t.leaf(Bm), t.leaf(Cm), L)); };
    if (L > 1) check_grad(f, {&d, &a, &x, &Bm, &Cm});
    else check_grad(f, {&d, &x, &Bm, &Cm});  // one row per sequence: a (the decay of the state before) reaches nothing
  }
}

TEST_CASE("ad: row_sum and mul_col gradients match") {
  Param x = param("x", 4, 3, 81), c = param("c", 4, 1, 82);
  check_grad([&](Tape& t) { return weighted(t, t.row_sum(t.leaf(x))); }, {&x});
  check_grad([&](Tape& t) { return weighted(t, t.mul_col(t.leaf(x), t.leaf(c))); }, {&x, &c});
}

TEST_CASE("ad: sum and mean gradients match") {
  Param x = param("x", 3, 4, 91);
  check_grad([&](Tape& t) { return t.sum(t.mul(t.leaf(x), t.leaf(x))); }, {&x});
  check_grad([&](Tape& t) { return t.mean(t.exp(t.leaf(x))); }, {&x});
  Tape t;
  CHECK(t.value(t.mean(t.leaf(x)))(0, 0) == Approx(x.value.mean()));
}

TEST_CASE("ad: cross_entropy gradient matches with masked targets, which count for nothing") {
  Param z = param("z", 5, 4, 101, -2.0, 2.0);
  const std::vector<int> targets = {2, -1, 0, 3, -100};
  check_grad([&](Tape& t) { return t.cross_entropy(t.leaf(z), targets); }, {&z});
  CHECK(z.grad.row(1).norm() == 0.0);
  CHECK(z.grad.row(4).norm() == 0.0);
  // the value: the mean over the 3 unmasked rows
  double want = 0.0;
  for (int i : {0, 2, 3}) {
    double se = 0.0;
    for (int j = 0; j < 4; ++j) se += std::exp(z.value(i, j));
    want += std::log(se) - z.value(i, targets[i]);
  }
  Tape t;
  CHECK(t.value(t.cross_entropy(t.leaf(z), targets))(0, 0) == Approx(want / 3.0).epsilon(1e-13));
  // every row masked: zero loss, zero gradient
  z.zero_grad();
  Tape t2;
  const Var l = t2.cross_entropy(t2.leaf(z), {-1, -1, -1, -1, -1});
  CHECK(t2.value(l)(0, 0) == 0.0);
  t2.backward(l);
  CHECK(z.grad.norm() == 0.0);
}

namespace {

// x U^T + b injected into 4 steps of z <- tanh(z W^T + u) from z = 0, then logits z V^T and a
// cross-entropy: a fixed-point unroll like the implicit models'.
struct Rnn {
  Param U = param("U", 5, 4, 111), b = param("b", 1, 5, 112), W = param("W", 5, 5, 113, -0.4, 0.4), V = param("V", 3, 5, 114);
  Mat x = uniform(3, 4, 115);
  Var loss(Tape& t) {
    const Var u = t.add(t.linear(t.constant(x), t.leaf(U)), t.leaf(b));
    const Var Wv = t.leaf(W);
    Var z = t.constant(Mat::Zero(3, 5));
    for (int k = 0; k < 4; ++k) z = t.tanh(t.add(t.linear(z, Wv), u));
    return t.cross_entropy(t.linear(z, t.leaf(V)), {0, 2, 1});
  }
  std::vector<Param*> params() { return {&U, &b, &W, &V}; }
};

// RMSNorm -> linear -> (sigmoid decay, softplus step, SiLU input, B, C) -> ssd over L = 3, B = 2.
struct Chain {
  Param x = param("x", 6, 4, 121, -2.0, 2.0), g = param("g", 1, 4, 122, 0.5, 1.5), W = param("W", 12, 4, 123);
  Var loss(Tape& t) {
    const Var p = t.linear(t.rmsnorm(t.leaf(x), t.leaf(g)), t.leaf(W));
    const Var a = t.sigmoid(t.slice_cols(p, 0, 2));
    const Var d = t.softplus(t.slice_cols(p, 2, 2));
    const Var v = t.silu(t.slice_cols(p, 4, 4));
    return weighted(t, t.ssd(d, a, v, t.slice_cols(p, 8, 2), t.slice_cols(p, 10, 2), 3));
  }
  std::vector<Param*> params() { return {&x, &g, &W}; }
};

}  // namespace

TEST_CASE("ad: a tanh fixed-point unroll of 4 steps differentiates end to end") {
  Rnn m;
  check_grad([&](Tape& t) { return m.loss(t); }, m.params());
}

TEST_CASE("ad: an RMSNorm, linear, SiLU, selective-scan chain differentiates end to end") {
  Chain m;
  check_grad([&](Tape& t) { return m.loss(t); }, m.params());
}

TEST_CASE("ad: a tape that does not record gives the same values, bit for bit, and refuses backward") {
  Rnn m;
  Tape rec(true), plain(false);
  const Var a = m.loss(rec), b = m.loss(plain);
  CHECK(rec.value(a)(0, 0) == plain.value(b)(0, 0));
  CHECK(rec.size() == plain.size());
  Chain c;
  Tape rec2(true), plain2(false);
  CHECK(rec2.value(c.loss(rec2))(0, 0) == plain2.value(c.loss(plain2))(0, 0));
  CHECK_FALSE(plain.recording());
  CHECK(error_of([&] { plain.backward(b); }).find("ad::backward") != std::string::npos);
  // run to run: the same gradients bit for bit
  for (Param* p : m.params()) p->zero_grad();
  rec.backward(a);
  std::vector<Mat> first;
  for (Param* p : m.params()) first.push_back(p->grad);
  for (Param* p : m.params()) p->zero_grad();
  Tape again;
  again.backward(m.loss(again));
  for (std::size_t i = 0; i < first.size(); ++i) CHECK(m.params()[i]->grad == first[i]);
}

TEST_CASE("ad: gradients accumulate across backward calls and leaves of the same param") {
  Param x = param("x", 2, 3, 131);
  Tape t;
  const Var s = t.sum(t.add(t.leaf(x), t.scale(t.leaf(x), 2.0)));  // d/dx = 3
  t.backward(s);
  CHECK((x.grad - Mat::Constant(2, 3, 3.0)).norm() == 0.0);
  t.backward(s);
  CHECK((x.grad - Mat::Constant(2, 3, 6.0)).norm() == 0.0);
  x.zero_grad();
  CHECK(x.grad.norm() == 0.0);
  // a constant takes no gradient and a loss of constants leaves the params alone
  Tape c;
  c.backward(c.sum(c.constant(x.value)));
  CHECK(x.grad.norm() == 0.0);
}

TEST_CASE("ad: AdamW's first step matches the hand computation and decay is decoupled") {
  Param p{"p", Mat(1, 3), Mat(1, 3)};
  p.value << 1.0, -2.0, 0.5;
  p.grad << 0.5, -0.1, 0.0;
  AdamW opt;
  opt.weight_decay = 0.01;
  const double lr = 0.1;
  const Mat p0 = p.value, g0 = p.grad;
  opt.step({&p}, lr);
  CHECK(opt.steps() == 1);
  // t = 1: m_hat = g, v_hat = g^2, so the update is lr * g / (|g| + eps) after the decay
  for (int j = 0; j < 3; ++j) {
    const double want = p0(0, j) * (1.0 - lr * 0.01) - lr * g0(0, j) / (std::abs(g0(0, j)) + 1e-8);
    CHECK(p.value(0, j) == Approx(want).epsilon(1e-13));
  }
  // the second step, by hand
  const Mat p1 = p.value;
  p.grad << -0.2, 0.3, 0.0;
  opt.step({&p}, lr);
  for (int j = 0; j < 3; ++j) {
    const double m = 0.9 * 0.1 * g0(0, j) + 0.1 * p.grad(0, j);
    const double v = 0.95 * 0.05 * g0(0, j) * g0(0, j) + 0.05 * p.grad(0, j) * p.grad(0, j);
    const double mh = m / (1.0 - 0.81), vh = v / (1.0 - 0.95 * 0.95);
    const double want = p1(0, j) * (1.0 - lr * 0.01) - lr * mh / (std::sqrt(vh) + 1e-8);
    CHECK(p.value(0, j) == Approx(want).epsilon(1e-12));
  }
}

TEST_CASE("ad: AdamW with a warm-up cosine schedule converges on a quadratic") {
  Param p = param("p", 2, 3, 141, -3.0, 3.0);
  const Mat c = uniform(2, 3, 142), w = uniform(2, 3, 143, 0.1, 10.0);  // badly scaled on purpose
  AdamW opt;
  const long long total = 1500;
  double loss = 0.0;
  for (long long s = 0; s < total; ++s) {
    p.zero_grad();
    Tape t;
    const Var l = t.sum(t.mul(t.square(t.sub(t.leaf(p), t.constant(c))), t.constant(w)));
    loss = t.value(l)(0, 0);
    t.backward(l);
    opt.step({&p}, warmup_cosine(s, total, 0.05, 0.1, 0.0));
  }
  INFO("final loss " << loss);
  CHECK((p.value - c).cwiseAbs().maxCoeff() < 1e-3);
  CHECK(opt.steps() == total);
}

TEST_CASE("ad: warmup_cosine rises linearly then falls along a cosine to the floor") {
  // total 100, warm-up 10 steps, peak 1, floor 0.1
  CHECK(warmup_cosine(0, 100, 0.1, 1.0) == Approx(0.1));
  CHECK(warmup_cosine(4, 100, 0.1, 1.0) == Approx(0.5));
  CHECK(warmup_cosine(9, 100, 0.1, 1.0) == Approx(1.0));
  CHECK(warmup_cosine(10, 100, 0.1, 1.0) == Approx(1.0));
  CHECK(warmup_cosine(55, 100, 0.1, 1.0) == Approx(0.55));
  CHECK(warmup_cosine(100, 100, 0.1, 1.0) == Approx(0.1));
  CHECK(warmup_cosine(500, 100, 0.1, 1.0) == Approx(0.1));
  CHECK(warmup_cosine(0, 100, 0.0, 2e-3, 0.0) == Approx(2e-3));
  CHECK(warmup_cosine(50, 100, 0.0, 2e-3, 0.0) == Approx(1e-3));
}

TEST_CASE("ad: clip_grad_norm scales the global norm down to max_norm and returns the norm before") {
  Param a{"a", Mat::Zero(1, 2), Mat(1, 2)}, b{"b", Mat::Zero(2, 1), Mat(2, 1)};
  a.grad << 3.0, 0.0;
  b.grad << 0.0, 4.0;  // global norm 5
  CHECK(clip_grad_norm({&a, &b}, 10.0) == Approx(5.0));
  CHECK(a.grad(0, 0) == 3.0);  // under the limit: untouched
  CHECK(clip_grad_norm({&a, &b}, 1.0) == Approx(5.0));
  CHECK(a.grad(0, 0) == Approx(0.6));
  CHECK(b.grad(1, 0) == Approx(0.8));
  CHECK(std::sqrt(a.grad.squaredNorm() + b.grad.squaredNorm()) == Approx(1.0));
}

TEST_CASE("ad: shape errors are one line naming the op and the shapes") {
  Tape t;
  const Var a = t.constant(Mat::Zero(2, 3)), b = t.constant(Mat::Zero(4, 5)), r = t.constant(Mat::Zero(1, 5));
  const Var s = t.constant(Mat::Zero(5, 3));
  struct Case {
    std::string op;
    std::function<void()> f;
  };
  const std::vector<Case> cases = {
      {"ad::matmul", [&] { t.matmul(a, b); }},
      {"ad::linear", [&] { t.linear(a, b); }},
      {"ad::add", [&] { t.add(a, r); }},
      {"ad::sub", [&] { t.sub(a, b); }},
      {"ad::mul", [&] { t.mul(a, b); }},
      {"ad::rmsnorm", [&] { t.rmsnorm(a, r); }},
      {"ad::slice_cols", [&] { t.slice_cols(a, 2, 2); }},
      {"ad::concat_cols", [&] { t.concat_cols({a, b}); }},
      {"ad::embedding", [&] { t.embedding(a, {0, 2}); }},
      {"ad::shift_rows", [&] { t.shift_rows(s, 2); }},
      {"ad::ssd", [&] { t.ssd(s, s, s, s, a, 5); }},
      {"ad::ssd", [&] { t.ssd(a, a, a, a, a, 3); }},
      {"ad::conv1d_causal", [&] { t.conv1d_causal(s, t.constant(Mat::Zero(3, 2)), 0); }},
      {"ad::conv1d_causal", [&] { t.conv1d_causal(s, t.constant(Mat::Zero(2, 2)), 5); }},
      {"ad::mul_col", [&] { t.mul_col(a, t.constant(Mat::Zero(3, 1))); }},
      {"ad::conv2d", [&] { t.conv2d(a, a, Tape::Conv2dShape{.height = 1, .width = 3, .channels = 1, .kh = 2, .kw = 1}); }},
      {"ad::conv2d", [&] { t.conv2d(a, b, Tape::Conv2dShape{.height = 1, .width = 3, .channels = 1, .kh = 1, .kw = 2}); }},
      {"ad::add_channels", [&] { t.add_channels(a, t.constant(Mat::Zero(1, 2))); }},
      {"ad::poisson_nll", [&] { t.poisson_nll(a, Mat::Zero(2, 3), {1}); }},
      {"ad::cross_entropy", [&] { t.cross_entropy(a, {0}); }},
      {"ad::cross_entropy", [&] { t.cross_entropy(a, {0, 3}); }},
      {"ad::backward", [&] { t.backward(a); }},
  };
  for (const Case& c : cases) {
    const std::string msg = error_of(c.f);
    INFO(msg);
    CHECK(msg.rfind(c.op + ":", 0) == 0);
    CHECK(msg.find('\n') == std::string::npos);
    CHECK(msg.find('[') != std::string::npos);
  }
  CHECK(error_of([&] { t.value(Var{99}); }).rfind("ad::value: Var 99", 0) == 0);
  CHECK(error_of([&] { t.matmul(a, b); }).find("[2, 3]") != std::string::npos);
  CHECK(error_of([&] { t.matmul(a, b); }).find("[4, 5]") != std::string::npos);
  Param p{"w", Mat::Zero(2, 2), Mat::Zero(1, 2)};
  AdamW opt;
  CHECK(error_of([&] { opt.step({&p}, 0.1); }).find("'w'") != std::string::npos);
}
