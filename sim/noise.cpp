#include "sim/noise.hpp"

#include <Random123/philox.h>
#include <fftw3.h>

#include <cmath>
#include <complex>
#include <map>
#include <mutex>

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

double normal(std::uint64_t seed, Source s, std::uint32_t a, std::uint32_t b, std::uint32_t c) {
  using G = r123::Philox4x32;
  const G::key_type key = {{static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)}};
  const G::ctr_type ctr = {{static_cast<std::uint32_t>(s), a, b, c}};
  const G::ctr_type r = G()(ctr, key);
  const double u1 = unit(r[0], r[1]), u2 = unit(r[2], r[3]);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

double drift(std::uint64_t seed, std::uint32_t channel, double t, double sigma) {
  if (sigma == 0) return 0;
  const double k = std::floor(t);
  const auto m = static_cast<std::uint32_t>(static_cast<std::int64_t>(k));
  const double w = t - k;
  const double g0 = normal(seed, Source::Drift, channel, m, 0), g1 = normal(seed, Source::Drift, channel, m + 1, 0);
  return sigma * ((1 - w) * g0 + w * g1);
}

std::vector<double> flicker(std::uint64_t seed, std::uint32_t sample, std::uint32_t channel, int length, double sigma) {
  if (length < 2) throw Error("flicker noise: needs a sequence of at least 2 iterations");
  std::vector<double> x(length);
  if (sigma == 0) return x;
  for (int n = 0; n < length; ++n) x[n] = normal(seed, Source::Flicker, sample, channel, static_cast<std::uint32_t>(n));
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
