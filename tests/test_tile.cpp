// The optical tile (sim/tile.hpp), the one model of the optics: what a read computes, and the
// statistics of each noise source, grouped as programming-time, per-read and time-correlated.
// The same sources are then checked through each path that uses the tile: the loop core
// (tests/test_noise.cpp), compiled programs and hardware-aware training (below).
#include <catch2/catch.hpp>

#include <cmath>
#include <complex>
#include <optional>
#include <random>

#include "compiler/passes.hpp"
#include "runtime/backend/backend.hpp"
#include "sim/isa.hpp"
#include "sim/programming.hpp"
#include "sim/tile.hpp"
#include "tests/graph_support.hpp"
#include "tests/support.hpp"

using namespace aoc;
using namespace aoc::test;

namespace {

constexpr int K = 24, M = 20;

MatrixXdR weights(std::uint64_t seed = 3) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  return MatrixXdR::NullaryExpr(K, M, [&] { return u(rng) / std::sqrt(double(K)); });
}

CoreConfig linear_chain() {
  CoreConfig c = CoreConfig::twin_defaults(hw48());
  c.gain = GainMode::Explicit;
  c.beta = {1.0};
  c.led = LedModel::Linear;
  c.closed_loop = false;
  return c;
}

TileNoise only(double NoiseSpec::*field, double level, double drift_time_us = 1e6) {
  TileNoise n;
  n.spec.led_bias = 0.06;
  n.spec.drift_time_us = drift_time_us;
  n.spec.*field = level;
  n.seed = 17;
  n.stream = 5;
  return n;
}

// Reads of one input t (the same every row) at `rows` slots and the given iteration: rows x M.
struct Reader {
  std::unique_ptr<OpticalTile<double>> tile;
  Reader(Optics optics, const TileNoise* noise, const MatrixXdR& W = weights()) {
    tile = std::make_unique<OpticalTile<double>>(hw48(), linear_chain(), optics);
    if (noise) tile->set_noise(*noise);
    tile->program(W, 3, 5);
  }
  MatrixXdR read(const Eigen::RowVectorXd& t, int rows, int iteration = 0, int slot0 = 0) const {
    const int ldi = tile->ld_in(), ldo = tile->ld_out();
    AlignedVector<double> in(static_cast<size_t>(rows) * ldi, 0.0), out(static_cast<size_t>(rows) * ldo), scratch(tile->scratch_size(rows));
    for (int r = 0; r < rows; ++r)
      for (int j = 0; j < K; ++j) in[static_cast<size_t>(r) * ldi + j] = t(j);
    std::vector<int> slots(rows);
    for (int r = 0; r < rows; ++r) slots[r] = slot0 + r;
    tile->read(in.data(), rows, StepContext{iteration, slots.data()}, 0, kern::Epilogue<double>{}, out.data(), scratch.data());
    MatrixXdR y(rows, M);
    for (int r = 0; r < rows; ++r)
      for (int j = 0; j < M; ++j) y(r, j) = out[static_cast<size_t>(r) * ldo + j];
    return y;
  }
};

Eigen::RowVectorXd input() { return Eigen::RowVectorXd::LinSpaced(K, -0.9, 0.8); }

double var_of(const Eigen::VectorXd& v) { return (v.array() - v.mean()).square().sum() / double(v.size() - 1); }

}  // namespace

TEST_CASE("tile: ideal optics without noise reads t W") {
  const Reader r(Optics::Ideal, nullptr);
  const MatrixXdR y = r.read(input(), 3);
  const Eigen::RowVectorXd expect = input() * weights();
  for (int i = 0; i < 3; ++i) CHECK((y.row(i) - expect).cwiseAbs().maxCoeff() < 1e-12);
}

TEST_CASE("tile: calibrated optics is the machine's chain for the tile at its place in the core") {
  const Reader r(Optics::Calibrated, nullptr);
  const MatrixXdR y = r.read(input(), 1);
  // the whole core programmed with the block at (3, 5), the other LEDs dark
  MatrixXdR core = MatrixXdR::Zero(48, 48);
  core.block(3, 5, K, M) = weights();
  MatrixXdR drive = MatrixXdR::Zero(1, 48);
  drive.block(0, 3, 1, K) = input();
  const MatrixXdR g = optical_chain(hw48(), linear_chain(), core, drive, drive);
  CHECK((y.row(0) - g.block(0, 5, 1, M)).cwiseAbs().maxCoeff() < 1e-12);
  CHECK((y.row(0) - input() * weights()).cwiseAbs().maxCoeff() > 1e-3);  // the chain is not ideal
}

namespace {

// Reads of rows of inputs through a float tile with calibrated optics, its light map in float or
// in half precision.
MatrixXdR read_float(const MatrixXdR& W, const MatrixXdR& t, bool half) {
  OpticalTile<float> tile(hw48(), linear_chain(), Optics::Calibrated);
  tile.set_light_map(half ? LightMap::F16 : LightMap::F32);
  tile.program(W, 0, 0);
  const int rows = static_cast<int>(t.rows()), ldi = tile.ld_in(), ldo = tile.ld_out();
  AlignedVector<float> in(static_cast<size_t>(rows) * ldi, 0.0f), out(static_cast<size_t>(rows) * ldo), scratch(tile.scratch_size(rows));
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < t.cols(); ++j) in[static_cast<size_t>(r) * ldi + j] = static_cast<float>(t(r, j));
  tile.read(in.data(), rows, StepContext{}, 0, kern::Epilogue<float>{}, out.data(), scratch.data());
  MatrixXdR y(rows, W.cols());
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < W.cols(); ++j) y(r, j) = out[static_cast<size_t>(r) * ldo + j];
  return y;
}

}  // namespace

TEST_CASE("tile: a half-precision light map reads within its rounding of the float map, every row and column") {
  // 40 LEDs x 46 detectors (a partial panel of light columns), 5 rows (a block of 4 and a single)
  std::mt19937_64 rng(8);
  std::uniform_real_distribution<double> u(-1, 1);
  const MatrixXdR W = MatrixXdR::NullaryExpr(40, 46, [&] { return u(rng) / std::sqrt(40.0); });
  const MatrixXdR t = MatrixXdR::NullaryExpr(5, 40, [&] { return u(rng); });
  const MatrixXdR full = read_float(W, t, false), half = read_float(W, t, true);
  // each light value is a sum of 40 products of one rounding (2^-11 relative) each, then the chain
  const double scale = full.cwiseAbs().maxCoeff();
  CHECK((half - full).cwiseAbs().maxCoeff() < 2e-3 * scale);
  CHECK((half - full).cwiseAbs().maxCoeff() > 0);  // it is a different map
}

TEST_CASE("tile: a half-precision light map is for float tiles, chosen before programming") {
  OpticalTile<double> d(hw48(), linear_chain(), Optics::Ideal);
  CHECK_THROWS_WITH(d.set_light_map(LightMap::F16), Catch::Contains("needs float products"));
  OpticalTile<float> f(hw48(), linear_chain(), Optics::Ideal);
  f.program(weights());
  CHECK_THROWS_WITH(f.set_light_map(LightMap::F16), Catch::Contains("before programming"));
}

TEST_CASE("tile: an automatic light map is half precision above 1 MiB in float, float below, double in a double tile") {
  const auto programmed_half = [](auto tile, int n) {
    tile.set_light_map(LightMap::Auto);
    tile.program(MatrixXdR::Constant(n, n, 0.5));
    return tile.half_light_map();
  };
  // ideal optics: a map of 2 n x n values; 2 x 352 x 352 floats are 0.95 MiB, 2 x 368 x 368 1.03 MiB
  CHECK_FALSE(programmed_half(OpticalTile<float>(hw48(), linear_chain(), Optics::Ideal), 48));
  CHECK_FALSE(programmed_half(OpticalTile<float>(hw48(), linear_chain(), Optics::Ideal), 352));
  CHECK(programmed_half(OpticalTile<float>(hw48(), linear_chain(), Optics::Ideal), 368));
  CHECK_FALSE(programmed_half(OpticalTile<double>(hw48(), linear_chain(), Optics::Ideal), 368));
}

TEST_CASE("tile: a tile whose LEDs and detectors sit on different channels reads the machine's chain") {
  // LEDs 0..23 and detectors 26..45: no detector on a channel of the tile's LEDs
  CoreConfig cfg = linear_chain();
  cfg.switches.pbs_crosstalk = true;
  OpticalTile<double> tile(hw48(), cfg, Optics::Calibrated);
  tile.program(weights(), 0, 26);
  AlignedVector<double> in(tile.ld_in(), 0.0), out(tile.ld_out()), scratch(tile.scratch_size(1));
  for (int j = 0; j < K; ++j) in[j] = input()(j);
  const int slot = 0;
  tile.read(in.data(), 1, StepContext{0, &slot}, 0, kern::Epilogue<double>{}, out.data(), scratch.data());
  MatrixXdR core = MatrixXdR::Zero(48, 48);
  core.block(0, 26, K, M) = weights();
  MatrixXdR drive = MatrixXdR::Zero(1, 48);
  drive.block(0, 0, 1, K) = input();
  const MatrixXdR g = optical_chain(hw48(), cfg, core, drive, drive);
  for (int j = 0; j < M; ++j) CHECK(out[j] == Approx(g(0, 26 + j)).margin(1e-12));
}

TEST_CASE("tile: the chain factored at the detectors is the whole chain probed with unit drives, on both machines") {
  for (const Hardware* hw : {&hw48(), &hw16()}) {
    const int C = hw->channels, k = C / 2, m = C / 2 + 1, in0 = 2, out0 = C / 3;
    INFO(hw->name);
    CoreConfig cfg = CoreConfig::twin_defaults(*hw);
    cfg.switches = Switches{true, true, true, true, true, true};  // every non-ideality of the chain
    MatrixXdR core = MatrixXdR::Zero(C, C);
    std::mt19937_64 rng(9);
    std::uniform_real_distribution<double> u(-1, 1);
    for (int i = 0; i < k; ++i)
      for (int j = 0; j < m; ++j) core(in0 + i, out0 + j) = u(rng);
    const FactoredChain f = factor_optical_chain(*hw, cfg, core, in0, k, out0, m);
    CHECK(f.Q.size() == (hw == &hw16() ? 2 * k * m : 0));  // the 16-variable machine's beam splitters leak densely
    const MatrixXdR F = f.folded();
    // the chain at zero drives, and with each LED of the tile lit alone on either path
    MatrixXdR pos = MatrixXdR::Zero(2 * k + 1, C), neg = MatrixXdR::Zero(2 * k + 1, C);
    for (int i = 0; i < k; ++i) pos(1 + i, in0 + i) = 1, neg(1 + k + i, in0 + i) = 1;
    const MatrixXdR g = optical_chain(*hw, cfg, core, pos, neg);
    for (int j = 0; j < m; ++j) CHECK(f.c(j) == Approx(g(0, out0 + j)).margin(1e-12));
    for (int i = 0; i < 2 * k; ++i)
      for (int j = 0; j < m; ++j) CHECK(F(i, j) == Approx(g(1 + i, out0 + j) - g(0, out0 + j)).margin(1e-12));
  }
}

TEST_CASE("tile: shot noise has the variance of the photons each detector receives and grows as they fall") {
  // drives of one sign: every LED lit above its bias (a drive below -bias emits no light)
  const Eigen::RowVectorXd t = Eigen::RowVectorXd::LinSpaced(K, 0.05, 0.9);
  const Reader clean(Optics::Ideal, nullptr);
  const MatrixXdR y0 = clean.read(t, 1);
  double prev = 0;
  for (double P : {1e6, 1e4, 1e2}) {
    const TileNoise n = only(&NoiseSpec::photons_per_sample, P);
    const Reader r(Optics::Ideal, &n);
    const MatrixXdR y = r.read(t, 4000);
    for (int j : {0, 7, 19}) {
      // light on detector j: every LED's bias plus its drive through |W| / max|W| on its path
      const MatrixXdR W = weights();
      const double m = W.cwiseAbs().maxCoeff();
      double light = 0;
      for (int i = 0; i < K; ++i) light += (0.06 + t(i)) * std::abs(W(i, j)) / m;
      const double expect = m * m * light * 0.06 * K / P;
      const double v = var_of(y.col(j).array() - y0(0, j));
      INFO("P " << P << " channel " << j);
      CHECK(std::abs(v / expect - 1) < 5 * std::sqrt(2.0 / 4000));
    }
    const double v0 = var_of(y.col(0));
    CHECK(v0 > prev * 50);  // 100x fewer photons: 100x the variance
    prev = v0;
  }
}

TEST_CASE("tile: the receiver's electrons add to the shot noise in the light's units, and fall against the signal as the light grows") {
  const Eigen::RowVectorXd t = Eigen::RowVectorXd::LinSpaced(K, 0.05, 0.9);
  const Reader clean(Optics::Ideal, nullptr);
  const MatrixXdR y0 = clean.read(t, 1);
  const MatrixXdR W = weights();
  const double m = W.cwiseAbs().maxCoeff();
  for (double P : {1e4, 1e6}) {
    TileNoise n = only(&NoiseSpec::photons_per_sample, P);
    n.spec.receiver_electrons = 30;
    const Reader r(Optics::Ideal, &n);
    const MatrixXdR y = r.read(t, 4000);
    const double u = 0.06 * K / P;  // the light of one detected photon (or electron)
    for (int j : {0, 7, 19}) {
      double light = 0;
      for (int i = 0; i < K; ++i) light += (0.06 + t(i)) * std::abs(W(i, j)) / m;
      const double expect = m * m * (light * u + 30.0 * 30.0 * u * u);
      const double v = var_of(y.col(j).array() - y0(0, j));
      INFO("P " << P << " channel " << j << " receiver share " << 900 * u / (light + 900 * u));
      CHECK(std::abs(v / expect - 1) < 5 * std::sqrt(2.0 / 4000));
    }
  }
}

TEST_CASE("tile: receiver noise has the set rms and is drawn afresh every iteration") {
  const TileNoise n = only(&NoiseSpec::thermal_sigma, 0.01);
  const Reader r(Optics::Ideal, &n), clean(Optics::Ideal, nullptr);
  const MatrixXdR y0 = clean.read(input(), 1), a = r.read(input(), 4000, 0), b = r.read(input(), 4000, 1);
  const Eigen::VectorXd da = a.col(3).array() - y0(0, 3), db = b.col(3).array() - y0(0, 3);
  CHECK(std::abs(std::sqrt(var_of(da)) / 0.01 - 1) < 5 / std::sqrt(2.0 * 4000));
  const double corr = ((da.array() - da.mean()) * (db.array() - db.mean())).sum() / (da.size() - 1) / std::sqrt(var_of(da) * var_of(db));
  CHECK(std::abs(corr) < 5 / std::sqrt(4000.0));
}

TEST_CASE("tile: LED intensity noise scales with each LED's light") {
  const TileNoise n = only(&NoiseSpec::rin_sigma, 0.01);
  const Reader r(Optics::Ideal, &n), clean(Optics::Ideal, nullptr);
  const MatrixXdR y0 = clean.read(input(), 1), y = r.read(input(), 4000);
  // out_j = sum_i (1 + rin eps_i) [(b + t_i) W+_ij - (b + t_i) W-_ij] - b (W+ - W-)_ij rin eps_i = ... + rin eps_i (b + t_i) W_ij
  const MatrixXdR W = weights();
  double expect = 0;
  for (int i = 0; i < K; ++i) expect += std::pow(0.01 * (0.06 + input()(i)) * W(i, 2), 2);
  const double v = var_of(y.col(2).array() - y0(0, 2));
  CHECK(std::abs(v / expect - 1) < 5 * std::sqrt(2.0 / 4000));
}

TEST_CASE("tile: the SLM pattern stays fixed within a programming and changes with the next") {
  const TileNoise n = only(&NoiseSpec::slm_fixed_pattern_sigma, 0.02);
  Reader r(Optics::Ideal, &n);
  const Reader clean(Optics::Ideal, nullptr);
  const MatrixXdR a = r.read(input(), 3, 0, 0), b = r.read(input(), 3, 9, 100), y0 = clean.read(input(), 1);
  CHECK(a.row(0) == a.row(2));
  CHECK(a.row(0) == b.row(1));
  CHECK((a.row(0) - y0.row(0)).cwiseAbs().maxCoeff() > 1e-4);
  r.tile->program(weights(), 3, 5);
  CHECK(r.tile->programmings() == 2);
  CHECK((r.read(input(), 1).row(0) - a.row(0)).cwiseAbs().maxCoeff() > 1e-5);
}

TEST_CASE("tile: write-verify writes a pixel again until its transmission is within the tolerance") {
  TileNoise n = only(&NoiseSpec::slm_fixed_pattern_sigma, 0.02);
  n.verify_tolerance = 0.005, n.verify_rounds = 64;  // a write passes with probability 0.2: 64 rounds leave ~1e-6 failing
  const Reader verified(Optics::Ideal, &n), again(Optics::Ideal, &n), clean(Optics::Ideal, nullptr);
  const TileNoise raw = only(&NoiseSpec::slm_fixed_pattern_sigma, 0.02);
  const Reader unverified(Optics::Ideal, &raw);
  const MatrixXdR y0 = clean.read(input(), 1), a = verified.read(input(), 1), b = again.read(input(), 1), u = unverified.read(input(), 1);
  CHECK(a == b);  // the writes again are keyed draws: the same seed, the same chip
  CHECK(verified.tile->rewrites() > 2 * K * M / 2);  // most of the 2 K M pixels fail their first write
  CHECK(unverified.tile->rewrites() == 0);
  // each pixel of each path within 0.5 % of its transmission: the product's error is bounded by it
  for (int j = 0; j < M; ++j) {
    double bound = 0;
    for (int i = 0; i < K; ++i) bound += 0.005 * std::abs(0.06 + input()(i)) * std::abs(weights()(i, j));
    INFO("detector " << j);
    CHECK(std::abs(a(0, j) - y0(0, j)) <= bound + 1e-12);
  }
  CHECK((a.row(0) - y0.row(0)).norm() < 0.5 * (u.row(0) - y0.row(0)).norm());
}

TEST_CASE("tile: the auto-zero takes out the offset the SLM pattern gives the LEDs' common light") {
  // A compiled program's chain: LEDs behind a driver, whose light at value 0 passes every pixel.
  const CoreConfig chain = program_chain(hw48());
  INFO("LED+ " << led_response(hw48(), chain.led).pos[3] << " LED- " << led_response(hw48(), chain.led).neg[3]);
  const auto zero_out = [&](Optics optics, std::optional<int> zero_reads) {  // each output at every value 0, over 2048 reads
    OpticalTile<double> tile(hw48(), chain, optics);
    TileNoise n = only(&NoiseSpec::slm_fixed_pattern_sigma, 0.01);
    n.spec.thermal_sigma = 1e-3;
    if (zero_reads) n.zero_reads = *zero_reads, tile.set_noise(n);  // none: the clean chain, the offset intended
    tile.program(weights(), 3, 5);
    const int rows = zero_reads ? 2048 : 1, ldo = tile.ld_out();
    AlignedVector<double> in(static_cast<size_t>(rows) * tile.ld_in(), 0.0), out(static_cast<size_t>(rows) * ldo),
        scratch(tile.scratch_size(rows));
    tile.read(in.data(), rows, StepContext{0}, 0, kern::Epilogue<double>{}, out.data(), scratch.data());
    Eigen::VectorXd mean = Eigen::VectorXd::Zero(M);
    for (int r = 0; r < rows; ++r)
      for (int j = 0; j < M; ++j) mean(j) += out[static_cast<size_t>(r) * ldo + j] / rows;
    return mean;
  };
  const Eigen::VectorXd c = zero_out(Optics::Calibrated, std::nullopt);
  const double raw = (zero_out(Optics::Calibrated, 0) - c).cwiseAbs().maxCoeff();
  const double zeroed = (zero_out(Optics::Calibrated, 1024) - c).cwiseAbs().maxCoeff();
  // the reads' mean is within 1 mV / sqrt(2048) per output, the auto-zero's within 1 mV / sqrt(1024)
  INFO("raw " << raw << ", auto-zeroed " << zeroed);
  CHECK(raw > 2.5e-4);
  CHECK(zeroed < 1.5e-4);
  CHECK(zeroed < raw / 4);
  // Ideal optics carries no light at value 0: its offset is the pattern's to begin with.
  CHECK((zero_out(Optics::Ideal, 0) - zero_out(Optics::Ideal, std::nullopt)).cwiseAbs().maxCoeff() < 2.5e-4);
}

// The time-correlated noise of detector 0 over `ticks` iterations of one slot (slot_ticks past
// them, so the clock runs on).
Eigen::VectorXd series(const TileNoise& n, int ticks, int detector = 0) {
  TileNoise s = n;
  s.slot_ticks = 1 << 30;
  const Reader r(Optics::Ideal, &s), clean(Optics::Ideal, nullptr);
  const double y0 = clean.read(input(), 1)(0, detector);
  Eigen::VectorXd v(ticks);
  for (int k = 0; k < ticks; ++k) v(k) = r.read(input(), 1, k)(0, detector) - y0;
  return v;
}

TEST_CASE("tile: drift is continuous in time, has its rms and decorrelates over its correlation time") {
  // 100 iterations of correlation time; many detectors for the ensemble
  const TileNoise base = only(&NoiseSpec::drift_sigma, 0.005, 2.0);
  double ss = 0, lag1 = 0, far = 0, n = 0;
  for (std::uint32_t ch = 0; ch < 400; ++ch) {
    TileNoise t = base;
    t.channel0 = ch * 64;
    const Eigen::VectorXd v = series(t, 401);  // far reads up to v(400)
    for (int k = 0; k < 200; ++k) {  // two whole knot intervals
      ss += v(k) * v(k), lag1 += v(k) * v(k + 1), far += v(k) * v(k + 201), n += 1;
    }
    CHECK((v.tail(400) - v.head(400)).cwiseAbs().maxCoeff() < 0.005 * 0.1);  // no jumps between iterations
  }
  // rms 0.005 at the knots, sqrt(2/3) of that on average over whole knot intervals
  CHECK(std::abs(std::sqrt(ss / n) / (0.005 * std::sqrt(2.0 / 3)) - 1) < 0.1);
  CHECK(lag1 / ss > 0.99);
  CHECK(std::abs(far / ss) < 0.1);  // two correlation times apart: independent knots
}

TEST_CASE("tile: the auto-zero taken again takes out the drift of its moment, and reads still depend only on slot and iteration") {
  // drift of 5 mV over a 10 ms correlation time; reads 20 correlation times after the programming
  TileNoise n = only(&NoiseSpec::drift_sigma, 0.005, 10000.0);
  n.after_programming_us = 0;
  const Reader clean(Optics::Ideal, nullptr), once(Optics::Ideal, &n);
  TileNoise again = n;
  again.zero_every_us = 400;  // each zero 1024 ADC samples at aoc-48's 6.25 MHz: 164 us
  const Reader rezeroed(Optics::Ideal, &again);
  const int slot = 20000, rows = 64;  // 512 iterations a slot: 204.8 ms, 10.24 us apart
  const MatrixXdR y0 = clean.read(input(), rows, 3, slot);
  const double drifted = (once.read(input(), rows, 3, slot) - y0).norm(), zeroed = (rezeroed.read(input(), rows, 3, slot) - y0).norm();
  INFO("zeroed once " << drifted << ", again every 400 us " << zeroed);
  CHECK(drifted > 0.002 * std::sqrt(rows * M));
  CHECK(zeroed < 0.05 * drifted);  // what is left: the drift over the last 400 us at most
  // the programming's zero itself is unchanged before the first zero again
  CHECK(rezeroed.read(input(), 2, 3, 0) == once.read(input(), 2, 3, 0));
  // with white noise in the zeros' reads: a row's value depends on nothing but its slot and iteration
  again.spec.thermal_sigma = 1e-3;
  const Reader white(Optics::Calibrated, &again);
  const MatrixXdR all = white.read(input(), 70, 3, slot), part = white.read(input(), 9, 3, slot + 61);
  CHECK(part == all.bottomRows(9));
  // zeros closer than their own reads take would leave the machine no clock to run on
  again.zero_every_us = 100;
  OpticalTile<double> tile(hw48(), linear_chain(), Optics::Ideal);
  CHECK_THROWS_WITH(tile.set_noise(again), Catch::Contains("zero-every") && Catch::Contains("no longer than one zero's 1024 reads"));
  again.zero_every_us = 400, again.after_programming_us.reset();
  CHECK_THROWS_WITH(tile.set_noise(again), Catch::Contains("needs after-programming"));
}

TEST_CASE("tile: 1/f noise has its rms and a spectrum falling as 1/f") {
  // octaves of knot spacings from 64 to 8192 iterations (the drift time); segments of 4096
  const TileNoise n = only(&NoiseSpec::flicker_sigma, 0.004, 0.02 * 8192);
  const int L = 4096;
  std::vector<double> power(9, 0.0);
  double ss = 0;
  int count = 0;
  for (int seg = 0; seg < 24; ++seg) {
    TileNoise t = n;
    t.channel0 = static_cast<std::uint32_t>(seg) * 97;
    const Eigen::VectorXd v = series(t, L);
    for (int k = 0; k < L; ++k) ss += v(k) * v(k), ++count;
    // without its linear trend (the octaves slower than a segment), which would leak as 1/f^2
    const Eigen::ArrayXd x = Eigen::ArrayXd::LinSpaced(L, -1, 1);
    const double mean = v.mean(), trend = (x * v.array()).sum() / (x * x).sum();
    const Eigen::ArrayXd u = v.array() - mean - trend * x;
    for (int f = 1; f <= 8; ++f) {
      std::complex<double> X = 0;
      for (int k = 0; k < L; ++k) X += u(k) * std::polar(1.0, -2 * M_PI * f * k / L);
      power[f] += std::norm(X);
    }
  }
  CHECK(std::abs(std::sqrt(ss / count) / 0.004 - 1) < 0.35);  // 24 segments of a slow process
  // least-squares slope of log power against log frequency over periods of 2048 .. 512 iterations,
  // well inside the band (near the shortest knot spacing the octaves' interpolation steepens it)
  double sx = 0, sy = 0, sxx = 0, sxy = 0, m = 0;
  for (int f = 2; f <= 8; ++f) {
    const double x = std::log(f), y = std::log(power[f]);
    sx += x, sy += y, sxx += x * x, sxy += x * y, m += 1;
  }
  const double slope = (m * sxy - sx * sy) / (m * sxx - sx * sx);
  INFO("slope " << slope);
  CHECK(slope < -0.75);  // white noise: 0; a random walk: -2
  CHECK(slope > -1.3);
}

TEST_CASE("tile: reads depend only on slot and iteration, not on the rows read with them") {
  TileNoise n;
  n.spec = NoiseSpec{0.06, 1e4, 1e-3, 1e-3, 1e-2, 1e-3, 10, 1e-3};
  n.seed = 4;
  const Reader r(Optics::Calibrated, &n);
  const MatrixXdR all = r.read(input(), 70, 3, 0), part = r.read(input(), 9, 3, 61);
  CHECK(part == all.bottomRows(9));
}

TEST_CASE("kern: each output column is the same sum whatever range of columns a product covers, in every instruction set's copy") {
  // every count of 64-byte units from 1 to 13 (the register tiles' shapes and their remainders at
  // each vector width), one row and a block of four, against the whole product
  const int Kf = 130, ld = 208;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1, 1);
  AlignedVector<float> L(static_cast<size_t>(4) * Kf), F(static_cast<size_t>(Kf) * ld), whole(static_cast<size_t>(4) * ld), part(whole.size());
  for (float& f : F) f = u(rng);
  for (float& l : L) l = u(rng);
  constexpr int W = kLanes<float>;
  const isa::Level was = isa::kernels();
  for (isa::Level level : isa::compiled()) {
    if (!isa::runs(level)) continue;
    isa::use(level);
    INFO(isa::name(level));
    for (int rows : {1, 4}) {
      kern::product(L.data(), Kf, Kf, F.data(), ld, 0, ld, rows, whole.data(), ld);
      for (int j0 : {0, W, 5 * W})
        for (int j1 = j0 + W; j1 <= ld; j1 += W) {
          kern::product(L.data(), Kf, Kf, F.data(), ld, j0, j1, rows, part.data(), ld);
          for (int r = 0; r < rows; ++r)
            for (int j = j0; j < j1; ++j) REQUIRE(part[static_cast<size_t>(r) * ld + j] == whole[static_cast<size_t>(r) * ld + j]);
        }
    }
  }
  isa::use(was);
}

TEST_CASE("tile: a read in steps (emit, then light per range of panels, then sense per range of columns) is the whole read bit for bit, every source on", "[slow]") {
  // a 130 x 200 tile at LED 5, detector 7 of the calibrated aoc-scale core (200 outputs: chunks of
  // 64, 64, 64 and 8), drift with knots inside the blocks, rows past the prepared memo
  const Hardware hw = load_hardware(resolve_hardware_path("aoc-scale"));
  CoreConfig chain = CoreConfig::twin_defaults(hw);
  const int Kt = 130, Mt = 200, rows = 3;
  std::mt19937_64 rng(9);
  std::uniform_real_distribution<double> u(-1, 1);
  const MatrixXdR W = MatrixXdR::NullaryExpr(Kt, Mt, [&] { return u(rng) / std::sqrt(double(Kt)); });
  TileNoise n;
  n.spec = NoiseSpec{0.06, 1e4, 1e-2, 1e-2, 1e-2, 1e-2, 0.5, 1e-2};
  n.seed = 21, n.stream = 3, n.channel0 = 7;
  OpticalTile<float> tile(hw, chain, Optics::Calibrated);
  tile.set_noise(n);
  tile.program(W, 5, 7);
  tile.prepare_reads(2);  // row 2 evaluates its time-correlated noise every read
  const int ldi = tile.ld_in(), ldo = tile.ld_out();
  AlignedVector<float> in(static_cast<size_t>(rows) * ldi, 0.f), L(static_cast<size_t>(rows) * tile.drive_ld()), light(tile.light_size(rows));
  REQUIRE(tile.light_panels() == 4);  // the light of detectors -1 .. 200
  AlignedVector<float> scratch(tile.scratch_size(rows)), whole(static_cast<size_t>(rows) * ldo), split(whole.size());
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < Kt; ++j) in[static_cast<size_t>(r) * ldi + j] = static_cast<float>(u(rng));
  const int slots[rows] = {0, 4, 9};
  const std::vector<std::vector<int>> splits = {{0, 64, 192, 200}, {0, 128, 200}, {0, 200}};
  for (int it : {3, 70, 131}) {
    const StepContext ctx{it, slots};
    tile.read(in.data(), rows, ctx, 0, kern::Epilogue<float>{}, whole.data(), scratch.data());
    for (const auto& cut : splits) {
      std::fill(split.begin(), split.end(), -1.f);
      tile.emit(in.data(), rows, ctx, 0, L.data(), scratch.data());
      tile.light(L.data(), rows, 2, 4, light.data());
      tile.light(L.data(), rows, 0, 2, light.data());
      for (std::size_t k = cut.size() - 1; k-- > 0;)  // the ranges in reverse order
        tile.sense(L.data(), light.data(), rows, ctx, 0, kern::Epilogue<float>{}, cut[k], cut[k + 1], split.data(), scratch.data());
      for (int r = 0; r < rows; ++r)
        for (int j = 0; j < Mt; ++j) REQUIRE(split[static_cast<size_t>(r) * ldo + j] == whole[static_cast<size_t>(r) * ldo + j]);
    }
  }
  CHECK_THROWS_WITH(tile.sense(L.data(), light.data(), rows, StepContext{0, slots}, 0, kern::Epilogue<float>{}, 10, 64, split.data(), scratch.data()),
                    Catch::Contains("not a range of whole chunks"));
}

// ---- the same sources through compiled programs ----

namespace {

// x[B, L, 12] -> z* = tanh(z W^T + x U^T) on the 48-variable machine (U digital: it feeds the loop once).
ir::Program loop_program(const std::string& rule = "fixed", double tol = 1e-9) {
  ir::Program p;
  ir::Graph& g = p.graph;
  g.name = "tile-loop";
  g.inputs.push_back(decl("x", {0, 0, 12}, {"B", "L"}));
  g.weights = {decl("U", {20, 12}), decl("b", {20}), decl("W", {20, 20})};
  p.weights = {{"U", wave({20, 12}, 0.1, 0.3)}, {"b", wave({20}, 0.2, 0.1)}, {"W", wave({20, 20}, 0.3, 0.04)}};
  g.ops.push_back(ir::make_op(ir::OpKind::Linear, {"x", "U", "b"}, {"u"}, {}, "inj"));
  auto body = std::make_shared<ir::Region>();
  body->args = {"z", "uc"};
  body->ops = {ir::make_op(ir::OpKind::Linear, {"z", "W"}, {"wz"}, {}, "mix"), ir::make_op(ir::OpKind::Add, {"wz", "uc"}, {"pre"}),
               ir::make_op(ir::OpKind::Tanh, {"pre"}, {"zn"})};
  body->results = {"zn"};
  ir::Op fp = ir::make_op(ir::OpKind::FixedPoint, {"u"}, {"zs"},
                          {{"tol", tol}, {"max_iter", std::int64_t{12}}, {"rule", rule}, {"like", std::string("u")}}, "deq");
  fp.body = body;
  g.ops.push_back(fp);
  g.outputs = {"zs"};
  p.target = ir::target_of(hw48(), "aoc-48", {});
  ir::run_pipeline(p, {});
  return p;
}

double program_error(const ir::Program& p, const Hardware& hw, bool noise, bool optics = false) {
  const std::map<std::string, ir::Tensor> in = {{"x", wave({4, 6, 12}, 1.0, 0.8)}};
  BackendOptions o;
  o.noise = noise, o.quantize = false, o.optics = optics, o.seed = 3;
  const ProgramResult a = make_backend("sim", &hw)->run(p, in, o);
  BackendOptions ref = o;
  ref.noise = false;
  const ProgramResult b = make_backend("sim", &hw)->run(p, in, ref);
  const std::string y = p.graph.outputs[0];
  return max_diff(a.values.at(y), b.values.at(y));
}

Hardware with_noise(const NoiseSpec& s) {
  Hardware hw = hw48();
  hw.noise = s;
  return hw;
}

}  // namespace

TEST_CASE("program: each noise source of the machine changes a compiled model's outputs on its own") {
  const ir::Program p = loop_program();
  const NoiseSpec all = *hw48().noise;
  for (double NoiseSpec::*f : {&NoiseSpec::thermal_sigma, &NoiseSpec::rin_sigma, &NoiseSpec::slm_fixed_pattern_sigma, &NoiseSpec::drift_sigma,
                               &NoiseSpec::flicker_sigma, &NoiseSpec::photons_per_sample}) {
    NoiseSpec one;
    one.led_bias = all.led_bias;
    one.drift_time_us = all.drift_time_us;
    one.*f = all.*f;
    INFO("source index " << (&(one.*f) - &one.led_bias));
    CHECK(program_error(p, with_noise(one), true) > 1e-7);
  }
  NoiseSpec none;
  none.led_bias = all.led_bias;
  CHECK(program_error(p, with_noise(none), true) == 0);
}

TEST_CASE("program: the error grows as the photons per sample fall") {
  const ir::Program p = loop_program();
  NoiseSpec s;
  s.led_bias = 0.06;
  double prev = 0;
  for (double P : {1e8, 1e6, 1e4, 1e2}) {
    s.photons_per_sample = P;
    const double e = program_error(p, with_noise(s), true, true);
    INFO("photons " << P);
    CHECK(e > 3 * prev);
    prev = e;
  }
}

TEST_CASE("program: drift is continuous across tokens: the same detector drifts the same in sequential and simultaneous runs") {
  const ir::Program p = loop_program();
  NoiseSpec s;
  s.led_bias = 0.06, s.drift_sigma = 0.01, s.drift_time_us = 1e3;
  const Hardware hw = with_noise(s);
  const std::map<std::string, ir::Tensor> in = {{"x", wave({2, 5, 12}, 1.0, 0.8)}};
  BackendOptions o;
  o.quantize = false, o.seed = 9;
  const ProgramResult a = make_backend("sim", &hw)->run(p, in, o);
  o.mode = ir::Mode::Sequential;
  const ProgramResult b = make_backend("sim", &hw)->run(p, in, o);
  // a fixed rule of 12 steps: each (sample, token) is one slot of the clock in both modes
  CHECK(max_diff(a.values.at(p.graph.outputs[0]), b.values.at(p.graph.outputs[0])) < 1e-5);
}

// Samples [from, to) of x ([B, L, D]) as inputs of their own.
std::map<std::string, ir::Tensor> samples_of(const ir::Tensor& x, std::int64_t from, std::int64_t to) {
  ir::Tensor part = x;
  part.shape[0] = to - from;
  const std::int64_t per = static_cast<std::int64_t>(x.data.size()) / x.shape[0];
  part.data.assign(x.data.begin() + from * per, x.data.begin() + to * per);
  return {{"x", part}};
}

TEST_CASE("program: noisy outputs are bit-identical for batch splits of 1, 3 and all samples, in both sequence modes") {
  // the per-sample rule, its samples converging at different steps (a body with states to commit:
  // tests/test_run.cpp's parity program)
  const ir::Program p = loop_program("relative", 1e-3);
  NoiseSpec s = *hw48().noise;
  s.thermal_sigma = 1e-5, s.rin_sigma = 1e-5, s.photons_per_sample = 1e9;
  const Hardware hw = with_noise(s);
  const ir::Tensor x = wave({7, 5, 12}, 1.0, 0.8);
  for (ir::Mode mode : {ir::Mode::Simultaneous, ir::Mode::Sequential}) {
    INFO((mode == ir::Mode::Sequential ? "sequential" : "simultaneous"));
    BackendOptions o;
    o.quantize = false, o.seed = 5, o.mode = mode, o.threads = 2;
    const ir::Tensor whole = make_backend("sim", &hw)->run(p, {{"x", x}}, o).values.at(p.graph.outputs[0]);
    const std::int64_t per = static_cast<std::int64_t>(whole.data.size()) / 7;
    for (int size : {1, 3}) {
      INFO("batches of " << size);
      for (int from = 0; from < 7; from += size) {
        const int to = std::min(7, from + size);
        o.first_sample = from, o.threads = 1;
        const ir::Tensor part = make_backend("sim", &hw)->run(p, samples_of(x, from, to), o).values.at(p.graph.outputs[0]);
        CHECK(std::equal(part.data.begin(), part.data.end(), whole.data.begin() + from * per));
      }
    }
  }
}
