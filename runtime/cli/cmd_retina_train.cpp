// aoc retina train --data retina.h5 --model cnn -o DIR: trains a retina model (models/retina_model.hpp)
// by Poisson likelihood on the file's train split and writes the folder `aoc retina eval` reads:
// graph.json (the compiler's IR), weights.h5, train.json (the training record: options, data,
// per-epoch curve, the held-out scores and the test scores of the digital model). After each epoch it
// keeps DIR/checkpoint.h5 (runtime/train/train_checkpoint.hpp); --resume continues a killed run.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>

#include "compiler/graph_json.hpp"
#include "models/retina_model.hpp"
#include "runtime/cli/commands.hpp"
#include "runtime/cli/retina_report.hpp"
#include "runtime/io/output.hpp"
#include "runtime/io/progress.hpp"
#include "runtime/retina/retina_eval.hpp"
#include "runtime/retina/retina_stimulus.hpp"
#include "runtime/train/train_checkpoint.hpp"
#include "sim/error.hpp"

namespace aoc::cli {

namespace {

struct TrainOpts {
  std::string data, output, forward, from;
  retina::ModelSpec spec;
  bool model_options = false;  // any of --model, --taps, ... given (a --from run takes the folder's)
  retina::TrainOptions train;
  bool quiet = false, resume = false;
  int stop_after = 0;  // epochs; 0: run them all
};

// The training's options as train.json records them (and the checkpoint's config hash covers).
nlohmann::ordered_json train_json(const TrainOpts& o) {
  return {{"epochs", o.train.epochs}, {"chunk", o.train.chunk}, {"batch", o.train.batch}, {"lr", o.train.lr},
          {"weight_decay", o.train.weight_decay}, {"warmup", o.train.warmup}, {"validation", o.train.validation},
          {"seed", o.train.seed},
          {"loss", o.spec.kind == "ibgp" ? "beta x Poisson NLL + KL(q || GP prior), per beta x scored bin, AdamW, warm-up + cosine"
                                         : "Poisson NLL per scored bin, AdamW, warm-up + cosine"},
          {"forward_from", o.forward.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(o.forward)},
          {"from", o.from.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(o.from)}};
}

// A run that failed is nothing to resume: a fresh run leaves nothing behind (a resumed one keeps its
// last checkpoint, written while the run was still sound).
void discard_run(const TrainOpts& o, const std::string& checkpoint, bool had_folder) {
  if (o.resume) return;
  std::error_code ec;
  std::filesystem::remove(checkpoint, ec);
  if (!had_folder) std::filesystem::remove(o.output, ec);  // only if empty
}

int run_train(TrainOpts o) {
  check_outputs({{"-o", o.output}}, {{"--data", o.data}});
  if (!o.forward.empty() && o.spec.kind != "ibgp") throw Error("retina train: --forward is for --model ibgp (its retina forward model)");
  if (!o.from.empty() && (o.model_options || !o.forward.empty()))
    throw Error("retina train: --from " + o.from + " trains that model on: its kind and sizes are its train.json's (drop --model, --forward and the size options)");
  // --from: the folder's spec and weights; otherwise seeded weights of the options' spec.
  std::optional<retina::Model> from;
  if (!o.from.empty()) {
    from = read_retina_digital(read_retina_model(o.from));
    o.spec = from->spec();
  }
  const retina::Dataset d = retina::read_dataset(o.data);
  if (from && (o.spec.height != d.train.height || o.spec.width != d.train.width || o.spec.cells != d.train.cells()))
    throw Error("retina train: --from " + o.from + " is a " + std::to_string(o.spec.height) + "x" + std::to_string(o.spec.width) + " model of " +
                std::to_string(o.spec.cells) + " cells; " + o.data + " has " + std::to_string(d.train.height) + "x" + std::to_string(d.train.width) +
                " frames of " + std::to_string(d.train.cells()) + " cells");
  o.spec.height = d.train.height, o.spec.width = d.train.width, o.spec.cells = d.train.cells();
  o.spec.check();
  retina::Model m = from ? std::move(*from) : retina::Model(o.spec, o.train.seed);
  if (!o.forward.empty()) {
    const RetinaModelFiles f = read_retina_model(o.forward);
    m.take_forward(f.weights);
  }
  if (!o.quiet)
    std::printf("%straining %s (%lld weights) on %s: %d train frames (the last %.0f %% held out), %d cells\n", d.synthetic ? "SYNTHETIC data: " : "",
                o.spec.kind.c_str(), static_cast<long long>(m.parameter_count()), o.data.c_str(), d.train.frames, 100 * o.train.validation,
                d.train.cells());
  std::fflush(stdout);
  const nlohmann::ordered_json settings{{"data_digest", file_digest(o.data)}, {"model", o.spec.json()}, {"train", train_json(o)}};
  const std::string hashed = settings.dump(), config_hash = digest_hex(hashed.data(), hashed.size());
  const std::string checkpoint = (std::filesystem::path(o.output) / "checkpoint.h5").string();
  retina::TrainState state;
  if (o.resume) {
    if (!std::filesystem::exists(checkpoint)) throw Error("retina train: --resume: " + checkpoint + " does not exist (no run to resume in " + o.output + ")");
    read_retina_checkpoint(checkpoint, m, state, config_hash);
    if (!o.quiet) std::printf("  resumed from %s after epoch %d of %d (%.0f s before)\n", checkpoint.c_str(), state.epoch, o.train.epochs, state.seconds_before);
  } else if (std::filesystem::exists(checkpoint)) {
    throw Error("retina train: " + checkpoint + ": the checkpoint of an unfinished run; --resume continues it (delete it to start afresh)");
  }
  const bool had_folder = std::filesystem::exists(o.output);
  std::filesystem::create_directories(o.output);
  struct Stop {};
  retina::TrainResult r;
  std::optional<Progress> meter;  // one per epoch: its line ends before the epoch's
  o.train.progress = [&](int epoch, int done, int steps) {
    if (!meter) meter.emplace("steps", !o.quiet), meter->phase("retina train: epoch " + std::to_string(epoch) + "/" + std::to_string(o.train.epochs));
    meter->update(done, steps);
  };
  try {
    r = retina::train(
        m, d, o.train,
        [&](const retina::EpochRecord& e) {
          meter.reset();
          if (!o.quiet) {
            std::printf("  epoch %3d/%d  train NLL %.4f  held-out NLL %.4f  CC %.3f  %.0f s\n", e.epoch, o.train.epochs, e.train_nll, e.val_nll,
                        e.val_cc, e.seconds);
            std::fflush(stdout);
          }
          if (state.epoch == o.train.epochs) return;  // the model folder follows: no checkpoint
          write_retina_checkpoint(checkpoint, m, state, config_hash);
          if (state.epoch == o.stop_after) throw Stop{};
        },
        &state);
  } catch (const Error&) {
    discard_run(o, checkpoint, had_folder);
    throw;
  } catch (const Stop&) {
    std::printf("stopped after epoch %d of %d: %s holds the run; the same command with --resume goes on\n", o.stop_after, o.train.epochs,
                checkpoint.c_str());
    return 0;
  }
  nlohmann::ordered_json curve = nlohmann::ordered_json::array();
  for (const retina::EpochRecord& e : r.epochs) curve.push_back({e.epoch, e.train_nll, e.val_nll, e.val_cc, e.seconds});
  const ir::WeightStore weights = m.weights();
  for (const auto& [name, t] : weights)
    for (double v : t.data)
      if (!std::isfinite(v)) {
        discard_run(o, checkpoint, had_folder);
        throw Error("retina train: weight '" + name + "' diverged to NaN or inf: nothing written; lower --lr");
      }
  // The digital model's test scores: what evaluation on the reference backend reproduces.
  const retina::Scores test = retina::score(d.test, m.predict(d.test), o.spec.skip());
  const retina::EpochRecord& best = r.epochs[static_cast<std::size_t>(r.best_epoch - 1)];
  nlohmann::ordered_json rec{{"tool", "aoc retina train"},
                             {"version", AOC_VERSION},
                             {"synthetic", d.synthetic},
                             {"data", o.data},
                             {"data_description", d.description},
                             {"data_digest", file_digest(o.data)},
                             {"model", o.spec.json()},
                             {"parameters", m.parameter_count()},
                             {"train", train_json(o)},
                             {"config_hash", config_hash},
                             {"resumed", o.resume},
                             {"best_epoch", r.best_epoch},
                             {"held_out", {{"nll", best.val_nll}, {"cc", best.val_cc}}},
                             {"curve_columns", {"epoch", "train_nll", "held_out_nll", "held_out_cc", "seconds"}},
                             {"curve", curve},
                             {"test_skip", o.spec.skip()},
                             {"test_digital", scores_json(test)},
                             {"seconds", r.epochs.back().seconds}};
  const std::filesystem::path dir(o.output);
  write_file_atomic((dir / "graph.json").string(), m.graph_json());
  ir::write_weights_h5((dir / "weights.h5").string(), weights);
  write_file_atomic((dir / "train.json").string(), rec.dump(1) + "\n");
  std::filesystem::remove(checkpoint);  // the model is whole: nothing left to resume
  if (!o.quiet) {
    std::printf("best epoch %d (held-out NLL %.4f); test on the digital model: CC %.3f, FEV %.3f, NLL %.4f%s\n", r.best_epoch, best.val_nll, test.cc_mean,
                test.fev_mean, test.nll_mean, d.synthetic ? " (SYNTHETIC data)" : "");
    std::printf("wrote %s/{graph.json, weights.h5, train.json}\n", o.output.c_str());
  }
  return 0;
}

}  // namespace

void add_retina_train(CLI::App& retina) {
  static TrainOpts o;
  auto* c = retina.add_subcommand("train", "Train a retina model (ln, cnn, implicit or ibgp) on a retina file's train split; write graph.json, weights.h5, train.json");
  c->add_option("--data", o.data, "the retina file (aoc retina data, or a naturalscene.h5)")->required();
  c->add_option("-o,--output", o.output, "the model folder to write")->required();
  c->add_option("--model", o.spec.kind,
                "ln: linear-nonlinear baseline; cnn: the retina forward model (conv - temporal conv - ReLU - conv - ReLU - dense); "
                "implicit: the AOC-native model (a fixed-point state on the core carried across frames); "
                "ibgp: IB-GP (encoder to a GP-prior latent, stimulus decoder, then the cnn forward model)")
      ->check(CLI::IsMember({"ln", "cnn", "implicit", "ibgp"}))
      ->capture_default_str();
  c->add_option("--taps", o.spec.taps, "temporal filter length, frames of 10 ms")->check(between(1, 1000))->capture_default_str();
  c->add_option("--conv1", o.spec.conv1, "cnn: first layer's channels")->check(between(1, 256))->capture_default_str();
  c->add_option("--kernel1", o.spec.kernel1, "cnn: first layer's kernel side, pixels")->check(between(1, 1024))->capture_default_str();
  c->add_option("--conv2", o.spec.conv2, "cnn: second layer's channels")->check(between(1, 256))->capture_default_str();
  c->add_option("--kernel2", o.spec.kernel2, "cnn: second layer's kernel side, pixels")->check(between(1, 1024))->capture_default_str();
  c->add_option("--state", o.spec.state, "implicit: latent state variables (the loop's width)")->check(between(1, 4096))->capture_default_str();
  c->add_option("--filters", o.spec.filters, "implicit: spatial filters of the front end, spread over the state")->check(between(1, 4096))->capture_default_str();
  c->add_option("--unroll", o.spec.unroll, "implicit: training steps with gradients after each solve (how far back the gradient reaches)")
      ->check(between(1, 1000))
      ->capture_default_str();
  c->add_option("--latent", o.spec.latent, "ibgp: latent variables per frame (the bottleneck)")->check(between(1, 4096))->capture_default_str();
  c->add_option("--enc", o.spec.enc1, "ibgp: the encoder's first 3x3 convolution's channels; the second and third get 1/2 and 1/4 of it")
      ->check(between(4, 1024))
      ->capture_default_str();
  c->add_option("--dec", o.spec.dec2, "ibgp: the decoder's last hidden 3x3 convolution's channels; the one before and the seed grid get 1/2 and 1/4")
      ->check(between(4, 1024))
      ->capture_default_str();
  c->add_option("--beta", o.spec.beta, "ibgp: the Poisson likelihood's weight against the KL to the GP prior")->check(positive())->capture_default_str();
  c->add_option("--forward", o.forward, "ibgp: start the retina forward model from this trained cnn folder (else from seeded weights)");
  c->add_option("--from", o.from,
                "go on training this model folder (its train.json's kind and sizes, its weights as the start; a fresh optimizer and schedule "
                "over --epochs)");
  c->add_option("--epochs", o.train.epochs, "passes over the train frames")->check(between(1, 100000))->capture_default_str();
  c->add_option("--chunk", o.train.chunk, "frames per training sequence (the temporal filters' warm-up not scored: taps - 1, ibgp 3 (taps - 1))")->check(between(2, 1 << 20))->capture_default_str();
  c->add_option("--batch", o.train.batch, "sequences per step")->check(between(1, 4096))->capture_default_str();
  c->add_option("--lr", o.train.lr, "peak learning rate (AdamW, warm-up then cosine)")->check(positive())->capture_default_str();
  c->add_option("--weight-decay", o.train.weight_decay, "AdamW's decoupled weight decay")->check(between(0.0, 1.0))->capture_default_str();
  c->add_option("--validation", o.train.validation, "the last fraction of the train frames held out to pick the best epoch")
      ->check(between(0.01, 0.5))
      ->capture_default_str();
  c->add_option("--seed", o.train.seed, "initial weights and the chunks' order")->check(seed_value())->capture_default_str();
  c->add_flag("--quiet", o.quiet, "no progress lines");
  c->add_flag("--resume", o.resume, "continue the run DIR/checkpoint.h5 holds (a killed or stopped run): the weights of an unbroken run");
  c->add_option("--stop-after", o.stop_after, "stop after this epoch with a checkpoint (jobs in time slices); --resume goes on")->check(positive());
  c->footer("Trains by Poisson likelihood; the epoch with the lowest held-out NLL is kept. The test split is not used in training;\n"
            "after each epoch DIR/checkpoint.h5 holds the run, so a killed run goes on with --resume (the same options).\n"
            "train.json records the digital model's test CC/FEV/NLL, what aoc retina eval reproduces on the reference backend.\n"
            "Examples:\n  aoc retina data -o retina.h5\n  aoc retina train --data retina.h5 --model ln -o ln\n"
            "  aoc retina train --data retina.h5 --model cnn -o cnn --epochs 30\n"
            "  aoc retina train --data retina.h5 --model ibgp -o ibgp --forward cnn --chunk 400\n"
            "  aoc retina train --data retina.h5 --from ibgp -o ibgp-longer --chunk 400 --epochs 10 --lr 5e-4   (train it further)\n"
            "  aoc retina eval --model cnn --data retina.h5 --hw aoc-48");
  c->callback([c] {
    o.model_options = false;
    for (const char* name : {"--model", "--taps", "--conv1", "--kernel1", "--conv2", "--kernel2", "--state", "--filters", "--unroll", "--latent", "--enc",
                             "--dec", "--beta"})
      o.model_options = o.model_options || c->count(name) > 0;
    o.spec.enc2 = o.spec.enc1 / 2, o.spec.enc3 = o.spec.enc1 / 4, o.spec.dec1 = o.spec.dec2 / 2, o.spec.dec0 = o.spec.dec2 / 4;
    exit_status() = run_train(o);
  });
}

}  // namespace aoc::cli
