#include "sim/noise.hpp"

#include <Random123/philox.h>
#include <fftw3.h>

#include <cmath>
#include <complex>
#include <map>
#include <mutex>
#include <utility>

#include "sim/error.hpp"

namespace aoc::noise {

namespace {

// FFTW plans of one length, made once (FFTW's planner is not thread-safe; executing a plan on
// other arrays with the new-array interface is). Unaligned, so any std::vector will do.
struct Plans {
  fftw_plan fwd = nullptr, inv = nullptr;
};

const Plans& plans(int length) {
  static std::mutex m;
  static std::map<int, Plans> cache;
  std::lock_guard<std::mutex> lock(m);
  Plans& p = cache[length];
  if (!p.fwd) {
    std::vector<double> x(length);
    std::vector<std::complex<double>> X(length / 2 + 1);
    auto* c = reinterpret_cast<fftw_complex*>(X.data());
    p.fwd = fftw_plan_dft_r2c_1d(length, x.data(), c, FFTW_ESTIMATE | FFTW_UNALIGNED);
    p.inv = fftw_plan_dft_c2r_1d(length, c, x.data(), FFTW_ESTIMATE | FFTW_UNALIGNED);
  }
  return p;
}

// 53-bit uniform in (0, 1] from two 32-bit words.
double unit(std::uint32_t hi, std::uint32_t lo) {
  const std::uint64_t bits = (static_cast<std::uint64_t>(hi) << 21) ^ (lo >> 11);
  return (static_cast<double>(bits & ((1ULL << 53) - 1)) + 1.0) * 0x1.0p-53;
}

}  // namespace

namespace {

// The two normals of block k: (cos branch, sin branch).
std::pair<double, double> block_pair(std::uint64_t seed, Source s, std::uint32_t a, std::uint32_t b, std::uint32_t k) {
  using G = r123::Philox4x32;
  const G::key_type key = {{static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)}};
  const G::ctr_type ctr = {{static_cast<std::uint32_t>(s), a, b, k}};
  const G::ctr_type r = G()(ctr, key);
  const double rad = std::sqrt(-2.0 * std::log(unit(r[0], r[1]))), ang = 2.0 * M_PI * unit(r[2], r[3]);
  return {rad * std::cos(ang), rad * std::sin(ang)};
}

}  // namespace

double normal(std::uint64_t seed, Source s, std::uint32_t a, std::uint32_t b, std::uint32_t c) {
  const auto [even, odd] = block_pair(seed, s, a, b, c >> 1);
  return (c & 1) ? odd : even;
}

void normals(std::uint64_t seed, Source s, std::uint32_t a, std::uint32_t b, int n, double* out) {
  for (int c = 0; c < n; c += 2) {
    const auto [even, odd] = block_pair(seed, s, a, b, static_cast<std::uint32_t>(c) >> 1);
    out[c] = even;
    if (c + 1 < n) out[c + 1] = odd;
  }
}

double drift(std::uint64_t seed, std::uint32_t channel, double t, double sigma) {
  if (sigma == 0) return 0;
  const double k = std::floor(t);
  const auto m = static_cast<std::uint32_t>(static_cast<std::int64_t>(k));
  const double w = t - k;
  return sigma * ((1 - w) * drift_knot(seed, channel, m) + w * drift_knot(seed, channel, m + 1));
}

double drift_knot(std::uint64_t seed, std::uint32_t channel, std::uint32_t m) {
  return normal(seed, Source::Drift, channel, m, 0);
}

std::vector<double> flicker(std::uint64_t seed, std::uint32_t sample, std::uint32_t channel, int length, double sigma) {
  if (length < 2) throw Error("flicker noise: needs a sequence of at least 2 iterations");
  std::vector<double> x(length);
  if (sigma == 0) return x;
  normals(seed, Source::Flicker, sample, channel, length, x.data());
  std::vector<std::complex<double>> X(length / 2 + 1);
  const Plans& p = plans(length);
  fftw_execute_dft_r2c(p.fwd, x.data(), reinterpret_cast<fftw_complex*>(X.data()));
  X[0] = 0;  // no DC: drift is its own source
  for (size_t k = 1; k < X.size(); ++k) X[k] /= std::sqrt(static_cast<double>(k));  // power ~ 1/f
  fftw_execute_dft_c2r(p.inv, reinterpret_cast<fftw_complex*>(X.data()), x.data());
  double mean = 0, ss = 0;
  for (double v : x) mean += v / length;
  for (double& v : x) v -= mean, ss += v * v;
  const double scale = ss > 0 ? sigma / std::sqrt(ss / length) : 0;
  for (double& v : x) v *= scale;
  return x;
}

}  // namespace aoc::noise
