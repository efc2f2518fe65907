// Graphs and programs: import a config, compile for a machine, run on each backend, check the
// simulator against the reference, estimate (python/aocsim/__init__.py documents the API).
#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include <optional>

#include "compiler/graph_json.hpp"
#include "compiler/import_config.hpp"
#include "compiler/passes.hpp"
#include "compiler/program_h5.hpp"
#include "compiler/report.hpp"
#include "models/model.hpp"
#include "models/tasks.hpp"
#include "python/bindings.hpp"
#include "python/convert.hpp"
#include "runtime/estimate/estimate_json.hpp"
#include "runtime/io/output.hpp"
#include "runtime/run/program_check.hpp"
#include "runtime/estimate/program_estimate.hpp"
#include "runtime/run/program_run.hpp"
#include "runtime/run/program_settings.hpp"
#include "sim/error.hpp"
#include "sim/files.hpp"

namespace aoc::python {

namespace {

// A graph and its weights, before it is compiled for a machine.
struct Model {
  ir::Graph graph;
  ir::WeightStore weights;
};

py::list values_of(const std::vector<ir::Value>& vs) {
  py::list l;
  for (const ir::Value& v : vs) l.append(py::make_tuple(v.name, ir::to_string(v.type)));
  return l;
}

py::list outputs_of(const ir::Graph& g) {
  py::list l;
  for (const std::string& o : g.outputs) l.append(o);
  return l;
}

Model load_model(const std::string& graph_path, const std::string& weights_path) {
  Model m{ir::read_graph(graph_path), {}};
  if (!weights_path.empty()) m.weights = ir::read_weights_h5(weights_path);
  return m;
}

void save_model(const Model& m, const std::string& graph_path, const std::string& weights_path) {
  check_outputs({{"graph", graph_path}, {"weights", weights_path}}, {});
  write_file_atomic(graph_path, ir::write_graph(m.graph));
  if (!weights_path.empty()) ir::write_weights_h5(weights_path, m.weights);
}

ir::Program compile(const Model& m, const std::string& hw_name, const std::vector<std::string>& set, bool quantize, bool tile, int tile_size,
                    bool gather, bool compensate, double trim_range, const py::object& calibrate, double margin, double balance) {
  const std::string hw_path = resolve_hardware_path(hw_name);
  const Hardware hw = load_hardware(hw_path, set);
  ir::Program p;
  p.graph = m.graph;
  p.weights = m.weights;
  if (p.weights.empty() && !p.graph.weights.empty() && !calibrate.is_none())
    throw Error("compile: calibrate needs the graph's weights (this graph has none loaded)");
  p.target = ir::target_of(hw, hw_name, set);
  ir::PassOptions po;
  po.quantize = quantize, po.tile = tile, po.tile_size = tile_size, po.gather = gather;
  if (compensate) po.compensate = &hw;
  if (!(trim_range >= 1)) throw Error("compile: trim_range must be >= 1 (1: no detector trims)");
  po.trim_range = trim_range;
  std::map<std::string, ir::Tensor> samples;
  if (!calibrate.is_none()) {
    // {input name: array}, or one array for a graph of one input (as aoc compile --calibrate FILE)
    if (py::isinstance<py::dict>(calibrate)) samples = tensors(calibrate.cast<py::dict>(), "calibrate");
    else if (p.graph.inputs.size() == 1) samples[p.graph.inputs[0].name] = array_tensor(calibrate, "calibrate");
    else throw Error("compile: calibrate: give {input name: array} (the graph has " + std::to_string(p.graph.inputs.size()) + " inputs)");
    po.calibrate = [&](ir::Program& q) { return calibrate_converters(q, samples, margin, ir::Mode::Simultaneous); };
  }
  if (balance != 0) {  // as aoc compile --balance: the channels' ranges from the calibration samples
    if (calibrate.is_none()) throw Error("compile: balance needs calibrate (the samples give each DAC channel's range)");
    if (!(balance > 0 && balance <= 1)) throw Error("compile: balance must be in (0, 1] (0: off)");
    po.balance = balance;
    po.channel_largest = [&](const ir::Program& q) { return converter_channel_largest(q, samples); };
  }
  py::gil_scoped_release unlocked;
  ir::run_pipeline(p, po);
  return p;
}

py::dict run_result(ProgramResult&& r, const ProgramSettings& s, const std::string& backend) {
  py::dict d;
  py::list fps;
  for (ir::FixedPointStats& f : r.fixed_points) {
    py::dict one;
    one["op"] = f.op;
    // [B], or [B, L] in sequential mode (one solve per sample and token)
    const std::vector<py::ssize_t> shape(f.shape.begin(), f.shape.end());
    one["iterations"] = owned_array(std::move(f.iterations), shape);
    one["converged"] = bool_array(f.converged).attr("reshape")(py::tuple(py::cast(shape)));
    // stopped at the noise floor (a noisy solve that settled as far as its noise lets it); all false without noise
    std::vector<std::uint8_t> floor = f.at_floor;
    floor.resize(f.converged.size(), 0);
    one["at_floor"] = bool_array(floor).attr("reshape")(py::tuple(py::cast(shape)));
    fps.append(one);
  }
  d["fixed_points"] = fps;
  d["counters"] = py::dict(py::arg("dac") = r.counters.dac, py::arg("dac_clipped") = r.counters.dac_clipped, py::arg("adc") = r.counters.adc,
                           py::arg("adc_clipped") = r.counters.adc_clipped, py::arg("slm_rewrites") = r.counters.slm_rewrites);
  d["precision"] = backend == "sim" ? precision_text(s.precision, r) : backend == "cuda-f32" ? "f32" : "f64";
  d["outputs"] = arrays(std::move(r.values));
  return d;
}

py::dict run(const ir::Program& p, const py::dict& inputs, const std::string& backend, const ProgramSettings& s, int first_sample) {
  if (p.weights.empty() && !p.graph.weights.empty()) throw Error("run: the program was compiled without weights (shapes only: estimate it, do not run it)");
  const Hardware hw = program_hardware(p, s.set, "run");
  const auto b = make_backend(backend, &hw);
  const auto in = tensors(inputs, "inputs");
  BackendOptions bo = backend_options(s);
  bo.first_sample = first_sample;
  if (backend != "sim") bo.noise = bo.quantize = false, bo.optics = false;
  ProgramResult r;
  {
    py::gil_scoped_release unlocked;
    r = b->run(p, in, bo);
  }
  return run_result(std::move(r), s, backend);
}

py::dict stat_dict(const Stat& s) {
  return py::dict(py::arg("mean") = s.mean, py::arg("sd") = s.sd, py::arg("min") = s.min, py::arg("max") = s.max);
}

// The simulator against the cpu reference over `seeds` noise seeds (aoc check's figures); with
// labels, both scored against them (aoc check --labels).
py::dict check(const ir::Program& p, const py::dict& inputs, int seeds, const ProgramSettings& s, const py::object& labels) {
  if (seeds < 1) throw Error("check: seeds must be at least 1");
  const Hardware hw = program_hardware(p, s.set, "check");
  const auto ref = make_backend("cpu", &hw);
  const auto sim = make_backend("sim", &hw);
  const auto in = tensors(inputs, "inputs");
  std::optional<ir::Tensor> label_tensor;
  if (!labels.is_none()) label_tensor = array_tensor(labels, "labels");
  const ir::Tensor* lab = label_tensor ? &*label_tensor : nullptr;
  BackendOptions ro = backend_options(s);
  ro.noise = false, ro.quantize = false, ro.optics = false, ro.f64 = true;
  SeedStats st;
  LabelScore ref_score;
  std::vector<double> all, last, whole;
  {
    py::gil_scoped_release unlocked;
    const ProgramResult reference = ref->run(p, in, ro);
    ref_score = label_score(p, reference, lab, "labels");
    st = check_over_seeds(*sim, p, in, backend_options(s), seeds, reference, {}, [&](int, const ProgramResult& r) {
      if (!lab) return;
      const LabelScore a = label_score(p, r, lab, "labels");
      all.push_back(a.all), last.push_back(a.last), whole.push_back(a.whole);
    });
  }
  py::dict d;
  d["max_abs"] = stat_dict(st.abs);
  d["max_rel"] = stat_dict(st.rel);
  d["argmax"] = stat_dict(st.argmax);
  d["codes"] = stat_dict(st.codes);
  d["failures"] = stat_dict(st.failures);
  d["iterations"] = stat_dict(st.iterations);
  d["iterations_differ"] = stat_dict(st.iterations_differ);
  d["seeds"] = seeds;
  if (lab) {
    d["accuracy"] = stat_dict(stat(all));
    d["accuracy_last"] = stat_dict(stat(last));
    d["accuracy_whole"] = stat_dict(stat(whole));
    d["reference_accuracy"] = ref_score.all;
    d["reference_accuracy_last"] = ref_score.last;
  }
  return d;
}

py::object estimate(const ir::Program& p, const py::object& iterations, std::int64_t seq_len, const std::vector<std::string>& set) {
  const EstimateTarget t = estimate_target(p, p.graph.name, "", set);
  ProgramEstimateOptions po;
  if (!iterations.is_none()) po.iterations = iterations.cast<double>();
  if (seq_len < 1) throw Error("estimate: seq_len must be at least 1");
  po.seq_len = seq_len;
  const ProgramEstimate e = estimate_program(p, t.hw, po);
  return to_python(program_estimate_json(e, t.hw, t.path, t.overrides, t.source));
}

}  // namespace

void bind_program(py::module_& m) {
  py::class_<ProgramSettings>(m, "ProgramSettings", "What decides a program run: aoc run PROG's flags (runtime/run/program_settings.hpp)")
      .def(py::init<>())
      .def_readwrite("sequence", &ProgramSettings::sequence)
      .def_readwrite("precision", &ProgramSettings::precision)
      .def_readwrite("light_map", &ProgramSettings::light_map)
      .def_readwrite("set", &ProgramSettings::set)
      .def_readwrite("quantize", &ProgramSettings::quantize)
      .def_readwrite("noise", &ProgramSettings::noise)
      .def_readwrite("ideal_optics", &ProgramSettings::ideal_optics)
      .def_readwrite("trace", &ProgramSettings::trace)
      .def_readwrite("seed", &ProgramSettings::seed)
      .def_readwrite("program_seed", &ProgramSettings::program_seed)
      .def_readwrite("write_verify", &ProgramSettings::write_verify)
      .def_readwrite("verify_rounds", &ProgramSettings::verify_rounds)
      .def_readwrite("zero_reads", &ProgramSettings::zero_reads)
      .def_readwrite("floor_patience", &ProgramSettings::floor_patience)
      .def_readwrite("after_programming_us", &ProgramSettings::after_programming_us)
      .def_readwrite("zero_every_us", &ProgramSettings::zero_every_us)
      .def_readwrite("threads", &ProgramSettings::threads);

  py::class_<Model>(m, "Graph")
      .def_static("load", &load_model, py::arg("graph"), py::arg("weights") = "")
      .def("save", &save_model, py::arg("graph"), py::arg("weights") = "")
      .def_property_readonly("name", [](const Model& g) { return g.graph.name; })
      .def_property_readonly("inputs", [](const Model& g) { return values_of(g.graph.inputs); })
      .def_property_readonly("outputs", [](const Model& g) { return outputs_of(g.graph); })
      .def_property_readonly("weight_names", [](const Model& g) {
        std::vector<std::string> names;
        for (const ir::Value& v : g.graph.weights) names.push_back(v.name);
        return names;
      })
      .def_property_readonly("has_weights", [](const Model& g) { return !g.weights.empty() || g.graph.weights.empty(); })
      .def("weight", [](const Model& g, const std::string& name) {
        const auto it = g.weights.find(name);
        if (it == g.weights.end()) throw Error("weight '" + name + "': not in the graph's weights");
        return tensor_array(ir::Tensor(it->second));
      })
      .def("set_weight", [](Model& g, const std::string& name, const py::handle& a) {
        auto it = g.weights.find(name);
        if (it == g.weights.end()) throw Error("weight '" + name + "': not in the graph's weights");
        ir::Tensor t = array_tensor(a, "weight '" + name + "'");
        if (t.shape != it->second.shape)
          throw Error("weight '" + name + "': expected shape " + ir::shape_text(it->second.shape) + ", got " + ir::shape_text(t.shape));
        it->second = std::move(t);
      })
      .def("load_weights", [](Model& g, const std::string& path) { g.weights = ir::read_weights_h5(path); }, py::arg("path"))
      .def("to_json", [](const Model& g) { return ir::write_graph(g.graph); })
      .def("compile", &compile, py::arg("hw") = "aoc-48", py::arg("set") = std::vector<std::string>{}, py::arg("quantize") = true,
           py::arg("tile") = true, py::arg("tile_size") = 0, py::arg("gather") = true, py::arg("compensate") = true,
           py::arg("trim_range") = kDetectorTrimRange, py::arg("calibrate") = py::none(),
           py::arg("margin") = 1.0, py::arg("balance") = 0.0);
  m.def(
      "import_config",
      [](const std::string& config, std::uint64_t seed, const std::string& weights, bool shapes_only, std::optional<double> tol) {
        ir::ImportOptions o;
        o.seed = seed, o.weights = !shapes_only, o.weights_path = weights, o.tol = tol;
        ir::Imported im = models::import_model_config(config, o);  // aoc import's: safetensors or an aoc weights HDF5
        return Model{std::move(im.graph), std::move(im.weights)};
      },
      py::arg("config"), py::arg("seed") = 1, py::arg("weights") = "", py::arg("shapes_only") = false, py::arg("tol") = py::none());

  m.def(
      "task",
      [](const std::string& name, int batch, int length, std::uint64_t seed, const std::string& split) {
        if (batch < 1 || length < 1) throw Error("task: batch and length must be at least 1");
        const tasks::SeqBatch b = tasks::sample(tasks::parse_task(name), batch, length, seed, 0, tasks::parse_split(split));
        py::dict d;
        d["tokens"] = tensor_array(b.tokens_tensor());
        d["labels"] = tensor_array(b.targets_tensor());
        return d;
      },
      py::arg("task"), py::arg("batch"), py::arg("length"), py::arg("seed") = 1, py::arg("split") = "test");

  py::class_<ir::Program>(m, "Program")
      .def_static("load", &ir::read_program_h5, py::arg("path"))
      .def("save", [](const ir::Program& p, const std::string& path) { ir::write_program_h5(path, p); }, py::arg("path"))
      .def("__str__", [](const ir::Program& p) { return ir::print_program(p); })
      .def_property_readonly("name", [](const ir::Program& p) { return p.graph.name; })
      .def_property_readonly("hardware", [](const ir::Program& p) { return p.target.hardware; })
      .def_property_readonly("passes", [](const ir::Program& p) { return p.passes; })
      .def_property_readonly("inputs", [](const ir::Program& p) { return values_of(p.graph.inputs); })
      .def_property_readonly("outputs", [](const ir::Program& p) { return outputs_of(p.graph); })
      .def("mapping_report", [](const ir::Program& p) { return to_python(ir::mapping_report(p)); })
      .def(
          "example_inputs",
          [](const ir::Program& p, std::int64_t batch, std::int64_t length, std::uint64_t seed) {
            if (batch < 1 || length < 1) throw Error("example_inputs: batch and length must be at least 1");
            return arrays(example_inputs(p, batch, length, seed));
          },
          py::arg("batch") = 4, py::arg("length") = 8, py::arg("seed") = 1)
      .def("run", &run, py::arg("inputs"), py::arg("backend"), py::arg("settings"), py::arg("first_sample") = 0)
      .def("check", &check, py::arg("inputs"), py::arg("seeds"), py::arg("settings"), py::arg("labels") = py::none())
      .def("estimate", &estimate, py::arg("iterations") = py::none(), py::arg("seq_len") = 1024,
           py::arg("set") = std::vector<std::string>{});
}

}  // namespace aoc::python
