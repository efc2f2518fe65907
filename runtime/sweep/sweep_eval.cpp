#include "runtime/sweep/sweep_eval.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <future>
#include <limits>
#include <map>
#include <mutex>
#include <optional>

#include "compiler/graph_json.hpp"
#include "compiler/import_config.hpp"
#include "compiler/passes.hpp"
#include "models/tasks.hpp"
#include "runtime/backend/backend.hpp"
#include "runtime/optimize/optimize.hpp"
#include "runtime/run/program_check.hpp"
#include "runtime/estimate/program_estimate.hpp"
#include "runtime/run/program_run.hpp"
#include "runtime/run/program_settings.hpp"
#include "runtime/retina/retina_eval.hpp"
#include "sim/area.hpp"
#include "sim/error.hpp"
#include "sim/hardware.hpp"
#include "sim/json_reader.hpp"

namespace aoc::sweep {

namespace fs = std::filesystem;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The run parameters of a point (docs/scenarios.md), defaults where the point does not set them.
struct RunParams {
  std::optional<double> iterations, photons;
  std::int64_t seq_len = 1024;
  double noise_scale = 1;
  std::uint64_t seed = 0;
  int seeds = 1;
  std::optional<int> batch, length, channels;
  std::optional<bool> optics;  // the point's optics (workload.optics where the point does not vary it)
};

// A value made once per key and shared, whichever thread asks first (the others wait for it).
template <class T>
class Once {
 public:
  std::shared_ptr<const T> get(const std::string& key, const std::function<T()>& make) {
    std::promise<std::shared_ptr<const T>> made;
    std::shared_future<std::shared_ptr<const T>> f;
    bool mine = false;
    {
      std::lock_guard<std::mutex> lock(m_);
      auto it = map_.find(key);
      if (it == map_.end()) it = map_.emplace(key, made.get_future().share()).first, mine = true;
      f = it->second;
    }
    if (mine) {
      try {
        made.set_value(std::make_shared<const T>(make()));
      } catch (...) {
        made.set_exception(std::current_exception());
      }
    }
    return f.get();
  }

 private:
  std::mutex m_;
  std::map<std::string, std::shared_future<std::shared_ptr<const T>>> map_;
};

// A program compiled for one compiler target, with what every run of it shares.
struct Compiled {
  ir::Program program;
  std::map<std::string, ir::Tensor> inputs;  // runs only
  ir::Tensor labels;                          // a model's task targets [B, L] (empty: no task)
  ProgramResult reference;                    // the digital reference on the inputs
};

// What the compiler reads of the machine: points with the same key share a program.
std::string target_key(const ir::Target& t) {
  json j{t.hardware, t.channels, t.modules, t.analog_functions, t.analog_partial_sums, t.analog_state_memory,
         t.slm_bits, t.dac_bits, t.adc_bits, t.dac_lo, t.dac_hi, t.adc_lo, t.adc_hi};
  return j.dump();
}

double finite_or_nan(double v) { return std::isfinite(v) ? v : kNaN; }

}  // namespace

struct Evaluator::Impl {
  const Scenario& s;
  HardwareFile machine;  // the base machine, parsed once
  ir::Graph graph;
  ir::WeightStore weights;
  std::optional<tasks::Task> task;
  IsingProblem problem;  // a problem workload's instance
  std::optional<RetinaModelFiles> retina_model;  // a retina workload's model and data
  std::optional<retina::Dataset> retina_data;
  mutable Once<Compiled> compiled;
  mutable Once<RetinaMachine> retina_machines;  // a retina workload's programs, by compiler target
  bool wants_area = false;

  explicit Impl(const Scenario& sc)
      : s(sc), machine(sc.hardware_path), wants_area(std::find(sc.metrics.begin(), sc.metrics.end(), "area") != sc.metrics.end()) {
    const Workload& w = s.workload;
    if (w.kind == Workload::Kind::Problem) {
      problem = read_problem(w.path);
    } else if (w.kind == Workload::Kind::Retina) {
      retina_model = read_retina_model(w.path);
      retina_data = w.data.empty() ? retina::synthesize(retina::SynthConfig{}) : retina::read_dataset(w.data);
    } else if (w.kind == Workload::Kind::Graph) {
      graph = ir::read_graph(w.path);
      if (!w.weights.empty()) weights = ir::read_weights_h5(w.weights);
    } else {
      const std::string config = w.kind == Workload::Kind::Model ? (fs::path(w.path) / "config.json").string() : w.path;
      ir::ImportOptions io;
      io.weights = false;  // a model's trained weights are its folder's weights.h5
      graph = ir::import_config(config, io).graph;
      if (w.kind == Workload::Kind::Model) {
        weights = ir::read_weights_h5((fs::path(w.path) / "weights.h5").string());
        task = tasks::parse_task(w.task);
      }
    }
  }

  RunParams run_params(const Point& pt, std::vector<std::string>& overrides) const {
    RunParams rp;
    rp.seed = s.seed;
    for (std::size_t k = 0; k < s.params.size(); ++k) {
      const Param& p = s.params[k];
      const json& v = pt.values[k];
      if (p.hardware) {
        overrides.push_back(p.name + "=" + v.dump());
        continue;
      }
      if (p.name == "optics") {
        rp.optics = v.get<bool>();
        continue;
      }
      const double x = v.get<double>();
      if (p.name == "iterations") rp.iterations = x;
      else if (p.name == "photons_per_sample") rp.photons = x;
      else if (p.name == "seq_len") rp.seq_len = v.get<std::int64_t>();
      else if (p.name == "noise_scale") rp.noise_scale = x;
      else if (p.name == "seed") rp.seed = v.get<std::uint64_t>();
      else if (p.name == "seeds") rp.seeds = v.get<int>();
      else if (p.name == "batch") rp.batch = v.get<int>();
      else if (p.name == "length") rp.length = v.get<int>();
      else if (p.name == "channels") rp.channels = v.get<int>();
    }
    return rp;
  }

  // The workload compiled for `hw` (shared by every point with the same target and inputs). A model
  // runs on the first `fraction` of its batch of test sequences, its converters calibrated on as
  // many of the calibration split's: a screen costs that fraction of a whole evaluation.
  std::shared_ptr<const Compiled> compile(const Hardware& hw, const RunParams& rp, double fraction) const {
    const Workload& w = s.workload;
    const int batch = std::max(1, static_cast<int>(std::ceil(rp.batch.value_or(w.batch) * fraction - 1e-9)));
    const int length = rp.length.value_or(w.length);
    const ir::Target target = ir::target_of(hw, s.hardware, {});
    const std::string key = target_key(target) + (w.kind == Workload::Kind::Model ? " " + std::to_string(batch) + " " + std::to_string(length) : "");
    return compiled.get(key, [&] {
      Compiled c;
      if (!w.runs()) {
        c.program = compile_for_estimate(graph, hw, s.hardware, {});
        return c;
      }
      ir::Program& p = c.program;
      p.graph = graph;
      p.weights = weights;
      p.target = target;
      std::map<std::string, ir::Tensor> calibration;
      if (w.kind == Workload::Kind::Model) {
        if (p.graph.inputs.size() != 1) throw Error(w.path + ": a model with one input (the tokens) is expected");
        // scored on the test split (its sequences a pure function of their index: a smaller batch is
        // the first of a larger); the converters calibrated on the calibration split, never on what is scored
        const tasks::SeqBatch data = tasks::sample(*task, batch, length, w.data_seed, 0, tasks::Split::Test);
        c.inputs[p.graph.inputs[0].name] = data.tokens_tensor();
        c.labels = data.targets_tensor();
        calibration[p.graph.inputs[0].name] = tasks::sample(*task, batch, length, w.data_seed, 0, tasks::Split::Calibration).tokens_tensor();
      } else {
        c.inputs = read_program_inputs(w.inputs, p);
      }
      ir::PassOptions po;
      po.quantize = hw.converters.has_value();
      po.compensate = &hw;  // for the machine as measured (a point with ideal optics programs the weights as they are)
      // As `aoc compile --calibrate`: the converters' ranges from the exact reference on the inputs.
      if (w.calibrate) po.calibrate = [&](ir::Program& q) { return calibrate_converters(q, calibration.empty() ? c.inputs : calibration); };
      ir::run_pipeline(p, po);
      BackendOptions ro;
      ro.noise = ro.quantize = ro.optics = false;
      ro.mode = w.mode;
      c.reference = make_backend("cpu", &hw)->run(p, c.inputs, ro);
      return c;
    });
  }

  // The machine's noise at the point: every level of its noise section times noise_scale, and with
  // a photon budget the photons each detector receives (the tile's shot noise). Returns whether
  // the run is noisy.
  bool set_noise(Hardware& hw, const RunParams& rp) const {
    const bool noisy = rp.noise_scale > 0 || rp.photons;
    if (!noisy) return false;
    if (!hw.noise) throw Error(s.hardware_path + ": noise: missing (needed for a noisy run: set noise_scale 0 to run without noise)");
    NoiseSpec& n = *hw.noise;
    for (double* level : {&n.thermal_sigma, &n.receiver_electrons, &n.rin_sigma, &n.slm_fixed_pattern_sigma, &n.drift_sigma, &n.flicker_sigma})
      *level *= rp.noise_scale;
    if (n.slm_fixed_pattern_sigma > 1)
      throw Error("noise_scale " + jsonr::num(rp.noise_scale) + ": noise.slm_fixed_pattern_sigma becomes " + jsonr::num(n.slm_fixed_pattern_sigma) +
                  ", more than 1");
    if (rp.photons) n.photons_per_sample = *rp.photons;
    else if (rp.noise_scale == 0) n.photons_per_sample = 0;
    return true;
  }

  // An optimisation problem at the point: the sampler's search and final run on the machine with its
  // overrides and noise (docs/optimisation.md), no baselines.
  void optimise(const Hardware& hw, const RunParams& rp, bool noisy, std::map<std::string, double>& m) const {
    const Workload& w = s.workload;
    OptimizeSettings os;
    os.loop.hw = s.hardware_path;
    os.loop.mode = rp.optics.value_or(w.optics) ? "default" : "ideal";  // the machine as measured, or the exact loop
    os.loop.quantize = w.quantize;
    os.loop.noise = noisy;
    os.loop.seed = rp.seed;
    os.samples = w.samples, os.iterations = w.iterations;
    os.sa_sweeps = os.sb_steps = 0;
    const OptimizeResult r = optimize(problem, hw, os, false);
    m["p"] = r.aoc_success.p;
    m["ops_to_solution"] = r.ops_to_solution(), m["tts99"] = r.tts99_s();
    m["energy_to_solution"] = r.energy_to_solution_j();
    m["best_objective"] = objective_of(problem, r.aoc.best_energy);
    m["programming_residual"] = r.aoc.programming_residual;
  }

  // Runs the program on the simulator once per seed, against the reference and the labels.
  double run(const Compiled& c, const Hardware& hw, const RunParams& rp, bool noisy, std::map<std::string, double>& m) const {
    const Workload& w = s.workload;
    const auto sim = make_backend("sim", &hw);
    BackendOptions bo;
    bo.seed = rp.seed;
    bo.noise = noisy;
    bo.quantize = w.quantize;
    bo.optics = rp.optics.value_or(w.optics);
    bo.mode = w.mode;
    std::vector<double> acc;
    const SeedStats st = check_over_seeds(*sim, c.program, c.inputs, bo, rp.seeds, c.reference, {}, [&](int, const ProgramResult& r) {
      if (!c.labels.data.empty()) acc.push_back(ir::label_accuracy(r.values.at(c.program.graph.outputs[0]), c.labels));
    });
    if (!acc.empty()) {
      const Stat a = stat(acc);
      m["accuracy"] = a.mean, m["accuracy_min"] = a.min;
    }
    m["agreement"] = st.argmax.mean, m["agreement_min"] = st.argmax.min, m["max_abs_error"] = st.abs.max;
    m["iterations"] = st.iterations.mean, m["failures"] = st.failures.mean;
    m["reference_iterations"] = summarize(c.reference).mean;
    return st.iterations.mean;
  }

  void estimate(const Compiled& c, const Hardware& hw, const RunParams& rp, std::optional<double> measured, std::map<std::string, double>& m) const {
    ProgramEstimateOptions eo;
    eo.iterations = rp.iterations ? rp.iterations : measured ? std::optional<double>(std::max(1.0, *measured)) : std::nullopt;
    eo.seq_len = rp.seq_len;
    eo.photons_per_sample = rp.photons;
    const ProgramEstimate e = estimate_program(c.program, hw, eo);
    if (!measured) m["iterations"] = e.loops.empty() ? 0.0 : e.loops[0].iterations;
    estimate_metrics(e, m);
  }

  // A retina model on the point's machine: its scores on the test movie, its measured iterations
  // and its estimate per frame (a frame is a token).
  void retina_point(const Hardware& hw, const RunParams& rp, bool noisy, std::map<std::string, double>& m) const {
    const Workload& w = s.workload;
    RetinaEvalSettings st;
    st.hw = s.hardware;
    st.backend = "sim";
    st.run.sequence = w.mode == ir::Mode::Sequential ? "sequential" : "simultaneous";
    st.run.quantize = w.quantize, st.run.noise = noisy, st.run.ideal_optics = !rp.optics.value_or(w.optics);
    st.run.seed = rp.seed;
    st.calibration_frames = w.calibrate ? st.calibration_frames : 0;
    st.frames = w.frames;
    // The compiled, calibrated program is shared by every point with the same compiler target (as a
    // model's); the point's machine (its noise) and run settings go with it.
    const auto compiled_machine = retina_machines.get(target_key(ir::target_of(hw, s.hardware, {})),
                                                      [&] { return compile_retina(*retina_model, *retina_data, hw, st); });
    RetinaMachine machine = *compiled_machine;
    machine.hw = hw;
    machine.options = backend_options(st.run);
    const RetinaEval r = evaluate_retina(machine, *retina_data, st);
    m["cc"] = r.scores.cc_mean, m["fev"] = r.scores.fev_mean, m["nll"] = r.scores.nll_mean;
    m["iterations"] = r.iterations.solves ? r.iterations.mean : 0.0;
    estimate_metrics(r.estimate, m);
  }

  static void estimate_metrics(const ProgramEstimate& e, std::map<std::string, double>& m) {
    const EnergyReport& r = e.token;
    m["energy"] = r.total_joules.typ, m["energy_min"] = r.total_joules.min, m["energy_max"] = r.total_joules.max;
    m["latency"] = r.total_seconds;
    m["tops_per_w"] = r.tops_per_watt.typ, m["tops_per_w_min"] = r.tops_per_watt.min, m["tops_per_w_max"] = r.tops_per_watt.max;
    m["gpu_ratio"] = r.gpu.joules / r.total_joules.typ;
    for (const auto& l : r.energy) m["energy." + l.name] = l.joules.typ;
    for (const auto& l : r.latency) m["latency." + l.name] = l.seconds;
    m["tiles"] = e.tiles, m["cores"] = e.cores, m["modules_used"] = e.modules_used, m["passes"] = e.passes;
    m["weight_reloads"] = r.work.weight_reloads, m["dac_conversions"] = r.work.dac_conversions;
    m["adc_conversions"] = r.work.adc_conversions, m["digital_ops"] = r.work.digital_macs;
  }
};

Evaluator::Evaluator(const Scenario& s) : impl_(std::make_unique<Impl>(s)) {}
Evaluator::~Evaluator() = default;

Row Evaluator::evaluate(const Point& pt, double fraction) const {
  const Impl& im = *impl_;
  Row row;
  row.index = pt.index;
  row.params = pt.values;
  row.metrics.assign(im.s.columns.size(), kNaN);
  std::map<std::string, double> m;
  try {
    std::vector<std::string> overrides;
    const RunParams rp = im.run_params(pt, overrides);
    row.seed = rp.seed;
    Hardware hw = im.machine.load(overrides);
    if (im.s.workload.kind == Workload::Kind::Problem) {
      im.optimise(hw, rp, im.set_noise(hw, rp), m);
    } else if (im.s.workload.kind == Workload::Kind::Retina) {
      const bool noisy = im.set_noise(hw, rp);
      im.retina_point(hw, rp, noisy, m);
    } else {
      if (rp.channels) hw.channels = *rp.channels;  // estimates only: the calibration keeps its size
      const auto c = im.compile(hw, rp, fraction);
      std::optional<double> measured;
      if (im.s.workload.runs()) {
        const bool noisy = im.set_noise(hw, rp);
        measured = im.run(*c, hw, rp, noisy, m);
      }
      im.estimate(*c, hw, rp, measured, m);
    }
    if (im.wants_area) {
      const AreaReport a = area_report(hw);
      m["area"] = a.machine_mm2.typ, m["area_min"] = a.machine_mm2.min, m["area_max"] = a.machine_mm2.max;
    }
  } catch (const Error& e) {
    row.status = "error", row.error = e.what();
    return row;
  } catch (const std::exception& e) {
    row.status = "error", row.error = jsonr::one_line(std::string("internal error: ") + e.what());
    return row;
  }
  for (std::size_t k = 0; k < im.s.columns.size(); ++k) {
    const auto it = m.find(im.s.columns[k].name);
    if (it != m.end()) row.metrics[k] = finite_or_nan(it->second);
  }
  return row;
}

}  // namespace aoc::sweep
