// The retina workload's data (models/retina_data.hpp): the SYNTHETIC retina's determinism, shapes,
// rates, cell polarities and movie statistics; the naturalscene.h5 reader and writer and the
// reader's refusals; the scores (CC, FEV, Poisson NLL) against hand-worked values; aoc retina.
#include <catch2/catch.hpp>

#include <H5Cpp.h>

#include <cmath>
#include <complex>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "models/retina_data.hpp"
#include "runtime/io/h5io.hpp"
#include "sim/error.hpp"
#include "sim/h5file.hpp"
#include "tests/support.hpp"

namespace {

namespace fs = std::filesystem;
using namespace aoc::retina;

// Small enough to generate in a fraction of a second, long enough for the statistics below.
SynthConfig small_config(std::uint64_t seed = 3) {
  SynthConfig c;
  c.height = c.width = 32;
  c.cells = 4;
  c.train_frames = 2000, c.test_frames = 1000, c.repeats = 5;
  c.images = 4, c.image_size = 128;
  c.rf_region = 14;
  c.seed = seed;
  return c;
}

const Dataset& small() {
  static const Dataset d = synthesize(small_config());
  return d;
}

SynthConfig tiny_config(std::uint64_t seed = 5) {
  SynthConfig c = small_config(seed);
  c.height = c.width = 16, c.cells = 2, c.train_frames = 120, c.test_frames = 60, c.repeats = 3, c.images = 2, c.image_size = 32, c.rf_region = 8;
  return c;
}

// One folder per test process, removed when it exits.
fs::path scratch(const std::string& name) {
  static const struct Dir {
    fs::path path = fs::temp_directory_path() / ("aoc-retina-test-" + std::to_string(::getpid()));
    ~Dir() {
      std::error_code ec;
      fs::remove_all(path, ec);
    }
  } dir;
  fs::create_directories(dir.path);
  return dir.path / name;
}

std::string bytes_of(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

double pearson(const Eigen::VectorXd& a, const Eigen::VectorXd& b) {
  const Eigen::VectorXd x = a.array() - a.mean(), y = b.array() - b.mean();
  return x.dot(y) / std::sqrt(x.squaredNorm() * y.squaredNorm());
}

// A valid tiny file, then `edit` applied to it in place: how the reader's refusals are provoked.
fs::path damaged(const std::string& name, const std::function<void(H5::H5File&)>& edit) {
  const fs::path p = scratch(name);
  write_dataset(p.string(), synthesize(tiny_config()));
  H5::H5File f(p.string(), H5F_ACC_RDWR);
  edit(f);
  return p;
}

void put(H5::H5File& f, const std::string& name, const std::vector<hsize_t>& dims, const std::vector<double>& v) {
  if (H5Lexists(f.getId(), name.c_str(), H5P_DEFAULT) > 0) f.unlink(name);
  f.createDataSet(name, H5::PredType::IEEE_F64LE, H5::DataSpace(static_cast<int>(dims.size()), dims.data())).write(v.data(), H5::PredType::NATIVE_DOUBLE);
}

std::string read_error(const fs::path& p) {
  try {
    read_dataset(p.string());
  } catch (const aoc::Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("retina data: the same seed gives bit-identical files") {
  const fs::path a = scratch("same-a.h5"), b = scratch("same-b.h5"), c = scratch("other.h5");
  write_dataset(a.string(), synthesize(tiny_config(5)));
  write_dataset(b.string(), synthesize(tiny_config(5)));
  write_dataset(c.string(), synthesize(tiny_config(6)));
  CHECK(bytes_of(a) == bytes_of(b));
  CHECK(bytes_of(a) != bytes_of(c));
}

TEST_CASE("retina data: splits have the documented shapes") {
  const Dataset& d = small();
  const SynthConfig c = small_config();
  CHECK(d.synthetic);
  CHECK(d.description.rfind("SYNTHETIC retina:", 0) == 0);
  for (const Split* s : {&d.train, &d.test}) {
    CHECK(s->height == 32);
    CHECK(s->width == 32);
    CHECK(s->stimulus.size() == static_cast<std::size_t>(s->frames) * 32 * 32);
    CHECK(s->counts.rows() == c.cells);
    CHECK(s->counts.cols() == s->frames);
    CHECK(s->rate.rows() == c.cells);
    CHECK(s->rate.cols() == s->frames);
    CHECK(s->true_rate.rows() == c.cells);
    CHECK(s->true_rate.cols() == s->frames);
  }
  CHECK(d.train.frames == c.train_frames);
  CHECK(d.test.frames == c.test_frames);
  CHECK(d.train.repeats.empty());
  REQUIRE(d.test.repeats.size() == static_cast<std::size_t>(c.cells));
  for (const auto& r : d.test.repeats) {
    CHECK(r.rows() == c.repeats);
    CHECK(r.cols() == c.test_frames);
  }
  CHECK(d.polarity.size() == static_cast<std::size_t>(c.cells));
}

TEST_CASE("retina data: the stimulus is in contrast units over the file") {
  const Dataset& d = small();
  double sum = 0, sq = 0, n = 0;
  for (const Split* s : {&d.train, &d.test})
    for (float v : s->stimulus) sum += v, sq += double(v) * v, n += 1;
  CHECK(std::abs(sum / n) < 1e-5);
  CHECK(std::abs(std::sqrt(sq / n - (sum / n) * (sum / n)) - 1) < 1e-5);
}

TEST_CASE("retina data: test repeats share the expected rate and differ in their spikes") {
  const Dataset& d = small();
  for (int i = 0; i < d.test.cells(); ++i) {
    const Eigen::MatrixXd& r = d.test.repeats[static_cast<std::size_t>(i)];
    CHECK(r.row(0) == d.test.counts.row(i));
    CHECK(r.row(0) != r.row(1));
    CHECK((r.array() >= 0).all());
    CHECK((r.array() == r.array().round()).all());
  }
  Eigen::MatrixXd mean(d.test.cells(), d.test.frames);
  for (int i = 0; i < d.test.cells(); ++i) mean.row(i) = d.test.repeats[static_cast<std::size_t>(i)].colwise().mean();
  CHECK((d.test.rate - smooth_rate(mean)).cwiseAbs().maxCoeff() == 0);
  CHECK((d.train.rate - smooth_rate(d.train.counts)).cwiseAbs().maxCoeff() == 0);
}

TEST_CASE("retina data: mean firing rates lie in the configured range with peaks far above") {
  const Dataset& d = small();
  const SynthConfig c = small_config();
  for (int i = 0; i < d.train.cells(); ++i) {
    const double expected_hz = d.train.true_rate.row(i).mean() / d.bin_s, spikes_hz = d.train.counts.row(i).mean() / d.bin_s;
    CHECK(expected_hz >= c.rate_min_hz - 1e-6);
    CHECK(expected_hz <= c.rate_max_hz + 1e-6);
    CHECK(spikes_hz > 0.7 * c.rate_min_hz);
    CHECK(spikes_hz < 1.3 * c.rate_max_hz);
    // sparse, bursty responses, as RGCs to natural movies: peaks many times the mean
    CHECK(d.train.true_rate.row(i).maxCoeff() > 5 * d.train.true_rate.row(i).mean());
  }
}

TEST_CASE("retina data: ON cells fire for light and OFF cells for dark in their centre") {
  const Dataset& d = small();
  const Split& s = d.train;
  for (int i = 0; i < s.cells(); ++i) {
    const int cy = static_cast<int>(std::lround(d.center[static_cast<std::size_t>(i)][0])),
              cx = static_cast<int>(std::lround(d.center[static_cast<std::size_t>(i)][1]));
    Eigen::VectorXd centre(s.frames);
    for (int t = 0; t < s.frames; ++t) {
      double sum = 0;
      for (int y = cy - 2; y <= cy + 2; ++y)
        for (int x = cx - 2; x <= cx + 2; ++x) sum += s.stimulus[(static_cast<std::size_t>(t) * s.height + y) * s.width + x];
      centre(t) = sum / 25;
    }
    // the centre's luminance over the temporal filter's first lobe (about 30 to 110 ms back)
    Eigen::VectorXd recent = Eigen::VectorXd::Zero(s.frames);
    for (int t = 12; t < s.frames; ++t) recent(t) = centre.segment(t - 11, 9).sum();
    const double r = pearson(s.true_rate.row(i).tail(s.frames - 12).transpose(), recent.tail(s.frames - 12));
    INFO("cell " << i << " polarity " << d.polarity[static_cast<std::size_t>(i)] << " correlation " << r);
    CHECK(r * d.polarity[static_cast<std::size_t>(i)] > 0.15);
  }
}

TEST_CASE("retina data: the movie's power spectrum falls about as 1/f^2") {
  const Dataset& d = small();
  const Split& s = d.train;
  const int n = s.height;
  std::vector<double> power(n, 0.0), count(n, 0.0);
  std::vector<double> hann(n);
  for (int i = 0; i < n; ++i) hann[i] = 0.5 - 0.5 * std::cos(2 * M_PI * i / n);
  using C = std::complex<double>;
  for (int t = 0; t < s.frames; t += 40) {
    // a plain 2-D DFT by rows then columns, windowed against the frame edges' leakage
    std::vector<C> a(static_cast<std::size_t>(n) * n), b(a.size());
    for (int y = 0; y < n; ++y)
      for (int x = 0; x < n; ++x) a[y * n + x] = hann[y] * hann[x] * double(s.stimulus[(static_cast<std::size_t>(t) * n + y) * n + x]);
    for (int y = 0; y < n; ++y)
      for (int k = 0; k < n; ++k) {
        C acc = 0;
        for (int x = 0; x < n; ++x) acc += a[y * n + x] * std::polar(1.0, -2 * M_PI * k * x / n);
        b[y * n + k] = acc;
      }
    for (int k = 0; k < n; ++k)
      for (int l = 0; l < n; ++l) {
        C acc = 0;
        for (int y = 0; y < n; ++y) acc += b[y * n + k] * std::polar(1.0, -2 * M_PI * l * y / n);
        const int fy = std::min(l, n - l), fx = std::min(k, n - k);
        const int f = static_cast<int>(std::lround(std::sqrt(double(fy * fy + fx * fx))));
        if (f < n) power[f] += std::norm(acc), count[f] += 1;
      }
  }
  // least-squares slope of log power against log frequency over the middle band
  double sx = 0, sy = 0, sxx = 0, sxy = 0, m = 0;
  for (int f = 3; f <= n / 3; ++f) {
    const double x = std::log(f), y = std::log(power[f] / count[f]);
    sx += x, sy += y, sxx += x * x, sxy += x * y, m += 1;
  }
  const double slope = (m * sxy - sx * sy) / (m * sxx - sx * sx);
  INFO("slope " << slope);
  CHECK(slope > -2.5);
  CHECK(slope < -1.5);
}

TEST_CASE("retina data: a file round-trips exactly") {
  const Dataset d = synthesize(tiny_config());
  const fs::path p = scratch("round.h5");
  write_dataset(p.string(), d);
  const Dataset r = read_dataset(p.string());
  CHECK(r.synthetic);
  CHECK(r.seed == d.seed);
  CHECK(r.bin_s == d.bin_s);
  CHECK(r.description == d.description);
  CHECK(r.config == d.config);
  CHECK(r.polarity == d.polarity);
  CHECK(r.center == d.center);
  for (const auto& [a, b] : {std::pair{&d.train, &r.train}, std::pair{&d.test, &r.test}}) {
    CHECK(a->frames == b->frames);
    CHECK(a->stimulus == b->stimulus);
    CHECK(a->counts == b->counts);
    CHECK(a->rate == b->rate);
    CHECK(a->true_rate == b->true_rate);
    REQUIRE(a->repeats.size() == b->repeats.size());
    for (std::size_t i = 0; i < a->repeats.size(); ++i) CHECK(a->repeats[i] == b->repeats[i]);
  }
  H5::H5File f(p.string(), H5F_ACC_RDONLY);
  CHECK(aoc::h5_string(f.openAttribute("aoc_version"), "aoc_version") == AOC_VERSION);
}

TEST_CASE("retina data: a recorded-layout file without the synthetic extras reads, z-scored") {
  const fs::path p = scratch("real.h5");
  {
    H5::H5File f(p.string(), H5F_ACC_TRUNC);
    const int F = 50, H = 10, W = 12, C = 3;
    for (const std::string split : {"train", "test"}) {
      f.createGroup(split);
      f.createGroup(split + "/response");
      std::vector<std::uint8_t> stim(static_cast<std::size_t>(F) * H * W);
      for (std::size_t i = 0; i < stim.size(); ++i) stim[i] = static_cast<std::uint8_t>((i * 37) % 256);
      const hsize_t sd[3] = {F, H, W};
      f.createDataSet(split + "/stimulus", H5::PredType::STD_U8LE, H5::DataSpace(3, sd)).write(stim.data(), H5::PredType::NATIVE_UINT8);
      std::vector<double> counts(static_cast<std::size_t>(C) * F);
      for (std::size_t i = 0; i < counts.size(); ++i) counts[i] = static_cast<double>((i * 7) % 3);
      put(f, split + "/response/binned", {C, F}, counts);
    }
  }
  const Dataset d = read_dataset(p.string());
  CHECK_FALSE(d.synthetic);
  CHECK(d.train.true_rate.size() == 0);
  CHECK(d.test.repeats.empty());
  CHECK(d.description.find("recorded retina") == 0);
  CHECK(d.description.find("z-scored") != std::string::npos);
  CHECK(d.description.find("smoothed") != std::string::npos);
  CHECK((d.train.rate - smooth_rate(d.train.counts)).cwiseAbs().maxCoeff() == 0);
  double sum = 0, sq = 0, n = 0;
  for (const Split* s : {&d.train, &d.test})
    for (float v : s->stimulus) sum += v, sq += double(v) * v, n += 1;
  CHECK(std::abs(sum / n) < 1e-5);
  CHECK(std::abs(sq / n - 1) < 1e-4);
  // without repeats the scores correlate with the rate: predicting it exactly is CC 1, FEV 1
  const Scores s = score(d.test, d.test.rate, 0);
  CHECK(s.cc_mean == Approx(1.0));
  CHECK(s.fev_mean == Approx(1.0));
}

TEST_CASE("retina data: the reader refuses a stimulus of the wrong rank") {
  const fs::path p = damaged("rank.h5", [](H5::H5File& f) { put(f, "train/stimulus", {120, 256}, std::vector<double>(120 * 256)); });
  CHECK(read_error(p) == p.string() + ": /train/stimulus: expected 3 dimensions (frames, height, width), got 2");
}

TEST_CASE("retina data: the reader refuses responses of other frames than the stimulus") {
  const fs::path p = damaged("frames.h5", [](H5::H5File& f) { put(f, "test/response/binned", {2, 59}, std::vector<double>(2 * 59)); });
  CHECK(read_error(p) == p.string() + ": /test/response/binned: 59 frames, but /test/stimulus has 60 (expected cells x frames)");
}

TEST_CASE("retina data: the reader refuses NaN in the stimulus and in responses") {
  const fs::path a = damaged("nan-stim.h5", [](H5::H5File& f) {
    std::vector<double> v(60 * 16 * 16, 0.5);
    v[16 * 16 * 7 + 3] = std::nan("");
    put(f, "test/stimulus", {60, 16, 16}, v);
  });
  CHECK(read_error(a) == a.string() + ": /test/stimulus: NaN or infinite value in frame 7");
  const fs::path b = damaged("inf-rate.h5", [](H5::H5File& f) {
    std::vector<double> v(2 * 120, 0.1);
    v[5] = INFINITY;
    put(f, "train/response/firing_rate_10ms", {2, 120}, v);
  });
  CHECK(read_error(b) == b.string() + ": /train/response/firing_rate_10ms: NaN or infinite value at element 5");
}

TEST_CASE("retina data: the reader refuses negative counts") {
  const fs::path p = damaged("negative.h5", [](H5::H5File& f) {
    std::vector<double> v(2 * 120, 1);
    v[120 + 4] = -1;
    put(f, "train/response/binned", {2, 120}, v);
  });
  CHECK(read_error(p) == p.string() + ": /train/response/binned: negative value -1 at (1, 4)");
}

TEST_CASE("retina data: the reader refuses repeats of another length") {
  const fs::path p = damaged("repeats.h5", [](H5::H5File& f) { put(f, "test/repeats/cell02", {3, 61}, std::vector<double>(3 * 61)); });
  CHECK(read_error(p) == p.string() + ": /test/repeats/cell02: repeats of 61 frames, but /test/stimulus has 60");
  const fs::path q = damaged("repeats-missing.h5", [](H5::H5File& f) { f.unlink("test/repeats/cell01"); });
  CHECK(read_error(q) == q.string() + ": /test/repeats/cell01: missing dataset (/test/repeats needs one per cell, 2)");
}

TEST_CASE("retina data: the reader refuses a stimulus over the size limit before reading it") {
  const fs::path p = damaged("huge.h5", [](H5::H5File& f) {
    f.unlink("train/stimulus");
    const hsize_t dims[3] = {40000, 256, 256}, chunk[3] = {1, 256, 256};
    H5::DSetCreatPropList pl;
    pl.setChunk(3, chunk);
    f.createDataSet("train/stimulus", H5::PredType::IEEE_F32LE, H5::DataSpace(3, dims), pl);  // declared, never written
  });
  CHECK(read_error(p) == p.string() + ": /train/stimulus: 40000 x 256 x 256 values, more than aoc's limit of 2^31");
}

TEST_CASE("retina data: the reader refuses an unwritten stimulus") {
  const fs::path p = damaged("unwritten.h5", [](H5::H5File& f) {
    f.unlink("train/stimulus");
    const hsize_t dims[3] = {120, 16, 16}, chunk[3] = {1, 16, 16};
    H5::DSetCreatPropList pl;
    pl.setChunk(3, chunk);
    f.createDataSet("train/stimulus", H5::PredType::IEEE_F32LE, H5::DataSpace(3, dims), pl);
  });
  CHECK(read_error(p) == p.string() + ": /train/stimulus: declares 122880 bytes of data, but 0 are stored (an unwritten or damaged dataset?)");
}

// A split by hand: one cell, two repeats y1 = 0 2 2 0, y2 = 0 0 4 2, so ybar = 0 1 3 1, the unbiased
// variances over repeats 0 2 2 2 (mean 1.5, s2 = 1.5 / 2 = 0.75), var_t(ybar) = 1.1875.
Split hand_split() {
  Split s;
  s.frames = 4, s.height = s.width = 1;
  s.stimulus.assign(4, 0.f);
  Eigen::MatrixXd rep(2, 4);
  rep << 0, 2, 2, 0, 0, 0, 4, 2;
  s.repeats = {rep};
  s.counts = rep.row(0);
  s.rate = rep.colwise().mean();
  return s;
}

TEST_CASE("retina data: scores match a hand-worked two-repeat example") {
  const Split s = hand_split();
  Eigen::MatrixXd pred(1, 4);
  pred << 0.5, 1, 2, 1.5;
  const Scores sc = score(s, pred, 0);
  // MSE 0.375: FEV = 1 - (0.375 - 0.75) / (1.1875 - 0.75); CC = 2.25 / sqrt(1.25 * 4.75)
  CHECK(sc.fev[0] == Approx(1 + 0.375 / 0.4375).epsilon(1e-12));
  CHECK(sc.cc[0] == Approx(2.25 / std::sqrt(1.25 * 4.75)).epsilon(1e-12));
  // NLL of y1: 0.5, 1 + ln 2, 2 - 2 ln 2 + ln 2, 1.5: the mean is exactly 1.25
  CHECK(sc.nll[0] == Approx(1.25).epsilon(1e-12));
  CHECK(sc.nll_mean == sc.nll[0]);
  // skip 1 drops the first frame from every term: NLL (1 + ln 2 + 2 - ln 2 + 1.5) / 3 = 1.5
  CHECK(score(s, pred, 1).nll[0] == Approx(1.5).epsilon(1e-12));
}

TEST_CASE("retina data: predicting the repeats' mean scores CC 1 and FEV 1 + s2 over var - s2") {
  const Dataset& d = small();
  const Split& t = d.test;
  Eigen::MatrixXd ybar(t.cells(), t.frames);
  for (int i = 0; i < t.cells(); ++i) ybar.row(i) = t.repeats[static_cast<std::size_t>(i)].colwise().mean();
  const int skip = 40, n = t.frames - skip;
  const Scores s = score(t, ybar, skip);
  for (int i = 0; i < t.cells(); ++i) {
    const Eigen::MatrixXd& r = t.repeats[static_cast<std::size_t>(i)];
    double noise = 0, mean = 0, var = 0;
    for (int f = skip; f < t.frames; ++f) {
      double m = 0, v = 0;
      for (int k = 0; k < r.rows(); ++k) m += r(k, f) / r.rows();
      for (int k = 0; k < r.rows(); ++k) v += (r(k, f) - m) * (r(k, f) - m) / (r.rows() - 1);
      noise += v / r.rows() / n;
      mean += m / n;
    }
    for (int f = skip; f < t.frames; ++f) var += (ybar(i, f) - mean) * (ybar(i, f) - mean) / n;
    CHECK(s.cc[static_cast<std::size_t>(i)] == Approx(1.0).epsilon(1e-12));
    CHECK(s.fev[static_cast<std::size_t>(i)] == Approx(1 + noise / (var - noise)).epsilon(1e-9));
    CHECK(s.fev[static_cast<std::size_t>(i)] > 1);
  }
}

TEST_CASE("retina data: the true rate scores FEV near 1 and beats a noisy constant") {
  const Dataset& d = small();
  const Scores truth = score(d.test, d.test.true_rate, kDefaultSkip);
  INFO("true rate: CC " << truth.cc_mean << ", FEV " << truth.fev_mean);
  CHECK(std::abs(truth.fev_mean - 1) < 0.15);
  CHECK(truth.cc_mean > 0.7);
  // each cell's mean rate plus small noise: no better than chance at following the movie
  Eigen::MatrixXd flat(d.test.cells(), d.test.frames);
  for (int i = 0; i < d.test.cells(); ++i)
    for (int t = 0; t < d.test.frames; ++t) flat(i, t) = d.test.true_rate.row(i).mean() * (1 + 0.01 * std::sin(12.9898 * t + i));
  const Scores base = score(d.test, flat, kDefaultSkip);
  CHECK(std::abs(base.cc_mean) < 0.2);
  CHECK(base.fev_mean < 0.1);
  CHECK(truth.cc_mean > base.cc_mean + 0.5);
  CHECK(truth.nll_mean < base.nll_mean);
}

TEST_CASE("retina data: a constant prediction's NLL is c - mean(y) log c + mean(log y!)") {
  const Dataset& d = small();
  const double c = 0.1;
  const Eigen::MatrixXd pred = Eigen::MatrixXd::Constant(d.test.cells(), d.test.frames, c);
  const Eigen::MatrixXd y = d.test.counts.rightCols(d.test.frames - 10);
  const double lfact = y.unaryExpr([](double v) { return std::lgamma(v + 1); }).mean();
  CHECK(poisson_nll(d.test.counts, pred, 10) == Approx(c - y.mean() * std::log(c) + lfact).epsilon(1e-12));
  // clamped below at 1e-8: a zero prediction costs -y log(1e-8), not infinity
  const Eigen::MatrixXd zero = Eigen::MatrixXd::Zero(d.test.cells(), d.test.frames);
  CHECK(poisson_nll(d.test.counts, zero, 10) == Approx(1e-8 - y.mean() * std::log(1e-8) + lfact).epsilon(1e-12));
}

TEST_CASE("retina data: CC is invariant to an affine scaling of the prediction and FEV is not") {
  const Dataset& d = small();
  const Scores a = score(d.test, d.test.true_rate, kDefaultSkip);
  const Scores b = score(d.test, (3 * d.test.true_rate.array() + 0.2).matrix(), kDefaultSkip);
  for (std::size_t i = 0; i < a.cc.size(); ++i) {
    CHECK(b.cc[i] == Approx(a.cc[i]).epsilon(1e-12));
    CHECK(b.fev[i] < a.fev[i] - 0.5);
  }
}

TEST_CASE("retina data: score refuses predictions of the wrong shape") {
  const Dataset& d = small();
  CHECK_THROWS_WITH(score(d.test, Eigen::MatrixXd::Zero(d.test.cells(), d.test.frames - 1), 0),
                    "retina score: predictions are 4 cells x 999 frames, the test split has 4 x 1000");
}

TEST_CASE("retina data: aoc retina data writes a SYNTHETIC file that aoc retina score reads", "[slow]") {
  const fs::path data = scratch("cli.h5"), pred = scratch("cli-pred.h5");
  const aoc::test::Run r = aoc::test::run_aoc("retina data -o " + data.string() + " --train-frames 300 --test-frames 200 --cells 2 --repeats 3 --seed 4");
  INFO(r.out);
  REQUIRE(r.status == 0);
  CHECK(r.out.rfind("SYNTHETIC retina: 2 cells (1 ON, 1 OFF), 50x50 px, train 300 frames, test 200 frames x 3 repeats at 10 ms, seed 4;", 0) == 0);
  const Dataset d = read_dataset(data.string());
  // the true rate as an aoc run output would hold it: [1, frames, cells]
  aoc::H5Array a;
  a.name = "rate";
  a.shape = {1, static_cast<std::size_t>(d.test.frames), 2};
  for (int t = 0; t < d.test.frames; ++t)
    for (int i = 0; i < 2; ++i) a.values.push_back(d.test.true_rate(i, t));
  aoc::write_h5_arrays(pred.string(), {a});
  const aoc::test::Run s = aoc::test::run_aoc("retina score --data " + data.string() + " --pred " + pred.string() + " --json");
  INFO(s.out);
  REQUIRE(s.status == 0);
  const auto j = nlohmann::json::parse(s.out);
  CHECK(j["synthetic"] == true);
  CHECK(j["dataset"] == "rate");
  CHECK(j["scores"]["cc_mean"].get<double>() == Approx(j["ceiling"]["cc_mean"].get<double>()).epsilon(1e-12));
  CHECK(j["scores"]["cc"].size() == 2);
  CHECK(j["types"] == nlohmann::json::array({"ON", "OFF"}));
  const aoc::test::Run bad = aoc::test::run_aoc("retina score --data " + data.string() + " --pred " + data.string() + " --dataset train/stimulus");
  CHECK(bad.status != 0);
  CHECK(bad.out.find("/train/stimulus: shape 300 x 50 x 50 (the test split has 200 frames of 2 cells") != std::string::npos);
}
