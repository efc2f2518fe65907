// The retina models (issue: the retina workload; docs/retina.md): trainable predictors of retinal
// ganglion cells' expected spikes per bin from the movie, trained here by Poisson likelihood and
// exported as a graph of the compiler's IR, which is what evaluation runs on every backend.
//
//   ln   the linear-nonlinear baseline: per cell one spatial filter over the frame (a Linear, [cells,
//        H*W]) and one causal temporal filter (taps frames), a bias, softplus. Space-time separable
//        and with one nonlinearity at the end, it cannot express the synthetic cells' rectified
//        subunits: the gap between it and the CNN is the point of the comparison.
//   cnn  the retina forward model of the issue (McIntosh et al. 2016, as in Rahmani et al. 2022):
//        Conv conv1@kernel1 (no bias) - depth-wise causal Conv1D (taps) + bias - ReLU -
//        Conv conv2@kernel2 + bias - ReLU - Dense cells + bias - softplus.
//   implicit  the AOC-native model: a latent state of `state` variables found by a fixed point on
//        the optical core in every frame and carried to the next through the machine's state memory
//        (the Delay), fed by a front end of `filters` spatial filters (optical) with causal temporal
//        filters of `taps` frames (digital):
//          u_t  = E conv_t(S x) + c                          (Linear, Conv1dCausal, Linear, bias)
//          z_t* = fix z:  W tanh(z) + V tanh(z*_{t-1}) + u_t  (the loop; damping as the FixedPoint's)
//          rate = softplus(R z_t* + r)
//        The loop is the model's non-linearity and its memory beyond the taps: the rectified, mixed
//        subunit-like responses an LN model lacks come from the fixed point (without the taps, the
//        recurrence as the only memory, it fell far below the LN: docs/retina.md). Trained on the
//        whole chunk at once: a gradient-free solve (Jacobi over
//        every frame together, the same fixed point the frame-by-frame solve finds), then `unroll`
//        steps with gradients from it (a phantom gradient that reaches unroll frames back).
//   ibgp the IB-GP model of Rahmani, Psaltis & Moser (NeurIPS 2022): an information bottleneck
//        between the movie and the responses. An encoder (Conv enc1@3x3 - ReLU - max-pool 2 - Conv
//        enc2@3x3 - ReLU - pool - Conv enc3@3x3 - ReLU - depth-wise causal Conv1D (taps) - ReLU -
//        Dense) gives each frame's posterior q(z_t) = N(mean, e^logvar) over `latent` variables; a
//        Gaussian-process prior over time ties them (per variable, the Cauchy kernel
//        k(i, j) = 1 / (1 + ((i - j) / length_scale)^2) + 1e-3 [i = j] over a sequence's frames);
//        a stimulus decoder (Dense to a dec0 x s x s grid - ReLU - causal Conv1D (taps) - ReLU -
//        Conv dec1@3x3 - ReLU - upsample 2 - Conv dec2@3x3 - ReLU - upsample 2 - Conv 1@3x3)
//        synthesises a movie from z, and the retina forward model (the cnn above, same weights'
//        names) predicts the rates from the synthesised movie. Trained on
//        beta * PoissonNLL + KL(q || prior), z sampled (reparameterised); the exported graph is the
//        deterministic path through the posterior mean, and also outputs `latent` and
//        `latent_logvar` (the posterior) and `synth` (the synthesised movie).
//        Where it departs from the authors' code, and why: valid convolutions sized so that the
//        decoder lands on the frame (no padding op on the tape), causal temporal filters (the
//        machine runs frame by frame), a latent per frame (their latent runs at half the frame
//        rate: the prior's length_scale of 2 frames keeps their time scale), a diagonal posterior
//        (theirs has a banded precision), no batch normalisation, a linear last layer (the movie
//        is in contrast units, mean 0 and sd 1, not display values in [0, 1]).
//
// Tape layout: frames as rows b*L + t of [B*L, H*W] (one sequence of L frames per block), channels
// last inside a row, the layout of the graph's [B, L, H, W, C] tensors flattened; the temporal
// filters see zeros before each block's first frame, as the graph's causal Conv1D does before frame 0.
// Every optical product in the graph is a bias-free Linear or Conv2d and the biases are Adds, so
// the compiler places the products on the optics (a product with a bias stays digital).
#pragma once
#include <Eigen/Dense>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "compiler/ir.hpp"
#include "models/autodiff.hpp"
#include "models/optim.hpp"
#include "models/retina_data.hpp"

namespace aoc::retina {

struct ModelSpec {
  std::string kind = "cnn";  // "ln", "cnn", "implicit" or "ibgp"
  int height = 50, width = 50, cells = 9;
  int taps = 40;                        // temporal filter length, frames
  int conv1 = 4, kernel1 = 21;          // cnn: first (spatial) layer's channels and kernel side
  int conv2 = 4, kernel2 = 15;          // cnn: second layer's
  int state = 48;                       // implicit: latent state variables (the loop's width: one aoc-48 core)
  int filters = 9;                      // implicit: spatial filters of the front end (few: a filter per state overfits)
  double tol = 0.01, damping = 1.0;     // implicit: the exported FixedPoint's (relative rule) and z <- (1 - d) z + d f(z)
  int max_iter = 60;                    // implicit: the exported FixedPoint's bound per frame
  int unroll = 30;                      // implicit training: steps with gradients after the solve
  int latent = 15;                      // ibgp: latent variables per frame
  int enc1 = 64, enc2 = 32, enc3 = 16;  // ibgp: the encoder's 3x3 convolutions' channels (the authors')
  int dec0 = 16, dec1 = 32, dec2 = 64;  // ibgp: the decoder's seed grid's channels and its 3x3 convolutions'
  double beta = 700;                    // ibgp: the Poisson likelihood's weight against the KL (the authors')
  double length_scale = 2;              // ibgp: the prior's Cauchy kernel's, in frames
  // Frames before every temporal filter of the model is whole (the chain of `taps` filters); the
  // scores skip at least these: max(kDefaultSkip, warm-up).
  int warmup() const;
  int skip() const;
  nlohmann::ordered_json json() const;
  // From a JSON object (a training record's "model"); `where` names it in errors.
  static ModelSpec from_json(const nlohmann::json& j, const std::string& where);
  void check() const;  // throws aoc::Error naming the field that does not fit
};

class Model {
 public:
  Model(const ModelSpec& spec, std::uint64_t seed);          // seeded initial weights
  Model(const ModelSpec& spec, const ir::WeightStore& ws);  // trained weights (graph names and shapes)

  const ModelSpec& spec() const { return spec_; }
  std::vector<ad::Param*> params();
  std::int64_t parameter_count() const;

  // Expected spikes per bin [B*L, cells] of frames x [B*L, H*W] (sequences of L frames). ibgp: through
  // the posterior mean (what the graph computes).
  ad::Var forward(ad::Tape& t, ad::Var x, int L);
  // The training loss of counts y [B*L, cells] over the rows with use != 0: the Poisson NLL per
  // scored bin; ibgp: plus KL(q || prior) / (beta * scored bins), z sampled with the normals of
  // (seed, step).
  ad::Var loss(ad::Tape& t, ad::Var x, const ad::Mat& y, const std::vector<char>& use, int L, std::uint64_t seed, std::uint64_t step);
  // ibgp: the synthesised movie [B*L, H*W] and the posterior's mean and log-variance [B*L, latent].
  // With a Draw, z is sampled from the posterior (the normals of (seed, step)); without, z = mean.
  struct Bottleneck {
    ad::Var synth, mean, logvar;
  };
  struct Draw {
    std::uint64_t seed = 0, step = 0;
  };
  Bottleneck bottleneck(ad::Tape& t, ad::Var x, int L, const Draw* draw = nullptr);
  // ibgp: the retina forward model's weights from a trained cnn folder's (same names and shapes);
  // training then keeps them as the start instead of setting the readout to the mean rates.
  void take_forward(const ir::WeightStore& cnn);
  // ibgp: scales the decoder's last layer so that the movie it synthesises from frames x [B*L, H*W]
  // has x's standard deviation (the contrast the forward model is made for; the authors' batch
  // normalisation did this). Training calls it once, on its first chunks. No-op for the other kinds.
  void match_contrast(const ad::Mat& x, int L);
  bool forward_taken() const { return forward_taken_; }
  // Made from trained weights (the second constructor): training goes on from them as they are,
  // without the mean-rate readout or the decoder's contrast scaling a seeded start gets.
  bool from_weights() const { return from_weights_; }
  // The same, without a tape that records: [cells, frames] of one split's whole movie.
  Eigen::MatrixXd predict(const Split& s);

  std::string graph_json() const;  // input "stimulus" [B, L, H, W, 1], output "rate" [B, L, cells]
  ir::WeightStore weights() const;  // by the graph's names and shapes

  // Sets the readout bias so that the initial rate is each cell's mean count per bin (softplus^-1).
  void set_mean_rates(const Eigen::VectorXd& mean_counts);
  // implicit: scales the loop's W and V together so that ||W||_2 + ||V||_2 <= kLoopBound (training
  // calls it after every step). The map z -> W tanh(z) + V tanh(z_prev) + u is then a contraction
  // over the whole sequence: the fixed point exists, is unique, and every solve (frame by frame on
  // the machine, all frames at once in training) finds it. No-op for the other kinds.
  static constexpr double kLoopBound = 0.95;
  void keep_contractive();

 private:
  ModelSpec spec_;
  bool forward_taken_ = false, from_weights_ = false;
  std::map<std::string, ad::Param> p_;  // by the graph's weight names; the tape's 2-D layout
  std::map<std::string, std::vector<std::int64_t>> shapes_;  // the graph's shapes

  // implicit: the fixed point of every frame of [B*L, state] injections u, solved without a tape
  // (Jacobi, undamped: the fixed point does not depend on the damping) to a relative change of 1e-10
  // or 2000 steps.
  ad::Mat solve(const ad::Mat& u, int L) const;
  ad::Var loop_step(ad::Tape& t, ad::Var z, ad::Var u, int L);
  ad::Var cnn(ad::Tape& t, ad::Var x, int L);  // the retina forward model, shared by cnn and ibgp
  // ibgp: the prior's K^-1 and log|K| over L frames, computed once per L
  std::map<int, std::pair<ad::Mat, double>> prior_;
};

struct TrainOptions {
  int epochs = 20;
  int chunk = 200;        // frames per training sequence (the first taps - 1 of each are not scored)
  int batch = 8;          // sequences per step
  double lr = 2e-3, weight_decay = 1e-4, warmup = 0.05;
  double validation = 0.1;  // the last fraction of the train split, held out to pick the best epoch
  std::uint64_t seed = 1;   // weights and chunk order
  // After each step: (epoch, steps done in it, its steps). Not a setting of the run (the progress meter's).
  std::function<void(int, int, int)> progress;
};

struct EpochRecord {
  int epoch = 0;
  double train_nll = 0;              // mean per scored bin over the epoch's steps (log y! left out; ibgp: with its KL term)
  double val_nll = 0, val_cc = 0;    // on the held-out frames (score's nll and cc, against the counts' smoothed rate)
  double seconds = 0;                // since the start
};

struct TrainResult {
  std::vector<EpochRecord> epochs;
  int best_epoch = 0;  // the weights kept: lowest val_nll
};

// Where a run stands after an epoch: the next epoch, the optimizer's moments, the epochs so far and
// the best epoch's weights. A checkpoint holds it with the model's weights
// (runtime/train/train_checkpoint.hpp); a run from a restored state takes the steps an unbroken run
// takes, bit for bit (the chunk order is keyed by the epoch, the learning rate and the IB-GP's
// draws by the step).
struct TrainState {
  int epoch = 0;  // epochs done
  ad::AdamW opt;
  TrainResult result;
  std::vector<ad::Mat> best;  // the best epoch's weights, in the order of Model::params()
  double best_nll = std::numeric_limits<double>::infinity();
  double seconds_before = 0;  // of the run's earlier processes
};

// Trains in place from `state` (from the start when null); `log` (if given) sees each epoch's
// record, with `state` already past that epoch. Deterministic for a given seed.
TrainResult train(Model& m, const Dataset& d, const TrainOptions& o, const std::function<void(const EpochRecord&)>& log = {},
                  TrainState* state = nullptr);

}  // namespace aoc::retina
