#include "models/retina_model.hpp"

#include <Eigen/SVD>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>

#include "models/aoc_ssm.hpp"
#include "models/optim.hpp"
#include "sim/error.hpp"
#include "sim/json_reader.hpp"
#include "sim/noise.hpp"

namespace aoc::retina {

using ad::Mat;
using ad::Tape;
using ad::Var;

namespace {

std::string num(std::int64_t v) { return std::to_string(v); }

std::string shape_json(const std::vector<std::int64_t>& s) {
  std::string t = "[";
  for (std::size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + num(s[i]);
  return t + "]";
}

// The first layer's output side (valid convolution, stride 1).
int side1(const ModelSpec& s, int frame_side) { return frame_side - s.kernel1 + 1; }

// ibgp's sides through the encoder (valid 3x3 convolutions, max-pools of 2) and the decoder's seed
// grid s0, from which 3x3 convolutions and upsamplings of 2 land on the frame: 2 (2 (s0 - 2) - 2) - 2.
struct IbgpSides {
  int e1h, e1w, p1h, p1w, e2h, e2w, p2h, p2w, e3h, e3w;  // encoder
  int s0h, s0w, u1h, u1w, u2h, u2w;                      // decoder: seed grid, after each upsampling
  bool fits;
};
IbgpSides ibgp_sides(const ModelSpec& s) {
  IbgpSides z{};
  z.e1h = s.height - 2, z.e1w = s.width - 2, z.p1h = z.e1h / 2, z.p1w = z.e1w / 2;
  z.e2h = z.p1h - 2, z.e2w = z.p1w - 2, z.p2h = z.e2h / 2, z.p2w = z.e2w / 2, z.e3h = z.p2h - 2, z.e3w = z.p2w - 2;
  z.s0h = (s.height + 14) / 4, z.s0w = (s.width + 14) / 4;
  z.u1h = 2 * (z.s0h - 2), z.u1w = 2 * (z.s0w - 2), z.u2h = 2 * (z.u1h - 2), z.u2w = 2 * (z.u1w - 2);
  z.fits = z.e3h >= 1 && z.e3w >= 1 && (s.height + 14) % 4 == 0 && (s.width + 14) % 4 == 0;
  return z;
}

using Shapes = std::vector<std::pair<std::string, std::vector<std::int64_t>>>;

// The retina forward model's (cnn, and ibgp's last part).
Shapes cnn_shapes(const ModelSpec& s) {
  const std::int64_t h2 = side1(s, s.height) - s.kernel2 + 1, w2 = side1(s, s.width) - s.kernel2 + 1;
  return {{"conv1", {s.conv1, s.kernel1, s.kernel1, 1}},
          {"temporal", {s.conv1, s.taps}},
          {"temporal_bias", {s.conv1}},
          {"conv2", {s.conv2, s.kernel2, s.kernel2, s.conv1}},
          {"conv2_bias", {s.conv2}},
          {"readout", {s.cells, h2 * w2 * s.conv2}},
          {"readout_bias", {s.cells}}};
}

// Graph and tape shapes of each weight, in a fixed order (the order of the weights' seeds).
Shapes weight_shapes(const ModelSpec& s) {
  if (s.kind == "implicit")
    return {{"spatial", {s.filters, std::int64_t(s.height) * s.width}}, {"temporal", {s.filters, s.taps}}, {"inject", {s.state, s.filters}},
            {"inject_bias", {s.state}}, {"loop.W", {s.state, s.state}},
            {"loop.V", {s.state, s.state}}, {"readout", {s.cells, s.state}}, {"readout_bias", {s.cells}}};
  if (s.kind == "ln")
    return {{"spatial", {s.cells, std::int64_t(s.height) * s.width}}, {"temporal", {s.cells, s.taps}}, {"bias", {s.cells}}};
  if (s.kind == "cnn") return cnn_shapes(s);
  const IbgpSides z = ibgp_sides(s);
  const std::int64_t features = std::int64_t(z.e3h) * z.e3w * s.enc3, seed = std::int64_t(z.s0h) * z.s0w * s.dec0;
  Shapes v{{"enc.conv1", {s.enc1, 3, 3, 1}},         {"enc.conv1_bias", {s.enc1}},  {"enc.conv2", {s.enc2, 3, 3, s.enc1}},
           {"enc.conv2_bias", {s.enc2}},             {"enc.conv3", {s.enc3, 3, 3, s.enc2}}, {"enc.conv3_bias", {s.enc3}},
           {"enc.temporal", {s.enc3, s.taps}},       {"enc.temporal_bias", {s.enc3}}, {"enc.mean", {s.latent, features}},
           {"enc.logvar", {s.latent, features}},     {"enc.logvar_bias", {s.latent}}, {"dec.dense", {seed, s.latent}},
           {"dec.dense_bias", {seed}},               {"dec.temporal", {s.dec0, s.taps}}, {"dec.temporal_bias", {s.dec0}},
           {"dec.conv1", {s.dec1, 3, 3, s.dec0}},    {"dec.conv1_bias", {s.dec1}},  {"dec.conv2", {s.dec2, 3, 3, s.dec1}},
           {"dec.conv2_bias", {s.dec2}},             {"dec.conv3", {1, 3, 3, s.dec2}}, {"dec.conv3_bias", {1}}};
  for (auto& w : cnn_shapes(s)) v.push_back(std::move(w));
  return v;
}

// A graph op's line (the JSON of the ops list).
std::string op_line(const std::string& kind, const std::string& name, const std::vector<std::string>& in, const std::string& out,
                    const std::string& attrs = "") {
  std::string ins;
  for (const auto& i : in) ins += (ins.empty() ? "\"" : ", \"") + i + "\"";
  return R"(    {"op": ")" + kind + R"(", "name": ")" + name + R"(", "in": [)" + ins + R"(], "out": [")" + out + "\"]" +
         (attrs.empty() ? "" : R"(, "attrs": )" + attrs) + "},\n";
}

// A graph shape as the tape's matrix: a vector is a row [1, n]; else [first, product of the rest].
std::pair<Eigen::Index, Eigen::Index> tape_shape(const std::vector<std::int64_t>& s) {
  if (s.size() == 1) return {1, s[0]};
  std::int64_t cols = 1;
  for (std::size_t i = 1; i < s.size(); ++i) cols *= s[i];
  return {s[0], cols};
}

bool is_bias(const std::string& name) { return name == "bias" || name.ends_with("_bias"); }

// Rows [first, first + n) of a split's movie as [n, H*W] tape rows.
Mat frames_of(const Split& s, int first, int n) {
  const Eigen::Index px = static_cast<Eigen::Index>(s.height) * s.width;
  Mat x(n, px);
  for (int t = 0; t < n; ++t)
    for (Eigen::Index i = 0; i < px; ++i) x(t, i) = s.stimulus[static_cast<std::size_t>(first + t) * px + i];
  return x;
}

}  // namespace

nlohmann::ordered_json ModelSpec::json() const {
  nlohmann::ordered_json j{{"kind", kind}, {"height", height}, {"width", width}, {"cells", cells}, {"taps", taps}};
  if (kind == "cnn" || kind == "ibgp") j.update({{"conv1", conv1}, {"kernel1", kernel1}, {"conv2", conv2}, {"kernel2", kernel2}});
  if (kind == "ibgp")
    j.update({{"latent", latent}, {"enc1", enc1}, {"enc2", enc2}, {"enc3", enc3}, {"dec0", dec0}, {"dec1", dec1}, {"dec2", dec2},
              {"beta", beta}, {"length_scale", length_scale}});
  if (kind == "implicit") j.update({{"state", state}, {"filters", filters}, {"tol", tol}, {"damping", damping}, {"max_iter", max_iter}, {"unroll", unroll}});
  return j;
}

ModelSpec ModelSpec::from_json(const nlohmann::json& j, const std::string& where) {
  const jsonr::Reader r(where);
  r.object(j, "model");
  ModelSpec s;
  s.kind = r.text(r.need(j, "model", "kind"), "model.kind", true);
  if (s.kind != "ln" && s.kind != "cnn" && s.kind != "implicit" && s.kind != "ibgp")
    r.fail("model.kind", "expected \"ln\", \"cnn\", \"implicit\" or \"ibgp\", got \"" + s.kind + "\"");
  const auto whole = [&](const char* key, int& v) { v = static_cast<int>(r.integer(r.need(j, "model", key), std::string("model.") + key, 1, 1 << 16)); };
  whole("height", s.height), whole("width", s.width), whole("cells", s.cells), whole("taps", s.taps);
  if (s.kind == "cnn" || s.kind == "ibgp") whole("conv1", s.conv1), whole("kernel1", s.kernel1), whole("conv2", s.conv2), whole("kernel2", s.kernel2);
  if (s.kind == "ibgp") {
    whole("latent", s.latent), whole("enc1", s.enc1), whole("enc2", s.enc2), whole("enc3", s.enc3);
    whole("dec0", s.dec0), whole("dec1", s.dec1), whole("dec2", s.dec2);
    s.beta = r.number(r.need(j, "model", "beta"), "model.beta", jsonr::kPositive);
    s.length_scale = r.number(r.need(j, "model", "length_scale"), "model.length_scale", jsonr::kPositive);
  }
  if (s.kind == "implicit") {
    whole("state", s.state), whole("filters", s.filters), whole("max_iter", s.max_iter), whole("unroll", s.unroll);
    s.tol = r.number(r.need(j, "model", "tol"), "model.tol", jsonr::kPositive);
    s.damping = r.number(r.need(j, "model", "damping"), "model.damping", {0, 1, false, true});
  }
  s.check();
  return s;
}

int ModelSpec::warmup() const { return (kind == "ibgp" ? 3 : 1) * (taps - 1); }
int ModelSpec::skip() const { return std::max(kDefaultSkip, warmup()); }

void ModelSpec::check() const {
  if (kind != "ln" && kind != "cnn" && kind != "implicit" && kind != "ibgp")
    throw Error("retina model: kind \"" + kind + "\" is not a model (ln, cnn, implicit, ibgp)");
  for (const auto& [name, v] : {std::pair{"height", height}, {"width", width}, {"cells", cells}, {"taps", taps}, {"conv1", conv1},
                                {"kernel1", kernel1}, {"conv2", conv2}, {"kernel2", kernel2}, {"state", state}, {"filters", filters}, {"max_iter", max_iter}, {"unroll", unroll},
                                {"latent", latent}, {"enc1", enc1}, {"enc2", enc2}, {"enc3", enc3}, {"dec0", dec0}, {"dec1", dec1}, {"dec2", dec2}})
    if (v < 1) throw Error(std::string("retina model: ") + name + " " + num(v) + " must be >= 1");
  if ((kind == "cnn" || kind == "ibgp") && (side1(*this, height) - kernel2 + 1 < 1 || side1(*this, width) - kernel2 + 1 < 1))
    throw Error("retina model: kernels " + num(kernel1) + " and " + num(kernel2) + " do not fit a " + num(height) + "x" + num(width) +
                " frame (valid convolutions need kernel1 + kernel2 - 1 <= each side)");
  if (!(tol > 0) || !(damping > 0 && damping <= 1)) throw Error("retina model: tol must be > 0 and damping in (0, 1]");
  if (kind == "ibgp" && !ibgp_sides(*this).fits)
    throw Error("retina model: ibgp's encoder and decoder do not fit a " + num(height) + "x" + num(width) +
                " frame (each side must be 2 mod 4 and at least 22: 50 is; the decoder grows a seed grid of (side + 14) / 4 to the frame)");
  if (!(beta > 0) || !(length_scale > 0)) throw Error("retina model: beta and length_scale must be > 0");
}

Model::Model(const ModelSpec& spec, std::uint64_t seed) : spec_(spec) {
  spec_.check();
  std::uint32_t k = 0;
  for (const auto& [name, shape] : weight_shapes(spec_)) {
    shapes_[name] = shape;
    const auto [rows, cols] = tape_shape(shape);
    ad::Param& p = p_[name];
    p.name = name;
    p.value = Mat::Zero(rows, cols);
    p.grad = Mat::Zero(rows, cols);
    // Biases start at 0 (the readout's is set from the data); filters Gaussian with unit-variance
    // outputs for unit-variance inputs, the readout small so that the first rates are the means.
    if (!is_bias(name)) {
      for (Eigen::Index r = 0; r < rows; ++r)
        noise::normals(seed, noise::Source::Init, k, static_cast<std::uint32_t>(r), 0, static_cast<int>(cols), p.value.row(r).data());
      // the loop's matrices small: W tanh(.) + V tanh(.) contracts at the start
      const bool small = name == "readout" || name == "spatial" || name == "enc.logvar";
      const bool into_relu = name.starts_with("enc.conv") || name == "dec.dense" || name == "dec.conv1" || name == "dec.conv2";
      const double gain = small ? 0.1 : name.starts_with("loop.") ? 0.3 : into_relu ? std::sqrt(2.0) : 1.0;
      p.value *= gain / std::sqrt(static_cast<double>(cols));
    }
    ++k;
  }
  if (spec_.kind == "ibgp") {
    // a narrow posterior at the start (variance e^-4): the decoder first learns from the means
    p_.at("enc.logvar_bias").value.setConstant(-4.0);
    // the encoder's and decoder's temporal filters start near the identity (the current frame):
    // random filters on the encoder's rectified, non-negative features silence whole channels at
    // the ReLU after them, and with them every gradient
    for (const char* name : {"enc.temporal", "dec.temporal"}) {
      Mat& w = p_.at(name).value;
      w *= 0.1;
      w.col(w.cols() - 1).array() += 1.0;
    }
  }
}

Model::Model(const ModelSpec& spec, const ir::WeightStore& ws) : spec_(spec), from_weights_(true) {
  spec_.check();
  for (const auto& [name, shape] : weight_shapes(spec_)) {
    const auto it = ws.find(name);
    if (it == ws.end()) throw Error("retina model: weight '" + name + "' is missing");
    if (it->second.shape != shape) throw Error("retina model: weight '" + name + "' must be " + shape_json(shape) + ", got " + shape_json(it->second.shape));
    shapes_[name] = shape;
    const auto [rows, cols] = tape_shape(shape);
    ad::Param& p = p_[name];
    p.name = name;
    p.value = Eigen::Map<const Mat>(it->second.data.data(), rows, cols);
    p.grad = Mat::Zero(rows, cols);
  }
}

std::vector<ad::Param*> Model::params() {
  std::vector<ad::Param*> v;
  for (auto& [name, p] : p_) v.push_back(&p);
  return v;
}

std::int64_t Model::parameter_count() const {
  std::int64_t n = 0;
  for (const auto& [name, p] : p_) n += p.value.size();
  return n;
}

Var Model::forward(Tape& t, Var x, int L) {
  const auto w = [&](const char* name) { return t.leaf(p_.at(name)); };
  const ModelSpec& s = spec_;
  if (s.kind == "implicit") {
    const Var sx = t.conv1d_causal(t.linear(x, w("spatial")), w("temporal"), L);
    const Var u = t.add(t.linear(sx, w("inject")), w("inject_bias"));
    Var z = t.constant(solve(t.value(u), L));
    for (int k = 0; k < (t.recording() ? s.unroll : 0); ++k) z = loop_step(t, z, u, L);
    return t.softplus(t.add(t.linear(z, w("readout")), w("readout_bias")));
  }
  if (s.kind == "ln") {
    const Var g = t.conv1d_causal(t.linear(x, w("spatial")), w("temporal"), L);
    return t.softplus(t.add(g, w("bias")));
  }
  if (s.kind == "ibgp") return cnn(t, bottleneck(t, x, L).synth, L);
  return cnn(t, x, L);
}

Var Model::cnn(Tape& t, Var x, int L) {
  const auto w = [&](const char* name) { return t.leaf(p_.at(name)); };
  const ModelSpec& s = spec_;
  const ad::Tape::Conv2dShape c1{s.height, s.width, 1, s.kernel1, s.kernel1, 1};
  const ad::Tape::Conv2dShape c2{c1.out_h(), c1.out_w(), s.conv1, s.kernel2, s.kernel2, 1};
  const Var a1 = t.relu(t.add_channels(t.conv1d_causal(t.conv2d(x, w("conv1"), c1), w("temporal"), L), w("temporal_bias")));
  const Var a2 = t.relu(t.add_channels(t.conv2d(a1, w("conv2"), c2), w("conv2_bias")));
  return t.softplus(t.add(t.linear(a2, w("readout")), w("readout_bias")));
}

Model::Bottleneck Model::bottleneck(Tape& t, Var x, int L, const Draw* draw) {
  const ModelSpec& s = spec_;
  if (s.kind != "ibgp") throw Error("retina model: a " + s.kind + " model has no bottleneck (only ibgp)");
  const IbgpSides z = ibgp_sides(s);
  const auto w = [&](const std::string& name) { return t.leaf(p_.at(name)); };
  const auto conv = [&](Var a, const std::string& name, int h, int wd, int c) {  // 3x3, valid, with its bias
    return t.add_channels(t.conv2d(a, w(name), {h, wd, c, 3, 3, 1}), w(name + "_bias"));
  };
  Var a = t.max_pool2d(t.relu(conv(x, "enc.conv1", s.height, s.width, 1)), {z.e1h, z.e1w, s.enc1}, 2);
  a = t.max_pool2d(t.relu(conv(a, "enc.conv2", z.p1h, z.p1w, s.enc1)), {z.e2h, z.e2w, s.enc2}, 2);
  a = t.relu(conv(a, "enc.conv3", z.p2h, z.p2w, s.enc2));
  a = t.relu(t.add_channels(t.conv1d_causal(a, w("enc.temporal"), L), w("enc.temporal_bias")));
  Bottleneck b;
  b.mean = t.linear(a, w("enc.mean"));
  b.logvar = t.add(t.linear(a, w("enc.logvar")), w("enc.logvar_bias"));
  Var zs = b.mean;
  if (draw) {  // reparameterised: z = mean + e^(logvar / 2) eps
    Mat eps(t.rows(b.mean), s.latent);
    noise::normals(draw->seed, noise::Source::Init, 0x49424700u, static_cast<std::uint32_t>(draw->step), 0, static_cast<int>(eps.size()), eps.data());
    zs = t.add(b.mean, t.mul(t.exp(t.scale(b.logvar, 0.5)), t.constant(eps)));
  }
  Var d = t.relu(t.add(t.linear(zs, w("dec.dense")), w("dec.dense_bias")));
  d = t.relu(t.add_channels(t.conv1d_causal(d, w("dec.temporal"), L), w("dec.temporal_bias")));
  d = t.upsample2d(t.relu(conv(d, "dec.conv1", z.s0h, z.s0w, s.dec0)), {z.s0h - 2, z.s0w - 2, s.dec1}, 2);
  d = t.upsample2d(t.relu(conv(d, "dec.conv2", z.u1h, z.u1w, s.dec1)), {z.u1h - 2, z.u1w - 2, s.dec2}, 2);
  b.synth = conv(d, "dec.conv3", z.u2h, z.u2w, s.dec2);
  return b;
}

Var Model::loss(Tape& t, Var x, const Mat& y, const std::vector<char>& use, int L, std::uint64_t seed, std::uint64_t step) {
  if (spec_.kind != "ibgp") return t.poisson_nll(forward(t, x, L), y, use);
  const Draw draw{seed, step};
  const Bottleneck b = bottleneck(t, x, L, &draw);
  const Var nll = t.poisson_nll(cnn(t, b.synth, L), y, use);
  auto prior = prior_.find(L);
  if (prior == prior_.end()) {
    Mat K(L, L);
    for (int i = 0; i < L; ++i)
      for (int j = 0; j < L; ++j) K(i, j) = 1.0 / (1.0 + std::pow((i - j) / spec_.length_scale, 2)) + (i == j ? 1e-3 : 0.0);
    const Eigen::LLT<Mat> llt(K);
    const double logdet = 2 * llt.matrixLLT().diagonal().array().log().sum();
    prior = prior_.emplace(L, std::pair{Mat(llt.solve(Mat::Identity(L, L))), logdet}).first;
  }
  const double bins = static_cast<double>(std::count(use.begin(), use.end(), 1)) * spec_.cells;
  return t.add(nll, t.scale(t.gp_kl(b.mean, b.logvar, prior->second.first, prior->second.second, L), 1.0 / (spec_.beta * std::max(bins, 1.0))));
}

void Model::match_contrast(const Mat& x, int L) {
  if (spec_.kind != "ibgp") return;
  Tape t(false);
  const Mat& synth = t.value(bottleneck(t, t.constant(x), L).synth);
  const auto sd = [](const Mat& m) { return std::sqrt(std::max((m.array() - m.mean()).square().mean(), 0.0)); };
  const double have = sd(synth), want = sd(x);
  if (!(have > 0) || !(want > 0)) return;
  p_.at("dec.conv3").value *= want / have;
  p_.at("dec.conv3_bias").value *= want / have;
}

void Model::take_forward(const ir::WeightStore& cnn) {
  if (spec_.kind != "ibgp") throw Error("retina model: only ibgp takes a trained forward model");
  for (const auto& [name, shape] : cnn_shapes(spec_)) {
    const auto it = cnn.find(name);
    if (it == cnn.end()) throw Error("retina model: the forward model's weight '" + name + "' is missing (a cnn folder's weights.h5)");
    if (it->second.shape != shape)
      throw Error("retina model: the forward model's weight '" + name + "' must be " + shape_json(shape) + ", got " + shape_json(it->second.shape));
    const auto [rows, cols] = tape_shape(shape);
    p_.at(name).value = Eigen::Map<const Mat>(it->second.data.data(), rows, cols);
  }
  forward_taken_ = true;
}

Var Model::loop_step(Tape& t, Var z, Var u, int L) {
  const Var f = t.tanh(z);
  const Var fz = t.add(t.add(t.linear(f, t.leaf(p_.at("loop.W"))), t.linear(t.shift_rows(f, L), t.leaf(p_.at("loop.V")))), u);
  return spec_.damping == 1 ? fz : t.add(t.scale(z, 1 - spec_.damping), t.scale(fz, spec_.damping));
}

Mat Model::solve(const Mat& u, int L) const {
  const Mat& W = p_.at("loop.W").value;
  const Mat& V = p_.at("loop.V").value;
  Mat z = Mat::Zero(u.rows(), u.cols()), f(u.rows(), u.cols()), fp(u.rows(), u.cols()), next;
  for (int k = 0; k < 2000; ++k) {
    f = z.array().tanh().matrix();
    fp.setZero();
    for (Eigen::Index r = 0; r < u.rows(); ++r)
      if (r % L) fp.row(r) = f.row(r - 1);  // the previous frame's state, none before a block's first
    next.noalias() = f * W.transpose();
    next.noalias() += fp * V.transpose();
    next += u;
    const double change = (next - z).norm(), size = next.norm();
    z.swap(next);
    if (change <= 1e-10 * std::max(size, 1e-30)) break;
  }
  return z;
}

Eigen::MatrixXd Model::predict(const Split& s) {
  Tape t(false);
  const Var r = forward(t, t.constant(frames_of(s, 0, s.frames)), s.frames);
  return t.value(r).transpose();
}

void Model::set_mean_rates(const Eigen::VectorXd& mean_counts) {
  ad::Param& b = p_.at(spec_.kind == "ln" ? "bias" : "readout_bias");
  if (mean_counts.size() != b.value.cols()) throw Error("retina model: " + num(mean_counts.size()) + " mean rates for " + num(b.value.cols()) + " cells");
  for (Eigen::Index i = 0; i < mean_counts.size(); ++i) {
    const double m = std::max(mean_counts[i], 1e-3);
    b.value(0, i) = m > 30 ? m : std::log(std::expm1(m));  // softplus^-1
  }
}

void Model::keep_contractive() {
  if (spec_.kind != "implicit") return;
  Mat& W = p_.at("loop.W").value;
  Mat& V = p_.at("loop.V").value;
  const double norm = Eigen::JacobiSVD<Mat>(W).singularValues()(0) + Eigen::JacobiSVD<Mat>(V).singularValues()(0);
  if (norm > kLoopBound) W *= kLoopBound / norm, V *= kLoopBound / norm;
}

std::string Model::graph_json() const {
  const ModelSpec& s = spec_;
  std::string weights;
  for (const auto& [name, shape] : weight_shapes(s)) weights += std::string(weights.empty() ? "" : ",\n    ") + R"({"name": ")" + name + R"(", "shape": )" + shape_json(shape) + "}";
  const std::string head = R"({"format": "aoc-graph", "version": 1, "name": "retina-)" + s.kind + R"(",
  "inputs": [{"name": "stimulus", "dtype": "f64", "shape": ["B", "L", )" + num(s.height) + ", " + num(s.width) + R"(, 1]}],
  "weights": [
    )" + weights + R"(],
  "ops": [
)";
  std::string ops;
  const std::string flatten = op_line("Reshape", "flatten", {"stimulus"}, "x", "{\"shape\": [0, 0, " + num(std::int64_t(s.height) * s.width) + "]}");
  if (s.kind == "implicit") {
    ops = flatten + op_line("Linear", "spatial", {"x", "spatial"}, "sx") + op_line("Conv1dCausal", "temporal", {"sx", "temporal"}, "tx") +
          op_line("Linear", "inject", {"tx", "inject"}, "ux") + op_line("Add", "inject_bias", {"ux", "inject_bias"}, "u") + "    " +
          models::aoc_loop_op_json(s.tol, s.max_iter, s.damping) + ",\n" + op_line("Linear", "readout", {"z", "readout"}, "r") +
          op_line("Add", "readout_bias", {"r", "readout_bias"}, "rb") + op_line("Softplus", "rate", {"rb"}, "rate");
  } else if (s.kind == "ln") {
    ops = flatten + op_line("Linear", "spatial", {"x", "spatial"}, "s") + op_line("Conv1dCausal", "temporal", {"s", "temporal", "bias"}, "g") +
          op_line("Softplus", "rate", {"g"}, "rate");
  } else {
    if (s.kind == "ibgp") {
      const IbgpSides z = ibgp_sides(s);
      const auto conv = [&](const std::string& name, const std::string& in, const std::string& out) {  // 3x3 and its bias, then ReLU
        return op_line("Conv2d", name, {in, name}, out + "c") + op_line("Add", name + "_bias", {out + "c", name + "_bias"}, out + "b") +
               op_line("Relu", name + "_relu", {out + "b"}, out);
      };
      const std::string pool = R"({"size": 2})";
      ops = conv("enc.conv1", "stimulus", "e1") + op_line("MaxPool2d", "enc.pool1", {"e1"}, "p1", pool) + conv("enc.conv2", "p1", "e2") +
            op_line("MaxPool2d", "enc.pool2", {"e2"}, "p2", pool) + conv("enc.conv3", "p2", "e3") +
            op_line("Conv1dCausal", "enc.temporal", {"e3", "enc.temporal", "enc.temporal_bias"}, "et") + op_line("Relu", "enc.temporal_relu", {"et"}, "er") +
            op_line("Reshape", "enc.flatten", {"er"}, "ef", "{\"shape\": [0, 0, " + num(std::int64_t(z.e3h) * z.e3w * s.enc3) + "]}") +
            op_line("Linear", "enc.mean", {"ef", "enc.mean"}, "latent") + op_line("Linear", "enc.logvar", {"ef", "enc.logvar"}, "lv") +
            op_line("Add", "enc.logvar_bias", {"lv", "enc.logvar_bias"}, "latent_logvar") + op_line("Linear", "dec.dense", {"latent", "dec.dense"}, "dd") +
            op_line("Add", "dec.dense_bias", {"dd", "dec.dense_bias"}, "ddb") + op_line("Relu", "dec.dense_relu", {"ddb"}, "dr") +
            op_line("Reshape", "dec.grid", {"dr"}, "dg", "{\"shape\": [0, 0, " + num(z.s0h) + ", " + num(z.s0w) + ", " + num(s.dec0) + "]}") +
            op_line("Conv1dCausal", "dec.temporal", {"dg", "dec.temporal", "dec.temporal_bias"}, "dt") + op_line("Relu", "dec.temporal_relu", {"dt"}, "d0") +
            conv("dec.conv1", "d0", "d1") + op_line("Upsample2d", "dec.up1", {"d1"}, "u1", R"({"scale": 2})") + conv("dec.conv2", "u1", "d2") +
            op_line("Upsample2d", "dec.up2", {"d2"}, "u2", R"({"scale": 2})") + op_line("Conv2d", "dec.conv3", {"u2", "dec.conv3"}, "d3") +
            op_line("Add", "dec.conv3_bias", {"d3", "dec.conv3_bias"}, "synth");
    }
    const std::string x = s.kind == "ibgp" ? "synth" : "stimulus";
    const std::int64_t features = cnn_shapes(s).at(5).second[1];
    ops += op_line("Conv2d", "conv1", {x, "conv1"}, "c1") + op_line("Conv1dCausal", "temporal", {"c1", "temporal", "temporal_bias"}, "t1") +
           op_line("Relu", "relu1", {"t1"}, "a1") + op_line("Conv2d", "conv2", {"a1", "conv2"}, "c2") +
           op_line("Add", "conv2_bias", {"c2", "conv2_bias"}, "c2b") + op_line("Relu", "relu2", {"c2b"}, "a2") +
           op_line("Reshape", "flatten", {"a2"}, "f", "{\"shape\": [0, 0, " + num(features) + "]}") + op_line("Linear", "readout", {"f", "readout"}, "r") +
           op_line("Add", "readout_bias", {"r", "readout_bias"}, "rb") + op_line("Softplus", "rate", {"rb"}, "rate");
  }
  ops.erase(ops.size() - 2, 1);  // the last op's comma
  const std::string outputs = s.kind == "ibgp" ? R"(["rate", "latent", "latent_logvar", "synth"])" : R"(["rate"])";
  return head + ops + "  ],\n  \"outputs\": " + outputs + "\n}\n";
}

ir::WeightStore Model::weights() const {
  ir::WeightStore out;
  for (const auto& [name, p] : p_) {
    ir::Tensor& t = out[name];
    t.shape = shapes_.at(name);
    t.data.assign(p.value.data(), p.value.data() + p.value.size());
  }
  return out;
}

TrainResult train(Model& m, const Dataset& d, const TrainOptions& o, const std::function<void(const EpochRecord&)>& log, TrainState* state) {
  const ModelSpec& s = m.spec();
  const Split& tr = d.train;
  if (tr.height != s.height || tr.width != s.width || tr.cells() != s.cells)
    throw Error("retina train: the model is for " + num(s.height) + "x" + num(s.width) + " frames and " + num(s.cells) + " cells, the data has " +
                num(tr.height) + "x" + num(tr.width) + " and " + num(tr.cells()));
  const int warm = s.warmup();  // frames before every temporal filter's output is whole
  if (o.chunk <= warm || o.batch < 1 || o.epochs < 1 || !(o.validation > 0 && o.validation < 1))
    throw Error("retina train: chunk must exceed the filters' warm-up of " + num(warm) + " frames, batch and epochs be >= 1, validation in (0, 1)");
  const int fit = static_cast<int>(std::lround((1 - o.validation) * tr.frames));
  if (fit < o.chunk || tr.frames - fit <= warm + 1)
    throw Error("retina train: " + num(tr.frames) + " train frames are too few for chunks of " + num(o.chunk) + " and a validation part longer than " +
                num(warm + 1) + " frames");

  // Chunks overlap by the warm-up, so every fitted frame after the first warm-up is scored once.
  std::vector<int> starts;
  for (int a = 0; a + o.chunk <= fit; a += o.chunk - warm) starts.push_back(a);
  if (starts.back() + o.chunk < fit) starts.push_back(fit - o.chunk);
  const int steps_per_epoch = static_cast<int>((starts.size() + o.batch - 1) / o.batch);
  const long long total = static_cast<long long>(steps_per_epoch) * o.epochs;

  // The validation part starts a warm-up early so that its first scored frame has whole filters.
  const Split val = slice(tr, fit - warm, tr.frames - fit + warm);
  TrainState fresh;
  TrainState& st = state ? *state : fresh;
  if (st.epoch < 0 || st.epoch > o.epochs) throw Error("retina train: resuming after epoch " + num(st.epoch) + " of " + num(o.epochs));
  if (!m.forward_taken() && !m.from_weights() && st.epoch == 0) m.set_mean_rates(tr.counts.leftCols(fit).rowwise().mean());

  ad::AdamW& opt = st.opt;
  opt.weight_decay = o.weight_decay;
  const std::vector<ad::Param*> params = m.params();
  std::vector<Mat>& best = st.best;
  TrainResult& result = st.result;
  double& best_nll = st.best_nll;
  const auto start = std::chrono::steady_clock::now();
  long long step = static_cast<long long>(st.epoch) * steps_per_epoch;
  for (int epoch = st.epoch + 1; epoch <= o.epochs; ++epoch) {
    // This epoch's order of the chunks: sorted by a seeded normal per chunk.
    std::vector<double> key(starts.size());
    noise::normals(o.seed, noise::Source::Init, 0x52455400u, static_cast<std::uint32_t>(epoch), 0, static_cast<int>(key.size()), key.data());
    std::vector<int> order(starts.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return key[a] < key[b]; });
    double nll_sum = 0;
    for (int k = 0; k < steps_per_epoch; ++k, ++step) {
      const int B = std::min<int>(o.batch, static_cast<int>(order.size()) - k * o.batch), L = o.chunk;
      Mat x(static_cast<Eigen::Index>(B) * L, static_cast<Eigen::Index>(s.height) * s.width), y(static_cast<Eigen::Index>(B) * L, s.cells);
      std::vector<char> use(static_cast<std::size_t>(B) * L);
      for (int b = 0; b < B; ++b) {
        const int a = starts[order[static_cast<std::size_t>(k * o.batch + b)]];
        x.middleRows(static_cast<Eigen::Index>(b) * L, L) = frames_of(tr, a, L);
        y.middleRows(static_cast<Eigen::Index>(b) * L, L) = tr.counts.middleCols(a, L).transpose();
        for (int t = 0; t < L; ++t) use[static_cast<std::size_t>(b) * L + t] = t >= warm;
      }
      if (step == 0 && !m.from_weights()) m.match_contrast(x, L);
      for (ad::Param* p : params) p->zero_grad();
      Tape t;
      const Var loss = m.loss(t, t.constant(x), y, use, L, o.seed, static_cast<std::uint64_t>(step));
      t.backward(loss);
      nll_sum += t.value(loss)(0, 0);
      ad::clip_grad_norm(params, 5.0);
      opt.step(params, ad::warmup_cosine(step, total, o.warmup, o.lr));
      m.keep_contractive();
      if (o.progress) o.progress(epoch, k + 1, steps_per_epoch);
    }
    EpochRecord rec;
    rec.epoch = epoch;
    rec.train_nll = nll_sum / steps_per_epoch;
    const Scores vs = score(val, m.predict(val), warm);
    rec.val_cc = vs.cc_mean;
    rec.val_nll = vs.nll_mean;
    rec.seconds = st.seconds_before + std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    result.epochs.push_back(rec);
    if (rec.val_nll < best_nll) {
      best_nll = rec.val_nll, result.best_epoch = epoch;
      best.clear();
      for (ad::Param* p : params) best.push_back(p->value);
    }
    st.epoch = epoch;
    if (log) log(rec);
  }
  for (std::size_t i = 0; i < best.size(); ++i) params[i]->value = best[i];  // none when every epoch's score was NaN
  return result;
}

}  // namespace aoc::retina
