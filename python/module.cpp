// The extension module aoc._aoc: the machines, the loop, programs and sweeps of the C++ libraries
// for the Python package (python/aoc/__init__.py wraps it in the documented API, docs/python.md).
// Every aoc::Error becomes aoc.Error (a ValueError) with the same one line.
#include <pybind11/stl.h>

#include "python/bindings.hpp"
#include "python/convert.hpp"
#include "runtime/sweep_results.hpp"
#include "runtime/sweep_run.hpp"
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
  m.doc() = "aoc's C++ core (use the package aoc: docs/python.md)";
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
}
