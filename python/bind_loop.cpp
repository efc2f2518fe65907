// aocsim.solve: the fixed-point loop of `aoc run` on NumPy buffers (python/aocsim/__init__.py documents it).
#include <pybind11/stl.h>

#include <cmath>
#include <cstring>

#include "python/bindings.hpp"
#include "python/convert.hpp"
#include "runtime/io/h5io.hpp"
#include "runtime/run/loop_settings.hpp"
#include "runtime/io/output.hpp"
#include "runtime/run/loop_problem.hpp"
#include "sim/error.hpp"

namespace aoc::python {

namespace {

template <class S>
bool mappable(const py::array& a) {
  return py::isinstance<py::array_t<S>>(a) && (a.flags() & py::array::c_style);
}

void check_shape(const py::array& a, const char* name, std::initializer_list<py::ssize_t> want) {
  bool ok = a.ndim() == static_cast<py::ssize_t>(want.size());
  for (std::size_t d = 0; ok && d < want.size(); ++d) ok = a.shape(static_cast<py::ssize_t>(d)) == want.begin()[d];
  if (ok) return;
  std::string got, expected;
  for (py::ssize_t d = 0; d < a.ndim(); ++d) got += (d ? ", " : "") + std::to_string(a.shape(d));
  for (std::size_t d = 0; d < want.size(); ++d) expected += (d ? ", " : "") + std::to_string(want.begin()[d]);
  std::string message = name;
  message += ": expected shape (" + expected + "), got (" + got + ")";
  throw Error(message);
}

// The run on inputs that are all C-contiguous arrays of S (mapped, not copied).
template <class S>
py::dict solve_as(const py::array& W, const py::array& x, const py::array& bias, const py::array& z0, const LoopSettings& s,
                  const LoopCoefficients& given, bool borrowed) {
  if (W.ndim() != 2 || W.shape(0) != W.shape(1)) check_shape(W, "W", {W.ndim() == 2 ? W.shape(0) : 0, W.ndim() == 2 ? W.shape(0) : 0});
  const py::ssize_t N = W.shape(0);
  if (x.ndim() != 2 || x.shape(1) != N) check_shape(x, "x", {x.ndim() == 2 ? x.shape(0) : 1, N});
  const py::ssize_t B = x.shape(0);
  if (B < 1) throw Error("x: no samples (shape (0, " + std::to_string(N) + "))");
  check_shape(bias, "bias", {N});
  check_shape(z0, "z0", {B, N});
  const auto* w = static_cast<const S*>(W.data());
  const LoopView<S> v{{w, N, N}, {static_cast<const S*>(x.data()), B, N}, {static_cast<const S*>(z0.data()), B, N},
                      {static_cast<const S*>(bias.data()), N}};
  if (!v.x.allFinite()) throw Error("x: contains NaN or infinity");
  if (!v.z0.allFinite()) throw Error("z0: contains NaN or infinity");
  const Hardware hw = load_machine(s);
  const CoreConfig cfg = loop_config(s, hw, given);
  const LoopRunOptions ro = run_options(s);
  const std::string hash = loop_config_hash(s, hw, cfg, v);
  LoopRunResult r;
  {
    py::gil_scoped_release unlocked;
    r = run_loop(hw, cfg, v, ro);
  }
  RunOutputMeta meta;
  meta.quantized = s.quantize, meta.trace = s.trace;
  py::dict d;
  d["output_digest"] = run_output_digest(r, meta);
  d["fixed_point_digest"] = digest_hex(r.solve.z.data(), sizeof(double) * r.solve.z.size());
  d["config_hash"] = hash;
  d["borrowed"] = borrowed;
  d["hardware"] = hw.name;
  d["alpha"] = cfg.alpha;
  d["beta"] = cfg.beta;
  SolveResult& sr = r.solve;
  d["steps"] = sr.steps;
  d["iterations"] = owned_array(std::move(sr.iterations), {B});
  d["converged"] = bool_array(sr.converged);
  d["at_floor"] = bool_array(sr.at_floor);
  d["finite"] = bool_array(sr.finite);
  d["residual"] = owned_array(std::move(sr.residual), {B});
  d["settled"] = owned_array(std::move(sr.settled), {B});
  d["max_residual"] = owned_array(std::vector<double>(sr.max_residual), {static_cast<py::ssize_t>(sr.max_residual.size())});
  if (s.trace) {
    d["residual_trace"] = owned_matrix(std::move(sr.residual_trace));
    d["state_trace"] = owned_matrix(std::move(sr.state_trace));
  }
  if (s.quantize) {
    d["slm_codes"] = owned_matrix(std::move(r.slm_codes));
    d["slm_scale"] = r.slm_scale;
    d["dac_codes"] = owned_matrix(std::move(r.dac_codes));
    d["adc_codes"] = owned_matrix(std::move(r.adc_codes));
  }
  d["z"] = owned_matrix(std::move(sr.z));
  d["readout"] = owned_matrix(std::move(r.readout));
  return d;
}

// A loop problem's arrays, moved into NumPy: W, x, bias, z0.
py::dict problem_arrays(LoopProblem&& p) {
  py::dict d;
  const auto n = static_cast<py::ssize_t>(p.bias.size());
  d["W"] = owned_matrix(std::move(p.W));
  d["x"] = owned_matrix(std::move(p.x));
  d["bias"] = owned_array(std::vector<double>(p.bias.data(), p.bias.data() + n), {n});
  d["z0"] = owned_matrix(std::move(p.z0));
  return d;
}

py::array zeros_like_dtype(const py::array& like, std::vector<py::ssize_t> shape) {
  py::array a(like.dtype(), std::move(shape));
  std::memset(a.mutable_data(), 0, static_cast<std::size_t>(a.nbytes()));
  return a;
}

py::dict solve(py::array W, py::array x, py::object bias, py::object z0, const LoopSettings& s, const LoopCoefficients& given) {
  check_settings(s);
  const py::ssize_t N = W.ndim() >= 1 ? W.shape(W.ndim() - 1) : 0;
  py::array b = bias.is_none() ? zeros_like_dtype(x, {N}) : py::array::ensure(bias);
  py::array z = z0.is_none() ? zeros_like_dtype(x, {x.ndim() == 2 ? x.shape(0) : 0, N}) : py::array::ensure(z0);
  if (!b) throw Error("bias: not an array");
  if (!z) throw Error("z0: not an array");
  // Inputs of one dtype, float32 or float64, C-contiguous: read where they lie. Anything else is
  // converted to float64 first (a copy, reported as borrowed = False).
  const auto all = [&](auto mappable_as) { return mappable_as(W) && mappable_as(x) && mappable_as(b) && mappable_as(z); };
  if (all([](const py::array& a) { return mappable<double>(a); })) return solve_as<double>(W, x, b, z, s, given, true);
  if (all([](const py::array& a) { return mappable<float>(a); })) return solve_as<float>(W, x, b, z, s, given, true);
  const auto f64 = [](const py::array& a, const char* name) {
    py::array d = py::array_t<double, py::array::c_style | py::array::forcecast>::ensure(a);
    if (!d) throw Error(std::string(name) + ": not an array of numbers");
    return d;
  };
  return solve_as<double>(f64(W, "W"), f64(x, "x"), f64(b, "bias"), f64(z, "z0"), s, given, false);
}

}  // namespace

void bind_loop(py::module_& m) {
  py::class_<LoopSettings>(m, "LoopSettings", "What decides a loop run: aoc run's flags (runtime/run/loop_settings.hpp)")
      .def(py::init<>())
      .def_readwrite("hw", &LoopSettings::hw)
      .def_readwrite("set", &LoopSettings::set)
      .def_readwrite("mode", &LoopSettings::mode)
      .def_readwrite("rule", &LoopSettings::rule)
      .def_readwrite("precision", &LoopSettings::precision)
      .def_readwrite("max_iter", &LoopSettings::max_iter)
      .def_readwrite("threads", &LoopSettings::threads)
      .def_readwrite("first_sample", &LoopSettings::first_sample)
      .def_readwrite("tol", &LoopSettings::tol)
      .def_readwrite("damping", &LoopSettings::damping)
      .def_readwrite("floor_patience", &LoopSettings::floor_patience)
      .def_readwrite("alpha", &LoopSettings::alpha)
      .def_readwrite("seed", &LoopSettings::seed)
      .def_readwrite("program_seed", &LoopSettings::program_seed)
      .def_readwrite("zero_reads", &LoopSettings::zero_reads)
      .def_readwrite("after_programming_us", &LoopSettings::after_programming_us)
      .def_readwrite("zero_every_us", &LoopSettings::zero_every_us)
      .def_readwrite("quantize", &LoopSettings::quantize)
      .def_readwrite("noise", &LoopSettings::noise)
      .def_readwrite("bandwidth", &LoopSettings::bandwidth)
      .def_readwrite("trace", &LoopSettings::trace)
      .def_readwrite("hardware_readout", &LoopSettings::hardware_readout)
      .def_readwrite("anneal", &LoopSettings::anneal);
  py::class_<LoopCoefficients>(m, "LoopCoefficients")
      .def(py::init<>())
      .def_readwrite("alpha", &LoopCoefficients::alpha)
      .def_readwrite("beta", &LoopCoefficients::beta)
      .def_readwrite("gamma", &LoopCoefficients::gamma);
  m.def("solve", &solve, py::arg("W"), py::arg("x"), py::arg("bias"), py::arg("z0"), py::arg("settings"), py::arg("coefficients"));
  m.def(
      "random_problem",
      [](int n, int batch, std::uint64_t seed, int first_sample) {
        if (n < 1 || batch < 1) throw Error("random_problem: n and batch must be at least 1");
        return problem_arrays(random_problem(n, batch, seed, first_sample));
      },
      py::arg("n"), py::arg("batch"), py::arg("seed"), py::arg("first_sample") = 0);
  m.def(
      "read_run_input",
      [](const std::string& path) {
        RunInput in = read_run_input(path);
        py::dict d = problem_arrays(std::move(in.problem));
        d["alpha"] = in.alpha;
        d["beta"] = in.beta;
        d["gamma"] = in.gamma;
        return d;
      },
      py::arg("path"));
}

}  // namespace aoc::python
