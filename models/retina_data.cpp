#include "models/retina_data.hpp"

#include <Random123/philox.h>
#include <fftw3.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <limits>
#include <mutex>
#include <new>
#include <optional>

#include "sim/error.hpp"
#include "sim/h5file.hpp"

namespace aoc::retina {

namespace {

using G = r123::Philox4x32;
using RowMatrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
constexpr int kTaps = 40;
enum Stream : std::uint32_t { kImages = 1, kFixations = 2, kDrift = 3, kCells = 4, kSpikes = 5 };

struct Rng {
  G::key_type key;
  explicit Rng(std::uint64_t seed) : key{{static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32) ^ 0x5245544Eu}} {}
  G::ctr_type block(std::uint32_t stream, std::uint32_t split, std::uint32_t a, std::uint32_t b, std::uint32_t c) const {
    return G()(G::ctr_type{{(stream << 8) | split, a, b, c}}, key);
  }
};

double u53(std::uint32_t hi, std::uint32_t lo) {
  const std::uint64_t bits = (static_cast<std::uint64_t>(hi) << 21) ^ (lo >> 11);
  return static_cast<double>(bits & ((1ULL << 53) - 1)) * 0x1.0p-53;  // [0, 1)
}

std::array<double, 2> normals(const G::ctr_type& r) {
  const double radius = std::sqrt(-2.0 * std::log(1.0 - u53(r[0], r[1])));  // 1 - u in (0, 1]: log is finite
  const double angle = 2.0 * M_PI * u53(r[2], r[3]);
  return {radius * std::cos(angle), radius * std::sin(angle)};
}

int index_below(std::uint32_t word, int n) { return static_cast<int>((static_cast<std::uint64_t>(word) * static_cast<std::uint64_t>(n)) >> 32); }

double softplus(double x) { return x > 30 ? x : std::log1p(std::exp(x)); }

// One uniform per count: the CDF inverted from 0 up. Rates far beyond any the generator reaches
// stop at a bound so a pathological config cannot loop for long.
int poisson(double lambda, double u) {
  if (!(lambda > 0)) return 0;
  double p = std::exp(-lambda), cdf = p;
  int k = 0;
  const double bound = lambda + 50.0 * std::sqrt(lambda) + 50.0;
  while (u > cdf && k < bound && p > 0) {
    ++k;
    p *= lambda / k;
    cdf += p;
  }
  return k;
}

void check_config(const SynthConfig& c) {
  const auto need = [](bool ok, const std::string& what) {
    if (!ok) throw Error("retina synthesize: " + what);
  };
  need(c.height >= 8 && c.width >= 8 && c.height <= 512 && c.width <= 512, "height and width must be 8..512 pixels");
  need(c.cells >= 1 && c.cells <= 999, "cells must be 1..999 (the file names them cell01..cell999)");
  need(c.train_frames > kTaps && c.test_frames > kTaps, "train_frames and test_frames must exceed the 40-frame filter");
  need(static_cast<std::uint64_t>(c.train_frames + std::uint64_t(c.test_frames)) * c.height * c.width <= kMaxStimulusValues,
       "the movie would exceed 2^31 values");
  need(c.repeats >= 2 && c.repeats <= 1000, "repeats must be 2..1000 (the noise estimate of FEV needs two)");
  need(c.bin_s > 0 && c.bin_s <= 1, "bin_s must be in (0, 1] seconds");
  need(c.images >= 1 && c.images <= 1024, "images must be 1..1024");
  need(c.image_size >= std::max(c.height, c.width) && c.image_size <= 4096, "image_size must be at least height and width, at most 4096");
  need(std::isfinite(c.skew) && std::abs(c.skew) <= 3, "skew must be in [-3, 3]");
  need(c.drift_px >= 0 && c.drift_px <= 50, "drift_px must be in [0, 50]");
  need(c.saccade_frames >= 1 && c.saccade_frames <= 1e6, "saccade_frames must be at least 1");
  need(c.rf_region >= 1 && c.rf_region <= std::min(c.height, c.width), "rf_region must be 1..min(height, width)");
  need(c.subunits >= 1 && c.subunits <= 64, "subunits must be 1..64");
  need(c.rf_radius >= 0 && c.rf_radius <= 20, "rf_radius must be in [0, 20]");
  need(c.subunit_sigma > 0.2 && c.surround_sigma > c.subunit_sigma && c.surround_sigma <= 20,
       "need 0.2 < subunit_sigma < surround_sigma <= 20");
  need(c.surround_strength >= 0 && c.surround_strength < 1, "surround_strength must be in [0, 1)");
  need(c.tau1 > 0.2 && c.tau2 > c.tau1 && c.tau2 <= 13, "need 0.2 < tau1 < tau2 <= 13 frames (the lobes must fit 40 taps)");
  need(c.biphasic >= 0 && c.biphasic <= 1.5, "biphasic must be in [0, 1.5]");
  need(std::abs(c.subunit_threshold) <= 3, "subunit_threshold must be in [-3, 3]");
  need(c.output_gain > 0 && c.output_gain <= 20, "output_gain must be in (0, 20]");
  need(c.rate_min_hz > 0 && c.rate_max_hz >= c.rate_min_hz && c.rate_max_hz * c.bin_s <= 5,
       "need 0 < rate_min_hz <= rate_max_hz, at most 5 spikes per bin");
}

// ---- the movie ----

// `images` periodic Gaussian images with a 1/f^2 power spectrum, sd 1, then the luminance skew.
std::vector<std::vector<double>> make_images(const SynthConfig& c, const Rng& rng, std::uint32_t split) {
  const int n = c.image_size, half = n / 2 + 1;
  double* in = fftw_alloc_real(static_cast<std::size_t>(n) * n);
  fftw_complex* spec = fftw_alloc_complex(static_cast<std::size_t>(n) * half);
  if (!in || !spec) {
    fftw_free(in), fftw_free(spec);
    throw Error("retina synthesize: no memory for the images");
  }
  static std::mutex planner;  // FFTW's planner is not thread-safe; its execution is
  fftw_plan forward, backward;
  {
    std::lock_guard<std::mutex> lock(planner);
    forward = fftw_plan_dft_r2c_2d(n, n, in, spec, FFTW_ESTIMATE);
    backward = fftw_plan_dft_c2r_2d(n, n, spec, in, FFTW_ESTIMATE);
  }
  std::vector<std::vector<double>> out(static_cast<std::size_t>(c.images));
  const std::size_t pixels = static_cast<std::size_t>(n) * n;
  for (int i = 0; i < c.images; ++i) {
    for (std::size_t p = 0; p < pixels; p += 2) {
      const auto z = normals(rng.block(kImages, split, static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(p / 2), 0));
      in[p] = z[0];
      if (p + 1 < pixels) in[p + 1] = z[1];
    }
    fftw_execute(forward);
    for (int ky = 0; ky < n; ++ky)
      for (int kx = 0; kx < half; ++kx) {
        const double fy = std::min(ky, n - ky), f = std::sqrt(fy * fy + double(kx) * kx);
        const double gain = f > 0 ? 1.0 / f : 0.0;  // amplitude 1/f: power 1/f^2; no DC
        spec[ky * half + kx][0] *= gain;
        spec[ky * half + kx][1] *= gain;
      }
    fftw_execute(backward);
    double sum = 0, sq = 0;
    for (std::size_t p = 0; p < pixels; ++p) sum += in[p], sq += in[p] * in[p];
    const double mean = sum / pixels, sd = std::sqrt(std::max(sq / pixels - mean * mean, 1e-300));
    std::vector<double>& img = out[static_cast<std::size_t>(i)];
    img.resize(pixels);
    for (std::size_t p = 0; p < pixels; ++p) {
      const double x = (in[p] - mean) / sd;
      img[p] = c.skew == 0 ? x : std::exp(c.skew * x);
    }
  }
  {
    std::lock_guard<std::mutex> lock(planner);
    fftw_destroy_plan(forward), fftw_destroy_plan(backward);
  }
  fftw_free(in), fftw_free(spec);
  return out;
}

// Fixations of a drifting window, each on a random image and place, until `frames` are filled.
std::vector<float> make_movie(const SynthConfig& c, const Rng& rng, std::uint32_t split, int frames) {
  const std::vector<std::vector<double>> images = make_images(c, rng, split);
  const int n = c.image_size, H = c.height, W = c.width;
  std::vector<float> movie(static_cast<std::size_t>(frames) * H * W);
  const auto wrap = [n](double v) {
    const long i = static_cast<long>(std::floor(v)) % n;
    return static_cast<int>(i < 0 ? i + n : i);
  };
  int t = 0;
  for (std::uint32_t k = 0; t < frames; ++k) {
    const G::ctr_type a = rng.block(kFixations, split, k, 0, 0), b = rng.block(kFixations, split, k, 1, 0);
    const int duration = std::max(1, static_cast<int>(std::lround(c.saccade_frames * (0.5 + u53(a[0], a[1])))));
    const std::vector<double>& img = images[static_cast<std::size_t>(index_below(a[2], c.images))];
    double py = u53(b[0], b[1]) * n, px = u53(b[2], b[3]) * n;
    for (int f = 0; f < duration && t < frames; ++f, ++t) {
      if (f > 0) {
        const auto z = normals(rng.block(kDrift, split, k, static_cast<std::uint32_t>(f), 0));
        py += c.drift_px * z[0], px += c.drift_px * z[1];
      }
      const int y0 = wrap(py), x0 = wrap(px);
      float* dst = movie.data() + static_cast<std::size_t>(t) * H * W;
      for (int y = 0; y < H; ++y) {
        const double* row = img.data() + static_cast<std::size_t>((y0 + y) % n) * n;
        for (int x = 0; x < W; ++x) dst[y * W + x] = static_cast<float>(row[(x0 + x) % n]);
      }
    }
  }
  return movie;
}

// ---- the cells ----

struct Subunit {
  double weight = 0;
  int y0 = 0, x0 = 0, h = 0, w = 0;  // the kernel's box in the frame
  std::vector<double> kernel;        // [h][w]
  double sd = 1;                     // of its drive on the train split
};

struct Cell {
  int polarity = 1;
  double cy = 0, cx = 0, target = 0;  // target: mean spikes per bin
  std::array<double, kTaps> temporal{};
  std::vector<Subunit> subunits;
  double u_sd = 1, offset = 0;
};

std::vector<Cell> make_cells(const SynthConfig& c, const Rng& rng) {
  std::vector<Cell> cells(static_cast<std::size_t>(c.cells));
  const int grid = static_cast<int>(std::ceil(std::sqrt(double(c.cells))));
  const double spacing = c.rf_region / grid;
  const double top = (c.height - c.rf_region) / 2.0, left = (c.width - c.rf_region) / 2.0;
  const int reach = static_cast<int>(std::ceil(3 * c.surround_sigma));
  for (int i = 0; i < c.cells; ++i) {
    Cell& cell = cells[static_cast<std::size_t>(i)];
    const G::ctr_type a = rng.block(kCells, 0, static_cast<std::uint32_t>(i), 0, 0), b = rng.block(kCells, 0, static_cast<std::uint32_t>(i), 0, 1);
    cell.polarity = i % 2 == 0 ? 1 : -1;
    // jittered by up to a quarter spacing, so neighbours' centres never coincide
    cell.cy = top + (i / grid + 0.5 + 0.5 * (u53(a[0], a[1]) - 0.5)) * spacing - 0.5;
    cell.cx = left + (i % grid + 0.5 + 0.5 * (u53(a[2], a[3]) - 0.5)) * spacing - 0.5;
    cell.target = (c.rate_min_hz + (c.rate_max_hz - c.rate_min_hz) * u53(b[0], b[1])) * c.bin_s;
    const double jitter = 0.85 + 0.3 * u53(b[2], b[3]);
    const auto gamma3 = [](double t, double tau) { return std::pow(t / tau, 3) * std::exp(-t / tau) / (27.0 * std::exp(-3.0)); };
    double norm = 0;
    for (int k = 0; k < kTaps; ++k) {
      cell.temporal[k] = gamma3(k, c.tau1 * jitter) - c.biphasic * gamma3(k, c.tau2 * jitter);
      norm += cell.temporal[k] * cell.temporal[k];
    }
    for (double& v : cell.temporal) v /= std::sqrt(norm);
    double weights = 0;
    for (int j = 0; j < c.subunits; ++j) {
      Subunit s;
      const G::ctr_type r = rng.block(kCells, 0, static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(j + 1), 0);
      const auto z = normals(r);
      const double sy = std::clamp(cell.cy + c.rf_radius * z[0], 0.0, c.height - 1.0), sx = std::clamp(cell.cx + c.rf_radius * z[1], 0.0, c.width - 1.0);
      s.weight = 0.5 + u53(rng.block(kCells, 0, static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(j + 1), 1)[0], r[3]);
      weights += s.weight;
      s.y0 = std::max(0, static_cast<int>(sy) - reach), s.x0 = std::max(0, static_cast<int>(sx) - reach);
      s.h = std::min(c.height, static_cast<int>(sy) + reach + 2) - s.y0, s.w = std::min(c.width, static_cast<int>(sx) + reach + 2) - s.x0;
      s.kernel.resize(static_cast<std::size_t>(s.h) * s.w);
      const double ac = 1 / (2 * M_PI * c.subunit_sigma * c.subunit_sigma), as = c.surround_strength / (2 * M_PI * c.surround_sigma * c.surround_sigma);
      double kn = 0;
      for (int y = 0; y < s.h; ++y)
        for (int x = 0; x < s.w; ++x) {
          const double d2 = std::pow(s.y0 + y - sy, 2) + std::pow(s.x0 + x - sx, 2);
          const double v = ac * std::exp(-d2 / (2 * c.subunit_sigma * c.subunit_sigma)) - as * std::exp(-d2 / (2 * c.surround_sigma * c.surround_sigma));
          s.kernel[static_cast<std::size_t>(y) * s.w + x] = v;
          kn += v * v;
        }
      for (double& v : s.kernel) v /= std::sqrt(kn);
      cell.subunits.push_back(std::move(s));
    }
    for (Subunit& s : cell.subunits) s.weight /= weights;
  }
  return cells;
}

double sd_of(const std::vector<double>& v) {
  double sum = 0, sq = 0;
  for (double x : v) sum += x;
  const double mean = sum / v.size();
  for (double x : v) sq += (x - mean) * (x - mean);
  return std::sqrt(sq / v.size());
}

// The expected spikes per bin of every cell for a split's movie. `fit` (the train split) sets the
// subunits' and the drive's scales and the offsets that the test split then reuses.
Eigen::MatrixXd expected_rate(const SynthConfig& c, std::vector<Cell>& cells, const Split& s, bool fit) {
  const int F = s.frames, W = s.width;
  Eigen::MatrixXd rate(static_cast<Eigen::Index>(cells.size()), F);
  std::vector<double> spatial(static_cast<std::size_t>(F)), drive(static_cast<std::size_t>(F)), u(static_cast<std::size_t>(F));
  for (std::size_t i = 0; i < cells.size(); ++i) {
    Cell& cell = cells[i];
    std::fill(u.begin(), u.end(), 0.0);
    for (Subunit& sub : cell.subunits) {
      for (int t = 0; t < F; ++t) {
        const float* frame = s.stimulus.data() + static_cast<std::size_t>(t) * s.height * W;
        double acc = 0;
        for (int y = 0; y < sub.h; ++y) {
          const float* row = frame + static_cast<std::size_t>(sub.y0 + y) * W + sub.x0;
          const double* k = sub.kernel.data() + static_cast<std::size_t>(y) * sub.w;
          for (int x = 0; x < sub.w; ++x) acc += k[x] * row[x];
        }
        spatial[static_cast<std::size_t>(t)] = acc;
      }
      for (int t = 0; t < F; ++t) {
        double acc = 0;
        for (int k = 0; k < kTaps && k <= t; ++k) acc += cell.temporal[k] * spatial[static_cast<std::size_t>(t - k)];
        drive[static_cast<std::size_t>(t)] = acc;
      }
      if (fit) sub.sd = std::max(sd_of(drive), 1e-12);
      for (int t = 0; t < F; ++t)
        u[static_cast<std::size_t>(t)] += sub.weight * std::max(0.0, cell.polarity * drive[static_cast<std::size_t>(t)] / sub.sd - c.subunit_threshold);
    }
    if (fit) {
      cell.u_sd = std::max(sd_of(u), 1e-12);
      const auto mean_rate = [&](double b) {
        double sum = 0;
        for (double v : u) sum += softplus(c.output_gain * v / cell.u_sd + b);
        return sum / F;
      };
      double lo = -80, hi = 20;
      for (int it = 0; it < 100; ++it) {
        const double mid = 0.5 * (lo + hi);
        (mean_rate(mid) < cell.target ? lo : hi) = mid;
      }
      cell.offset = 0.5 * (lo + hi);
    }
    for (int t = 0; t < F; ++t) rate(static_cast<Eigen::Index>(i), t) = softplus(c.output_gain * u[static_cast<std::size_t>(t)] / cell.u_sd + cell.offset);
  }
  return rate;
}

Eigen::MatrixXd spikes(const Rng& rng, std::uint32_t split, std::uint32_t trial, const Eigen::MatrixXd& lambda) {
  Eigen::MatrixXd counts(lambda.rows(), lambda.cols());
  for (Eigen::Index i = 0; i < lambda.rows(); ++i)
    for (Eigen::Index t = 0; t < lambda.cols(); ++t) {
      const G::ctr_type r = rng.block(kSpikes, split, trial, static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(t));
      counts(i, t) = poisson(lambda(i, t), u53(r[0], r[1]));
    }
  return counts;
}

std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.17g", v);
  return b;
}

}  // namespace

std::string SynthConfig::text() const {
  std::string t = "height=" + std::to_string(height) + " width=" + std::to_string(width) + " cells=" + std::to_string(cells) +
                  " train_frames=" + std::to_string(train_frames) + " test_frames=" + std::to_string(test_frames) +
                  " repeats=" + std::to_string(repeats) + " bin_s=" + num(bin_s) + " seed=" + std::to_string(seed) +
                  " images=" + std::to_string(images) + " image_size=" + std::to_string(image_size) + " skew=" + num(skew) +
                  " drift_px=" + num(drift_px) + " saccade_frames=" + num(saccade_frames) + " rf_region=" + num(rf_region) +
                  " subunits=" + std::to_string(subunits) + " rf_radius=" + num(rf_radius) + " subunit_sigma=" + num(subunit_sigma) +
                  " surround_sigma=" + num(surround_sigma) + " surround_strength=" + num(surround_strength) + " tau1=" + num(tau1) +
                  " tau2=" + num(tau2) + " biphasic=" + num(biphasic) + " subunit_threshold=" + num(subunit_threshold) +
                  " output_gain=" + num(output_gain) + " rate_min_hz=" + num(rate_min_hz) + " rate_max_hz=" + num(rate_max_hz);
  return t;
}

Eigen::MatrixXd smooth_rate(const Eigen::MatrixXd& counts) {
  constexpr int kReach = 4;
  double w[2 * kReach + 1];
  for (int d = -kReach; d <= kReach; ++d) w[d + kReach] = std::exp(-0.5 * d * d);
  const Eigen::Index F = counts.cols();
  Eigen::MatrixXd out(counts.rows(), F);
  for (Eigen::Index i = 0; i < counts.rows(); ++i)
    for (Eigen::Index t = 0; t < F; ++t) {
      double sum = 0, norm = 0;
      for (int d = -kReach; d <= kReach; ++d)
        if (t + d >= 0 && t + d < F) sum += w[d + kReach] * counts(i, t + d), norm += w[d + kReach];
      out(i, t) = sum / norm;
    }
  return out;
}

Dataset synthesize(const SynthConfig& c) {
  check_config(c);
  const Rng rng(c.seed);
  Dataset d;
  d.synthetic = true;
  d.seed = c.seed;
  d.bin_s = c.bin_s;
  d.config = c.text();
  Split* splits[2] = {&d.train, &d.test};
  const int frames[2] = {c.train_frames, c.test_frames};
  for (std::uint32_t s = 0; s < 2; ++s) {
    splits[s]->frames = frames[s], splits[s]->height = c.height, splits[s]->width = c.width;
    splits[s]->stimulus = make_movie(c, rng, s, frames[s]);
  }
  // contrast units over the whole file, as the models see a real file's stimulus after z-scoring
  double sum = 0, sq = 0, n = 0;
  for (const Split* s : splits)
    for (float v : s->stimulus) sum += v, n += 1;
  const double mean = sum / n;
  for (const Split* s : splits)
    for (float v : s->stimulus) sq += (v - mean) * (v - mean);
  const double sd = std::sqrt(sq / n);
  for (Split* s : splits)
    for (float& v : s->stimulus) v = static_cast<float>((v - mean) / sd);

  std::vector<Cell> cells = make_cells(c, rng);
  d.train.true_rate = expected_rate(c, cells, d.train, true);
  d.test.true_rate = expected_rate(c, cells, d.test, false);
  d.train.counts = spikes(rng, 0, 0, d.train.true_rate);
  d.train.rate = smooth_rate(d.train.counts);
  std::vector<Eigen::MatrixXd> trials;
  for (int r = 0; r < c.repeats; ++r) trials.push_back(spikes(rng, 1, static_cast<std::uint32_t>(r), d.test.true_rate));
  d.test.counts = trials[0];
  Eigen::MatrixXd mean_trial = Eigen::MatrixXd::Zero(c.cells, c.test_frames);
  for (const auto& m : trials) mean_trial += m;
  mean_trial /= c.repeats;
  d.test.rate = smooth_rate(mean_trial);
  for (int i = 0; i < c.cells; ++i) {
    Eigen::MatrixXd rep(c.repeats, c.test_frames);
    for (int r = 0; r < c.repeats; ++r) rep.row(r) = trials[static_cast<std::size_t>(r)].row(i);
    d.test.repeats.push_back(std::move(rep));
  }
  int on = 0;
  for (const Cell& cell : cells) {
    d.polarity.push_back(cell.polarity);
    d.center.push_back({cell.cy, cell.cx});
    on += cell.polarity > 0;
  }
  d.description = "SYNTHETIC retina: a seeded model (seed " + std::to_string(c.seed) + ") of " + std::to_string(c.cells) + " RGCs (" +
                  std::to_string(on) + " ON, " + std::to_string(c.cells - on) +
                  " OFF; rectified DoG subunits, softplus, Poisson spikes) watching 1/f^2 movies with fixational drift and saccades; "
                  "not recorded data (aoc models/retina_data.hpp)";
  return d;
}

// ---- the file ----

namespace {

bool has(const H5::Group& g, const std::string& path) {
  std::size_t at = 0;
  while (true) {
    const std::size_t slash = path.find('/', at);
    const std::string prefix = path.substr(0, slash);
    if (H5Lexists(g.getId(), prefix.c_str(), H5P_DEFAULT) <= 0) return false;
    if (slash == std::string::npos) return true;
    at = slash + 1;
  }
}

void put_matrix(H5::Group& g, const std::string& name, const Eigen::MatrixXd& m) {
  const RowMatrix r = m;
  const hsize_t dims[2] = {static_cast<hsize_t>(m.rows()), static_cast<hsize_t>(m.cols())};
  H5::DataSet d = g.createDataSet(name, H5::PredType::IEEE_F64LE, H5::DataSpace(2, dims), untimed_dataset());
  if (r.size()) d.write(r.data(), H5::PredType::NATIVE_DOUBLE);
}

void put_split(H5::H5File& f, const std::string& name, const Split& s, bool synthetic) {
  H5::Group g = create_group(f, name);
  const hsize_t dims[3] = {static_cast<hsize_t>(s.frames), static_cast<hsize_t>(s.height), static_cast<hsize_t>(s.width)};
  H5::DataSet st = g.createDataSet("stimulus", H5::PredType::IEEE_F32LE, H5::DataSpace(3, dims), untimed_dataset());
  if (!s.stimulus.empty()) st.write(s.stimulus.data(), H5::PredType::NATIVE_FLOAT);
  H5::Group r = create_group(g, "response");
  put_matrix(r, "binned", s.counts);
  put_matrix(r, "firing_rate_10ms", s.rate);
  if (synthetic && s.true_rate.size()) put_matrix(r, "true_rate", s.true_rate);
  if (!s.repeats.empty()) {
    H5::Group rep = create_group(g, "repeats");
    for (std::size_t i = 0; i < s.repeats.size(); ++i) {
      char cell[32];
      std::snprintf(cell, sizeof cell, "cell%02zu", i + 1);
      put_matrix(rep, cell, s.repeats[i]);
    }
  }
}

void check_split_shape(const Split& s, const std::string& name) {
  const auto bad = [&](const std::string& what) { return Error("retina write: " + name + ": " + what); };
  if (s.frames < 1 || s.height < 1 || s.width < 1) throw bad("no frames or an empty frame");
  if (s.stimulus.size() != static_cast<std::size_t>(s.frames) * s.height * s.width) throw bad("stimulus size is not frames x height x width");
  if (s.counts.cols() != s.frames || s.rate.cols() != s.frames || s.rate.rows() != s.counts.rows()) throw bad("responses are not cells x frames");
  if (s.true_rate.size() && (s.true_rate.rows() != s.counts.rows() || s.true_rate.cols() != s.frames)) throw bad("true_rate is not cells x frames");
  if (!s.repeats.empty() && static_cast<Eigen::Index>(s.repeats.size()) != s.counts.rows()) throw bad("repeats are not one per cell");
  for (const auto& r : s.repeats)
    if (r.cols() != s.frames) throw bad("repeats are not repeats x frames");
}

// A numeric dataset of exactly rank `rank`, finite, checked against nothing else yet.
std::vector<double> read_numbers(const H5::H5File& f, const std::string& path, const std::string& name, int rank, std::vector<std::uint64_t>& dims) {
  const std::string where = path + ": /" + name;
  H5Extent e;
  std::vector<double> v;
  try {
    v = h5_numbers(f.openDataSet(name), where, rank, &e);
  } catch (const H5::Exception& x) {
    throw Error(where + ": cannot read as a dataset (" + x.getDetailMsg() + ")");
  }
  if (static_cast<int>(e.dims.size()) != rank)
    throw Error(where + ": expected " + std::to_string(rank) + " dimensions, got " + std::to_string(e.dims.size()));
  for (std::size_t i = 0; i < v.size(); ++i)
    if (!std::isfinite(v[i])) throw Error(where + ": NaN or infinite value at element " + std::to_string(i));
  dims = e.dims;
  return v;
}

// [cells, frames], finite, non-negative, `frames` columns.
Eigen::MatrixXd read_responses(const H5::H5File& f, const std::string& path, const std::string& name, int frames, const std::string& stim) {
  std::vector<std::uint64_t> dims;
  const std::vector<double> v = read_numbers(f, path, name, 2, dims);
  const std::string where = path + ": /" + name;
  if (dims[1] != static_cast<std::uint64_t>(frames))
    throw Error(where + ": " + std::to_string(dims[1]) + " frames, but /" + stim + " has " + std::to_string(frames) +
                " (expected cells x frames)");
  if (dims[0] < 1) throw Error(where + ": no cells");
  Eigen::MatrixXd m = Eigen::Map<const RowMatrix>(v.data(), static_cast<Eigen::Index>(dims[0]), static_cast<Eigen::Index>(dims[1]));
  for (Eigen::Index i = 0; i < m.rows(); ++i)
    for (Eigen::Index t = 0; t < m.cols(); ++t)
      if (m(i, t) < 0)
        throw Error(where + ": negative value " + num(m(i, t)) + " at (" + std::to_string(i) + ", " + std::to_string(t) + ")");
  return m;
}

// The stimulus straight into float32: a real training movie runs to ~10^9 values, which as double
// (h5_numbers) would need twice the memory.
std::vector<float> read_stimulus(const H5::H5File& f, const std::string& path, const std::string& name, Split& s) {
  const std::string where = path + ": /" + name;
  try {
    H5::DataSet d = f.openDataSet(name);
    const H5T_class_t cls = d.getTypeClass();
    if (cls != H5T_INTEGER && cls != H5T_FLOAT) throw Error(where + ": expected numbers, got another type class");
    const H5::DataSpace space = d.getSpace();
    if (!space.isSimple()) throw Error(where + ": not a simple dataspace");
    const int rank = space.getSimpleExtentNdims();
    if (rank != 3) throw Error(where + ": expected 3 dimensions (frames, height, width), got " + std::to_string(rank));
    hsize_t dims[3];
    space.getSimpleExtentDims(dims);
    for (hsize_t v : dims)
      if (v < 1 || v > static_cast<hsize_t>(INT_MAX)) throw Error(where + ": a dimension of " + std::to_string(v));
    // a frame is under 2^62 values (each side under 2^31), the whole then under 2^31 * 2^31 once the frame passes
    const std::uint64_t frame = std::uint64_t(dims[1]) * dims[2];
    const std::uint64_t count = frame > kMaxStimulusValues ? frame : frame * dims[0];
    if (frame > kMaxStimulusValues || count > kMaxStimulusValues)
      throw Error(where + ": " + std::to_string(dims[0]) + " x " + std::to_string(dims[1]) + " x " + std::to_string(dims[2]) +
                  " values, more than aoc's limit of 2^31");
    const std::uint64_t need = count * d.getDataType().getSize();
    const std::uint64_t stored = H5Dget_storage_size(d.getId());
    const H5::DSetCreatPropList plist = d.getCreatePlist();
    const std::uint64_t room = plist.getNfilters() > 0 ? stored * 1100 : stored;  // deflate's limit is about 1000x
    if (need > room)
      throw Error(where + ": declares " + std::to_string(need) + " bytes of data, but " + std::to_string(stored) +
                  " are stored (an unwritten or damaged dataset?)");
    s.frames = static_cast<int>(dims[0]), s.height = static_cast<int>(dims[1]), s.width = static_cast<int>(dims[2]);
    std::vector<float> v;
    try {
      v.resize(static_cast<std::size_t>(count));
    } catch (const std::bad_alloc&) {
      throw Error(where + ": " + std::to_string(count) + " values do not fit in this machine's memory");
    }
    d.read(v.data(), H5::PredType::NATIVE_FLOAT);
    for (std::size_t i = 0; i < v.size(); ++i)
      if (!std::isfinite(v[i]))
        throw Error(where + ": NaN or infinite value in frame " + std::to_string(i / (static_cast<std::size_t>(s.height) * s.width)));
    return v;
  } catch (const H5::Exception& x) {
    throw Error(where + ": cannot read (" + x.getDetailMsg() + ")");
  }
}

void read_split(const H5::H5File& f, const std::string& path, const std::string& name, Split& s, std::string& notes) {
  const std::string stim = name + "/stimulus";
  if (!has(f, stim)) throw Error(path + ": /" + stim + ": missing dataset");
  s.stimulus = read_stimulus(f, path, stim, s);
  const std::string binned = name + "/response/binned", fr = name + "/response/firing_rate_10ms", tr = name + "/response/true_rate";
  const bool has_binned = has(f, binned), has_rate = has(f, fr);
  if (!has_binned && !has_rate) throw Error(path + ": /" + name + "/response: neither binned nor firing_rate_10ms");
  if (has_binned) s.counts = read_responses(f, path, binned, s.frames, stim);
  if (has_rate) s.rate = read_responses(f, path, fr, s.frames, stim);
  if (!has_binned) {
    s.counts = s.rate;
    notes += "; " + name + " counts are firing_rate_10ms (no /" + binned + ")";
  }
  if (!has_rate) {
    s.rate = smooth_rate(s.counts);
    notes += "; " + name + " rate is binned smoothed (no /" + fr + ")";
  }
  if (s.rate.rows() != s.counts.rows())
    throw Error(path + ": /" + fr + ": " + std::to_string(s.rate.rows()) + " cells, but /" + binned + " has " + std::to_string(s.counts.rows()));
  if (has(f, tr)) {
    s.true_rate = read_responses(f, path, tr, s.frames, stim);
    if (s.true_rate.rows() != s.counts.rows())
      throw Error(path + ": /" + tr + ": " + std::to_string(s.true_rate.rows()) + " cells, but the responses have " + std::to_string(s.counts.rows()));
  }
  const std::string reps = name + "/repeats";
  if (!has(f, reps)) return;
  for (int i = 1; i <= s.cells(); ++i) {
    char cell[32];
    std::snprintf(cell, sizeof cell, "cell%02d", i);
    const std::string rn = reps + "/" + cell;
    if (!has(f, rn)) throw Error(path + ": /" + rn + ": missing dataset (/" + reps + " needs one per cell, " + std::to_string(s.cells()) + ")");
    std::vector<std::uint64_t> dims;
    const std::vector<double> v = read_numbers(f, path, rn, 2, dims);
    if (dims[1] != static_cast<std::uint64_t>(s.frames))
      throw Error(path + ": /" + rn + ": repeats of " + std::to_string(dims[1]) + " frames, but /" + stim + " has " + std::to_string(s.frames));
    if (dims[0] < 1) throw Error(path + ": /" + rn + ": no repeats");
    Eigen::MatrixXd m = Eigen::Map<const RowMatrix>(v.data(), static_cast<Eigen::Index>(dims[0]), static_cast<Eigen::Index>(dims[1]));
    if (m.minCoeff() < 0) throw Error(path + ": /" + rn + ": negative count " + num(m.minCoeff()));
    s.repeats.push_back(std::move(m));
  }
}

std::optional<double> attr_number(const H5::H5File& f, const std::string& path, const std::string& name) {
  if (H5Aexists(f.getId(), name.c_str()) <= 0) return std::nullopt;
  const std::string where = path + ": attribute " + name;
  try {
    const std::vector<double> v = h5_numbers(f.openAttribute(name), where, 0);
    if (v.size() != 1 || !std::isfinite(v[0])) throw Error(where + ": expected one finite number");
    return v[0];
  } catch (const H5::Exception& e) {
    throw Error(where + ": cannot read (" + e.getDetailMsg() + ")");
  }
}

std::optional<std::string> attr_text(const H5::H5File& f, const std::string& path, const std::string& name) {
  if (H5Aexists(f.getId(), name.c_str()) <= 0) return std::nullopt;
  const std::string where = path + ": attribute " + name;
  try {
    return h5_string(f.openAttribute(name), where);
  } catch (const H5::Exception& e) {
    throw Error(where + ": cannot read (" + e.getDetailMsg() + ")");
  }
}

}  // namespace

void write_dataset(const std::string& path, const Dataset& d) {
  check_split_shape(d.train, "train");
  check_split_shape(d.test, "test");
  if (d.train.cells() != d.test.cells() || d.train.height != d.test.height || d.train.width != d.test.width)
    throw Error("retina write: train and test differ in cells or frame size");
  if (d.polarity.size() != d.center.size() || (!d.polarity.empty() && static_cast<int>(d.polarity.size()) != d.train.cells()))
    throw Error("retina write: polarity and center must have one entry per cell");
  write_h5_atomic(path, [&](H5::H5File& f) {
    put_split(f, "train", d.train, d.synthetic);
    put_split(f, "test", d.test, d.synthetic);
    if (!d.polarity.empty()) {
      H5::Group truth = create_group(f, "truth");
      const hsize_t n = d.polarity.size(), dims[2] = {n, 2};
      std::vector<std::int32_t> pol(d.polarity.begin(), d.polarity.end());
      truth.createDataSet("polarity", H5::PredType::STD_I32LE, H5::DataSpace(1, &n), untimed_dataset()).write(pol.data(), H5::PredType::NATIVE_INT32);
      truth.createDataSet("center", H5::PredType::IEEE_F64LE, H5::DataSpace(2, dims), untimed_dataset())
          .write(d.center.data(), H5::PredType::NATIVE_DOUBLE);
    }
    const std::uint8_t synthetic = d.synthetic ? 1 : 0;
    const H5::DataSpace scalar(H5S_SCALAR);
    f.createAttribute("synthetic", H5::PredType::STD_U8LE, scalar).write(H5::PredType::NATIVE_UINT8, &synthetic);
    f.createAttribute("seed", H5::PredType::STD_U64LE, scalar).write(H5::PredType::NATIVE_UINT64, &d.seed);
    f.createAttribute("bin_s", H5::PredType::IEEE_F64LE, scalar).write(H5::PredType::NATIVE_DOUBLE, &d.bin_s);
    h5_put_text_attr(f, "description", d.description);
    h5_put_text_attr(f, "aoc_version", AOC_VERSION);
    h5_put_text_attr(f, "stimulus_units", "contrast");
    if (!d.config.empty()) h5_put_text_attr(f, "config", d.config);
  });
}

Dataset read_dataset(const std::string& path) {
  H5::H5File f = open_h5_read(path);
  Dataset d;
  std::string notes;
  read_split(f, path, "train", d.train, notes);
  read_split(f, path, "test", d.test, notes);
  if (d.train.cells() != d.test.cells())
    throw Error(path + ": /test/response: " + std::to_string(d.test.cells()) + " cells, but /train/response has " + std::to_string(d.train.cells()));
  if (d.train.height != d.test.height || d.train.width != d.test.width)
    throw Error(path + ": /test/stimulus: frames of " + std::to_string(d.test.height) + " x " + std::to_string(d.test.width) +
                ", but /train/stimulus has " + std::to_string(d.train.height) + " x " + std::to_string(d.train.width));
  d.synthetic = attr_number(f, path, "synthetic").value_or(0) != 0;
  if (H5Aexists(f.getId(), "seed") > 0) {
    try {
      const std::vector<std::uint64_t> seed = h5_u64s(f.openAttribute("seed"), path + ": attribute seed");
      if (seed.size() != 1) throw Error(path + ": attribute seed: expected one number");
      d.seed = seed[0];
    } catch (const H5::Exception& e) {
      throw Error(path + ": attribute seed: cannot read (" + e.getDetailMsg() + ")");
    }
  }
  d.bin_s = attr_number(f, path, "bin_s").value_or(0.01);
  if (!(d.bin_s > 0 && d.bin_s <= 1)) throw Error(path + ": attribute bin_s: " + num(d.bin_s) + " s is not in (0, 1]");
  d.config = attr_text(f, path, "config").value_or("");
  if (attr_text(f, path, "stimulus_units").value_or("") != "contrast") {
    double sum = 0, sq = 0, n = 0;
    for (const Split* s : {&d.train, &d.test})
      for (float v : s->stimulus) sum += v, n += 1;
    const double mean = sum / n;
    for (const Split* s : {&d.train, &d.test})
      for (float v : s->stimulus) sq += (v - mean) * (v - mean);
    const double sd = std::sqrt(sq / n);
    if (!(sd > 0)) throw Error(path + ": /train/stimulus, /test/stimulus: constant (no contrast)");
    for (Split* s : {&d.train, &d.test})
      for (float& v : s->stimulus) v = static_cast<float>((v - mean) / sd);
    notes += "; stimulus z-scored on reading (mean " + num(mean) + ", sd " + num(sd) + ")";
  }
  if (d.synthetic != (d.train.true_rate.size() > 0))
    throw Error(path + ": attribute synthetic is " + std::string(d.synthetic ? "1" : "0") + " but /train/response/true_rate is " +
                (d.synthetic ? "missing" : "present"));
  if (has(f, "truth/polarity") != has(f, "truth/center")) throw Error(path + ": /truth: needs both polarity and center");
  if (has(f, "truth/polarity")) {
    std::vector<std::uint64_t> dims;
    const std::vector<double> pol = read_numbers(f, path, "truth/polarity", 1, dims);
    const std::vector<double> ctr = read_numbers(f, path, "truth/center", 2, dims);
    if (static_cast<int>(pol.size()) != d.train.cells() || dims[0] != pol.size() || dims[1] != 2)
      throw Error(path + ": /truth: expected polarity (cells) and center (cells, 2) for " + std::to_string(d.train.cells()) + " cells");
    for (std::size_t i = 0; i < pol.size(); ++i) {
      if (pol[i] != 1 && pol[i] != -1) throw Error(path + ": /truth/polarity: " + num(pol[i]) + " is neither 1 (ON) nor -1 (OFF)");
      d.polarity.push_back(static_cast<int>(pol[i]));
      d.center.push_back({ctr[2 * i], ctr[2 * i + 1]});
    }
  }
  const std::string stated = attr_text(f, path, "description").value_or("");
  if (d.synthetic) {
    d.description = stated.rfind("SYNTHETIC", 0) == 0 ? stated : "SYNTHETIC retina: " + stated;
  } else {
    d.description = "recorded retina " + path + (stated.empty() ? "" : " (" + stated + ")");
  }
  d.description += notes;
  return d;
}

// ---- the scores ----

double poisson_nll(const Eigen::MatrixXd& counts, const Eigen::MatrixXd& pred, int skip) {
  if (counts.rows() != pred.rows() || counts.cols() != pred.cols())
    throw Error("poisson_nll: predictions are " + std::to_string(pred.rows()) + " x " + std::to_string(pred.cols()) + ", the counts " +
                std::to_string(counts.rows()) + " x " + std::to_string(counts.cols()));
  if (skip < 0 || skip >= counts.cols()) throw Error("poisson_nll: skip " + std::to_string(skip) + " leaves no frames of " + std::to_string(counts.cols()));
  double sum = 0;
  for (Eigen::Index i = 0; i < counts.rows(); ++i)
    for (Eigen::Index t = skip; t < counts.cols(); ++t) {
      const double p = std::max(pred(i, t), 1e-8), y = counts(i, t);
      sum += p - y * std::log(p) + std::lgamma(y + 1);
    }
  return sum / (static_cast<double>(counts.rows()) * static_cast<double>(counts.cols() - skip));
}

Scores score(const Split& test, const Eigen::MatrixXd& pred, int skip) {
  const int C = test.cells(), F = test.frames;
  if (pred.rows() != C || pred.cols() != F)
    throw Error("retina score: predictions are " + std::to_string(pred.rows()) + " cells x " + std::to_string(pred.cols()) +
                " frames, the test split has " + std::to_string(C) + " x " + std::to_string(F));
  if (skip < 0 || skip > F - 2) throw Error("retina score: skip " + std::to_string(skip) + " leaves fewer than 2 of " + std::to_string(F) + " frames");
  if (!pred.allFinite()) throw Error("retina score: NaN or infinite predictions");
  if (!test.repeats.empty() && static_cast<int>(test.repeats.size()) != C) throw Error("retina score: repeats are not one per cell");
  Scores s;
  const int n = F - skip;
  for (int i = 0; i < C; ++i) {
    Eigen::VectorXd ybar(n);
    double s2 = 0;
    if (test.repeats.empty()) {
      ybar = test.rate.row(i).segment(skip, n).transpose();
    } else {
      const Eigen::MatrixXd rep = test.repeats[static_cast<std::size_t>(i)].middleCols(skip, n);
      const Eigen::Index R = rep.rows();
      ybar = rep.colwise().mean().transpose();
      if (R >= 2) {
        const double unbiased = (rep.rowwise() - ybar.transpose()).array().square().colwise().sum().sum() / (R - 1);  // summed over t
        s2 = unbiased / n / R;
      }
    }
    const Eigen::VectorXd p = pred.row(i).segment(skip, n).transpose();
    const Eigen::VectorXd pc = p.array() - p.mean(), yc = ybar.array() - ybar.mean();
    const double vp = pc.squaredNorm(), vy = yc.squaredNorm();
    s.cc.push_back(vp > 0 && vy > 0 ? pc.dot(yc) / std::sqrt(vp * vy) : 0.0);
    const double var = vy / n, mse = (p - ybar).squaredNorm() / n;
    s.fev.push_back(var > s2 ? 1 - (mse - s2) / (var - s2) : std::numeric_limits<double>::quiet_NaN());
    s.nll.push_back(poisson_nll(test.counts.row(i), pred.row(i), skip));
  }
  const auto mean = [](const std::vector<double>& v) {
    double sum = 0;
    for (double x : v) sum += x;
    return sum / v.size();
  };
  s.cc_mean = mean(s.cc), s.fev_mean = mean(s.fev), s.nll_mean = mean(s.nll);
  return s;
}

Split slice(const Split& s, int first, int n) {
  if (first < 0 || n < 1 || first + n > s.frames)
    throw Error("retina: frames " + std::to_string(first) + " .. " + std::to_string(first + n) + " of a split of " + std::to_string(s.frames));
  Split v;
  v.frames = n, v.height = s.height, v.width = s.width;
  const std::size_t px = static_cast<std::size_t>(s.height) * static_cast<std::size_t>(s.width);
  v.stimulus.assign(s.stimulus.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(first) * px),
                    s.stimulus.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(first + n) * px));
  v.counts = s.counts.middleCols(first, n);
  v.rate = s.rate.middleCols(first, n);
  if (s.true_rate.size()) v.true_rate = s.true_rate.middleCols(first, n);
  for (const auto& r : s.repeats) v.repeats.push_back(r.middleCols(first, n));
  return v;
}

}  // namespace aoc::retina
