// NumPy <-> aoc values for the Python module: C++ results handed to NumPy without a copy (the array
// owns the moved buffer through a capsule), NumPy inputs read as ir::Tensor, JSON records as dicts.
#pragma once
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "compiler/ir.hpp"

namespace aoc::python {

namespace py = pybind11;

// A C++ container moved into a NumPy array of `shape` (C order): no copy, freed with the array.
template <class C>
py::array owned_array(C&& c, std::vector<py::ssize_t> shape) {
  using T = std::remove_cv_t<std::remove_reference_t<decltype(*c.data())>>;
  auto* held = new C(std::move(c));
  py::capsule free_it(held, [](void* p) { delete static_cast<C*>(p); });
  return py::array_t<T>(std::move(shape), held->data(), free_it);
}

// An Eigen row-major matrix moved into a 2-D array.
template <class M>
py::array owned_matrix(M&& m) {
  const std::vector<py::ssize_t> shape{static_cast<py::ssize_t>(m.rows()), static_cast<py::ssize_t>(m.cols())};
  return owned_array(std::move(m), shape);
}

// A vector of flags as a bool array.
py::array bool_array(const std::vector<std::uint8_t>& v);

// A tensor (its data moved) as a float64 array of its shape.
py::array tensor_array(ir::Tensor&& t);
// An array (any numeric dtype, any layout) as a tensor; `what` names it in errors
// ("inputs['tokens']: contains NaN or infinity").
ir::Tensor array_tensor(const py::handle& a, const std::string& what);
std::map<std::string, ir::Tensor> tensors(const py::dict& arrays, const std::string& what);
py::dict arrays(std::map<std::string, ir::Tensor>&& tensors);

// A JSON record as Python objects (dicts, lists, numbers, strings), keys in the record's order.
py::object to_python(const nlohmann::ordered_json& j);

}  // namespace aoc::python
