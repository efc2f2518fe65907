// aoc task: a batch of a state-tracking task (models/tasks.hpp) as HDF5 files: the tokens (the
// input of a trained model's program, /tokens) and the labels (/labels, what `aoc check --labels`
// scores the outputs against). Each use of the data is its own stream (--split): by default the test
// split, which no training step or converter calibration ever draws from.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "compiler/graph_json.hpp"
#include "models/tasks.hpp"
#include "runtime/cli/commands.hpp"
#include "runtime/io/output.hpp"
#include "sim/files.hpp"

namespace aoc::cli {

namespace {

struct Opts {
  std::string task, tokens, labels, split = "test";
  int batch = 16, length = 64;
  std::uint64_t seed = 1;
  bool json = false;
};

int run(const Opts& o) {
  check_outputs({{"--tokens", o.tokens}, {"--labels", o.labels}}, {});
  const tasks::Task task = tasks::parse_task(o.task);
  const tasks::SeqBatch b = tasks::sample(task, o.batch, o.length, o.seed, 0, tasks::parse_split(o.split));
  // both or neither: labels without their tokens (or stale ones beside new tokens) would score a
  // model against the wrong answers
  write_files_atomic({{o.tokens, ir::weights_h5_image(o.tokens, {{"tokens", b.tokens_tensor()}})},
                      {o.labels, ir::weights_h5_image(o.labels, {{"labels", b.targets_tensor()}})}});
  if (o.json) {
    emit_json(nlohmann::ordered_json{{"tool", "aoc task"}, {"version", AOC_VERSION}, {"task", o.task}, {"batch", o.batch}, {"length", o.length},
                                     {"vocabulary", task.vocab}, {"seed", o.seed}, {"split", o.split}, {"tokens", o.tokens}, {"labels", o.labels}}
                  .dump(1),
              "");
    return 0;
  }
  std::printf("task %s: %d sequences of %d tokens (vocabulary %d), %s split, seed %llu: wrote %s (/tokens) and %s (/labels)\n",
              o.task.c_str(), o.batch, o.length, task.vocab, o.split.c_str(), static_cast<unsigned long long>(o.seed), o.tokens.c_str(),
              o.labels.c_str());
  return 0;
}

}  // namespace

void add_task(CLI::App& app) {
  static Opts o;
  auto* c = app.add_subcommand("task", "Write a seeded batch of a state-tracking task: tokens and labels (HDF5)");
  c->add_option("task", o.task, "parity, count:M, s3, a5, s5, a5xm (with :p=P for the easy tokens' probability); docs/models.md")->required();
  c->add_option("--batch", o.batch, "sequences")->check(between(1, 1 << 20))->capture_default_str();
  c->add_option("--length", o.length, "tokens per sequence")->check(between(1, 1 << 20))->capture_default_str();
  c->add_option("--seed", o.seed, "the seed of the split's stream")->check(seed_value())->capture_default_str();
  c->add_option("--split", o.split,
                "which use's stream: test (what tables score), calibration (converter ranges: aoc compile --calibrate), "
                "train (the trainer's batch of step 0 for its train.seed), eval (its evaluation); no two splits share data")
      ->check(CLI::IsMember({"train", "eval", "test", "calibration"}))
      ->capture_default_str();
  c->add_option("--tokens", o.tokens, "the tokens file to write (/tokens, the model's input)")->required();
  c->add_option("--labels", o.labels, "the labels file to write (/labels, for aoc check --labels)")->required();
  c->add_flag("--json", o.json, "print what was written as a JSON record (task, shape, vocabulary, seed, files)");
  c->footer("Example:\n  aoc task parity --batch 16 --length 64 --seed 7 --tokens tok.h5 --labels lab.h5\n"
            "  aoc task parity --batch 16 --length 64 --seed 7 --split calibration --tokens cal.h5 --labels cal-labels.h5\n"
            "  aoc compile g.json --weights w.h5 --hw aoc-48 -o prog.h5 --calibrate cal.h5\n"
            "  aoc check prog.h5 --inputs tok.h5 --labels lab.h5 --sequence sequential --quantize --noise");
  c->callback([] { exit_status() = run(o); });
}

}  // namespace aoc::cli
