// The readout chain's saturation (sim/readout.hpp), the twin's apply_output_saturation: identity in
// the middle, saturation beyond the ends, the 48-variable piece 0 in its documented (continuous)
// and twin-code (jumping) forms, and the 16-variable pieces. Expected values are written out from
// the fits in docs of the twin (research notes, section 2.5), not from the code under test.
#include <catch2/catch.hpp>
#include <cmath>

#include "tests/support.hpp"
#include "sim/hardware.hpp"
#include "sim/readout.hpp"

namespace {

using namespace aoc;
using namespace aoc::test;

double sat48(double z, Piece0Form form = Piece0Form::Documented) { return readout_saturation(hw48().readout, z, form); }
double sat16(double z) { return readout_saturation(hw16().readout, z); }

// The 48-variable fit's edges.
constexpr double kP0Lo = -6.567319399665574, kP0Hi = -3.2849214153884727;  // piece 0
constexpr double kP1Hi = -1.6685890746459606;                              // piece 1 ends, identity begins
constexpr double kP3Lo = 2.2603418459281444, kP3Hi = 4.125340700631042;    // piece 3
constexpr double kP4Hi = 6.161297783681706;                                // piece 4 ends

}  // namespace

TEST_CASE("readout: the saturation is the identity in the middle range on both machines") {
  for (const double z : {0.5, 0.0, -0.5, 1.0, -1.5, 2.0}) {
    INFO("z = " << z);
    CHECK(sat48(z) == z);
    CHECK(sat48(z, Piece0Form::TwinCode) == z);
  }
  // the 16-variable fit's middle piece is z - 10.627*sin(0.1439*z)^5: identity to within 1e-4 near 0
  for (const double z : {0.5, 0.0, -0.5}) {
    INFO("z = " << z);
    CHECK(sat16(z) == Approx(z).margin(1e-4));
  }
  CHECK(sat16(0.5) != 0.5);  // but not exactly
  // the 48-variable identity runs from the end of piece 1 to the start of piece 3
  const double lo = std::nextafter(kP1Hi, 0.0), hi = kP3Lo;
  CHECK(sat48(lo) == lo);
  CHECK(sat48(hi) == hi);
  CHECK(sat48(kP1Hi) != kP1Hi);
}

TEST_CASE("readout: beyond the ends of the fit the readout saturates at the documented values") {
  for (const double z : {-6.6, -10.0, -1e6, kP0Lo}) {
    INFO("z = " << z);
    CHECK(sat48(z) == Approx(-3.28965).margin(1e-5));
  }
  for (const double z : {6.2, 10.0, 1e6}) {
    INFO("z = " << z);
    CHECK(sat48(z) == Approx(2.84546).margin(1e-5));
  }
  for (const double z : {-6.5, -10.0, -1e6}) {
    INFO("z = " << z);
    CHECK(sat16(z) == Approx(-3.23374).margin(1e-5));
  }
  for (const double z : {5.7, 10.0, 1e6}) {
    INFO("z = " << z);
    CHECK(sat16(z) == Approx(3.22956).margin(1e-5));
  }
}

TEST_CASE("readout: the 48-variable pieces follow the documented fits") {
  // piece 1: quadratic [0.0048238, 1.0176346, 0.0165635]
  const double z1 = -2.5;
  CHECK(sat48(z1) == Approx(0.0048238 * z1 * z1 + 1.0176346 * z1 + 0.0165635).margin(1e-5));
  // piece 3: quartic [-0.0667503, 0.6117598, -1.9773130, 3.5696710, -1.0224429]
  const double z3 = 3.0;
  CHECK(sat48(z3) == Approx((((-0.0667503 * z3 + 0.6117598) * z3 - 1.9773130) * z3 + 3.5696710) * z3 - 1.0224429).margin(1e-5));
  // piece 4: cos(z + 3.8138459) + 3.6977943
  const double z4 = 5.0;
  CHECK(sat48(z4) == Approx(std::cos(z4 + 3.8138459) + 3.6977943).margin(1e-5));
  // piece 4 joins the positive saturation at its right edge
  CHECK(sat48(kP4Hi) == Approx(2.84546).margin(1e-4));
  CHECK(std::abs(sat48(kP3Hi) - sat48(std::nextafter(kP3Hi, 10.0))) < 0.1);
  CHECK(std::abs(sat48(kP3Lo) - kP3Lo) < 1e-2);
}

TEST_CASE("readout: the documented 48-variable piece 0, c0 - cos(1/(k0 z)), joins its neighbours at both edges") {
  const double left_in = sat48(std::nextafter(kP0Lo, 0.0));  // just inside piece 0
  const double left_out = sat48(kP0Lo);                       // the negative saturation
  const double right_in = sat48(kP0Hi);                       // piece 0 includes its right edge
  const double right_out = sat48(std::nextafter(kP0Hi, 0.0)); // piece 1
  INFO("left " << left_in << " vs " << left_out << ", right " << right_in << " vs " << right_out);
  CHECK(std::abs(left_in - left_out) < 2e-2);
  // the fits themselves leave a 0.026 step here: -3.3005 (piece 0) vs -3.2742 (piece 1)
  CHECK(std::abs(right_in - right_out) < 3e-2);
  CHECK(right_in == Approx(-3.793710768 - std::cos(1.0 / (-0.0725406950 * kP0Hi))).margin(1e-6));
  // and it is continuous inside: no jumps between close samples, never more than 1 from its neighbours
  double prev = left_out;
  for (int i = 1; i <= 200; ++i) {
    const double z = kP0Lo + (kP0Hi - kP0Lo) * i / 200.0;
    const double v = sat48(z);
    INFO("z = " << z << ": " << v);
    CHECK(std::abs(v - prev) < 0.05);
    CHECK(std::abs(v - left_out) < 1.0);
    CHECK(std::abs(v - right_out) < 1.0);
    prev = v;
  }
}

TEST_CASE("readout: the twin-code 48-variable piece 0, c0 - cos(k0 z), jumps away from its neighbours") {
  const double neighbour_left = sat48(kP0Lo, Piece0Form::TwinCode);
  const double neighbour_right = sat48(std::nextafter(kP0Hi, 0.0), Piece0Form::TwinCode);
  CHECK(neighbour_left == Approx(-3.28965).margin(1e-5));
  bool jumps = false;
  for (int i = 0; i <= 20; ++i) {
    const double z = kP0Lo + (kP0Hi - kP0Lo) * (i + 0.5) / 21.0;
    const double v = sat48(z, Piece0Form::TwinCode);
    INFO("z = " << z << ": " << v);
    CHECK(v == Approx(-3.793710768 - std::cos(-0.0725406950 * z)).margin(1e-6));
    jumps = jumps || (std::abs(v - neighbour_left) > 1 && std::abs(v - neighbour_right) > 1);
  }
  CHECK(jumps);
  CHECK(sat48(-5.0, Piece0Form::TwinCode) == Approx(-4.72).margin(0.02));
  // outside piece 0 the two forms agree
  for (const double z : {-7.0, -3.0, 0.0, 3.0, 5.0, 7.0}) CHECK(sat48(z, Piece0Form::TwinCode) == sat48(z));
}

TEST_CASE("readout: the 16-variable fit has a cosine piece below -4.12 and a sine-corrected identity above it") {
  // piece 0 (-6.4626, -4.1234]: -4.18412 - cos(0.548565 z)
  for (const double z : {-6.0, -5.0, -4.2}) {
    INFO("z = " << z);
    CHECK(sat16(z) == Approx(-4.18412 - std::cos(0.548565 * z)).margin(1e-4));
  }
  // piece 1 (-4.1234, 5.6696]: z - 10.62706 sin(0.143916 z)^5
  for (const double z : {-4.0, -2.0, 1.0, 3.0, 5.5}) {
    INFO("z = " << z);
    CHECK(sat16(z) == Approx(z - 10.62706 * std::pow(std::sin(0.143916 * z), 5)).margin(1e-4));
  }
  // the two pieces meet at -4.1234 to within 5e-3
  const double edge = hw16().readout.piece0[1];
  CHECK(edge == Approx(-4.1234).margin(1e-4));
  CHECK(std::abs(sat16(edge) - sat16(std::nextafter(edge, 0.0))) < 5e-3);
  // the 16-variable model ignores the form of the 48-variable piece 0
  for (const double z : {-5.0, -4.5}) CHECK(readout_saturation(hw16().readout, z, Piece0Form::TwinCode) == sat16(z));
}
