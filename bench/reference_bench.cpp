#include "bench/reference_bench.hpp"

#include <Eigen/Core>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <sstream>

#include "bench/loop_bench.hpp"
#include "bench/program_bench.hpp"
#include "compiler/import_config.hpp"
#include "compiler/passes.hpp"
#include "runtime/backend/backend.hpp"
#include "runtime/run/program_run.hpp"
#include "sim/error.hpp"
#include "sim/hardware.hpp"

namespace aoc {

namespace {

using Clock = std::chrono::steady_clock;

// The least time of one pass of GEMVs over the given plans' weights (each in its stored layout,
// mapped where it lies), repeated for at least min_seconds.
double gemv_pass(const ir::Program& p, bool in_loop, double min_seconds = 0.3) {
  struct Product {
    Eigen::Map<const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>> rm;  // Linear: [out, in]
    Eigen::Map<const Eigen::MatrixXd> cm;                                                       // MatMul: [in, out] row-major
    bool aoc_layout;
    Eigen::VectorXd x, y;
  };
  std::vector<Product> products;
  for (const ir::OpticalPlan& plan : p.optical) {
    if (plan.loop.empty() == in_loop) continue;
    const double* w = p.weights.at(plan.weight).data.data();
    products.push_back({{w, plan.rows, plan.cols}, {w, plan.rows, plan.cols}, plan.aoc_layout, Eigen::VectorXd::Random(plan.cols),
                        Eigen::VectorXd::Zero(plan.rows)});
  }
  if (products.empty()) return 0;
  double best = 1e300, spent = 0;
  for (int k = 0; k < 5 || spent < min_seconds; ++k) {
    const auto t0 = Clock::now();
    for (Product& g : products) {
      if (g.aoc_layout) g.y.noalias() = g.cm * g.x;
      else g.y.noalias() = g.rm * g.x;
    }
    const double s = seconds_since(t0);
    best = std::min(best, s), spent += s;
  }
  return best;
}

// The program on the cpu backend, token by token, with 1 and 2 threads alternately (a burst of load
// elsewhere slows both alike).
ThreadRuns time_threads(const Backend& cpu, const ir::Program& p, const std::map<std::string, ir::Tensor>& inputs, int runs, int batch) {
  ThreadRuns t;
  t.batch = batch;
  std::vector<double> one, two;
  ProgramResult r;
  for (int k = 0; k < runs; ++k)
    for (int threads : {1, 2}) {
      BackendOptions bo;
      bo.threads = threads, bo.mode = ir::Mode::Sequential;
      bo.noise = bo.quantize = bo.optics = false, bo.f64 = true;
      const auto t0 = Clock::now();
      r = cpu.run(p, inputs, bo);
      (threads == 1 ? one : two).push_back(seconds_since(t0));
    }
  // per token, the batch's steps (its slowest sample's), then the evaluation that commits it (every
  // run takes the same: the reference is exact and deterministic)
  std::vector<int> steps(static_cast<std::size_t>(inputs.begin()->second.shape.at(1)), 0);
  for (const ir::FixedPointStats& st : r.fixed_points) {
    std::fill(steps.begin(), steps.end(), 0);
    for (std::size_t i = 0; i < st.iterations.size(); ++i) steps[i % steps.size()] = std::max(steps[i % steps.size()], st.iterations[i]);
    for (int s : steps) t.evaluations += s + 1;
  }
  t.speedup = median_ratio(one, two);
  t.one_s = *std::min_element(one.begin(), one.end());
  t.two_s = *std::min_element(two.begin(), two.end());
  return t;
}

// GB/s of a read streaming through 512 MiB with this many threads, each summing its share with
// Eigen's vectorised sum (the best of 5): the memory's ceiling for a product that reads each weight once.
double read_bandwidth(int threads) {
  const std::int64_t n = std::int64_t{1} << 26;
  std::vector<double> a(static_cast<std::size_t>(n), 1.0);
  double best = 1e300, sink = 0;
  for (int rep = 0; rep < 5; ++rep) {
    const auto t0 = Clock::now();
    double s = 0;
#pragma omp parallel for num_threads(threads) reduction(+ : s) schedule(static)
    for (int part = 0; part < threads; ++part) {
      const std::int64_t lo = n * part / threads, hi = n * (part + 1) / threads;
      s += Eigen::Map<const Eigen::VectorXd>(a.data() + lo, hi - lo).sum();
    }
    best = std::min(best, seconds_since(t0));
    sink += s;
  }
  return sink > 0 ? static_cast<double>(n) * sizeof(double) / best / 1e9 : 0;
}

}  // namespace

ReferenceBench run_reference_bench(const ReferenceBenchOptions& opt, bool progress) {
  if (opt.length < 1 || opt.runs < 1 || opt.batch < 1) throw Error("bench: reference length, runs and batch must be at least 1");
  ReferenceBench b;
  b.opt = opt;
  b.config_path = bench_file(opt.config.empty() ? bundled_path("bench/mamba2-12-layer/config.json") : opt.config,
                             "the model the reference section runs; --no-reference leaves it out");
  const Hardware hw = load_hardware(resolve_hardware_path(opt.hardware));
  if (progress) std::fprintf(stderr, "bench: reference, import and compile %s ...\n", b.config_path.c_str());
  const auto t0 = Clock::now();
  ir::Program p;
  ir::ImportOptions io;  // aoc import's seeded weights (seed 0), handed over one at a time: any size
  io.weight_sink = [&](const std::string& name, ir::Tensor&& t) { p.weights.emplace(name, std::move(t)); };
  ir::Imported m = ir::import_config(b.config_path, io);
  b.model = m.graph.name;
  p.graph = std::move(m.graph);
  p.target = ir::target_of(hw, opt.hardware, {});
  ir::PassOptions po;
  po.quantize = false;  // the reference reads exact weights
  ir::run_pipeline(p, po);
  b.prepare_s = seconds_since(t0);
  for (const ir::OpticalPlan& plan : p.optical) (plan.loop.empty() ? b.top_weights : b.loop_weights) += plan.weights();
  b.config_hash = bench_cell_hash({b.config_path, hw.path}, "reference " + opt.hardware + " batches 1 " + std::to_string(opt.batch) + " length " + std::to_string(opt.length) +
                                                                " sequential weights seed 0 seed " + std::to_string(opt.seed));

  const auto cpu = make_backend("cpu", &hw);
  for (ThreadRuns* t : {&b.token, &b.batched}) {
    t->batch = t == &b.token ? 1 : opt.batch;
    if (progress) std::fprintf(stderr, "bench: reference %s, batch %d, 1 and 2 threads, %d run(s) each ...\n", b.model.c_str(), t->batch, opt.runs);
    *t = time_threads(*cpu, p, example_inputs(p, t->batch, opt.length, opt.seed), opt.runs, t->batch);
  }
  b.gemv_loop_s = gemv_pass(p, true);
  b.gemv_top_s = gemv_pass(p, false);
  b.read_gb_s_1 = read_bandwidth(1), b.read_gb_s_2 = read_bandwidth(2);
  return b;
}

nlohmann::json reference_bench_json(const ReferenceBench& b) {
  const ReferenceBenchOptions& o = b.opt;
  const auto runs = [&](const ThreadRuns& t) {
    const double evals = static_cast<double>(std::max<long long>(1, t.evaluations));
    return nlohmann::json{{"batch", t.batch},
                          {"evaluations", t.evaluations},
                          {"best_s_1_thread", t.one_s},
                          {"best_s_2_threads", t.two_s},
                          {"per_evaluation_s_1_thread", t.one_s / evals},
                          {"per_evaluation_s_2_threads", t.two_s / evals},
                          {"two_thread_speedup", t.speedup}};
  };
  nlohmann::json token = runs(b.token), batched = runs(b.batched);
  const double evals = static_cast<double>(std::max<long long>(1, b.token.evaluations));
  token["roofline_per_evaluation_s"] = b.roofline_s() / evals;
  token["over_roofline"] = b.over_roofline();
  token["target"] = kReferenceOverGemvTarget;
  token["within_target"] = b.over_roofline() <= kReferenceOverGemvTarget;
  token["read_bandwidth_gb_s"] = {{"1_thread", b.read_gb_s_1}, {"2_threads", b.read_gb_s_2}};
  batched["target"] = kTwoThreadSpeedupTarget;
  batched["within_target"] = b.batched.speedup >= kTwoThreadSpeedupTarget;
  return {{"cell", "reference"},
          {"model", b.model},
          {"config", b.config_path},
          {"hardware", o.hardware},
          {"length", o.length},
          {"mode", "sequential"},
          {"options", "aoc run --backend cpu --sequence sequential (exact weights, f64), 1 and 2 threads alternating"},
          {"seed", o.seed},
          {"weights_seed", 0},
          {"runs", o.runs},
          {"config_hash", b.config_hash},
          {"version", AOC_VERSION},
          {"loop_weights", b.loop_weights},
          {"top_level_weights", b.top_weights},
          {"prepare_s", b.prepare_s},
          {"gemv_loop_s", b.gemv_loop_s},
          {"gemv_top_level_s", b.gemv_top_s},
          {"token", token},
          {"batched", batched}};
}

std::string reference_bench_table(const ReferenceBench& b) {
  char line[512];
  std::ostringstream t;
  std::snprintf(line, sizeof line,
                "\nthe digital reference: %s on %s (%.1fM loop weights, %.1fM outside the loop), %d token(s) one at a time, best of %d\n",
                b.model.c_str(), b.opt.hardware.c_str(), b.loop_weights / 1e6, b.top_weights / 1e6, b.opt.length, b.opt.runs);
  t << line;
  const auto ms = [](const ThreadRuns& r, double s) { return 1e3 * s / static_cast<double>(std::max<long long>(1, r.evaluations)); };
  std::snprintf(line, sizeof line, "%-15s %.2f ms per evaluation (%lld a run), the Eigen GEMV roofline %.2f ms: %.2fx (target %.1fx: %s)\n",
                "batch 1", ms(b.token, b.token.one_s), b.token.evaluations, ms(b.token, b.roofline_s()), b.over_roofline(), kReferenceOverGemvTarget,
                b.over_roofline() <= kReferenceOverGemvTarget ? "met" : "not met");
  t << line;
  std::snprintf(line, sizeof line, "%-15s 2 threads %.2f ms: %.2fx of 1 thread, median of the pairs (memory-bound: a streaming read gains %.2fx, %.1f -> %.1f GB/s)\n",
                "", ms(b.token, b.token.two_s), b.token.speedup, b.read_gb_s_2 / b.read_gb_s_1, b.read_gb_s_1, b.read_gb_s_2);
  t << line;
  std::snprintf(line, sizeof line, "%-15s %.2f ms per evaluation (%lld a run); 2 threads %.2f ms: %.2fx of 1 thread (target %.1fx: %s)\n",
                ("batch " + std::to_string(b.batched.batch)).c_str(), ms(b.batched, b.batched.one_s), b.batched.evaluations, ms(b.batched, b.batched.two_s),
                b.batched.speedup, kTwoThreadSpeedupTarget, b.batched.speedup >= kTwoThreadSpeedupTarget ? "met" : "not met");
  t << line;
  return t.str();
}

}  // namespace aoc
