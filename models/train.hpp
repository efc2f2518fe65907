// Training and evaluating the state-tracking models (docs/research/implicit_ssm.md 2, 5.2).
//
// Training is simultaneous (the whole sequence per fixed-point step) with the reference's
// curriculum: a bounded phase of a few unrolled steps with full backpropagation (z = f(0), then
// z <- (1 - tau) z + tau f(z)), then a gradient-free solve (at most `solve_max` undamped steps,
// per-sample relative residual, the best iterate of each sample kept) followed by `phantom` damped
// steps with gradients (the phantom gradient, tau = 0.8). AdamW, linear warm-up and cosine decay,
// gradient-norm clipping. The explicit model is trained by plain backpropagation.
//
// Evaluation exports the model as a graph and runs the interpreter, sequential (token by token) or
// simultaneous, so what is measured is what the compiler and the backends run.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "compiler/interpret.hpp"
#include "models/model.hpp"
#include "models/optim.hpp"

namespace aoc::models {

struct TrainOptions {
  std::string task = "parity";  // a task spec (models/tasks.hpp)
  int length = 32, batch = 64, steps = 600;
  double lr = 3e-3, warmup = 0.1, clip = 1.0, weight_decay = 0.0, beta2 = 0.95;
  double bounded_fraction = 0.3;  // of the steps, the unrolled phase
  int unroll = 4;                 // f evaluations in the unrolled phase
  int solve_max = 16;             // gradient-free steps, then
  double solve_tol = 0.05;
  double solve_damping = 1.0;     // of the gradient-free steps (1: undamped, the reference's)
  int phantom = 4;                // damped steps with gradients
  double tau = 0.8;
  // The weights the run ends with: the mean of those after each of its last `average_last` steps
  // (0: the last step's). Single steps move a noisy, machine-in-the-loop model by a few points of
  // accuracy; the mean over a stretch of them (Polyak/SWA averaging) takes that scatter out.
  int average_last = 0;
  std::uint64_t seed = 0;         // data stream (the weights have their own seed)
  HardwareAware hardware;         // the simulator's physics in the forward pass (models/model.hpp)
};

struct TrainStep {
  int step = 0;
  double loss = 0, lr = 0, grad_norm = 0;
  int solve_iterations = 0;  // of the gradient-free solve (0 in the unrolled phase)
  double seconds = 0;        // since the start
};

// Where a run stands: the next step and the optimizer's moments (with the model's weights and its
// noise counter, what a checkpoint holds: runtime/train/train_checkpoint.hpp). A run from a restored state
// takes the steps an unbroken run takes, bit for bit (the data and the learning rate are keyed by
// the step).
struct TrainState {
  int step = 0;
  ad::AdamW opt;
  std::vector<ad::Mat> average;  // with average_last: the params' running mean so far (empty before it starts)
};

// Trains in place from `state` (from step 0 with fresh moments when null); `log` (if given) sees
// every step, after the optimizer's update, with `state` already at the next step. With
// average_last the model holds the averaged weights once the last step is done.
void train(SequenceModel& m, const TrainOptions& o, const std::function<void(const TrainStep&)>& log = {},
           TrainState* state = nullptr);

struct EvalOptions {
  std::string task = "parity";
  int length = 32, batch = 128;
  std::uint64_t seed = 1000;  // a data stream the training did not see
  ir::Mode mode = ir::Mode::Sequential;
  int threads = 1;
};

// The steps of the unrolled phase (bounded_fraction of them, rounded); the solve phase follows.
int bounded_steps(const TrainOptions& o);

// How well a batch of B sequences of L decisions went (row b * L + t: sequence b, position t; a
// negative target: no label there, the position is skipped, "last" is the last labelled one).
// State tracking is judged at the end: the all-position mean hides a model that loses the state
// late (its early positions are easy), so the last position and whole sequences are counted too.
struct PositionScores {
  double accuracy = 0;       // over every position
  double last = 0;           // at the last position of each sequence
  double last10 = 0;         // over the last 10 positions of each sequence (the reference's metric)
  double whole = 0;          // the fraction of sequences with every position right
  double first_error = -1;   // the mean position (0-based) of the first wrong decision, over the
                             // sequences that have one; -1 when none has
  std::vector<double> per_position;  // L: the accuracy at each position over the sequences labelled there (NaN: none)
};
PositionScores score_positions(const std::vector<std::int64_t>& guesses, const std::vector<int>& targets, int B, int L);

struct EvalResult {
  double accuracy = 0;        // per position, argmax of the logits = the label
  double last10 = 0;          // over the last 10 positions of each sequence (the reference's metric)
  double last = 0, whole = 0, first_error = -1;  // PositionScores
  double mean_iterations = 0; // per token (sequential) or per sequence (simultaneous); 0 for explicit
  long long solves = 0, converged = 0;
};

EvalResult evaluate(const SequenceModel& m, const EvalOptions& o);

}  // namespace aoc::models
