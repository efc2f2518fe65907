#include "models/model.hpp"

#include <cmath>

#include "compiler/graph_json.hpp"
#include "compiler/op_def.hpp"
#include "compiler/safetensors.hpp"
#include "models/aoc_ssm.hpp"
#include "sim/error.hpp"
#include "sim/json_reader.hpp"
#include "sim/quantize.hpp"
#include "sim/tile.hpp"

namespace aoc::models {

using ad::Mat;
using ad::Tape;
using ad::Var;

std::int64_t SequenceModel::parameter_count() {
  std::int64_t n = 0;
  for (const ad::Param* p : params()) n += p->value.size();
  return n;
}

namespace {

// The forward value q with the gradient of x (straight-through): x + constant(q - x).
Var straight_through(Tape& t, Var x, const Mat& q) { return t.add(x, t.constant(q - t.value(x))); }

}  // namespace

void SequenceModel::program_machine(int step) {
  if (!hw_.machine) return;
  if (hw_.slm_bits > 0 || hw_.output_noise > 0 || hw_.dac_bits > 0 || hw_.adc_bits > 0)
    throw Error("train: hardware_aware's bits and noise are the machine's when training for a hardware file (leave them out)");
  hw_.machine->program(*this, step);
  reads_ = 0;
}

// The forward pass reads the simulator's tile (sim/tile.hpp) programmed with the SLM codes of W
// (sim/quantize.hpp, the compiler's quantizer) on ideal optics with the receiver noise; the backward
// pass is the exact product's.
Var SequenceModel::optical(Tape& t, Var x, Var W, const std::string& weight) {
  Var y = t.linear(x, W);
  if (hw_.machine) return straight_through(t, y, hw_.machine->product(weight, t.value(x), reads_++));
  if (hw_.slm_bits <= 0 && hw_.output_noise <= 0) return y;  // off: no pass over the values
  const Mat& w = t.value(W);  // [out, in]
  if (!(w.cwiseAbs().maxCoeff() > 0)) return y;
  static const Hardware kNoCalibration{};  // ideal optics with linear LEDs reads nothing of it
  CoreConfig chain = CoreConfig::ideal(0, 1);
  chain.led = LedModel::Linear;
  OpticalTile<double> tile(kNoCalibration, chain, Optics::Ideal);
  if (hw_.output_noise > 0) {
    TileNoise n;
    n.spec.thermal_sigma = hw_.output_noise;
    n.seed = hw_.seed;
    n.stream = static_cast<std::uint32_t>(draws_++ % (1u << 27)) + 1;
    tile.set_noise(n);
  }
  tile.program(MatrixXdR(hw_.slm_bits > 0 ? MatrixXdR(quantize_weights(w, hw_.slm_bits).values()) : MatrixXdR(w)).transpose());
  const Mat& xv = t.value(x);
  const auto R = static_cast<int>(xv.rows());
  const int ldi = tile.ld_in(), ldo = tile.ld_out();
  AlignedVector<double> in(static_cast<std::size_t>(R) * ldi, 0.0), out(static_cast<std::size_t>(R) * ldo), scratch(tile.scratch_size(R));
  for (int r = 0; r < R; ++r)
    for (Eigen::Index j = 0; j < xv.cols(); ++j) in[static_cast<std::size_t>(r) * ldi + j] = xv(r, j);
  tile.read(in.data(), R, StepContext{}, 0, kern::Epilogue<double>{}, out.data(), scratch.data());
  Mat q(R, w.rows());
  for (int r = 0; r < R; ++r)
    for (Eigen::Index j = 0; j < w.rows(); ++j) q(r, j) = out[static_cast<std::size_t>(r) * ldo + j];
  return straight_through(t, y, q);
}

// A converter of 2^bits levels over +-max|x| (sim/quantize.hpp's UniformConverter), as calibrated
// converters set their ranges.
Var SequenceModel::convert(Tape& t, Var x, int bits) {
  if (bits <= 0) return x;
  const Mat& v = t.value(x);
  const double m = v.cwiseAbs().maxCoeff();
  if (!(m > 0)) return x;
  const UniformConverter c{-m, m, bits};
  return straight_through(t, x, v.unaryExpr([&](double e) { return c.quantize(e); }));
}

namespace {

// The config's graph with the weights of an aoc weights file (HDF5), each checked against the
// graph's declaration by name and shape; the file's other tensors are reported as unused.
ir::Imported import_with_h5(const std::string& path, const ir::ImportOptions& o) {
  ir::ImportOptions shapes;
  shapes.weights = false;
  ir::Imported m = import_model_config(path, shapes);
  ir::WeightStore w = ir::read_weights_h5(o.weights_path);
  for (const ir::Value& v : m.graph.weights) {
    const auto it = w.find(v.name);
    if (it == w.end())
      throw Error(o.weights_path + ": tensor '" + v.name + "': missing (the graph of " + path + " declares it " + ir::to_string(v.type) +
                  "): is this the weights file of that model?");
    std::vector<std::int64_t> want;
    for (const auto& d : v.type.shape) want.push_back(d.size);
    if (it->second.shape != want)
      throw Error(o.weights_path + ": tensor '" + v.name + "': shape " + ir::shape_text(it->second.shape) + ", the graph of " + path +
                  " declares " + ir::shape_text(want));
    m.weights[v.name] = std::move(it->second);
    w.erase(it);
  }
  for (const auto& [name, t] : w) m.unused_tensors.push_back(name);
  return m;
}

ir::Imported import_as_configured(const std::string& path, const ir::ImportOptions& o) {
  if (!o.weights_path.empty() && ir::weights_format(o.weights_path) == ir::WeightsFormat::Hdf5) return import_with_h5(path, o);
  const jsonr::json j = jsonr::parse_file(path);
  if (!j.is_object() || !j.contains("model_type") || j["model_type"] != "aoc_ssm") return ir::import_config(path, o);
  if (!o.weights_path.empty()) throw Error(path + ": model_type: an aoc_ssm model has no checkpoint form (its weights are an aoc weights.h5)");
  ir::Imported m = AocSsmModel(AocSsmSpec::from_config(path), o.seed).export_graph();
  if (!o.weights) m.weights.clear();
  return m;
}

}  // namespace

ir::Imported import_model_config(const std::string& path, const ir::ImportOptions& o) {
  ir::Imported m = import_as_configured(path, o);
  // The solve's stopping rule is the program's: set in the graph, the reference, the simulator and
  // the estimates all run the same one.
  if (o.tol) {
    if (!(*o.tol > 0 && std::isfinite(*o.tol))) throw Error(path + ": tol: must be a number > 0, got " + jsonr::num(*o.tol));
    for (auto& op : m.graph.ops)
      if (op.kind == ir::OpKind::FixedPoint) m.config_tol = ir::attr_number(op, "tol"), op.attrs["tol"] = *o.tol;
    if (!m.config_tol) throw Error(path + ": --tol: the model has no fixed point (an explicit backbone)");
  }
  return m;
}

}  // namespace aoc::models
