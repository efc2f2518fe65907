#include <cstdio>
#include <functional>

#include "bench/loop_bench.hpp"
#include "bench/program_bench.hpp"
#include "bench/reference_bench.hpp"
#include "bench/train_bench.hpp"
#include "compiler/import_config.hpp"
#include "compiler/op_def.hpp"
#include "runtime/cli/commands.hpp"
#include "runtime/backend/cuda_backend.hpp"
#include "sim/hardware.hpp"
#ifdef AOC_HAVE_CUDA
#include "bench/gpu_bench.hpp"
#endif

namespace aoc::cli {

namespace {

struct GpuOpts {
  std::string config = bundled_path("tests/data/implicit-lm/mamba2-1.3b-implicit/config.json");
  std::vector<int> batches{1, 1024, 65536, 1048576}, token_batches{1, 64, 1024};
  int token_iterations = 20;  // K per token for the per-token figure (docs/results.md's K)
  bool skip = false;
};

#ifdef AOC_HAVE_CUDA
// The products by a weight that one token of the graph runs (Linear x W^T, MatMul a W), those in a
// FixedPoint's body once per iteration: what the compiler puts on the optics.
std::vector<GpuMatrix> token_matrices(const ir::Graph& g) {
  std::vector<GpuMatrix> ms;
  ir::walk(g.ops, [&](const ir::Op& op, int depth) {
    if ((op.kind != ir::OpKind::Linear && op.kind != ir::OpKind::MatMul) || op.inputs.size() < 2 || !ir::is_weight(g, op.inputs[1])) return;
    for (const ir::Value& w : g.weights)
      if (w.name == op.inputs[1] && w.type.shape.size() == 2) {
        const std::int64_t a = w.type.shape[0].size, b = w.type.shape[1].size;
        const bool in_loop = depth > 0;
        ms.push_back(op.kind == ir::OpKind::Linear ? GpuMatrix{a, b, in_loop} : GpuMatrix{b, a, in_loop});
      }
  });
  return ms;
}
#endif

// The GPU section: a table (text) and a record (JSON); "no CUDA device: GPU reference skipped" (or
// the build's reason) where it cannot run.
void gpu_section(const BenchOptions& o, const GpuOpts& g, bool json, nlohmann::json& record, std::string& text) {
  if (g.skip) return;
  const std::string why = cuda_unavailable();
  if (!why.empty()) {
    record["gpu"] = {{"skipped", why}};
    text = "\n" + why + ": GPU reference skipped\n";
    return;
  }
#ifdef AOC_HAVE_CUDA
  GpuBenchOptions go;
  go.channels = load_hardware(resolve_hardware_path(o.hardware)).channels;
  go.batches = g.batches, go.token_batches = g.token_batches;
  go.iterations = o.iterations, go.min_seconds = o.min_seconds, go.seed = o.seed;
  if (!json) std::fprintf(stderr, "bench: GPU loop ...\n");
  const auto loop = gpu_loop_bench(go);
  ir::ImportOptions io;
  io.weights = false;
  const ir::Imported model = ir::import_config(g.config, io);
  const auto ms = token_matrices(model.graph);
  if (!json) std::fprintf(stderr, "bench: GPU matrix work of %s ...\n", model.graph.name.c_str());
  const auto work = gpu_matrix_bench(ms, go);

  const std::string device = cuda_device_description();
  nlohmann::json& j = record["gpu"];
  j["device"] = device;
  j["math"] = "cuBLAS pedantic (no TF32)";
  j["loop"] = {{"channels", go.channels}, {"iterations_per_run", go.iterations}, {"alpha", 0.5}, {"beta", 1.0},
               {"unit", "sample-iterations per second"}};
  for (const auto& r : loop) j["loop"]["rows"].push_back({{"cell", r.cell}, {"precision", r.precision}, {"batch", r.batch}, {"best", r.best}, {"median", r.median}});
  j["token"] = {{"model", model.graph.name}, {"config", g.config}, {"matrices", ms.size()}, {"iterations_per_token", g.token_iterations},
                {"unit", "seconds per pass over the matrices (median)"}};
  char line[256];
  std::string t = "\nGPU reference: " + device + ", cuBLAS pedantic math (no TF32); CUDA events\n";
  std::snprintf(line, sizeof line, "loop z' = 0.5 z + W tanh(z) + x, %d channels, %d iterations per run; sample-iterations/s (best, median)\n\n",
                go.channels, go.iterations);
  t += line;
  std::snprintf(line, sizeof line, "%-12s %4s %8s %11s %11s\n", "cell", "prec", "batch", "best", "median");
  t += line;
  for (const auto& r : loop) {
    std::snprintf(line, sizeof line, "%-12s %4s %8d %11.3e %11.3e\n", r.cell.c_str(), r.precision.c_str(), r.batch, r.best, r.median);
    t += line;
  }
  const double lw = work.empty() ? 0 : work[0].loop_weights, ow = work.empty() ? 0 : work[0].other_weights;
  std::snprintf(line, sizeof line,
                "\none token's matrix work of %s: %zu products, %.3g weights in the fixed point (K = %d iterations per token), %.3g outside;\n"
                "GEMV at batch 1, GEMM above; medians; per token = outside + K x fixed point, divided by the batch\n\n",
                model.graph.name.c_str(), ms.size(), lw, g.token_iterations, ow);
  t += line;
  std::snprintf(line, sizeof line, "%4s %6s %12s %12s %12s %10s %10s\n", "prec", "batch", "loop pass s", "other pass s", "per token s", "GB/s", "TFLOP/s");
  t += line;
  for (const auto& r : work) {
    const double token = (r.other_s + g.token_iterations * r.loop_s) / r.batch;
    const double bytes = (r.loop_weights + r.other_weights) * (r.precision == "f32" ? 4 : 8);
    const double pass = r.loop_s + r.other_s;
    const double gbs = bytes / pass / 1e9, tflops = 2 * (r.loop_weights + r.other_weights) * r.batch / pass / 1e12;
    std::snprintf(line, sizeof line, "%4s %6d %12.4e %12.4e %12.4e %10.1f %10.2f\n", r.precision.c_str(), r.batch, r.loop_s, r.other_s, token, gbs, tflops);
    t += line;
    j["token"]["rows"].push_back({{"precision", r.precision}, {"batch", r.batch}, {"loop_pass_s", r.loop_s}, {"other_pass_s", r.other_s},
                                  {"loop_weights", r.loop_weights}, {"other_weights", r.other_weights}, {"per_token_s", token},
                                  {"weight_gb_per_s", gbs}, {"tflop_per_s", tflops}});
  }
  text = t;
#else
  (void)o, (void)json, (void)record;
#endif
}

}  // namespace

void add_bench(CLI::App& app) {
  static BenchOptions o;
  static GpuOpts g;
  static ProgramBenchOptions po;
  static ReferenceBenchOptions ro;
  static TrainBenchOptions to;
  static bool json = false, no_program = false, no_reference = false, no_train = false;
  static std::string out;
  auto* c = app.add_subcommand("bench",
                               "Time the optical loop against a matrix-product-only loop and the twin, compiled programs on the "
                               "simulator against the reference, and a GPU reference");
  c->add_option("--hw", o.hardware, "hardware file or bundled machine")->capture_default_str();
  c->add_option("--batches", o.batches, "batch sizes")->delimiter(',')->capture_default_str();
  c->add_option("--iterations", o.iterations, "iterations per timed run")->check(positive())->capture_default_str();
  c->add_option("--min-seconds", o.min_seconds, "time spent per measurement (at least 5 runs)")->capture_default_str();
  c->add_option("--threads", o.threads, "threads for every loop timed")->check(positive())->capture_default_str();
  c->add_flag("--f64", o.f64, "time double precision (default: float, as the twin)");
  c->add_option("--seed", o.seed, "seed of the weights and inputs (the programs': of their inputs and the first noise seed)")->check(seed_value())->capture_default_str();
  auto* no_prog = c->add_flag("--no-program", no_program, "leave the program section out");
  const auto sizes = between(1, 1000000);
  for (auto* p : {c->add_option("--program-batch", po.batch, "programs: sequences of the parity model timed per run"),
                  c->add_option("--program-length", po.length, "programs: tokens per sequence of the parity model"),
                  c->add_option("--program-runs", po.runs, "programs: timed runs of each backend on the parity model"),
                  c->add_option("--check-seeds", po.seeds, "programs: noise seeds of the timed aoc check"),
                  c->add_option("--estimate-runs", po.estimate_runs, "programs: timed runs of the 1.3B estimate (the best counts)")})
    p->check(sizes)->capture_default_str()->excludes(no_prog);  // an option that would not apply is an error
  auto* no_ref = c->add_flag("--no-reference", no_reference, "leave the digital reference section out");
  c->add_option("--reference-config", ro.config, "reference: the model timed (a config.json aoc import reads; default bench/mamba2-12-layer)")
      ->check(CLI::ExistingFile)
      ->excludes(no_ref);
  for (auto* p : {c->add_option("--reference-length", ro.length, "reference: tokens run one at a time"),
                  c->add_option("--reference-runs", ro.runs, "reference: timed runs of each thread count"),
                  c->add_option("--reference-batch", ro.batch, "reference: sequences of the batched runs (the 2-thread target's)")})
    p->check(sizes)->capture_default_str()->excludes(no_ref);
  auto* no_tr = c->add_flag("--no-train", no_train, "leave the training section out");
  c->add_option("--torch-step", to.torch_step, "training: PyTorch's figures for the same model (the JSON bench/torch_train_step.py prints)")
      ->check(CLI::ExistingFile)
      ->excludes(no_tr);
  c->add_option("--train-steps", to.steps, "training: timed steps of each kind")->check(sizes)->capture_default_str()->excludes(no_tr);
  c->add_option("--gpu-batches", g.batches, "GPU: batch sizes of the loop")->delimiter(',')->check(positive())->capture_default_str();
  c->add_option("--gpu-config", g.config, "GPU: the model whose per-token matrix work is timed (a config.json aoc import reads)")
      ->check(CLI::ExistingFile);
  c->add_option("--gpu-token-batches", g.token_batches, "GPU: tokens multiplied at once in the matrix work")
      ->delimiter(',')
      ->check(positive())
      ->capture_default_str();
  c->add_option("--gpu-token-iterations", g.token_iterations, "GPU: fixed-point iterations per token for the per-token figure")
      ->check(positive())
      ->capture_default_str();
  c->add_flag("--no-gpu", g.skip, "leave the GPU reference out");
  c->add_flag("--json", json, "print JSON instead of the table");
  c->add_option("-o,--output", out, "write the JSON to this file (with --json)");
  c->footer(
      "Cells: the twin's default switches, the same with every noise source of the hardware file\n"
      "on, every switch off, the ideal tanh loop (all in the simulator), the digital reference\n"
      "(double), and an Eigen loop of only the two matrix products of one iteration. '/matmul' is\n"
      "the ratio to that loop; 'twin' is the twin's own figure on this kind of machine\n"
      "(docs/bench.md). The line under the table: what noise costs, the noisy loop's time over the\n"
      "noiseless one's at each batch, the median over the turns they take (target 1.5x).\n"
      "Programs (--no-program leaves them out), compiled in-process for aoc-48 as aoc import and aoc\n"
      "compile do: the trained parity model (models/trained/parity-implicit) on seeded tokens, token by\n"
      "token, on the digital reference (cpu) and on the simulated machine (sim --quantize --noise, its\n"
      "calibrated optics, float32), the two alternating; their tokens/s and sim/cpu, the median of\n"
      "the pairs' ratios (target 1.5x). And\n"
      "the wall time of aoc check --quantize --noise --seeds 8 on docs/program.md's example (the\n"
      "untrained state-tracking Mamba2, converters calibrated on its 2 x 6 tokens; target 60 s). And\n"
      "the wall time of aoc estimate of the published 1.3B implicit Mamba2 (shapes only, --iterations\n"
      "20): its compilation for the machine and the count of a token (best of 3; target 2 s on aoc-48).\n"
      "The digital reference (--no-reference leaves it out): a 12-layer implicit Mamba2 (bench/mamba2-12-layer,\n"
      "45M loop weights, seeded) on the cpu backend token by token, its time per fixed-point evaluation\n"
      "against an Eigen GEMV over the same weights (target 1.5x), and 2 threads against 1 at batch 1\n"
      "(memory-bound: beside it what a second thread adds to a streaming read) and at --reference-batch\n"
      "(16: GEMMs; target 1.7x).\n"
      "Training (--no-train leaves it out): the trainer's bounded and free steps on the parity scenario\n"
      "(scenarios/train/parity-implicit.json; the free step's solve runs all its 16 steps), seconds per\n"
      "step on one thread (as aoc train trains), against PyTorch's for the same model with --torch-step FILE (the JSON of\n"
      "/usr/bin/python3 bench/torch_train_step.py; target: no slower than its faster precision).\n"
      "GPU reference (a build with AOC_CUDA and a device; else one line says it was skipped): the same\n"
      "loop batched on the GPU (a kernel and a cuBLAS GEMM per iteration) and one token's matrix work\n"
      "of --gpu-config (default: the largest published config, mamba2-1.3b), float32 and float64.\n"
      "Examples:\n  aoc bench --batches 1,64,1024 --json -o bench.json\n  aoc bench --no-gpu --program-length 256 --check-seeds 3");
  c->callback([c] {
    require_json_for_output(c, "bench");
    const auto rows = run_loop_bench(o, !json);
    nlohmann::json record = bench_json(o, rows);
    std::string program_text, gpu_text;
    if (!no_program) {
      po.threads = o.threads, po.seed = o.seed;
      const ProgramBench pb = run_program_bench(po, !json);
      record["programs"] = program_bench_json(pb);
      program_text = program_bench_table(pb);
    }
    std::string reference_text;
    if (!no_reference) {
      ro.seed = o.seed;
      const ReferenceBench rb = run_reference_bench(ro, !json);
      record["reference"] = reference_bench_json(rb);
      reference_text = reference_bench_table(rb);
    }
    std::string train_text;
    if (!no_train) {
      const TrainBench tb = run_train_bench(to, !json);
      record["train"] = train_bench_json(tb);
      train_text = train_bench_table(tb);
    }
    gpu_section(o, g, json, record, gpu_text);
    if (json) emit_json(record.dump(1), out);
    else std::printf("%s%s%s%s%s", bench_table(o, rows).c_str(), program_text.c_str(), reference_text.c_str(), train_text.c_str(), gpu_text.c_str());
  });
}

}  // namespace aoc::cli
