#include "models/model.hpp"

#include <cmath>

#include "models/aoc_ssm.hpp"
#include "sim/error.hpp"
#include "sim/json_reader.hpp"
#include "sim/noise.hpp"

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

// Rounds v to a uniform grid of 2^bits codes over [-m, m], m = max|v| (the forward pass); the
// backward pass is the identity (straight-through): v + constant(q - v).
Var straight_through(Tape& t, Var x, int bits, bool symmetric_codes) {
  if (bits <= 0) return x;  // off: no pass over the values (every product of every solve step calls this)
  const Mat& v = t.value(x);
  const double m = v.cwiseAbs().maxCoeff();
  if (!(m > 0)) return x;
  Mat q;
  if (symmetric_codes) {  // the SLM: signed codes -qmax-1 .. qmax
    const double qmax = std::ldexp(1.0, bits - 1) - 1;
    q = (v / m * qmax).array().round().max(-qmax - 1).min(qmax).matrix() * (m / qmax);
  } else {  // a converter: 2^bits levels from -m to m (sim/quantize.hpp's UniformConverter)
    const double step = 2 * m / (std::ldexp(1.0, bits) - 1);
    q = (((v.array() + m) / step).round() * step - m).matrix();
  }
  return t.add(x, t.constant(q - v));
}

}  // namespace

Var SequenceModel::optical(Tape& t, Var x, Var W) {
  Var y = t.linear(x, straight_through(t, W, hw_.slm_bits, true));
  if (hw_.output_noise > 0) {
    const Mat& v = t.value(y);
    Mat n(v.rows(), v.cols());
    const std::uint64_t draw = draws_++;
    for (Eigen::Index r = 0; r < v.rows(); ++r)
      noise::normals(hw_.seed, noise::Source::Thermal, static_cast<std::uint32_t>(draw), static_cast<std::uint32_t>(r),
                     static_cast<int>(v.cols()), n.row(r).data());
    y = t.add(y, t.constant(n * hw_.output_noise));
  }
  return y;
}

Var SequenceModel::convert(Tape& t, Var x, int bits) { return straight_through(t, x, bits, false); }

ir::Imported import_model_config(const std::string& path, const ir::ImportOptions& o) {
  const jsonr::json j = jsonr::parse_file(path);
  if (!j.is_object() || !j.contains("model_type") || j["model_type"] != "aoc_ssm") return ir::import_config(path, o);
  if (!o.weights_path.empty()) throw Error(path + ": model_type: an aoc_ssm model has no checkpoint form (its weights are an aoc weights.h5)");
  ir::Imported m = AocSsmModel(AocSsmSpec::from_config(path), o.seed).export_graph();
  if (!o.weights) m.weights.clear();
  return m;
}

}  // namespace aoc::models
