// The retina workload's data (issue: the retina model, IB-GP, Rahmani, Psaltis, Moser, NeurIPS
// 2022): recordings of retinal ganglion cells (RGCs) watching a movie, in the layout of the
// salamander natural-scene files (naturalscene.h5, Maheswaranathan et al. 2023, the deep-retina
// convention), a seeded SYNTHETIC retina in that layout for where the real files are not at hand,
// and the scores the literature reports (correlation, fraction of explainable variance, Poisson
// negative log-likelihood). docs/retina.md explains the data, the metrics and the commands.
//
// The synthetic retina (synthesize) is a pure function of its SynthConfig, on every machine that
// builds this code the same way (Philox4x32-10 counters, no std::random engine, no threads in any
// sum). Its parts, each a knob of SynthConfig:
//   Movie. `images` Gaussian images per split, image_size x image_size pixels, with a 1/f^2 power
//     spectrum (white noise shaped by 1/f in amplitude with FFTW, DC removed), each scaled to sd 1,
//     then luminance = exp(skew * x) (a lognormal, like natural luminance; skew 0: the Gaussian
//     itself). The movie is a height x width window onto one image that drifts by a Gaussian random
//     walk of drift_px pixels per frame per axis (fixational eye movements; positions rounded to
//     whole pixels, the images wrap around) and jumps to a random image and place every
//     saccade_frames frames on average (uniform in 0.5..1.5 of it). The train and test splits use
//     different images, so the test movie is never seen in training. The whole file (both splits)
//     is then scaled to mean 0, sd 1 (contrast units).
//   Cells. `cells` RGCs, ON (even index) and OFF (odd index), centres on a jittered grid inside the
//     central rf_region x rf_region pixels (so that a 21x21 then 15x15 valid convolution stack sees
//     every receptive field whole). Each cell sums `subunits` subunits scattered around its centre
//     (Gaussian offsets of sd rf_radius px). A subunit is a difference of Gaussians in space (centre
//     sd subunit_sigma, surround sd surround_sigma, surround integral surround_strength of the
//     centre's; unit L2 norm) and the cell's biphasic temporal filter in time (40 taps at bin_s:
//     a difference of two gamma-3 kernels peaking near 3 tau1 and 3 tau2 frames, tau1 jittered per
//     cell, unit L2 norm), then scaled to sd 1 on the train split and rectified:
//         r_j(t) = max(0, polarity * g_j(t) - subunit_threshold).
//     The cell's drive u = sum_j w_j r_j (weights uniform in 0.5..1.5, summing to 1), scaled to sd 1
//     on the train split, gives the expected spikes per bin
//         lambda(t) = softplus(output_gain * u(t) + b),
//     b set (bisection on the train split) so that the mean rate is the cell's target, uniform in
//     rate_min_hz..rate_max_hz. Spikes are Poisson(lambda) per bin. The rectification before the sum
//     is what a linear-nonlinear (LN) model cannot express: an LN fit is misspecified on purpose.
//   Splits. Train: one trial. Test: `repeats` trials of the same movie (independent spikes), counts
//     = the first. rate (firing_rate_10ms) = the counts (train) or the repeats' mean (test)
//     smoothed by a Gaussian of sd 1 bin (truncated at 4, renormalised at the ends). true_rate =
//     lambda. Before frame 0 the movie is grey (0), for the generator's filters as for a model's.
//
// Draws: key = (seed low 32 bits, seed high 32 bits ^ 0x5245544E "RETN"), counter = (stream << 8 |
// split, i, j, k); streams 1 image noise (image, pixel pair), 2 fixations (fixation), 3 drift
// (fixation, frame), 4 cells (cell, subunit), 5 spikes (trial, cell, frame). Uniforms take 53 bits
// of two words; normals are Box-Muller pairs; a Poisson count inverts the CDF with one uniform.
#pragma once
#include <Eigen/Dense>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace aoc::retina {

// One split of a recording: frames of a movie at `bin_s` per frame and the cells' responses per bin.
struct Split {
  int frames = 0, height = 0, width = 0;
  std::vector<float> stimulus;           // [frames][height][width] row-major, contrast units (per-file mean 0, sd 1)
  Eigen::MatrixXd counts;                // [cells, frames] spike counts per bin of one trial
  Eigen::MatrixXd rate;                  // [cells, frames] the file's firing_rate_10ms (spikes per bin, smoothed)
  std::vector<Eigen::MatrixXd> repeats;  // test only: per cell [repeats, frames] spike counts; empty for train
  Eigen::MatrixXd true_rate;             // synthetic only: the generator's expected spikes per bin [cells, frames]; empty for real data
  int cells() const { return static_cast<int>(counts.rows()); }
};

struct Dataset {
  Split train, test;
  double bin_s = 0.01;
  bool synthetic = false;
  std::string description;  // "SYNTHETIC retina: ..." or the source of a real file
  std::uint64_t seed = 0;
  // Synthetic only (empty for real data): each cell's polarity (+1 ON, -1 OFF) and receptive-field
  // centre (row, column in pixels of the frame), and the generator's knobs as text.
  std::vector<int> polarity;
  std::vector<std::array<double, 2>> center;
  std::string config;
};

struct SynthConfig {
  int height = 50, width = 50, cells = 9;
  int train_frames = 30000, test_frames = 1000, repeats = 5;  // 5 min of training movie: fewer spikes (60 s: ~600 per cell) overfit a 2500-pixel filter
  double bin_s = 0.01;
  std::uint64_t seed = 1;
  // Movie
  int images = 8;               // images per split
  int image_size = 256;         // pixels per side (a power of two keeps FFTW fast)
  double skew = 0.2;            // luminance = exp(skew * gaussian): 0 keeps the Gaussian
  double drift_px = 0.7;        // sd of the fixational random walk per frame per axis, pixels
  double saccade_frames = 100;  // mean frames between jumps (1 s at 10 ms)
  // Cells
  double rf_region = 20;           // side of the central square holding the RF centres, pixels
  int subunits = 6;                // per cell
  double rf_radius = 2.0;          // sd of the subunits' offsets from the centre, pixels
  double subunit_sigma = 1.0;      // DoG centre sd, pixels
  double surround_sigma = 3.0;     // DoG surround sd, pixels
  double surround_strength = 0.6;  // surround integral / centre integral
  double tau1 = 3.0, tau2 = 5.0;   // temporal lobes' gamma-3 time constants, frames (peaks near 3 tau)
  double biphasic = 0.5;           // second (opposite) lobe's peak / the first's (0.5: a transient, mostly band-pass filter)
  double subunit_threshold = 0.0;  // rectification threshold, in sd of a subunit's drive
  double output_gain = 1.5;        // softplus slope per sd of the summed drive
  double rate_min_hz = 5, rate_max_hz = 15;  // mean firing rates, uniform per cell
  std::string text() const;  // every knob, "key=value" space-separated (the file's `config` attribute)
};

// The seeded synthetic retina (see the top of this file); throws aoc::Error on a bad config.
Dataset synthesize(const SynthConfig& c);

// The naturalscene.h5 layout, what write_dataset writes and read_dataset reads:
//   /train/stimulus (frames, height, width)  /test/stimulus
//   /train/response/binned (cells, frames) spike counts, /train/response/firing_rate_10ms (cells, frames)
//   /test/response/binned, /test/response/firing_rate_10ms, /test/repeats/cell01..cellNN (repeats, frames)
//   synthetic extras: /train/response/true_rate, /test/response/true_rate, /truth/polarity (cells),
//   /truth/center (cells, 2); root attributes synthetic (1/0), description, seed, bin_s,
//   aoc_version, config, stimulus_units ("contrast": already mean 0, sd 1).
// A real file needs only the stimuli and one of binned / firing_rate_10ms per split: without
// binned the counts are firing_rate_10ms (said in the description: the NLL is then of a rate, not of
// spikes); without firing_rate_10ms the rate is the counts smoothed as above; without repeats the
// test split has none (score() then correlates with the rate). A stimulus without stimulus_units
// "contrast" is z-scored over both splits (the description says so). Every malformed file (a wrong
// rank, frames that differ between a stimulus and its responses, NaN or infinite values, negative
// counts, repeats of other lengths, a stimulus over kMaxStimulusValues) is a one-line aoc::Error
// naming the file and the dataset.
constexpr std::uint64_t kMaxStimulusValues = std::uint64_t(1) << 31;  // 8 GiB as float32
Dataset read_dataset(const std::string& path);
void write_dataset(const std::string& path, const Dataset& d);  // atomic (sim/h5file.hpp write_h5_atomic)

// Per-cell scores of predicted expected spikes per bin `pred` [cells, frames] against a test split,
// over the frames t >= skip (the model's filter warm-up). With y_r(t) the repeats (R of them) and
// ybar their mean (the split's `rate` when it has no repeats; s2 = 0 then and when R < 2):
//   cc   Pearson correlation of pred with ybar over t (0 when either is constant)
//   fev  fraction of explainable variance: s2 = mean_t(unbiased variance over r of y_r(t)) / R,
//        fev = 1 - (mean_t (pred - ybar)^2 - s2) / (var_t(ybar) - s2), var_t the population
//        variance over t; NaN when var_t(ybar) <= s2 (nothing explainable). The true rate scores
//        about 1; ybar itself scores 1 + s2 / (var_t(ybar) - s2).
//   nll  poisson_nll of that cell's `counts` (one trial).
// The means are plain means over cells (NaN if any cell's is).
struct Scores {
  std::vector<double> cc, fev, nll;  // per cell
  double cc_mean = 0, fev_mean = 0, nll_mean = 0;
};
constexpr int kDefaultSkip = 40;  // the 40-tap (400 ms) temporal filters' warm-up
Scores score(const Split& test, const Eigen::MatrixXd& pred, int skip);
// Mean over cells and bins t >= skip of pred - y log(pred) + lgamma(y + 1), pred clamped below at
// 1e-8: the negative log-likelihood per bin of the counts y under Poisson(pred), log(y!) included.
double poisson_nll(const Eigen::MatrixXd& counts, const Eigen::MatrixXd& pred, int skip);

// Frames [first, first + n) of a split as a split of their own, every response (repeats, true
// rate) cut to them; throws aoc::Error when they are not in the split.
Split slice(const Split& s, int first, int n);

// The smoothing of `rate` (Gaussian, sd 1 bin, truncated at 4 bins, renormalised at the ends), per row.
Eigen::MatrixXd smooth_rate(const Eigen::MatrixXd& counts);

}  // namespace aoc::retina
