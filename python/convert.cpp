#include "python/convert.hpp"

#include <cmath>

#include "sim/error.hpp"

namespace aoc::python {

py::array bool_array(const std::vector<std::uint8_t>& v) {
  py::array_t<bool> a(static_cast<py::ssize_t>(v.size()));
  auto w = a.mutable_unchecked<1>();
  for (std::size_t i = 0; i < v.size(); ++i) w(static_cast<py::ssize_t>(i)) = v[i] != 0;
  return a;
}

py::array tensor_array(ir::Tensor&& t) {
  std::vector<py::ssize_t> shape(t.shape.begin(), t.shape.end());
  return owned_array(std::move(t.data), std::move(shape));
}

ir::Tensor array_tensor(const py::handle& h, const std::string& what) {
  const auto a = py::array_t<double, py::array::c_style | py::array::forcecast>::ensure(h);
  if (!a) throw Error(what + ": not an array of numbers");
  ir::Tensor t;
  for (py::ssize_t d = 0; d < a.ndim(); ++d) t.shape.push_back(a.shape(d));
  t.data.assign(a.data(), a.data() + a.size());
  for (double v : t.data)
    if (!std::isfinite(v)) throw Error(what + ": contains NaN or infinity");
  return t;
}

std::map<std::string, ir::Tensor> tensors(const py::dict& arrays, const std::string& what) {
  std::map<std::string, ir::Tensor> out;
  for (const auto& [k, v] : arrays) {
    const std::string name = py::str(k);
    out[name] = array_tensor(v, what + "['" + name + "']");
  }
  return out;
}

py::dict arrays(std::map<std::string, ir::Tensor>&& tensors) {
  py::dict d;
  for (auto& [name, t] : tensors) d[py::str(name)] = tensor_array(std::move(t));
  return d;
}

py::object to_python(const nlohmann::ordered_json& j) {
  // imported per call (sys.modules caches it): a static py::object would outlive the interpreter
  return py::module_::import("json").attr("loads")(j.dump());
}

}  // namespace aoc::python
