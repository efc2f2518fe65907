// The fast optical core (sim/core.hpp) against the readable staged iteration (sim/stages.hpp), what
// each twin switch acts on, the mean fallback, the ideal mode against the digital reference, the
// determinism of the threaded kernel, and the checks on programmed weights.
#include <omp.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "tests/support.hpp"
#include "sim/batch.hpp"
#include "sim/config.hpp"
#include "sim/core.hpp"
#include "sim/error.hpp"
#include "sim/hardware.hpp"
#include "sim/reference.hpp"
#include "sim/stages.hpp"

namespace {

using namespace aoc;
using namespace aoc::test;

MatrixXdR uniform(int rows, int cols, double lo, double hi, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> d(lo, hi);
  MatrixXdR m(rows, cols);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) m(r, c) = d(rng);
  return m;
}

std::vector<double> uniform_vec(int n, double lo, double hi, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> d(lo, hi);
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v) x = d(rng);
  return v;
}

// Weights and bias scaled like a torch Linear init, states spread over the sigmoid's range, inputs
// within the clip range.
struct Problem {
  MatrixXdR W, z, x, z_prev;
  Eigen::VectorXd bias;
};

Problem make_problem(int N, int B, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const double k = 1.0 / std::sqrt(static_cast<double>(N));
  Problem p;
  p.W = uniform(N, N, -k, k, rng);
  p.bias = uniform(N, 1, -k, k, rng).col(0);
  p.z = uniform(B, N, -3.0, 3.0, rng);
  p.x = uniform(B, N, -1.2, 1.2, rng);
  p.z_prev = uniform(B, N, -3.0, 3.0, rng);
  return p;
}

template <class T>
MatrixXdR core_step(const Hardware& hw, const CoreConfig& cfg, const Problem& p, bool use_prev = false) {
  OpticalCore<T> core(hw, cfg);
  core.load_weights(p.W, p.bias);
  const Batch<T> inj = core.injection(Batch<T>::from(p.x));
  const Batch<T> z = Batch<T>::from(p.z), zp = Batch<T>::from(p.z_prev);
  Batch<T> out;
  core.step(z, inj, use_prev ? &zp : nullptr, out);
  return out.to_double();
}

MatrixXdR staged_step(const Hardware& hw, const CoreConfig& cfg, const Problem& p, bool use_prev = false) {
  return twin_step_stages(hw, cfg, p.W, p.bias, p.z, p.x, use_prev ? &p.z_prev : nullptr).step_output;
}

double max_abs_diff(const MatrixXdR& a, const MatrixXdR& b) {
  REQUIRE(a.rows() == b.rows());
  REQUIRE(a.cols() == b.cols());
  return (a - b).cwiseAbs().maxCoeff();
}

// The fast core in both precisions against the staged iteration on one configuration.
void check_core_matches_stages(const Hardware& hw, const CoreConfig& cfg, int N, std::uint64_t seed,
                               bool use_prev = false) {
  const Problem p = make_problem(N, 9, seed);
  const MatrixXdR ref = staged_step(hw, cfg, p, use_prev);
  REQUIRE(ref.allFinite());
  SECTION("OpticalCore<double> within 1e-12") {
    const double err = max_abs_diff(core_step<double>(hw, cfg, p, use_prev), ref);
    INFO("max abs error " << err);
    CHECK(err <= 1e-12);
  }
  SECTION("OpticalCore<float> within 1e-5") {
    const double err = max_abs_diff(core_step<float>(hw, cfg, p, use_prev), ref);
    INFO("max abs error " << err);
    CHECK(err <= 1e-5);
  }
}

bool same(const MatrixXdR& a, const MatrixXdR& b) {
  return a.rows() == b.rows() && a.cols() == b.cols() && (a - b).cwiseAbs().maxCoeff() == 0.0;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// The fast core equals the staged twin iteration

TEST_CASE("core: the fast core agrees with the staged twin iteration on the 48-variable machine with its defaults") {
  check_core_matches_stages(hw48(), CoreConfig::twin_defaults(hw48()), 48, 101);
}

TEST_CASE("core: the optimiser's comparator and walls agree with the staged twin iteration on mixed binary and continuous channels") {
  CoreConfig cfg = CoreConfig::twin_defaults(hw48());
  cfg.nonlinearity = Nonlinearity::Ising;
  cfg.ising_level = 0.2;
  cfg.binary.assign(48, 1);
  for (int j = 0; j < 48; j += 3) cfg.binary[static_cast<size_t>(j)] = 0;  // every third channel continuous
  cfg.wall = 1.0;
  cfg.gamma = 0.9;
  check_core_matches_stages(hw48(), cfg, 48, 105, true);
}

TEST_CASE("core: the walls keep every state of a step within them") {
  CoreConfig cfg = CoreConfig::twin_defaults(hw48());
  cfg.nonlinearity = Nonlinearity::Ising;
  cfg.wall = 0.5;
  const Problem p = make_problem(48, 9, 106);
  const MatrixXdR out = core_step<double>(hw48(), cfg, p);
  CHECK(out.cwiseAbs().maxCoeff() <= 0.5);
  CHECK(out.cwiseAbs().maxCoeff() == 0.5);  // the step reaches them: they clip something
}

TEST_CASE("core: the fast core agrees with the staged twin iteration on the 48-variable machine with PBS crosstalk on") {
  CoreConfig cfg = CoreConfig::twin_defaults(hw48());
  cfg.switches.pbs_crosstalk = true;
  check_core_matches_stages(hw48(), cfg, 48, 102);
}

TEST_CASE("core: the fast core agrees with the staged twin iteration on the 48-variable machine with every switch off") {
  check_core_matches_stages(hw48(), CoreConfig::twin_all_off(hw48()), 48, 103);
}

TEST_CASE("core: the fast core agrees with the staged twin iteration on the 16-variable machine with its defaults") {
  check_core_matches_stages(hw16(), CoreConfig::twin_defaults(hw16()), 16, 104);
}

TEST_CASE("core: the fast core agrees with the staged twin iteration on the 16-variable machine with the quadratic PBS leak on") {
  CoreConfig cfg = CoreConfig::twin_defaults(hw16());
  cfg.switches.pbs_crosstalk = true;
  check_core_matches_stages(hw16(), cfg, 16, 105);
}

TEST_CASE("core: the fast core agrees with the staged twin iteration for 24 variables on the 48-variable machine (mean fallback)") {
  check_core_matches_stages(hw48(), CoreConfig::twin_defaults(hw48()), 24, 106);
}

TEST_CASE("core: the fast core agrees with the staged twin iteration for 20 variables on the 16-variable machine with PBS on") {
  CoreConfig cfg = CoreConfig::twin_defaults(hw16());
  cfg.switches.pbs_crosstalk = true;
  check_core_matches_stages(hw16(), cfg, 20, 107);
}

TEST_CASE("core: the fast core agrees with the staged twin iteration when the gain is max|W| (normalise_matrix false)") {
  CoreConfig cfg = CoreConfig::twin_defaults(hw48());
  cfg.gain = GainMode::MaxAbs;
  check_core_matches_stages(hw48(), cfg, 48, 108);
}

TEST_CASE("core: the fast core agrees with the staged twin iteration when beta is given per output channel") {
  std::mt19937_64 rng(109);
  CoreConfig cfg = CoreConfig::twin_defaults(hw48());
  cfg.beta = uniform_vec(48, 8.0, 30.0, rng);
  check_core_matches_stages(hw48(), cfg, 48, 110);
}

TEST_CASE("core: the fast core agrees with the staged twin iteration when alpha is given per channel") {
  std::mt19937_64 rng(111);
  CoreConfig cfg = CoreConfig::twin_defaults(hw48());
  cfg.alpha = uniform_vec(48, 0.1, 0.9, rng);
  check_core_matches_stages(hw48(), cfg, 48, 112);
}

TEST_CASE("core: the fast core agrees with the staged twin iteration with gamma momentum and a previous state") {
  CoreConfig cfg = CoreConfig::twin_defaults(hw48());
  cfg.gamma = 0.3;
  check_core_matches_stages(hw48(), cfg, 48, 113, /*use_prev=*/true);
}

TEST_CASE("core: with gamma momentum and no previous state the fast core treats the previous state as zeros") {
  CoreConfig cfg = CoreConfig::twin_defaults(hw48());
  cfg.gamma = 0.3;
  const Problem p = make_problem(48, 5, 114);
  const MatrixXdR without_prev = core_step<double>(hw48(), cfg, p, false);
  CHECK(max_abs_diff(without_prev, staged_step(hw48(), cfg, p, false)) <= 1e-12);
  // gamma*z more than without momentum
  CoreConfig no_gamma = cfg;
  no_gamma.gamma.reset();
  CHECK(max_abs_diff(without_prev - core_step<double>(hw48(), no_gamma, p), 0.3 * p.z) <= 1e-12);
}

// ---------------------------------------------------------------------------------------------
// Each switch acts where it should

namespace {

struct SwitchCase {
  const char* name;
  bool Switches::*flag;
  // the first stage that changes: 0 fan-in, 1 SLM weights, 2 the chain after the VMM
  int first_stage;
};

const SwitchCase kSwitches[] = {
    {"input_efficiencies", &Switches::input_efficiencies, 0},
    {"weight_distortion", &Switches::weight_distortion, 1},
    {"output_efficiencies", &Switches::output_efficiencies, 2},
    {"pd_crosstalk", &Switches::pd_crosstalk, 2},
    {"pbs_crosstalk", &Switches::pbs_crosstalk, 2},
    {"slm_darkness", &Switches::slm_darkness, 2},
};

void check_switches(const Hardware& hw) {
  CoreConfig on = CoreConfig::twin_defaults(hw);
  on.switches = Switches{true, true, true, true, true, true};
  const int N = hw.channels;
  const Problem p = make_problem(N, 6, 200 + static_cast<std::uint64_t>(N));
  const StepStages a = twin_step_stages(hw, on, p.W, p.bias, p.z, p.x);
  for (const SwitchCase& sc : kSwitches) {
    INFO(hw.name << ": switching off " << sc.name);
    CoreConfig off = on;
    off.switches.*(sc.flag) = false;
    const StepStages b = twin_step_stages(hw, off, p.W, p.bias, p.z, p.x);
    // the step output changes, in the fast core as much as in the staged iteration
    CHECK_FALSE(same(a.step_output, b.step_output));
    CHECK(max_abs_diff(core_step<double>(hw, on, p), core_step<double>(hw, off, p)) > 1e-9);
    // nothing before the stage it acts on changes
    CHECK(same(a.after_tanh, b.after_tanh));
    CHECK(same(a.after_led_pos, b.after_led_pos));
    CHECK(same(a.after_led_neg, b.after_led_neg));
    const bool fanin_same = same(a.after_fanin_pos, b.after_fanin_pos) && same(a.after_fanin_neg, b.after_fanin_neg);
    const bool slm_same = same(a.W_pos_distorted_norm, b.W_pos_distorted_norm) && same(a.W_neg_distorted_norm, b.W_neg_distorted_norm);
    const bool vmm_same = same(a.after_vmm_chain_pos, b.after_vmm_chain_pos) && same(a.after_vmm_chain_neg, b.after_vmm_chain_neg);
    switch (sc.first_stage) {
      case 0:
        CHECK_FALSE(same(a.after_fanin_pos, b.after_fanin_pos));
        CHECK_FALSE(same(a.after_fanin_neg, b.after_fanin_neg));
        CHECK(slm_same);  // the SLM transmission does not depend on the fan-in
        CHECK_FALSE(vmm_same);
        break;
      case 1:
        CHECK(fanin_same);
        CHECK_FALSE(same(a.W_pos_distorted_norm, b.W_pos_distorted_norm));
        CHECK_FALSE(same(a.W_neg_distorted_norm, b.W_neg_distorted_norm));
        CHECK_FALSE(vmm_same);
        break;
      default:
        CHECK(fanin_same);
        CHECK(slm_same);
        CHECK_FALSE(vmm_same);
        break;
    }
    CHECK_FALSE(same(a.after_closed_loop, b.after_closed_loop));
  }
}

}  // namespace

TEST_CASE("core: on the 48-variable machine each twin switch changes the step output and first acts on its own stage") {
  check_switches(hw48());
}

TEST_CASE("core: on the 16-variable machine each twin switch changes the step output and first acts on its own stage") {
  check_switches(hw16());
}

TEST_CASE("core: the SLM-darkness switch has no effect when photodetector crosstalk is off") {
  for (const Hardware* hw : {&hw48(), &hw16()}) {
    INFO(hw->name);
    CoreConfig on = CoreConfig::twin_defaults(*hw);
    on.switches.pd_crosstalk = false;
    on.switches.slm_darkness = true;
    CoreConfig off = on;
    off.switches.slm_darkness = false;
    const Problem p = make_problem(hw->channels, 6, 300);
    CHECK(same(staged_step(*hw, on, p), staged_step(*hw, off, p)));
    CHECK(same(core_step<double>(*hw, on, p), core_step<double>(*hw, off, p)));
  }
}

TEST_CASE("core: the 48-variable PBS leak adds channel j's source light to output j, scaled by the TIA gain even with output efficiencies off") {
  const Hardware& hw = hw48();
  CoreConfig cfg = CoreConfig::twin_all_off(hw);
  cfg.switches.pbs_crosstalk = true;
  const Problem p = make_problem(48, 4, 310);
  const StepStages s = twin_step_stages(hw, cfg, p.W, p.bias, p.z, p.x);
  const double g = cfg.scale / 48.0;
  Eigen::VectorXd kp(48), kn(48), kp_no_tia(48);
  for (int j = 0; j < 48; ++j) {
    kp(j) = hw.gain_pos[j] * hw.pbs_neg_to_pos[j];  // "negative_to_positive" pairs with the positive path
    kn(j) = hw.gain_neg[j] * hw.pbs_pos_to_neg[j];
    kp_no_tia(j) = hw.pbs_neg_to_pos[j];
  }
  const MatrixXdR pos = (s.after_fanin_pos * s.W_pos_distorted_norm + s.after_fanin_pos * kp.asDiagonal()) * g;
  const MatrixXdR neg = (s.after_fanin_neg * s.W_neg_distorted_norm + s.after_fanin_neg * kn.asDiagonal()) * g;
  CHECK(max_abs_diff(s.after_vmm_chain_pos, pos) <= 1e-14);
  CHECK(max_abs_diff(s.after_vmm_chain_neg, neg) <= 1e-14);
  // without the TIA gain it would be measurably different
  const MatrixXdR pos_no_tia = (s.after_fanin_pos * s.W_pos_distorted_norm + s.after_fanin_pos * kp_no_tia.asDiagonal()) * g;
  CHECK(max_abs_diff(s.after_vmm_chain_pos, pos_no_tia) > 1e-8);
}

TEST_CASE("core: the SLM darkness is subtracted only when the calibration applies per channel (the twin's mean-fallback quirk)") {
  // 24 variables on the 48-variable machine: the PD crosstalk uses y, not y - darkness.
  CoreConfig on = CoreConfig::twin_defaults(hw48());
  CoreConfig off = on;
  off.switches.slm_darkness = false;
  const Problem p = make_problem(24, 6, 301);
  CHECK(same(staged_step(hw48(), on, p), staged_step(hw48(), off, p)));
  // ...while at the machine's own size it matters
  const Problem q = make_problem(48, 6, 302);
  CHECK_FALSE(same(staged_step(hw48(), on, q), staged_step(hw48(), off, q)));
}

TEST_CASE("core: without the closed-loop correction the balanced output is exactly the positive minus the negative path") {
  CoreConfig with = CoreConfig::twin_defaults(hw48());
  CoreConfig without = with;
  without.closed_loop = false;
  const Problem p = make_problem(48, 6, 400);
  const StepStages a = twin_step_stages(hw48(), with, p.W, p.bias, p.z, p.x);
  const StepStages b = twin_step_stages(hw48(), without, p.W, p.bias, p.z, p.x);
  const MatrixXdR balanced = b.after_vmm_chain_pos - b.after_vmm_chain_neg;
  CHECK(same(b.after_closed_loop, balanced));
  CHECK_FALSE(same(a.after_closed_loop, a.after_vmm_chain_pos - a.after_vmm_chain_neg));
  CHECK(max_abs_diff(a.step_output, b.step_output) > 1e-3);
  // the fast core follows the switch too
  CHECK(max_abs_diff(core_step<double>(hw48(), without, p), b.step_output) <= 1e-12);
}

TEST_CASE("core: the 16-variable machine has no closed-loop correction at all") {
  REQUIRE_FALSE(hw16().closed_loop.has_value());
  REQUIRE(hw48().closed_loop.has_value());
  CoreConfig with = CoreConfig::twin_defaults(hw16());
  CoreConfig without = with;
  without.closed_loop = false;
  const Problem p = make_problem(16, 6, 401);
  const StepStages a = twin_step_stages(hw16(), with, p.W, p.bias, p.z, p.x);
  CHECK(same(a.after_closed_loop, a.after_vmm_chain_pos - a.after_vmm_chain_neg));
  CHECK(same(a.step_output, staged_step(hw16(), without, p)));
  CHECK(same(core_step<double>(hw16(), with, p), core_step<double>(hw16(), without, p)));
}

TEST_CASE("core: with input_clip false an injection x + b beyond ±1.3 passes through unclipped") {
  CoreConfig clip = CoreConfig::twin_defaults(hw48());
  CoreConfig noclip = clip;
  noclip.input_clip = false;
  REQUIRE(hw48().clip_lo == -1.3);
  REQUIRE(hw48().clip_hi == 1.3);
  std::mt19937_64 rng(500);
  Problem p = make_problem(48, 4, 501);
  p.x = uniform(4, 48, -3.0, 3.0, rng);
  MatrixXdR sum = p.x.rowwise() + p.bias.transpose();
  const MatrixXdR clipped = sum.cwiseMax(-1.3).cwiseMin(1.3);
  REQUIRE((sum - clipped).cwiseAbs().maxCoeff() > 1.0);  // the inputs do reach beyond the clip
  // the staged iteration: the outputs differ by exactly what the clip removes
  CHECK(max_abs_diff(staged_step(hw48(), noclip, p) - staged_step(hw48(), clip, p), sum - clipped) <= 1e-12);
  // the fast core's injection
  for (const bool on : {true, false}) {
    INFO("input_clip " << on);
    OpticalCore<double> core(hw48(), on ? clip : noclip);
    core.load_weights(p.W, p.bias);
    CHECK(max_abs_diff(core.injection(Batch<double>::from(p.x)).to_double(), on ? clipped : sum) <= 1e-15);
  }
  CHECK(max_abs_diff(core_step<double>(hw48(), noclip, p), staged_step(hw48(), noclip, p)) <= 1e-12);
}

// ---------------------------------------------------------------------------------------------
// The mean fallback

TEST_CASE("core: with as many variables as channels the fan-in and SLM calibration apply per channel") {
  const Hardware& hw = hw48();
  const Problem p = make_problem(48, 5, 600);
  const StepStages s = twin_step_stages(hw, CoreConfig::twin_defaults(hw), p.W, p.bias, p.z, p.x);
  for (int j = 0; j < 48; ++j) {
    INFO("channel " << j);
    CHECK((s.after_fanin_pos.col(j) - s.after_led_pos.col(j) * hw.fan_in_pos[j]).cwiseAbs().maxCoeff() <= 1e-15);
    CHECK((s.after_fanin_neg.col(j) - s.after_led_neg.col(j) * hw.fan_in_neg[j]).cwiseAbs().maxCoeff() <= 1e-15);
  }
  // the calibration does vary: channel 8's input LED is dark on this machine
  CHECK(hw.fan_in_pos[8] == 0.0);
  CHECK(s.after_fanin_pos.col(8).cwiseAbs().maxCoeff() == 0.0);
  CHECK(s.after_led_pos.col(8).cwiseAbs().maxCoeff() > 0.0);
}

TEST_CASE("core: with a size other than the machine's, each calibration vector is replaced by its mean (24 on aoc-48)") {
  const Hardware& hw = hw48();
  const int N = 24;
  const Problem p = make_problem(N, 5, 601);
  const StepStages s = twin_step_stages(hw, CoreConfig::twin_defaults(hw), p.W, p.bias, p.z, p.x);
  auto mean = [](const std::vector<double>& v) {
    double acc = 0;
    for (double x : v) acc += x;
    return acc / static_cast<double>(v.size());
  };
  const double fp = mean(hw.fan_in_pos), fn = mean(hw.fan_in_neg);
  CHECK((s.after_fanin_pos - s.after_led_pos * fp).cwiseAbs().maxCoeff() <= 1e-14);
  CHECK((s.after_fanin_neg - s.after_led_neg * fn).cwiseAbs().maxCoeff() <= 1e-14);
  // per-channel values would differ: the first channels' fan-in is far from the mean
  CHECK(std::abs(hw.fan_in_pos[0] - fp) > 0.1);
  // SLM distortion with the mean quadratic of every column
  const double m = p.W.cwiseAbs().maxCoeff();
  double q[2][3] = {};
  for (int side = 0; side < 2; ++side) {
    const auto& qs = side == 0 ? hw.slm_pos : hw.slm_neg;
    for (const Quad& c : qs)
      for (int k = 0; k < 3; ++k) q[side][k] += c[static_cast<size_t>(k)] / static_cast<double>(qs.size());
  }
  double err = 0;
  for (int i = 0; i < N; ++i)
    for (int j = 0; j < N; ++j) {
      const double wp = std::max(p.W(i, j), 0.0) / m, wn = std::max(-p.W(i, j), 0.0) / m;
      err = std::max(err, std::abs(s.W_pos_distorted_norm(i, j) - (q[0][0] * wp * wp + q[0][1] * wp + q[0][2])));
      err = std::max(err, std::abs(s.W_neg_distorted_norm(i, j) - (q[1][0] * wn * wn + q[1][1] * wn + q[1][2])));
    }
  CHECK(err <= 1e-15);
}

// ---------------------------------------------------------------------------------------------
// Ideal mode

TEST_CASE("core: ideal mode of OpticalCore<double> equals the digital reference loop within 1e-12") {
  const Hardware& hw = hw48();
  for (const int N : {48, 24, 7}) {
    INFO("N = " << N);
    std::mt19937_64 rng(700 + static_cast<std::uint64_t>(N));
    const MatrixXdR W = uniform(N, N, -1.0, 1.0, rng);
    const Eigen::VectorXd bias = uniform(N, 1, -0.5, 0.5, rng).col(0);
    const MatrixXdR x = uniform(11, N, -2.5, 2.5, rng);  // beyond ±1.3: neither loop clips
    const MatrixXdR z = uniform(11, N, -3.0, 3.0, rng);
    const double alpha = 0.35, beta = 0.8;
    OpticalCore<double> core(hw, CoreConfig::ideal(alpha, beta));
    core.load_weights(W, bias);
    const ReferenceLoop ref(W, bias, {alpha}, {beta});
    const Batch<double> xb = Batch<double>::from(x), zb = Batch<double>::from(z);
    const Batch<double> inj_core = core.injection(xb), inj_ref = ref.injection(xb);
    CHECK(max_abs_diff(inj_core.to_double(), inj_ref.to_double()) == 0.0);
    Batch<double> out_core, out_ref;
    core.step(zb, inj_core, nullptr, out_core);
    ref.step(zb, inj_ref, out_ref);
    const double err = max_abs_diff(out_core.to_double(), out_ref.to_double());
    INFO("max abs error " << err);
    CHECK(err <= 1e-12);
    // and it is the ideal loop written out here
    const MatrixXdR expect = alpha * z + beta * (z.array().tanh().matrix() * W) + (x.rowwise() + bias.transpose());
    CHECK(max_abs_diff(out_ref.to_double(), expect) <= 1e-12);
  }
}

// ---------------------------------------------------------------------------------------------
// Determinism of the threaded kernel

namespace {

template <class T>
Batch<T> step_with_threads(const OpticalCore<T>& core, const Batch<T>& z, const Batch<T>& inj, const Batch<T>& zp, int threads) {
  const int saved = omp_get_max_threads();
  omp_set_num_threads(threads);
  Batch<T> out;
  core.step(z, inj, &zp, out);
  omp_set_num_threads(saved);
  return out;
}

template <class T>
void check_thread_independence() {
  CoreConfig cfg = CoreConfig::twin_defaults(hw48());
  cfg.gamma = 0.2;
  const Problem p = make_problem(48, 300, 800);
  OpticalCore<T> core(hw48(), cfg);
  core.load_weights(p.W, p.bias);
  const Batch<T> z = Batch<T>::from(p.z), zp = Batch<T>::from(p.z_prev), inj = core.injection(Batch<T>::from(p.x));
  const Batch<T> one = step_with_threads(core, z, inj, zp, 1);
  const Batch<T> two = step_with_threads(core, z, inj, zp, 2);
  REQUIRE(one.data.size() == two.data.size());
  REQUIRE(one.rows == 300);
  CHECK(std::memcmp(one.data.data(), two.data.data(), one.data.size() * sizeof(T)) == 0);
  CHECK(one.to_double().allFinite());
}

template <class T>
void check_split_independence() {
  CoreConfig cfg = CoreConfig::twin_defaults(hw48());
  cfg.gamma = 0.2;
  const int B = 300, N = 48;
  const Problem p = make_problem(N, B, 801);
  OpticalCore<T> core(hw48(), cfg);
  core.load_weights(p.W, p.bias);
  const Batch<T> zp_whole = Batch<T>::from(p.z_prev);
  Batch<T> whole;
  core.step(Batch<T>::from(p.z), core.injection(Batch<T>::from(p.x)), &zp_whole, whole);
  REQUIRE(whole.rows == B);
  for (const int chunk : {1, 7, 64, 129}) {
    INFO("chunks of " << chunk << " rows");
    int mismatched_rows = 0;
    for (int r0 = 0; r0 < B; r0 += chunk) {
      const int len = std::min(chunk, B - r0);
      const Batch<T> z = Batch<T>::from(p.z.middleRows(r0, len));
      const Batch<T> zp = Batch<T>::from(p.z_prev.middleRows(r0, len));
      const Batch<T> inj = core.injection(Batch<T>::from(p.x.middleRows(r0, len)));
      Batch<T> part;
      core.step(z, inj, &zp, part);
      REQUIRE(part.rows == len);
      for (int r = 0; r < len; ++r)
        mismatched_rows += std::memcmp(part.row(r), whole.row(r0 + r), sizeof(T) * static_cast<size_t>(N)) != 0;
    }
    CHECK(mismatched_rows == 0);
  }
}

}  // namespace

TEST_CASE("core: OpticalCore<float> results are bit-identical with one thread and with two") {
  check_thread_independence<float>();
}

TEST_CASE("core: OpticalCore<double> results are bit-identical with one thread and with two") {
  check_thread_independence<double>();
}

TEST_CASE("core: OpticalCore<float> rows are bit-identical whether the batch is stepped at once or in chunks of 1, 7, 64 and 129") {
  check_split_independence<float>();
}

TEST_CASE("core: OpticalCore<double> rows are bit-identical whether the batch is stepped at once or in chunks of 1, 7, 64 and 129") {
  check_split_independence<double>();
}

// ---------------------------------------------------------------------------------------------
// Weights that cannot be programmed

TEST_CASE("core: load_weights rejects NaN weights") {
  const Problem p = make_problem(48, 1, 900);
  for (const double bad : {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity()}) {
    MatrixXdR W = p.W;
    W(3, 5) = bad;
    OpticalCore<double> core(hw48(), CoreConfig::twin_defaults(hw48()));
    CHECK_THROWS_AS(core.load_weights(W, p.bias), Error);
    OpticalCore<float> coref(hw48(), CoreConfig::twin_defaults(hw48()));
    CHECK_THROWS_AS(coref.load_weights(W, p.bias), Error);
  }
  OpticalCore<double> core(hw48(), CoreConfig::twin_defaults(hw48()));
  CHECK_NOTHROW(core.load_weights(p.W, p.bias));
}

TEST_CASE("core: load_weights rejects a matrix that is not square") {
  std::mt19937_64 rng(901);
  const MatrixXdR W = uniform(48, 47, -1, 1, rng);
  OpticalCore<double> core(hw48(), CoreConfig::twin_defaults(hw48()));
  CHECK_THROWS_AS(core.load_weights(W, Eigen::VectorXd::Zero(47)), Error);
  CHECK_THROWS_AS(core.load_weights(W, Eigen::VectorXd::Zero(48)), Error);
}

TEST_CASE("core: load_weights rejects a bias of the wrong length") {
  const Problem p = make_problem(48, 1, 902);
  OpticalCore<double> core(hw48(), CoreConfig::twin_defaults(hw48()));
  CHECK_THROWS_AS(core.load_weights(p.W, Eigen::VectorXd::Zero(47)), Error);
  CHECK_THROWS_AS(core.load_weights(p.W, Eigen::VectorXd::Zero(49)), Error);
  CHECK_NOTHROW(core.load_weights(p.W, Eigen::VectorXd::Zero(48)));
}

TEST_CASE("core: load_weights rejects an all-zero matrix") {
  OpticalCore<double> core(hw48(), CoreConfig::twin_defaults(hw48()));
  CHECK_THROWS_AS(core.load_weights(MatrixXdR::Zero(48, 48), Eigen::VectorXd::Zero(48)), Error);
  OpticalCore<double> ideal(hw48(), CoreConfig::ideal(0.5, 1.0));
  CHECK_THROWS_AS(ideal.load_weights(MatrixXdR::Zero(8, 8), Eigen::VectorXd::Zero(8)), Error);
}
