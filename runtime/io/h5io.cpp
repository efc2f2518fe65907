#include "runtime/io/h5io.hpp"

#include "sim/h5file.hpp"

#include <H5Cpp.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>

#include "runtime/io/output.hpp"
#include "sim/error.hpp"

namespace aoc {

namespace {

namespace fs = std::filesystem;

std::string shape_text(const std::vector<std::size_t>& s) {
  if (s.empty()) return "a scalar";
  std::string t;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (i) t += " x ";
    t += std::to_string(s[i]);
  }
  return t;
}

bool has_dataset(const H5::H5File& f, const std::string& name) { return H5Lexists(f.getId(), name.c_str(), H5P_DEFAULT) > 0; }

H5Array read_array(const H5::H5File& f, const std::string& path, const std::string& name) {
  const std::string where = path + ": /" + name;
  if (!has_dataset(f, name)) throw Error(where + ": missing dataset");
  H5Array a;
  a.name = name;
  H5Extent e;
  try {
    a.values = h5_numbers(f.openDataSet(name), where, 32, &e);
  } catch (const H5::Exception& x) {
    throw Error(where + ": cannot read as a dataset (" + x.getDetailMsg() + ")");
  }
  a.integer = e.type_class == H5T_INTEGER;
  for (std::uint64_t v : e.dims) a.shape.push_back(static_cast<hsize_t>(v));
  return a;
}

// An input dataset: float64 (or float32), finite.
H5Array read_input(const H5::H5File& f, const std::string& path, const std::string& name) {
  H5Array a = read_array(f, path, name);
  if (a.integer) throw Error(path + ": /" + name + ": expected floating-point numbers (float64), got integers");
  for (std::size_t i = 0; i < a.values.size(); ++i)
    if (!std::isfinite(a.values[i])) {
      std::string at = std::to_string(i);
      if (a.shape.size() == 2) at = std::to_string(i / a.shape[1]) + ", " + std::to_string(i % a.shape[1]);
      throw Error(path + ": /" + name + ": NaN or infinite value at (" + at + ")");
    }
  return a;
}

// Numbers of a root attribute (scalar or 1-D), or nullopt when absent.
std::optional<std::vector<double>> read_attr_numbers(const H5::H5File& f, const std::string& path, const std::string& name) {
  if (H5Aexists(f.getId(), name.c_str()) <= 0) return std::nullopt;
  const std::string where = path + ": attribute " + name;
  std::vector<double> v;
  try {
    v = h5_numbers(f.openAttribute(name), where, 1);
  } catch (const H5::Exception& e) {
    throw Error(where + ": cannot read (" + e.getDetailMsg() + ")");
  }
  for (double x : v)
    if (!std::isfinite(x)) throw Error(where + ": NaN or infinite value");
  return v;
}

MatrixXdR to_matrix(const H5Array& a) {
  return Eigen::Map<const MatrixXdR>(a.values.data(), static_cast<Eigen::Index>(a.shape[0]), static_cast<Eigen::Index>(a.shape[1]));
}

enum class Kind { F64, I32, U8 };

void put(H5::H5File& f, const std::string& name, const std::vector<hsize_t>& dims, const void* data, Kind k) {
  const H5::PredType& file = k == Kind::F64 ? H5::PredType::IEEE_F64LE : k == Kind::I32 ? H5::PredType::STD_I32LE : H5::PredType::STD_U8LE;
  const H5::PredType& mem = k == Kind::F64 ? H5::PredType::NATIVE_DOUBLE : k == Kind::I32 ? H5::PredType::NATIVE_INT32 : H5::PredType::NATIVE_UINT8;
  H5::DataSet d = f.createDataSet(name, file, H5::DataSpace(static_cast<int>(dims.size()), dims.data()), untimed_dataset());
  std::size_t n = 1;
  for (hsize_t v : dims) n *= v;
  if (n) d.write(data, mem);
}

void put_numbers(H5::H5Object& o, const std::string& name, const std::vector<double>& v) {
  const hsize_t n = v.size();
  const H5::DataSpace s = n == 1 ? H5::DataSpace(H5S_SCALAR) : H5::DataSpace(1, &n);
  o.createAttribute(name, H5::PredType::IEEE_F64LE, s).write(H5::PredType::NATIVE_DOUBLE, v.data());
}

// The arrays of a run output, in file order.
struct OutArray {
  std::string name;
  std::vector<hsize_t> dims;
  const void* data;
  std::size_t bytes;
  Kind kind;
};

std::vector<OutArray> out_arrays(const LoopRunResult& r, const RunOutputMeta& m) {
  const SolveResult& s = r.solve;
  const hsize_t B = s.z.rows(), N = s.z.cols(), steps = s.max_residual.size();
  std::vector<OutArray> a{
      {"fixed_points", {B, N}, s.z.data(), sizeof(double) * s.z.size(), Kind::F64},
      {"readout", {B, N}, r.readout.data(), sizeof(double) * r.readout.size(), Kind::F64},
      {"iterations", {B}, s.iterations.data(), sizeof(int) * s.iterations.size(), Kind::I32},
      {"converged", {B}, s.converged.data(), s.converged.size(), Kind::U8},
      {"residual", {B}, s.residual.data(), sizeof(double) * s.residual.size(), Kind::F64},
      {"max_residual_per_step", {steps}, s.max_residual.data(), sizeof(double) * steps, Kind::F64}};
  // where a noisy solve stopped at its noise floor, which samples (absent otherwise: the files and
  // digests of every other run as before)
  if (std::find(s.at_floor.begin(), s.at_floor.end(), 1) != s.at_floor.end())
    a.push_back({"at_floor", {B}, s.at_floor.data(), s.at_floor.size(), Kind::U8});
  if (m.quantized) {
    const hsize_t n = r.slm_codes.rows();
    a.push_back({"slm_codes", {n, n}, r.slm_codes.data(), sizeof(std::int32_t) * r.slm_codes.size(), Kind::I32});
    a.push_back({"dac_codes", {B, N}, r.dac_codes.data(), sizeof(std::int32_t) * r.dac_codes.size(), Kind::I32});
    a.push_back({"adc_codes", {B, N}, r.adc_codes.data(), sizeof(std::int32_t) * r.adc_codes.size(), Kind::I32});
  }
  if (m.trace) {
    const hsize_t rows = s.residual_trace.rows(), cols = s.residual_trace.cols();
    a.push_back({"residual_trace", {rows, cols}, s.residual_trace.data(), sizeof(double) * s.residual_trace.size(), Kind::F64});
    a.push_back({"state_trace", {rows, cols, N}, s.state_trace.data(), sizeof(double) * s.state_trace.size(), Kind::F64});
  }
  return a;
}

}  // namespace

RunInput read_run_input(const std::string& path) {
  const H5::H5File f = open_h5_read(path);
  const H5Array W = read_input(f, path, "W");
  if (W.shape.size() != 2 || W.shape[0] != W.shape[1] || W.shape[0] == 0)
    throw Error(path + ": /W: expected a square N x N matrix, got " + shape_text(W.shape));
  const std::size_t N = W.shape[0];
  const H5Array x = read_input(f, path, "x");
  if (x.shape.size() != 2 || x.shape[1] != N || x.shape[0] == 0)
    throw Error(path + ": /x: expected B x " + std::to_string(N) + " (one row per sample, N as /W), got " + shape_text(x.shape));
  const std::size_t B = x.shape[0];
  RunInput in;
  in.problem.W = to_matrix(W);
  in.problem.x = to_matrix(x);
  in.problem.bias = Eigen::VectorXd::Zero(static_cast<Eigen::Index>(N));
  in.problem.z0 = MatrixXdR::Zero(static_cast<Eigen::Index>(B), static_cast<Eigen::Index>(N));
  if (has_dataset(f, "bias")) {
    const H5Array b = read_input(f, path, "bias");
    if (b.shape != std::vector<std::size_t>{N}) throw Error(path + ": /bias: expected " + std::to_string(N) + " numbers (N as /W), got " + shape_text(b.shape));
    in.problem.bias = Eigen::Map<const Eigen::VectorXd>(b.values.data(), static_cast<Eigen::Index>(N));
  }
  if (has_dataset(f, "z0")) {
    const H5Array z = read_input(f, path, "z0");
    if (z.shape != x.shape) throw Error(path + ": /z0: expected " + shape_text(x.shape) + " (the shape of /x), got " + shape_text(z.shape));
    in.problem.z0 = to_matrix(z);
  }
  for (const char* name : {"alpha", "beta"})
    if (auto v = read_attr_numbers(f, path, name)) {
      if (v->size() != 1 && v->size() != N)
        throw Error(path + ": attribute " + name + ": expected one number or N = " + std::to_string(N) + " numbers, got " + std::to_string(v->size()));
      (std::string(name) == "alpha" ? in.alpha : in.beta) = *v;
    }
  if (auto v = read_attr_numbers(f, path, "gamma")) {
    if (v->size() != 1) throw Error(path + ": attribute gamma: expected one number, got " + std::to_string(v->size()));
    in.gamma = (*v)[0];
  }
  return in;
}

void write_run_input(const std::string& path, const LoopProblem& p) {
  auto arr = [](const std::string& name, const double* d, std::vector<std::size_t> shape) {
    std::size_t n = 1;
    for (std::size_t s : shape) n *= s;
    return H5Array{name, shape, std::vector<double>(d, d + n), false};
  };
  const std::size_t N = p.W.rows(), B = p.x.rows();
  write_h5_arrays(path, {arr("W", p.W.data(), {N, N}), arr("x", p.x.data(), {B, N}), arr("bias", p.bias.data(), {N}),
                         arr("z0", p.z0.data(), {B, N})});
}

H5Array read_h5_array(const std::string& path, const std::string& name) { return read_array(open_h5_read(path), path, name); }

std::string read_h5_attr(const std::string& path, const std::string& name) {
  const H5::H5File f = open_h5_read(path);
  if (H5Aexists(f.getId(), name.c_str()) > 0) {
    try {
      const H5::Attribute a = f.openAttribute(name);
      if (a.getTypeClass() == H5T_STRING) return h5_string(a, path + ": attribute " + name);
    } catch (const H5::Exception& e) {
      throw Error(path + ": attribute " + name + ": cannot read (" + e.getDetailMsg() + ")");
    }
  }
  const auto v = read_attr_numbers(f, path, name);
  if (!v) throw Error(path + ": attribute " + name + ": missing");
  return numbers_text(*v);
}

void write_h5_arrays(const std::string& path, const std::vector<H5Array>& arrays, const H5Attrs& attrs, const H5Text& text) {
  write_h5_atomic(path, [&](H5::H5File& f) {
    for (const H5Array& a : arrays) {
      const std::vector<hsize_t> dims(a.shape.begin(), a.shape.end());
      if (a.integer) {
        const std::vector<std::int32_t> v(a.values.begin(), a.values.end());
        put(f, a.name, dims, v.data(), Kind::I32);
      } else {
        put(f, a.name, dims, a.values.data(), Kind::F64);
      }
    }
    for (const auto& [name, v] : attrs) put_numbers(f, name, v);
    for (const auto& [name, v] : text) h5_put_text_attr(f, name, v);
  });
}

std::string run_output_digest(const LoopRunResult& r, const RunOutputMeta& m) {
  std::string bytes;
  for (const OutArray& a : out_arrays(r, m)) bytes.append(static_cast<const char*>(a.data), a.bytes);
  return digest_hex(bytes.data(), bytes.size());
}

void write_run_output(const std::string& path, const LoopRunResult& r, const RunOutputMeta& m) {
  const std::string digest = run_output_digest(r, m);
  write_h5_atomic(path, [&](H5::H5File& f) {
    for (const OutArray& a : out_arrays(r, m)) put(f, a.name, a.dims, a.data, a.kind);
    if (m.quantized) {
      H5::DataSet d = f.openDataSet("slm_codes");
      put_numbers(d, "slm_scale", {r.slm_scale});
    }
    for (const auto& [name, v] : m.text) h5_put_text_attr(f, name, v);
    for (const auto& [name, v] : m.numbers) put_numbers(f, name, {v});
    const std::uint64_t seed = m.seed;
    f.createAttribute("seed", H5::PredType::STD_U64LE, H5::DataSpace(H5S_SCALAR)).write(H5::PredType::NATIVE_UINT64, &seed);
    h5_put_text_attr(f, "output_digest", digest);
  });
}

}  // namespace aoc
