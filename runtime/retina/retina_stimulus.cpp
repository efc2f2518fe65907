#include "runtime/retina/retina_stimulus.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "models/optim.hpp"
#include "sim/error.hpp"

namespace aoc {

namespace {

using ad::Mat;

// The upsampling as a matrix: frame pixel (y, x) = coarse pixel (y / block, x / block); U is
// [coarse pixels, frame pixels], so frames = coarse U.
Mat upsampling(int height, int width, int block) {
  const int cw = width / block;
  Mat U = Mat::Zero((height / block) * cw, height * width);
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x) U((y / block) * cw + x / block, y * width + x) = 1;
  return U;
}

// How close responses are to the target over the matched frames (t >= skip).
StimulusStep measure(int step, const Eigen::MatrixXd& pred, const Eigen::MatrixXd& target, int skip) {
  const int n = static_cast<int>(target.cols()) - skip;
  const Eigen::MatrixXd p = pred.rightCols(n), y = target.rightCols(n);
  StimulusStep m;
  m.step = step;
  m.mse = (p - y).squaredNorm() / static_cast<double>(p.size());
  for (Eigen::Index c = 0; c < p.rows(); ++c) {
    const Eigen::ArrayXd a = p.row(c).array() - p.row(c).mean(), b = y.row(c).array() - y.row(c).mean();
    const double den = std::sqrt((a * a).sum() * (b * b).sum());
    m.cc += den > 0 ? (a * b).sum() / den : 0.0;
  }
  m.cc /= static_cast<double>(p.rows());
  return m;
}

ir::Tensor movie_tensor(const Mat& frames, int height, int width) {
  ir::Tensor t;
  t.shape = {1, frames.rows(), height, width, 1};
  t.data.assign(frames.data(), frames.data() + frames.size());
  return t;
}

}  // namespace

void check_stimulus_settings(const StimulusSearchSettings& s, const retina::Split& test, int skip) {
  if (s.block < 1 || test.height % s.block || test.width % s.block)
    throw Error("block: " + std::to_string(s.block) + " does not divide the " + std::to_string(test.height) + "x" + std::to_string(test.width) + " frame");
  if (s.first < 0 || s.frames <= skip || s.first + s.frames > test.frames)
    throw Error("frames: the stretch " + std::to_string(s.first) + ".." + std::to_string(s.first + s.frames) + " must lie in the test movie's " +
                std::to_string(test.frames) + " frames and be longer than the " + std::to_string(skip) + " warm-up frames");
  if (s.steps < 0) throw Error("steps: negative");
  if (!(s.lr > 0) || !(s.limit > 0)) throw Error("lr and limit: must be positive");
}

retina::Model read_retina_digital(const RetinaModelFiles& m) {
  const std::string path = (std::filesystem::path(m.dir) / "train.json").string();
  if (m.record.is_null()) throw Error(path + ": missing (the model's kind and sizes are in its training record)");
  if (!m.record.is_object() || !m.record.contains("model")) throw Error(path + ": model: missing (the spec aoc retina train records)");
  retina::ModelSpec spec = retina::ModelSpec::from_json(m.record["model"], path + ": model");
  spec.check();
  try {
    return retina::Model(spec, m.weights);
  } catch (const Error& e) {  // a weight of another shape than the record's sizes: name the file
    throw Error((std::filesystem::path(m.dir) / "weights.h5").string() + ": " + e.what());
  }
}

StimulusSearch search_stimulus(const RetinaMachine& machine, retina::Model& digital, const retina::Split& test, int skip, std::uint64_t seed,
                               const StimulusSearchSettings& s, const std::function<void(const StimulusStep&)>& log) {
  check_stimulus_settings(s, test, skip);
  const int H = test.height, W = test.width;

  StimulusSearch r;
  r.height = H, r.width = W, r.coarse_h = H / s.block, r.coarse_w = W / s.block, r.frames = s.frames, r.skip = skip;
  const int L = s.frames, px = H * W;
  const retina::Split stretch = retina::slice(test, s.first, L);
  r.natural = stretch.stimulus;
  const Mat natural = Eigen::Map<const Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(stretch.stimulus.data(), L, px).cast<double>();
  r.target = run_retina(machine, retina_stimulus_tensor(stretch, L), seed);

  const Mat U = upsampling(H, W, s.block);
  const Mat averaged = natural * U.transpose() / static_cast<double>(s.block * s.block);  // block means
  r.downsampled = measure(0, run_retina(machine, movie_tensor(averaged * U, H, W), seed), r.target, skip);

  ad::Param coarse{"coarse", s.from_grey ? Mat(Mat::Zero(L, U.rows())) : averaged, Mat()};
  ad::AdamW adam;
  const Eigen::Index cells = r.target.rows();
  for (int step = 0;; ++step) {
    // Forward on the machine with this step's noise; the error's gradient back through the twin.
    const Mat frames = coarse.value * U;
    const Eigen::MatrixXd pred = run_retina(machine, movie_tensor(frames, H, W), seed + 1 + static_cast<std::uint64_t>(step));
    const StimulusStep m = measure(step, pred, r.target, skip);
    r.curve.push_back(m);
    if (log) log(m);
    if (step == s.steps) break;
    Mat g = Mat::Zero(L, cells);  // d mse / d rate, [frames, cells] as the tape's rows
    const double n = static_cast<double>(cells) * (L - skip);
    for (int t = skip; t < L; ++t)
      for (Eigen::Index c = 0; c < cells; ++c) g(t, c) = 2 * (pred(c, t) - r.target(c, t)) / n;
    ad::Tape tape;
    const ad::Var x = tape.matmul(tape.leaf(coarse), tape.constant(U));
    const ad::Var rate = digital.forward(tape, x, L);
    tape.backward(tape.sum(tape.mul(rate, tape.constant(g))));
    adam.step({&coarse}, s.lr);
    coarse.value = coarse.value.cwiseMax(-s.limit).cwiseMin(s.limit);
    coarse.zero_grad();
    for (ad::Param* p : digital.params()) p->zero_grad();
  }
  r.coarse = coarse.value;
  const Mat frames = coarse.value * U;
  r.stimulus.assign(frames.data(), frames.data() + frames.size());
  r.final_fresh = measure(s.steps, run_retina(machine, movie_tensor(frames, H, W), seed + 2 + static_cast<std::uint64_t>(s.steps)), r.target, skip);
  return r;
}

}  // namespace aoc
