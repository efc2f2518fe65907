#include "runtime/retina/retina_eval.hpp"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>

#include "compiler/graph_json.hpp"
#include "compiler/passes.hpp"
#include "sim/error.hpp"

namespace aoc {

namespace fs = std::filesystem;

namespace {

std::string num(std::int64_t v) { return std::to_string(v); }

// The graph's input must be one `stimulus` [B, L, H, W, 1] and its outputs include `rate`.
void check_retina_graph(const ir::Graph& g, const std::string& path) {
  if (g.inputs.size() != 1 || g.inputs[0].name != "stimulus")
    throw Error(path + ": inputs: a retina model has one input, stimulus [B, L, H, W, 1] (aoc retina train writes one)");
  const ir::Shape& s = g.inputs[0].type.shape;
  if (s.size() != 5 || !s[2].is_fixed() || !s[3].is_fixed() || !(s[4].is_fixed() && s[4].size == 1))
    throw Error(path + ": inputs: stimulus is " + ir::to_string(g.inputs[0].type) + ", not [B, L, H, W, 1] with H and W fixed");
  bool rate = false;
  for (const auto& o : g.outputs) rate = rate || o == "rate";
  if (!rate) throw Error(path + ": outputs: no output named rate (the expected spikes per bin [B, L, cells])");
}

}  // namespace

RetinaModelFiles read_retina_model(const std::string& dir) {
  if (!fs::is_directory(dir)) throw Error(dir + ": not a folder (a retina model folder holds graph.json and weights.h5: aoc retina train -o DIR)");
  RetinaModelFiles m;
  m.dir = dir;
  const std::string graph = (fs::path(dir) / "graph.json").string(), weights = (fs::path(dir) / "weights.h5").string();
  for (const auto& f : {graph, weights})
    if (!fs::is_regular_file(f)) throw Error(f + ": missing (a retina model folder holds graph.json and weights.h5: aoc retina train -o DIR)");
  m.graph = ir::read_graph(graph);
  check_retina_graph(m.graph, graph);
  m.weights = ir::read_weights_h5(weights);
  const std::string record = (fs::path(dir) / "train.json").string();
  if (fs::is_regular_file(record)) try {
      m.record = nlohmann::json::parse(std::ifstream(record));
    } catch (const std::exception& e) {
      throw Error(record + ": not JSON: " + e.what());
    }
  if (m.record.is_object() && m.record.contains("test_skip")) {
    const auto& v = m.record["test_skip"];
    if (!v.is_number_integer() || v.get<std::int64_t>() < 0 || v.get<std::int64_t>() > (1 << 20))
      throw Error(record + ": test_skip: expected a whole number of frames >= 0");
    m.skip = v.get<int>();
  }
  return m;
}

ir::Tensor retina_stimulus_tensor(const retina::Split& s, int frames) {
  if (frames < 1 || frames > s.frames) throw Error("retina: " + num(frames) + " frames asked of a split of " + num(s.frames));
  ir::Tensor t;
  t.shape = {1, frames, s.height, s.width, 1};
  const std::size_t n = static_cast<std::size_t>(frames) * static_cast<std::size_t>(s.height) * static_cast<std::size_t>(s.width);
  t.data.assign(s.stimulus.begin(), s.stimulus.begin() + static_cast<std::ptrdiff_t>(n));
  return t;
}

RetinaEval evaluate_retina(const RetinaModelFiles& m, const retina::Dataset& d, const RetinaEvalSettings& s,
                           std::function<void(long long, long long)> progress) {
  return evaluate_retina(m, d, load_hardware(resolve_hardware_path(s.hw), s.set), s, std::move(progress));
}

RetinaMachine compile_retina(const RetinaModelFiles& m, const retina::Dataset& d, const Hardware& hw, const RetinaEvalSettings& s) {
  const std::string graph_file = (fs::path(m.dir) / "graph.json").string();
  const ir::Shape& in = m.graph.inputs[0].type.shape;
  if (in[2].size != d.test.height || in[3].size != d.test.width)
    throw Error(graph_file + ": inputs: stimulus frames are " + num(in[2].size) + "x" + num(in[3].size) + " px, the data's " + num(d.test.height) +
                "x" + num(d.test.width));
  if (s.calibration_frames < 0) throw Error("calibration_frames: " + num(s.calibration_frames) + " is negative");
  RetinaMachine r;
  r.graph_file = graph_file;
  r.hw = hw;
  r.backend = s.backend;
  r.options = backend_options(s.run);
  r.cells = d.test.cells();
  r.skip = m.skip;
  ir::Program& p = r.program;
  p.graph = m.graph;
  p.weights = m.weights;
  p.target = ir::target_of(r.hw, s.hw, s.set);
  ir::PassOptions po;
  po.quantize = r.hw.converters.has_value();
  if (s.compensate) po.compensate = &r.hw;
  r.calibration_frames = po.quantize ? std::min(s.calibration_frames, d.train.frames) : 0;
  std::map<std::string, ir::Tensor> cal;
  if (r.calibration_frames > 0) {
    // The converters' ranges from the exact reference on train frames: never on what is scored.
    cal["stimulus"] = retina_stimulus_tensor(d.train, r.calibration_frames);
    po.calibrate = [&](ir::Program& q) { return r.calibrated_ranges = calibrate_converters(q, cal, 1.0, r.options.mode); };
  }
  ir::run_pipeline(p, po);
  return r;
}

Eigen::MatrixXd run_retina(const RetinaMachine& m, const ir::Tensor& stimulus, std::uint64_t seed, ProgramResult* result,
                           std::function<void(long long, long long)> progress) {
  BackendOptions bo = m.options;
  bo.seed = seed;
  bo.progress = std::move(progress);
  ProgramResult res = make_backend(m.backend, &m.hw)->run(m.program, {{"stimulus", stimulus}}, bo);
  const ir::Tensor& rate = res.values.at("rate");
  const std::int64_t frames = stimulus.shape.at(1);
  if (rate.shape.size() != 3 || rate.shape[0] != 1 || rate.shape[1] != frames)
    throw Error(m.graph_file + ": outputs: rate is not [B, L, cells] (got rank " + num(static_cast<std::int64_t>(rate.shape.size())) + ")");
  if (rate.shape[2] != m.cells) throw Error(m.graph_file + ": outputs: rate has " + num(rate.shape[2]) + " cells, the data " + num(m.cells));
  Eigen::MatrixXd pred(m.cells, frames);
  for (std::int64_t t = 0; t < frames; ++t)
    for (int c = 0; c < m.cells; ++c) pred(c, t) = rate.data[static_cast<std::size_t>(t * m.cells + c)];
  if (result) *result = std::move(res);
  return pred;
}

RetinaEval evaluate_retina(const RetinaModelFiles& m, const retina::Dataset& d, const Hardware& hw, const RetinaEvalSettings& s,
                           std::function<void(long long, long long)> progress) {
  return evaluate_retina(compile_retina(m, d, hw, s), d, s, std::move(progress));
}

RetinaEval evaluate_retina(const RetinaMachine& machine, const retina::Dataset& d, const RetinaEvalSettings& s,
                           std::function<void(long long, long long)> progress) {
  const int frames = s.frames ? s.frames : d.test.frames;
  if (frames < 1 || frames > d.test.frames) throw Error("frames: " + num(s.frames) + " of a test split of " + num(d.test.frames));
  RetinaEval r;
  r.skip = s.skip >= 0 ? s.skip : machine.skip;
  if (r.skip >= frames) throw Error("skip: " + num(r.skip) + " leaves no frame of " + num(frames) + " to score");
  r.hw = machine.hw;
  r.program = machine.program;
  r.calibrated_ranges = machine.calibrated_ranges;
  r.calibration_frames = machine.calibration_frames;
  r.test = retina::slice(d.test, 0, frames);
  const auto start = std::chrono::steady_clock::now();
  r.pred = run_retina(machine, retina_stimulus_tensor(r.test, frames), s.run.seed, &r.result, std::move(progress));
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.scores = retina::score(r.test, r.pred, r.skip);

  ProgramEstimateOptions eo;
  eo.seq_len = frames;
  for (const auto& fp : r.result.fixed_points) {
    const IterationSummary it = summarize(fp.iterations, fp.converged);
    eo.measured[fp.op] = {it.mean, "measured: the mean over " + num(it.solves) + " solves of this evaluation (" + machine.backend + " backend, " +
                                       s.run.sequence + ")"};
  }
  if (!r.result.fixed_points.empty()) r.iterations = summarize(r.result);
  r.estimate = estimate_program(r.program, r.hw, eo);
  return r;
}

}  // namespace aoc
