// The closed-loop search for a reduced-complexity stimulus that elicits the same responses (the
// second half of Rahmani, Psaltis and Moser, NeurIPS 2022; `aoc retina stimulus`, docs/retina.md):
// a stretch of the test movie is run on the simulated machine, and its responses are the target;
// then a movie of `block` x `block` times fewer pixels (each frame a coarse grid, shown as blocks of
// equal pixels: nearest-neighbour upsampling) is searched so that the machine's responses to it
// match the target. Each step runs the current coarse movie on the machine (with fresh noise: seed
// + step), takes the error of its responses, and moves the coarse pixels along the gradient of that
// error back-propagated through the trained model's digital twin (the tape of models/retina_model:
// forward on the hardware, backward on the model, as in physics-aware training, Wright et al.,
// Nature 2022). Adam on the coarse pixels. It starts from the movie block-averaged (the naive
// reduction) or from grey, and reports how close the machine's responses come at each step.
#pragma once
#include <Eigen/Dense>
#include <cstdint>
#include <functional>
#include <vector>

#include "models/retina_model.hpp"
#include "runtime/retina/retina_eval.hpp"

namespace aoc {

struct StimulusSearchSettings {
  int first = 0;         // the test movie's first frame of the stretch
  int frames = 200;      // frames of the stretch (the first `skip` warm the filters up and are not matched)
  int block = 5;         // coarse pixel side in frame pixels (must divide the frame's sides)
  int steps = 60;
  double lr = 0.05;      // Adam's step on the coarse pixels (contrast units)
  bool from_grey = false;  // start from a grey movie (0) instead of the block-averaged one
  double limit = 3;        // the coarse pixels stay within +-limit (contrast units: the movie's sd is 1)
};

struct StimulusStep {
  int step = 0;
  double mse = 0;  // mean over cells and matched frames of (machine response - target)^2
  double cc = 0;   // mean over cells of the correlation with the target over the matched frames
};

struct StimulusSearch {
  int height = 0, width = 0, coarse_h = 0, coarse_w = 0, frames = 0, skip = 0;
  Eigen::MatrixXd target;            // [cells, frames] the machine's responses to the natural stretch
  std::vector<float> natural;        // [frames][height][width] the stretch
  std::vector<float> stimulus;       // [frames][height][width] the found movie, upsampled
  Eigen::MatrixXd coarse;            // [frames, coarse_h * coarse_w] the found movie's coarse pixels
  StimulusStep downsampled;          // the block-averaged movie on the machine (step 0's start when not from grey)
  std::vector<StimulusStep> curve;   // every step's measurement before its update, then the final one
  StimulusStep final_fresh;          // the found movie on a seed no step used
};

// Throws aoc::Error naming the setting that does not fit (a block that does not divide the frame,
// a stretch outside the test movie). `log` sees each step.
StimulusSearch search_stimulus(const RetinaMachine& machine, retina::Model& digital, const retina::Split& test, int skip, std::uint64_t seed,
                               const StimulusSearchSettings& s, const std::function<void(const StimulusStep&)>& log = {});

// The settings checked against the test movie (what search_stimulus checks first).
void check_stimulus_settings(const StimulusSearchSettings& s, const retina::Split& test, int skip);

// The folder's digital model: its train.json's spec with its weights (throws naming the file).
retina::Model read_retina_digital(const RetinaModelFiles& m);

}  // namespace aoc
