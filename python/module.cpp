// The extension module aocsim._aoc: the machines, the loop, programs and sweeps of the C++ libraries
// for the Python package (python/aocsim/__init__.py wraps it in the documented API, docs/python.md).
// Every aoc::Error becomes aocsim.Error (a ValueError) with the same one line.
#include <pybind11/stl.h>

#include "python/bindings.hpp"
#include "python/convert.hpp"
#include "runtime/optimize/ising.hpp"
#include "runtime/optimize/optimize.hpp"
#include "runtime/sweep/sweep_results.hpp"
#include "runtime/sweep/sweep_run.hpp"
#include "sim/error.hpp"
#include "sim/hardware.hpp"
#include "sim/isa.hpp"

namespace aoc::python {

namespace {

py::dict results_columns(const sweep::Results& r) {
  py::dict cols;
  py::list index, seed, status, error;
  for (const sweep::Row& row : r.rows) index.append(row.index), seed.append(row.seed), status.append(row.status), error.append(row.error);
  cols["index"] = index;
  for (std::size_t c = 0; c < r.header.params.size(); ++c) {
    py::list v;
    for (const sweep::Row& row : r.rows) v.append(to_python(row.params.at(c)));
    cols[py::str(r.header.params[c].name)] = v;
  }
  for (std::size_t c = 0; c < r.header.metrics.size(); ++c) {
    std::vector<double> v;
    for (const sweep::Row& row : r.rows) v.push_back(row.metrics.at(c));
    const auto n = static_cast<py::ssize_t>(v.size());
    cols[py::str(r.header.metrics[c].name)] = owned_array(std::move(v), {n});
  }
  cols["seed"] = seed, cols["status"] = status, cols["error"] = error;
  return cols;
}

py::dict results_dict(const sweep::Results& r) {
  const sweep::Header& h = r.header;
  py::dict units;
  for (const auto& m : h.metrics) units[py::str(m.name)] = py::make_tuple(m.unit, m.better);
  py::dict attrs;
  attrs["scenario"] = h.scenario, attrs["name"] = h.name, attrs["config_hash"] = h.config_hash, attrs["tool_version"] = h.tool_version;
  attrs["sampling"] = h.sampling, attrs["workload"] = h.workload, attrs["hardware"] = h.hardware, attrs["seed"] = h.seed;
  attrs["points"] = h.points, attrs["units"] = units;
  py::dict d;
  d["columns"] = results_columns(r);
  d["attrs"] = attrs;
  return d;
}

}  // namespace

}  // namespace aoc::python

PYBIND11_MODULE(_aoc, m) {
  using namespace aoc;
  using namespace aoc::python;
  m.doc() = "aoc's C++ core (use the package aocsim: docs/python.md)";
  m.attr("__version__") = AOC_VERSION;
  py::register_exception<Error>(m, "Error", PyExc_ValueError);
  isa::kernels();  // a bad AOC_ISA fails the import, before any thread runs a kernel
  m.attr("instruction_sets") = isa::describe();

  m.def("bundled_machines", &bundled_machines, "The bundled machines' names (scenarios/hardware/*.json)");
  m.def("resolve_hardware_path", &resolve_hardware_path, py::arg("name_or_path"));
  m.def(
      "hardware_json",
      [](const std::string& name_or_path, const std::vector<std::string>& set) {
        return to_python(hardware_document(resolve_hardware_path(name_or_path), set));
      },
      py::arg("name_or_path"), py::arg("set") = std::vector<std::string>{});
  m.def(
      "describe_hardware",
      [](const std::string& name_or_path, const std::vector<std::string>& set) {
        return describe(load_hardware(resolve_hardware_path(name_or_path), set));
      },
      py::arg("name_or_path"), py::arg("set") = std::vector<std::string>{});

  bind_loop(m);
  bind_program(m);

  m.def(
      "run_sweep",
      [](const std::string& scenario, const std::string& output, int threads, bool resume) {
        sweep::SweepOptions o;
        o.output = output, o.threads = threads, o.resume = resume, o.quiet = true;
        sweep::SweepSummary s;
        {
          py::gil_scoped_release unlocked;
          s = sweep::run_sweep(scenario, o);
        }
        return py::dict(py::arg("points") = s.points, py::arg("ran") = s.ran, py::arg("failed") = s.failed, py::arg("seconds") = s.seconds,
                        py::arg("threads") = s.threads);
      },
      py::arg("scenario"), py::arg("output"), py::arg("threads") = 0, py::arg("resume") = false);
  m.def(
      "read_results", [](const std::string& path) { return results_dict(sweep::read_results_h5(path)); }, py::arg("path"));

  // aocsim.optimize: a problem file, or J (n x n), h and the binary flags; the settings as aoc optimize's
  // flags. Returns (the summary aoc optimize --json prints, every sample's objective, the best state).
  m.def(
      "optimize",
      [](const std::string& path, const py::object& J_in, const py::object& h_in, std::vector<std::uint8_t> binary,
         const OptimizeSettings& s, std::optional<std::vector<double>> params, std::optional<double> best_known) {
        IsingProblem p;
        if (!path.empty()) {
          p = read_problem(path);
        } else {
          const ir::Tensor J = array_tensor(J_in, "J");
          const std::optional<ir::Tensor> h = h_in.is_none() ? std::nullopt : std::optional<ir::Tensor>(array_tensor(h_in, "h"));
          const std::int64_t n = J.shape.size() == 2 ? J.shape[0] : -1;
          if (n < 1 || J.shape[1] != n) throw Error("optimize: J must be a square matrix");
          if (h && static_cast<std::int64_t>(h->data.size()) != n) throw Error("optimize: h must hold " + std::to_string(n) + " values");
          p.name = "J";
          p.J = Eigen::Map<const MatrixXdR>(J.data.data(), n, n);
          p.h = h ? Eigen::VectorXd(Eigen::Map<const Eigen::VectorXd>(h->data.data(), static_cast<Eigen::Index>(h->data.size())))
                  : Eigen::VectorXd::Zero(n);
          p.binary = binary.empty() ? std::vector<std::uint8_t>(static_cast<std::size_t>(n), 1) : binary;
          check_ising(p, "optimize");
        }
        if (best_known) {
          if (!std::isfinite(*best_known)) throw Error("optimize: best_known must be a finite number");
          p.best_known = *best_known, p.best_known_source = "given (best_known)";
        }
        OptimizeSettings o = s;
        if (params) {
          if (params->size() != 3) throw Error("optimize: params must be (a, g, m)");
          o.params = SamplerParams{(*params)[0], (*params)[1], (*params)[2]};
        }
        check_settings(o.loop);
        OptimizeResult r;
        {
          py::gil_scoped_release unlocked;
          r = optimize(p, load_machine(o.loop), o, false);
        }
        std::vector<double> objectives;
        for (double e : r.aoc.energies) objectives.push_back(objective_of(p, e));
        const auto n = static_cast<py::ssize_t>(objectives.size());
        std::vector<double> best(r.aoc.best_state.data(), r.aoc.best_state.data() + p.n());
        return py::make_tuple(to_python(optimize_summary(p, path, o, r)), owned_array(std::move(objectives), {n}),
                              owned_array(std::move(best), {static_cast<py::ssize_t>(p.n())}));
      },
      py::arg("path"), py::arg("J"), py::arg("h"), py::arg("binary"), py::arg("settings"), py::arg("params"), py::arg("best_known"));
  py::class_<OptimizeSettings>(m, "OptimizeSettings")
      .def(py::init<>())
      .def_readwrite("samples", &OptimizeSettings::samples)
      .def_readwrite("iterations", &OptimizeSettings::iterations)
      .def_readwrite("dt", &OptimizeSettings::dt)
      .def_readwrite("search_configs", &OptimizeSettings::search_configs)
      .def_readwrite("search_samples", &OptimizeSettings::search_samples)
      .def_readwrite("search_iterations", &OptimizeSettings::search_iterations)
      .def_readwrite("sa_sweeps", &OptimizeSettings::sa_sweeps)
      .def_readwrite("sa_samples", &OptimizeSettings::sa_samples)
      .def_readwrite("sb_steps", &OptimizeSettings::sb_steps)
      .def_readwrite("loop", &OptimizeSettings::loop);
}
