#include "runtime/run/program_run.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <random>

#include "compiler/graph_json.hpp"
#include "runtime/io/h5io.hpp"
#include "runtime/io/output.hpp"
#include "sim/error.hpp"
#include "sim/json_reader.hpp"

namespace aoc {

std::map<std::string, ir::Tensor> read_program_inputs(const std::string& path, const ir::Program& p) {
  ir::WeightStore all = ir::read_weights_h5(path);
  std::map<std::string, ir::Tensor> in;
  for (const ir::Value& v : p.graph.inputs) {
    auto it = all.find(v.name);
    if (it == all.end())
      throw Error(path + ": /" + v.name + ": missing (the program's input " + ir::to_string(v.type) + ")");
    for (std::size_t a = 0; a < it->second.shape.size(); ++a)
      if (it->second.shape[a] == 0) {
        std::string dims;
        for (std::int64_t d : it->second.shape) dims += (dims.empty() ? "" : ", ") + std::to_string(d);
        throw Error(path + ": /" + v.name + ": shape [" + dims + "] has no elements along axis " + std::to_string(a) + ": nothing to run");
      }
    if (v.type.dtype == ir::DType::I64)
      for (std::size_t i = 0; i < it->second.data.size(); ++i)
        if (it->second.data[i] != std::floor(it->second.data[i]))
          throw Error(path + ": /" + v.name + ": element " + std::to_string(i) + " is not a whole number (an i64 input)");
    in[v.name] = std::move(it->second);
    all.erase(it);
  }
  if (!all.empty()) throw Error(path + ": /" + all.begin()->first + ": not an input of the program (its inputs: " + p.graph.inputs[0].name + (p.graph.inputs.size() > 1 ? ", ..." : "") + ")");
  return in;
}

namespace {
// The rows of the table of the first Embedding that reads `input` (0: none).
std::int64_t id_bound(const ir::Program& p, const std::string& input) {
  for (const ir::Op& o : p.graph.ops)
    if (o.kind == ir::OpKind::Embedding && o.inputs[0] == input)
      for (const ir::Value& w : p.graph.weights)
        if (w.name == o.inputs[1]) return w.type.shape[0].size;
  return 0;
}
}  // namespace

std::map<std::string, ir::Tensor> example_inputs(const ir::Program& p, std::int64_t batch, std::int64_t length, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  ir::WeightStore store;
  for (const ir::Value& v : p.graph.inputs) {
    ir::Tensor t;
    for (std::size_t i = 0; i < v.type.shape.size(); ++i)
      t.shape.push_back(v.type.shape[i].is_fixed() ? v.type.shape[i].size : i == 0 ? batch : length);
    t.data.resize(static_cast<std::size_t>(t.size()));
    if (v.type.dtype == ir::DType::I64) {
      const std::int64_t V = id_bound(p, v.name);
      if (V < 1) throw Error("example inputs: i64 input '" + v.name + "' is read by no Embedding: the id range is unknown");
      std::uniform_int_distribution<std::int64_t> d(0, V - 1);
      for (double& x : t.data) x = static_cast<double>(d(rng));
    } else {
      std::uniform_real_distribution<double> d(-1.0, 1.0);
      for (double& x : t.data) x = d(rng);
    }
    store[v.name] = std::move(t);
  }
  return store;
}

void write_example_inputs(const std::string& path, const ir::Program& p, std::int64_t batch, std::int64_t length, std::uint64_t seed) {
  ir::write_weights_h5(path, example_inputs(p, batch, length, seed));
}

std::string write_program_output(const std::string& path, const ir::Program&, const ProgramResult& r, const ProgramRunMeta& m) {
  std::vector<H5Array> arrays;
  for (const auto& [name, t] : r.values)
    arrays.push_back({name, std::vector<std::size_t>(t.shape.begin(), t.shape.end()), t.data, false});
  for (const auto& fp : r.fixed_points) {
    arrays.push_back({fp.op + ".iterations", fp.shape, std::vector<double>(fp.iterations.begin(), fp.iterations.end()), true});
    arrays.push_back({fp.op + ".converged", fp.shape, std::vector<double>(fp.converged.begin(), fp.converged.end()), true});
    if (std::find(fp.at_floor.begin(), fp.at_floor.end(), 1) != fp.at_floor.end())  // a noisy run's solves stopped at the floor
      arrays.push_back({fp.op + ".at_floor", fp.shape, std::vector<double>(fp.at_floor.begin(), fp.at_floor.end()), true});
  }
  std::string bytes;
  for (const auto& a : arrays) bytes.append(reinterpret_cast<const char*>(a.values.data()), sizeof(double) * a.values.size());
  const std::string digest = digest_hex(bytes.data(), bytes.size());
  const H5Text text{{"tool", "aoc run"},        {"version", AOC_VERSION},  {"program", m.program},
                    {"config_hash", m.program_digest}, {"backend", m.backend}, {"mode", m.mode},
                    {"inputs", m.inputs},      {"precision", m.precision}, {"set", set_text(m.set)},
                    {"compile_set", set_text(m.compile_set)}, {"output_digest", digest}};
  H5Attrs nums{{"seed", {static_cast<double>(m.seed)}}, {"first_sample", {static_cast<double>(m.first_sample)}}, {"noise", {m.noise ? 1.0 : 0.0}}, {"quantize", {m.quantize ? 1.0 : 0.0}},
                     {"optics", {m.optics ? 1.0 : 0.0}}, {"trace", {m.trace ? 1.0 : 0.0}},
                     {"dac_conversions", {static_cast<double>(r.counters.dac)}},
                     {"adc_conversions", {static_cast<double>(r.counters.adc)}}};
  if (m.program_seed) nums.push_back({"program_seed", {static_cast<double>(*m.program_seed)}});
  write_h5_arrays(path, arrays, nums, text);
  return digest;
}

std::string set_text(const std::vector<std::string>& set) {
  std::string t;
  for (const auto& o : set) t += (t.empty() ? "" : " ") + o;
  return t;
}

IterationSummary summarize(const std::vector<int>& iterations, const std::vector<std::uint8_t>& converged, const std::vector<std::uint8_t>& at_floor) {
  IterationSummary s;
  if (iterations.empty()) return s;
  std::vector<int> sorted = iterations;
  std::sort(sorted.begin(), sorted.end());
  for (int k : sorted) s.mean += k / static_cast<double>(sorted.size());
  s.min = sorted.front(), s.max = sorted.back();
  s.p99 = sorted[static_cast<std::size_t>(std::ceil(0.99 * static_cast<double>(sorted.size()))) - 1];
  s.solves = static_cast<long long>(sorted.size());
  for (std::uint8_t c : converged) s.converged += c;
  for (std::uint8_t c : at_floor) s.at_floor += c;
  return s;
}

IterationSummary summarize(const ProgramResult& r) {
  std::vector<int> it;
  std::vector<std::uint8_t> conv, floor;
  for (const auto& fp : r.fixed_points) {
    it.insert(it.end(), fp.iterations.begin(), fp.iterations.end());
    conv.insert(conv.end(), fp.converged.begin(), fp.converged.end());
    floor.insert(floor.end(), fp.at_floor.begin(), fp.at_floor.end());
  }
  return summarize(it, conv, floor);
}

IterationSummary read_run_iterations(const std::string& path, const std::string& op) {
  const H5Array it = read_h5_array(path, op + ".iterations"), conv = read_h5_array(path, op + ".converged");
  if (it.values.empty() || it.values.size() != conv.values.size())
    throw Error(path + ": " + op + ".iterations: " + std::to_string(it.values.size()) + " solves, " + op + ".converged " +
                std::to_string(conv.values.size()) + " (an `aoc run` output records one of each per solve)");
  std::vector<int> k;
  std::vector<std::uint8_t> c;
  for (std::size_t i = 0; i < it.values.size(); ++i) {
    const double v = it.values[i];
    if (!(v >= 0 && v <= 1e9 && v == std::floor(v)))
      throw Error(path + ": " + op + ".iterations[" + std::to_string(i) + "]: " + jsonr::num(v) + " is not a count of iterations");
    k.push_back(static_cast<int>(v));
    c.push_back(conv.values[i] != 0);
  }
  return summarize(k, c);
}

}  // namespace aoc
