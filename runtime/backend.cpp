#include "runtime/backend.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <functional>
#include <set>

#include "compiler/verify.hpp"
#include "runtime/cuda_backend.hpp"
#include "sim/error.hpp"
#include "sim/hardware.hpp"
#include "sim/noise.hpp"
#include "sim/quantize.hpp"
#include "sim/stages.hpp"

namespace aoc {

namespace {

using ir::OpContext;
using ir::Tensor;

std::uint32_t op_key(const std::string& name) {  // FNV-1a: a stable number per op for the noise keys
  std::uint32_t h = 2166136261u;
  for (unsigned char c : name) h = (h ^ c) * 16777619u;
  return h;
}

struct Counters {
  std::atomic<long long> dac{0}, adc{0}, dac_clipped{0}, adc_clipped{0};
};

// The tile loop both backends share: y = sum over tiles of x[cols of the tile] W_tile^T. `tile_w`
// gives a tile's matrix (rows x cols, row-major); `partial` may change a tile's partial sums before
// they are added (the sim converts them when the hardware adds them digitally).
template <class TileW, class Partial>
Tensor tiled_product(const ir::OpticalPlan& plan, const Tensor& x, int threads, TileW&& tile_w, Partial&& partial) {
  if (x.shape.empty() || x.shape.back() != plan.cols)
    throw Error("run: op '" + plan.op + "': input has last dim " + (x.shape.empty() ? std::string("none") : std::to_string(x.shape.back())) +
                ", the matrix has " + std::to_string(plan.cols) + " columns");
  Tensor y;
  y.shape = x.shape;
  y.shape.back() = plan.rows;
  const std::int64_t R = plan.cols == 0 ? 0 : static_cast<std::int64_t>(x.data.size()) / plan.cols;
  y.data.assign(static_cast<std::size_t>(R * plan.rows), 0.0);
  for (std::size_t k = 0; k < plan.tiles.size(); ++k) {
    const ir::Tile& t = plan.tiles[k];
    const std::vector<double>& W = tile_w(k);
#pragma omp parallel for num_threads(threads) schedule(static)
    for (std::int64_t r = 0; r < R; ++r) {
      const double* xr = x.data.data() + r * plan.cols + t.col0;
      double* yr = y.data.data() + r * plan.rows + t.row0;
      std::vector<double> part(static_cast<std::size_t>(t.rows));
      for (std::int64_t i = 0; i < t.rows; ++i) {
        const double* wi = W.data() + i * t.cols;
        double acc = 0;
        for (std::int64_t j = 0; j < t.cols; ++j) acc += wi[j] * xr[j];
        part[static_cast<std::size_t>(i)] = acc;
      }
      partial(k, r, part);
      for (std::int64_t i = 0; i < t.rows; ++i) yr[i] += part[static_cast<std::size_t>(i)];
    }
  }
  return y;
}

// The exact tile matrices of a plan, cut from the weight.
std::vector<double> exact_tile(const ir::OpticalPlan& plan, const Tensor& w, const ir::Tile& t) {
  std::vector<double> m(static_cast<std::size_t>(t.rows * t.cols));
  for (std::int64_t i = 0; i < t.rows; ++i)
    for (std::int64_t j = 0; j < t.cols; ++j) m[static_cast<std::size_t>(i * t.cols + j)] = plan.weight_at(w, t.row0 + i, t.col0 + j);
  return m;
}

class CpuHooks : public ir::Hooks {
 protected:
  virtual void saw(const ir::Op&, const Tensor&) const {}

 public:
  CpuHooks(const ir::Program& p, int threads) : p_(p), threads_(threads) {}
  Tensor optical(const ir::Op& op, const Tensor& x, const Tensor& w, const OpContext&) const override {
    const ir::OpticalPlan* plan = p_.plan(op.name);
    if (!plan) throw Error("run: optical op '" + op.name + "' has no plan");
    std::vector<double> tile;
    return tiled_product(
        *plan, x, threads_, [&](std::size_t k) -> const std::vector<double>& { return tile = exact_tile(*plan, w, plan->tiles[k]); },
        [](std::size_t, std::int64_t, std::vector<double>&) {});
  }
  Tensor convert(const ir::Op& op, const Tensor& x, const OpContext&) const override {
    saw(op, x);
    return x;
  }

 private:
  const ir::Program& p_;
  int threads_;
};

// The reference, noting the largest |value| each Convert sees.
class CalibrationHooks : public CpuHooks {
 public:
  using CpuHooks::CpuHooks;
  mutable std::map<std::string, double> largest;

 protected:
  void saw(const ir::Op& op, const Tensor& x) const override {
    double& m = largest[op.name];
    for (double v : x.data) m = std::max(m, std::fabs(v));
  }
};

class SimHooks : public ir::Hooks {
 public:
  SimHooks(const ir::Program& p, const Hardware& hw, const BackendOptions& o) : p_(p), o_(o), hw_(hw), chain_(CoreConfig::twin_defaults(hw)) {
    chain_.gain = GainMode::Explicit;  // output = x W exactly when every non-ideality is off
    chain_.beta = {1.0};
    chain_.led = LedModel::Linear;
    chain_.closed_loop = false;
    if (o.noise) {
      if (!hw.noise) throw Error(hw.path + ": noise: missing (needed for a noisy run; run without noise to skip it)");
      noise_ = *hw.noise;
    }
    for (const ir::OpticalPlan& plan : p.optical) {
      if (plan.column_blocks() > 1 && !p.target.analog_partial_sums && o.quantize && p.target.adc_bits > 0) digital_sums_.insert(plan.op);
    }
  }

  Tensor optical(const ir::Op& op, const Tensor& x, const Tensor& w, const OpContext& ctx) const override {
    const ir::OpticalPlan* plan = p_.plan(op.name);
    if (!plan) throw Error("run: optical op '" + op.name + "' has no plan");
    const std::uint32_t key = op_key(op.name);
    std::vector<std::vector<double>> offsets(plan->tiles.size());  // the optical chain's constant output per tile
    const bool codes = o_.quantize && !plan->codes.empty();
    const bool sums = digital_sums_.count(op.name) > 0;
    const UniformConverter adc{p_.target.adc_lo, p_.target.adc_hi, p_.target.adc_bits};
    std::vector<double> tile;
    Tensor y = tiled_product(
        *plan, x, o_.threads,
        [&](std::size_t k) -> const std::vector<double>& {
          const ir::Tile& t = plan->tiles[k];
          tile = exact_tile(*plan, w, t);
          for (std::int64_t i = 0; i < t.rows; ++i)
            for (std::int64_t j = 0; j < t.cols; ++j) {
              double& v = tile[static_cast<std::size_t>(i * t.cols + j)];
              if (codes) v = plan->codes[static_cast<std::size_t>((t.row0 + i) * plan->cols + t.col0 + j)] * plan->code_step[k];
              // The SLM's fixed pattern: one relative error per pixel per programming (the tile's load).
              if (noise_.slm_fixed_pattern_sigma > 0)
                v *= 1 + noise_.slm_fixed_pattern_sigma *
                             noise::normal(o_.seed, noise::Source::SlmPattern, key + static_cast<std::uint32_t>(k),
                                           static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(j));
            }
          if (o_.optics) through_chain(t, tile, offsets[k]);
          return tile;
        },
        [&](std::size_t k, std::int64_t r, std::vector<double>& part) {
          const ir::Tile& t = plan->tiles[k];
          for (std::size_t i = 0; i < offsets[k].size(); ++i) part[i] += offsets[k][i];
          // Receiver noise on every detected output of every tile, per iteration.
          if (noise_.thermal_sigma > 0)
            for (std::int64_t i = 0; i < t.rows; ++i)
              part[static_cast<std::size_t>(i)] +=
                  noise_.thermal_sigma * noise::normal(o_.seed, noise::Source::Thermal, key ^ step_key(ctx),
                                                       row_key(r, ctx), static_cast<std::uint32_t>(t.row0 + i));
          if (sums)  // each tile's partial sums leave through an ADC and are added digitally
            for (double& v : part) v = count_convert(adc, v, false);
        });
    return y;
  }

  Tensor convert(const ir::Op& op, const Tensor& x, const OpContext&) const override {
    const std::optional<UniformConverter> c = converter_of(op);
    if (!o_.quantize || !c) return x;
    const bool to_analog = ir::attr_string(op, "to", "") == "analog";
    Tensor y = x;
    for (double& v : y.data) v = count_convert(*c, v, to_analog);
    return y;
  }

  mutable Counters counters;

 private:
  const ir::Program& p_;
  const BackendOptions& o_;
  const Hardware& hw_;
  CoreConfig chain_;
  NoiseSpec noise_;
  std::set<std::string> digital_sums_;

  // The tile as the optics compute it: the chain is affine in the LED drives, g(x) = x F + c, so F
  // and c follow from the drives 0 and each of the tile's channels lit alone.
  void through_chain(const ir::Tile& t, std::vector<double>& tile, std::vector<double>& offset) const {
    const std::int64_t C = hw_.channels;
    if (t.core_row0 + t.rows > C || t.core_col0 + t.cols > C)
      throw Error("run: --optics: a tile of " + std::to_string(t.rows) + " x " + std::to_string(t.cols) + " does not fit the " +
                  std::to_string(C) + " channels of " + hw_.name + " (compile with tiles of the machine's size)");
    // The tile where the plan puts it in the core (AOC convention: W(LED channel, detector)); the
    // other tiles of its programming are dark while it runs and are left out of the frame.
    MatrixXdR W = MatrixXdR::Zero(C, C);
    for (std::int64_t i = 0; i < t.rows; ++i)
      for (std::int64_t j = 0; j < t.cols; ++j) W(t.core_col0 + j, t.core_row0 + i) = tile[static_cast<std::size_t>(i * t.cols + j)];
    offset.assign(static_cast<std::size_t>(t.rows), 0.0);
    if (W.cwiseAbs().maxCoeff() == 0) return;
    MatrixXdR drives = MatrixXdR::Zero(t.cols + 1, C);  // no light, then each of the tile's channels alone
    for (std::int64_t j = 0; j < t.cols; ++j) drives(1 + j, t.core_col0 + j) = 1.0;
    const MatrixXdR g = optical_chain(hw_, chain_, W, drives, drives);
    for (std::int64_t i = 0; i < t.rows; ++i) {
      const std::int64_t d = t.core_row0 + i;
      offset[static_cast<std::size_t>(i)] = g(0, d);
      for (std::int64_t j = 0; j < t.cols; ++j) tile[static_cast<std::size_t>(i * t.cols + j)] = g(1 + j, d) - g(0, d);
    }
  }

  static std::uint32_t step_key(const OpContext& c) { return static_cast<std::uint32_t>(c.iteration + 1) * 0x9E3779B9u; }
  static std::uint32_t row_key(std::int64_t r, const OpContext& c) {
    return static_cast<std::uint32_t>(r) + static_cast<std::uint32_t>(c.token + 1) * 0x85EBCA6Bu;
  }

  double count_convert(const UniformConverter& c, double v, bool dac) const {
    const bool clipped = v < c.lo || v > c.hi;
    (dac ? counters.dac : counters.adc) += 1;
    if (clipped) (dac ? counters.dac_clipped : counters.adc_clipped) += 1;
    return c.quantize(v);
  }
};

}  // namespace

ProgramResult run_with_hooks(const ir::Program& p, const std::map<std::string, Tensor>& inputs, const BackendOptions& o,
                             const ir::Hooks& hooks) {
  if (p.weights.empty() && !p.graph.weights.empty())
    throw Error("run: the program has no weights (compiled from a shapes-only graph): it can be estimated, not run");
  ir::InterpretOptions io;
  io.threads = o.threads;
  io.trace = o.trace;
  io.hooks = &hooks;
  io.mode = o.mode;
  ir::InterpretResult r = ir::interpret(p.graph, p.weights, inputs, io);
  ProgramResult res;
  res.values = std::move(r.values);
  res.fixed_points = std::move(r.fixed_points);
  return res;
}

namespace {

class CpuBackend : public Backend {
 public:
  std::string name() const override { return "cpu"; }
  ProgramResult run(const ir::Program& p, const std::map<std::string, Tensor>& inputs, const BackendOptions& o) const override {
    return run_with_hooks(p, inputs, o, CpuHooks(p, o.threads));
  }
};

class SimBackend : public Backend {
 public:
  explicit SimBackend(const Hardware& hw) : hw_(hw) {}
  std::string name() const override { return "sim"; }
  ProgramResult run(const ir::Program& p, const std::map<std::string, Tensor>& inputs, const BackendOptions& o) const override {
    if (hw_.name != p.target.hardware)
      throw Error("run: the program was compiled for " + p.target.hardware + ", the hardware given is " + hw_.name);
    SimHooks hooks(p, hw_, o);
    ProgramResult res = run_with_hooks(p, inputs, o, hooks);
    res.counters = {hooks.counters.dac, hooks.counters.adc, hooks.counters.dac_clipped, hooks.counters.adc_clipped};
    return res;
  }

 private:
  Hardware hw_;
};

}  // namespace

int calibrate_converters(ir::Program& p, const std::map<std::string, ir::Tensor>& inputs, double margin, ir::Mode mode) {
  if (!(margin > 0)) throw Error("calibrate: the margin must be > 0");
  CalibrationHooks hooks(p, 1);
  BackendOptions o;
  o.mode = mode;
  run_with_hooks(p, inputs, o, hooks);
  int set = 0;
  const std::function<void(std::vector<ir::Op>&)> walk = [&](std::vector<ir::Op>& ops) {
    for (ir::Op& op : ops) {
      if (op.body) walk(op.body->ops);
      if (op.kind != ir::OpKind::Convert || !op.attrs.count("bits")) continue;
      const auto it = hooks.largest.find(op.name);
      if (it == hooks.largest.end() || !(it->second > 0)) continue;
      op.attrs["lo"] = -margin * it->second;
      op.attrs["hi"] = margin * it->second;
      ++set;
    }
  };
  walk(p.graph.ops);
  return set;
}

std::optional<UniformConverter> converter_of(const ir::Op& op) {
  if (op.kind != ir::OpKind::Convert || !op.attrs.count("bits")) return std::nullopt;
  return UniformConverter{ir::attr_number(op, "lo", 0), ir::attr_number(op, "hi", 1), static_cast<int>(ir::attr_int(op, "bits", 8))};
}

const std::vector<std::string>& backend_names() {
  static const std::vector<std::string> n = {"cpu", "sim", "cuda", "cuda-f32"};
  return n;
}

std::unique_ptr<Backend> make_backend(const std::string& name, const Hardware* hw) {
  if (name == "cpu") return std::make_unique<CpuBackend>();
  if (name == "sim") {
    if (!hw) throw Error("backend sim: needs the hardware the program was compiled for");
    return std::make_unique<SimBackend>(*hw);
  }
  if (name == "cuda" || name == "cuda-f32") return make_cuda_backend(name == "cuda-f32");
  throw Error("unknown backend \"" + name + "\" (backends: cpu, sim, cuda, cuda-f32)");
}

#ifndef AOC_HAVE_CUDA
// A build without AOC_CUDA: the cuda backends exist by name and say why they cannot run.
bool cuda_built() { return false; }
std::string cuda_unavailable() { return "aoc was built without CUDA (AOC_CUDA=OFF or no nvcc)"; }
std::string cuda_device_description() { return ""; }
std::unique_ptr<Backend> make_cuda_backend(bool f32) {
  throw Error("backend " + std::string(f32 ? "cuda-f32" : "cuda") + ": " + cuda_unavailable());
}
#endif

}  // namespace aoc
