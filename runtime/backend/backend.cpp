#include "runtime/backend/backend.hpp"

#include <algorithm>
#include <chrono>
#include <atomic>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <set>
#include <tuple>

#include "compiler/kernels.hpp"
#include "compiler/passes.hpp"
#include "compiler/verify.hpp"
#include "runtime/backend/cuda_backend.hpp"
#include "sim/error.hpp"
#include "sim/hardware.hpp"
#include "sim/noise.hpp"
#include "sim/programming.hpp"
#include "sim/quantize.hpp"
#include "sim/stages.hpp"
#include "sim/tile.hpp"
#include "runtime/run/loop_run.hpp"

namespace aoc {

namespace {

using ir::OpContext;
using ir::Tensor;

struct Counters {
  std::atomic<long long> dac{0}, adc{0}, dac_clipped{0}, adc_clipped{0};
};

// The zero result of x's product with a plan's matrix ([..., rows] for x [..., cols]), and its row count.
Tensor product_result(const ir::OpticalPlan& plan, const Tensor& x, std::int64_t& R) {
  if (x.shape.empty() || x.shape.back() != plan.cols)
    throw Error("run: op '" + plan.op + "': input has last dim " + (x.shape.empty() ? std::string("none") : std::to_string(x.shape.back())) +
                ", the matrix has " + std::to_string(plan.cols) + " columns");
  Tensor y;
  y.shape = x.shape;
  y.shape.back() = plan.rows;
  R = plan.cols == 0 ? 0 : static_cast<std::int64_t>(x.data.size()) / plan.cols;
  y.data.assign(static_cast<std::size_t>(R * plan.rows), 0.0);
  return y;
}

// A block's values on the SLM code grid (all-zero stays zero).
MatrixXdR quantized_block(const MatrixXdR& B, int bits) {
  return B.cwiseAbs().maxCoeff() == 0 ? B : quantize_weights(B, bits).values();
}

class CpuHooks : public ir::Hooks {
 protected:
  virtual void saw(const ir::Op&, const Tensor&) const {}

 public:
  // A MatMul's weight ([in, out]) is laid out once as [out, in], the rows the products stream.
  CpuHooks(const ir::Program& p, int threads) : p_(p), threads_(threads) {
    for (const ir::OpticalPlan& plan : p.optical) {
      const auto w = p.weights.find(plan.weight);
      if (!plan.aoc_layout || w == p.weights.end() || static_cast<std::int64_t>(w->second.data.size()) != plan.weights()) continue;
      std::vector<double>& t = transposed_[plan.op];
      t.resize(static_cast<std::size_t>(plan.weights()));
      for (std::int64_t r = 0; r < plan.rows; ++r)
        for (std::int64_t c = 0; c < plan.cols; ++c) t[static_cast<std::size_t>(r * plan.cols + c)] = plan.weight_at(w->second, r, c);
    }
  }
  // The exact product over the whole matrix: its tiles cover it once, and each element is one dot
  // product in kernels::dot_rows' order, whatever the tiles, the batch or the threads.
  Tensor optical(const ir::Op& op, const Tensor& x, const Tensor& w, const OpContext&) const override {
    const ir::OpticalPlan* plan = p_.plan(op.name);
    if (!plan) throw Error("run: optical op '" + op.name + "' has no plan");
    if (static_cast<std::int64_t>(w.data.size()) != plan->weights())
      throw Error("run: op '" + op.name + "': its weight has " + std::to_string(w.data.size()) + " elements, the plan " + std::to_string(plan->weights()));
    std::int64_t R = 0;
    Tensor y = product_result(*plan, x, R);
    const double* W = w.data.data();
    if (plan->aoc_layout) {
      const auto t = transposed_.find(op.name);
      if (t == transposed_.end()) throw Error("run: op '" + op.name + "': weight '" + plan->weight + "' is not the program's");
      W = t->second.data();
    }
    ir::kernels::dot_rows(x.data.data(), R, W, plan->rows, plan->cols, y.data.data(), threads_);
    return y;
  }
  Tensor convert(const ir::Op& op, const Tensor& x, const OpContext&) const override {
    saw(op, x);
    return x;
  }

 private:
  const ir::Program& p_;
  int threads_;
  std::map<std::string, std::vector<double>> transposed_;  // per MatMul op: its weight as [out, in]
};

// The largest |s| over R rows of x (row stride ld) of a tile's partial sums s[i] = sum over c of
// x[c] w[c * rp + i] (w's columns zero-padded to rp, a multiple of 8), each sum in column order with
// a rounding per product and per add on every CPU (contracted into FMAs they would round where GCC's
// tuning chose: a converter's range would depend on the machine that calibrated it). Eight rows of
// the tile side by side for four rows of x, in registers: the sums run on vectors.
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")
double tile_largest(const double* x, std::int64_t ld, std::int64_t R, const double* w, std::int64_t rows, std::int64_t cols) {
  using v8 = double __attribute__((vector_size(64)));  // two AVX2 vectors where there is no AVX-512
  const std::int64_t rp = (rows + 7) / 8 * 8;
  double m = 0;
  const auto largest = [&](v8 a, std::int64_t n) {
    for (std::int64_t l = 0; l < n; ++l) m = std::max(m, std::fabs(a[l]));
  };
  for (std::int64_t i0 = 0; i0 < rows; i0 += 8) {
    const std::int64_t n = std::min<std::int64_t>(8, rows - i0);
    std::int64_t r = 0;
    for (; r + 4 <= R; r += 4) {
      v8 a0 = {}, a1 = {}, a2 = {}, a3 = {};
      const double* x0 = x + r * ld;
      for (std::int64_t c = 0; c < cols; ++c) {
        v8 wc;
        std::memcpy(&wc, w + c * rp + i0, sizeof wc);
        a0 += x0[c] * wc, a1 += x0[ld + c] * wc, a2 += x0[2 * ld + c] * wc, a3 += x0[3 * ld + c] * wc;
      }
      largest(a0, n), largest(a1, n), largest(a2, n), largest(a3, n);
    }
    for (; r < R; ++r) {
      v8 a = {};
      for (std::int64_t c = 0; c < cols; ++c) {
        v8 wc;
        std::memcpy(&wc, w + c * rp + i0, sizeof wc);
        a += x[r * ld + c] * wc;
      }
      largest(a, n);
    }
  }
  return m;
}
#pragma GCC pop_options

// The reference, noting the largest |value| each Convert sees.
class CalibrationHooks : public CpuHooks {
 public:
  CalibrationHooks(const ir::Program& p, int threads) : CpuHooks(p, threads), prog_(p) {}
  mutable std::map<std::string, double> largest;
  mutable std::map<std::string, std::vector<double>> channel_largest;  // per Convert: per channel (last axis)
  mutable std::map<std::string, double> largest_sum;    // per split matrix: the largest |partial sum| of a tile
  mutable std::map<std::string, double> largest_input;  // per optical op: the largest |value| its LED drivers take

  // The exact product, and for a matrix split over column blocks the largest partial sum a tile
  // hands its ADC where the machine adds them digitally.
  Tensor optical(const ir::Op& op, const Tensor& x, const Tensor& w, const OpContext& ctx) const override {
    Tensor y = CpuHooks::optical(op, x, w, ctx);
    const ir::OpticalPlan* plan = prog_.plan(op.name);
    double& in = largest_input[op.name];
    for (double v : x.data) in = std::max(in, std::fabs(v));
    if (plan->column_blocks() > 1) {
      const std::int64_t R = static_cast<std::int64_t>(x.data.size()) / plan->cols;
      double& m = largest_sum[op.name];
      std::vector<std::vector<double>>& blocks = tile_blocks_[op.name];
      if (blocks.empty())
        for (const ir::Tile& t : plan->tiles) {
          const std::int64_t rp = (t.rows + 7) / 8 * 8;
          std::vector<double>& b = blocks.emplace_back(static_cast<std::size_t>(rp * t.cols), 0.0);
          for (std::int64_t c = 0; c < t.cols; ++c)
            for (std::int64_t i = 0; i < t.rows; ++i) b[static_cast<std::size_t>(c * rp + i)] = plan->weight_at(w, t.row0 + i, t.col0 + c);
        }
      for (std::size_t k = 0; k < plan->tiles.size(); ++k) {
        const ir::Tile& t = plan->tiles[k];
        m = std::max(m, tile_largest(x.data.data() + t.col0, plan->cols, R, blocks[k].data(), t.rows, t.cols));
      }
    }
    return y;
  }

 protected:
  void saw(const ir::Op& op, const Tensor& x) const override {
    double& m = largest[op.name];
    for (double v : x.data) m = std::max(m, std::fabs(v));
    const std::size_t n = x.shape.empty() ? 1 : static_cast<std::size_t>(x.shape.back());
    std::vector<double>& c = channel_largest[op.name];
    c.resize(n, 0.0);
    for (std::size_t i = 0; n && i < x.data.size(); ++i) c[i % n] = std::max(c[i % n], std::fabs(x.data[i]));
  }

 private:
  const ir::Program& prog_;
  // per split op: each tile's weights, column by column (one run's weights do not change)
  mutable std::map<std::string, std::vector<std::vector<double>>> tile_blocks_;
};

// The simulated machine: one programmed OpticalTile (sim/tile.hpp) per tile of every plan, made
// once per run (the run's weight loads), read once per product and fixed-point iteration, in T.
template <class T>
class SimHooks : public ir::Hooks {
 public:
  SimHooks(const ir::Program& p, const Hardware& hw, const BackendOptions& o) : p_(p), o_(o), hw_(hw), chain_(program_chain(hw)) {
    if (o.noise && !hw.noise) throw Error(hw.path + ": noise: missing (needed for a noisy run; run without noise to skip it)");
    if (o.quantize && hw.converters) dac_bits_ = hw.converters->dac_bits, adc_bits_ = hw.converters->adc_bits;
    else dac_bits_ = p.target.dac_bits, adc_bits_ = p.target.adc_bits;
    int max_iter = 1;
    ir::walk(p.graph.ops, [&](const ir::Op& op, int) {
      if (op.kind == ir::OpKind::FixedPoint) max_iter = std::max<int>(max_iter, static_cast<int>(ir::attr_int(op, "max_iter")));
    });
    const NoiseRun clock = o.noise ? noise_run(hw, o.seed, max_iter) : NoiseRun{};  // iterations and solve slots
    std::uint32_t stream = 1;  // 0 is the loop core's
    struct Programming {
      const ir::OpticalPlan* plan;
      std::size_t k;
      const Tensor* weight;
      OpticalTile<T>* tile;
    };
    std::vector<Programming> jobs;
    for (const ir::OpticalPlan& plan : p.optical) {
      if (plan.column_blocks() > 1 && !p.target.analog_partial_sums && o.quantize && adc_bits_ > 0) digital_sums_.insert(plan.op);
      const auto wt = p.weights.find(plan.weight);
      if (wt == p.weights.end()) throw Error("run: weight '" + plan.weight + "' of op '" + plan.op + "' is missing");
      std::vector<std::unique_ptr<OpticalTile<T>>>& tiles = tiles_[plan.op];
      std::vector<std::vector<int>>& at = input_at_[plan.op];
      for (std::size_t k = 0; k < plan.tiles.size(); ++k) {
        const ir::Tile& t = plan.tiles[k];
        at.emplace_back();
        if (!p.target.dark_leds.empty())
          for (int led : ir::tile_leds(p.target, t)) at.back().push_back(led - static_cast<int>(t.core_col0));
        auto tile = std::make_unique<OpticalTile<T>>(hw_, chain_, o.optics ? Optics::Calibrated : Optics::Ideal);
        tile->set_light_map(o.light_map);
        tile->set_drive_rails(o.quantize);
        if (o.noise) {
          TileNoise n;
          n.spec = *hw.noise;
          n.seed = o.seed;
          n.program_seed = o.program_seed;
          n.verify_tolerance = o.verify_tolerance, n.verify_rounds = o.verify_rounds, n.zero_reads = o.zero_reads;
          n.after_programming_us = o.after_programming_us;
          n.zero_every_us = o.zero_every_us;
          n.stream = stream;
          n.channel0 = static_cast<std::uint32_t>(t.module * hw.channels + t.core_row0);
          n.loop_period_us = clock.loop_period_us;
          n.slot_ticks = std::max<std::int64_t>(1, std::llround(clock.sample_spacing_us / clock.loop_period_us));
          tile->set_noise(n);
        }
        ++stream;
        jobs.push_back({&plan, k, &wt->second, tile.get()});
        tiles.push_back(std::move(tile));
      }
    }
    // Tiles are programmed independently (each its own pattern and chain), so in parallel.
    std::vector<std::string> errors(jobs.size());
#pragma omp parallel for num_threads(o.threads) schedule(dynamic)
    for (std::size_t j = 0; j < jobs.size(); ++j) {
      const Programming& g = jobs[j];
      const ir::Tile& t = g.plan->tiles[g.k];
      try {
        // What the SLM holds: on the machine as measured, the values compensated for its chain
        // (where the compensate pass ran) or their codes, behind the detector gains it trimmed;
        // with ideal optics the weights themselves or their codes, untrimmed (a compensated
        // program's codes are the compensated values': the weights' codes are cut here by the same
        // quantizer).
        const ir::OpticalPlan& plan = *g.plan;
        const bool codes = o.quantize && !plan.codes.empty();
        const bool trimmed = o.optics && plan.compensated();
        const Eigen::VectorXd gain = trimmed ? Eigen::Map<const Eigen::VectorXd>(plan.compensation[g.k].gain.data(), t.rows) : Eigen::VectorXd();
        const MatrixXdR W = !codes                               ? ir::tile_block(plan, t, *g.weight, o.optics)
                            : o.optics || !plan.compensated()    ? ir::tile_code_block(plan, g.k)
                            : quantized_block(ir::tile_block(plan, t, *g.weight, false), plan.slm_bits);
        g.tile->program(ir::spread_over_leds(p.target, t, W), static_cast<int>(t.core_col0), static_cast<int>(t.core_row0), 0,
                        trimmed ? &gain : nullptr);
      } catch (const std::exception& e) {
        errors[j] = e.what();
      }
    }
    for (const std::string& e : errors)
      if (!e.empty()) throw Error(e);
  }

  long long slm_rewrites() const {
    long long n = 0;
    for (const auto& [op, ts] : tiles_)
      for (const auto& t : ts) n += t->rewrites();
    return n;
  }

  // Tiles programmed, and of those, with half-precision light maps.
  std::pair<int, int> light_maps() const {
    int n = 0, half = 0;
    for (const auto& [op, ts] : tiles_)
      for (const auto& t : ts) ++n, half += t->half_light_map();
    return {n, half};
  }

  Tensor optical(const ir::Op& op, const Tensor& x, const Tensor&, const OpContext& ctx) const override {
    const ir::OpticalPlan* plan = p_.plan(op.name);
    if (!plan) throw Error("run: optical op '" + op.name + "' has no plan");
    std::int64_t R = 0;
    Tensor y = product_result(*plan, x, R);
    const auto& tiles = tiles_.at(op.name);
    const auto& input_at = input_at_.at(op.name);
    const bool sums = digital_sums_.count(op.name) > 0;
    const UniformConverter adc = plan->sum_range > 0 ? UniformConverter{-plan->sum_range, plan->sum_range, adc_bits_}
                                                     : UniformConverter{p_.target.adc_lo, p_.target.adc_hi, adc_bits_};
    // Each row is one read in its own slot of the machine's clock: (row, token) in sequential mode,
    // the row (batch x token) at once in simultaneous mode: the same slot for the same sample and
    // token. Rows count from the whole input's first sample (axis 0 is the batch: R / x.shape[0]
    // rows per sample), so a sample's slots do not depend on how the batch was split.
    const std::int64_t per_sample = x.shape.size() >= 2 && x.shape[0] > 0 && R % x.shape[0] == 0 ? R / x.shape[0] : R;
    const std::int64_t first = static_cast<std::int64_t>(o_.first_sample) * per_sample;
    const std::int64_t last_slot = (first + R) * (ctx.token >= 0 ? ctx.tokens : 1);
    if (last_slot > std::numeric_limits<int>::max())
      throw Error("run: the first sample " + std::to_string(o_.first_sample) + " and " + std::to_string(R) +
                  " rows put this op's noise slots past 2^31 (use a smaller --first-sample)");
    thread_local std::vector<int> slots;
    slots.resize(static_cast<std::size_t>(R));
    for (std::int64_t r = 0; r < R; ++r) slots[r] = static_cast<int>(ctx.token >= 0 ? (first + r) * ctx.tokens + ctx.token : first + r);
    const StepContext sc{ctx.iteration, slots.data()};
    constexpr int kRows = 64;
    const std::int64_t blocks = (R + kRows - 1) / kRows;
    const std::size_t n_tiles = plan->tiles.size();
    for (const auto& tile : tiles) tile->prepare_reads(static_cast<int>(R));
    // The LED drivers take each value as a fraction of their range (LedModel::Driver); the outputs
    // come back in values.
    const double range = plan->drive_range_on(p_.target), per_range = 1.0 / range;
    auto rows_of = [&](std::int64_t b) { return static_cast<int>(std::min<std::int64_t>(kRows, R - b * kRows)); };
    // Tile k's inputs of block b (kRows x its ld_in) in this thread's buffer, then room for its
    // read's scratch: reused across reads, no allocation in the loop.
    auto inputs = [&](std::size_t k, std::int64_t b) {
      const ir::Tile& t = plan->tiles[k];
      const OpticalTile<T>& tile = *tiles[k];
      const int ldi = tile.ld_in(), rows = rows_of(b);
      thread_local AlignedVector<T> buf;
      const std::size_t need = static_cast<std::size_t>(kRows) * ldi + tile.scratch_size(kRows);
      if (buf.size() < need) buf.resize(need);
      T* in = buf.data();
      std::fill(in, in + static_cast<std::size_t>(rows) * ldi, T(0));
      const std::vector<int>& at = input_at[k];  // past the dark LEDs (empty: contiguous)
      for (int r = 0; r < rows; ++r) {
        const double* xr = x.data.data() + (b * kRows + r) * plan->cols + t.col0;
        T* ir = in + static_cast<std::size_t>(r) * ldi;
        if (at.empty())
          for (std::int64_t j = 0; j < t.cols; ++j) ir[j] = static_cast<T>(xr[j] * per_range);
        else
          for (std::int64_t j = 0; j < t.cols; ++j) ir[at[static_cast<std::size_t>(j)]] = static_cast<T>(xr[j] * per_range);
      }
      return in;
    };
    // Tile k's read of block b into out (kRows x its ld_out); or the same read in steps: its drives
    // into L, then (with its light) its outputs [j0, j1) into out.
    auto read = [&](std::size_t k, std::int64_t b, T* out) {
      T* in = inputs(k, b);
      tiles[k]->read(in, rows_of(b), sc, static_cast<int>(b * kRows), kern::Epilogue<T>{}, out, in + static_cast<std::size_t>(kRows) * tiles[k]->ld_in());
    };
    auto emit = [&](std::size_t k, std::int64_t b, T* L) {
      T* in = inputs(k, b);
      tiles[k]->emit(in, rows_of(b), sc, static_cast<int>(b * kRows), L, in + static_cast<std::size_t>(kRows) * tiles[k]->ld_in());
    };
    auto sense = [&](std::size_t k, std::int64_t b, const T* L, const T* light, int j0, int j1, T* out) {
      const OpticalTile<T>& tile = *tiles[k];
      thread_local AlignedVector<T> buf;
      if (buf.size() < tile.scratch_size(kRows)) buf.resize(tile.scratch_size(kRows));
      tile.sense(L, light, rows_of(b), sc, static_cast<int>(b * kRows), kern::Epilogue<T>{}, j0, j1, out, buf.data());
    };
    // y += tile k's rows of block b, tile after tile: the same sums in the same order whatever ran
    // the reads. Each tile's partial sums leave through an ADC and are added digitally.
    // A compensated tile's chain offset is taken out at its detectors, before their ADC.
    const bool offsets = o_.optics && plan->compensated();
    auto add = [&](std::size_t k, std::int64_t b, const T* out) {
      const ir::Tile& t = plan->tiles[k];
      const int ldo = tiles[k]->ld_out();
      const std::int64_t r0 = b * kRows;
      const double* off = offsets ? plan->compensation[k].offset.data() : nullptr;
      for (int r = 0; r < rows_of(b); ++r) {
        double* yr = y.data.data() + (r0 + r) * plan->rows + t.row0;
        const T* o = out + static_cast<std::size_t>(r) * ldo;
        if (!sums) {
          if (off)
            for (std::int64_t i = 0; i < t.rows; ++i) yr[i] += range * (static_cast<double>(o[i]) - off[i]);
          else
            for (std::int64_t i = 0; i < t.rows; ++i) yr[i] += range * static_cast<double>(o[i]);
          continue;
        }
        thread_local std::vector<double> part;
        part.resize(static_cast<std::size_t>(t.rows));
        for (std::int64_t i = 0; i < t.rows; ++i) part[static_cast<std::size_t>(i)] = range * (static_cast<double>(o[i]) - (off ? off[i] : 0.0));
        counters.adc_clipped += adc.quantize_all(part.data(), part.size());
        counters.adc += t.rows;
        for (std::int64_t i = 0; i < t.rows; ++i) yr[i] += part[static_cast<std::size_t>(i)];
      }
    };
    std::size_t ldo_max = 0;
    for (const auto& tile : tiles) ldo_max = std::max<std::size_t>(ldo_max, tile->ld_out());
    const std::size_t block_out = kRows * ldo_max;
    if (blocks >= o_.threads) {  // many rows: threads take blocks of rows, each through every tile
#pragma omp parallel for num_threads(o_.threads) schedule(static)
      for (std::int64_t b = 0; b < blocks; ++b) {
        thread_local AlignedVector<T> out;
        if (out.size() < block_out) out.resize(block_out);
        for (std::size_t k = 0; k < n_tiles; ++k) read(k, b, out.data()), add(k, b, out.data());
      }
    } else if (n_tiles * static_cast<std::size_t>(blocks) >= 4 * static_cast<std::size_t>(o_.threads)) {
      // few rows through many tiles (a large matrix on small cores): threads take whole reads, each
      // into its own slot, and the sums go in tile order after (sharing each small tile's read among
      // the threads cost more in scheduling than the read itself)
      const std::size_t cells = n_tiles * static_cast<std::size_t>(blocks);
      const std::size_t cell_out = static_cast<std::size_t>(std::min<std::int64_t>(kRows, R)) * ldo_max;
      thread_local AlignedVector<T> outs;
      if (outs.size() < cells * cell_out) outs.resize(cells * cell_out);
      T* const all = outs.data();  // this thread's buffer, shared with the team
#pragma omp parallel for num_threads(o_.threads) schedule(static)
      for (std::size_t c = 0; c < cells; ++c) read(c / blocks, static_cast<std::int64_t>(c % blocks), all + c * cell_out);
      for (std::size_t c = 0; c < cells; ++c) add(c / blocks, static_cast<std::int64_t>(c % blocks), all + c * cell_out);
    } else {  // few rows (a token at a time) through a few large tiles: threads share each tile, then the sums go in tile order
      // Each tile's drives once; its light map's panels, then its outputs' column chunks, in about
      // four ranges per thread over the op (a module's read is as fast as its memory: every thread
      // streams a part of it). Values do not depend on the ranges (OpticalTile's three steps).
      constexpr int G = OpticalTile<T>::kColumnGrain;
      std::int64_t panels = 0, chunks = 0;
      for (const auto& tile : tiles) panels += tile->light_panels(), chunks += (tile->outputs() + G - 1) / G;
      const int per = 4 * o_.threads;
      const int panel_step = static_cast<int>(std::max<std::int64_t>(1, (panels + per - 1) / per));
      const int chunk_step = static_cast<int>(std::max<std::int64_t>(1, (chunks + per - 1) / per)) * G;
      struct Range { std::size_t k; std::int64_t b; int lo, hi; };
      thread_local std::vector<Range> shine, sense_at;
      shine.clear(), sense_at.clear();
      for (std::size_t k = 0; k < n_tiles; ++k)
        for (std::int64_t b = 0; b < blocks; ++b) {
          const OpticalTile<T>& tile = *tiles[k];
          for (int q = 0; q < tile.light_panels(); q += panel_step) shine.push_back({k, b, q, std::min(tile.light_panels(), q + panel_step)});
          for (int j = 0; j < tile.outputs(); j += chunk_step) sense_at.push_back({k, b, j, std::min(tile.outputs(), j + chunk_step)});
        }
      std::size_t drive_max = 0, light_max = 0;
      for (const auto& tile : tiles) drive_max = std::max<std::size_t>(drive_max, tile->drive_ld()), light_max = std::max(light_max, tile->light_size(kRows));
      const std::size_t per_tile = block_out * static_cast<std::size_t>(blocks), cells = n_tiles * static_cast<std::size_t>(blocks);
      const std::size_t block_drive = kRows * drive_max;
      thread_local AlignedVector<T> outs, drives, lights;
      if (outs.size() < per_tile * n_tiles) outs.resize(per_tile * n_tiles);
      if (drives.size() < block_drive * cells) drives.resize(block_drive * cells);
      if (lights.size() < light_max * cells) lights.resize(light_max * cells);
      // this thread's buffers and lists, shared with the team
      T *const all = outs.data(), *const all_drives = drives.data(), *const all_light = lights.data();
      const Range *const shine_at = shine.data(), *const sense_list = sense_at.data();
      const std::size_t n_shine = shine.size(), n_sense = sense_at.size();
#pragma omp parallel num_threads(o_.threads)
      {
#pragma omp for schedule(dynamic)
        for (std::size_t c = 0; c < cells; ++c) emit(c / blocks, static_cast<std::int64_t>(c % blocks), all_drives + c * block_drive);
#pragma omp for schedule(dynamic)
        for (std::size_t i = 0; i < n_shine; ++i) {
          const Range& g = shine_at[i];
          const std::size_t c = g.k * blocks + g.b;
          tiles[g.k]->light(all_drives + c * block_drive, rows_of(g.b), g.lo, g.hi, all_light + c * light_max);
        }
#pragma omp for schedule(dynamic)
        for (std::size_t i = 0; i < n_sense; ++i) {
          const Range& g = sense_list[i];
          const std::size_t c = g.k * blocks + g.b;
          sense(g.k, g.b, all_drives + c * block_drive, all_light + c * light_max, g.lo, g.hi, all + g.k * per_tile + g.b * block_out);
        }
      }
      for (std::size_t k = 0; k < n_tiles; ++k)
        for (std::int64_t b = 0; b < blocks; ++b) add(k, b, all + k * per_tile + b * block_out);
    }
    return y;
  }

  Tensor convert(const ir::Op& op, const Tensor& x, const OpContext&) const override {
    std::optional<UniformConverter> c = converter_of(op);
    if (!o_.quantize || !c) return x;
    const bool to_analog = ir::attr_string(op, "to") == "analog";
    c->bits = to_analog ? dac_bits_ : adc_bits_;  // the run's converters over the range compiled in
    Tensor y = x;
    const long long clipped = c->quantize_all(y.data.data(), y.data.size());
    (to_analog ? counters.dac : counters.adc) += static_cast<long long>(y.data.size());
    (to_analog ? counters.dac_clipped : counters.adc_clipped) += clipped;
    return y;
  }

  mutable Counters counters;

 private:
  const ir::Program& p_;
  const BackendOptions& o_;
  const Hardware& hw_;
  CoreConfig chain_;
  int dac_bits_ = 0, adc_bits_ = 0;
  std::set<std::string> digital_sums_;
  std::map<std::string, std::vector<std::unique_ptr<OpticalTile<T>>>> tiles_;  // per optical op, per plan tile
  std::map<std::string, std::vector<std::vector<int>>> input_at_;  // per op and tile: each input's LED row past dark LEDs
};

}  // namespace

ProgramResult run_with_hooks(const ir::Program& p, const std::map<std::string, Tensor>& inputs, const BackendOptions& o,
                             const ir::Hooks& hooks, bool noisy) {
  if (p.weights.empty() && !p.graph.weights.empty())
    throw Error("run: the program has no weights (compiled from a shapes-only graph): it can be estimated, not run");
  ir::InterpretOptions io;
  io.threads = o.threads;
  io.trace = o.trace;
  io.hooks = &hooks;
  io.mode = o.mode;
  io.progress = o.progress;
  io.floor_patience = noisy ? o.floor_patience : 0;
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
    if (o.f64 && o.light_map == LightMap::F16) throw Error("sim: --light-map f16 needs --precision f32 (a half-precision light map is summed in float)");
    return o.f64 ? run_in<double>(p, inputs, o) : run_in<float>(p, inputs, o);
  }

 private:
  template <class T>
  ProgramResult run_in(const ir::Program& p, const std::map<std::string, Tensor>& inputs, const BackendOptions& o) const {
    const auto t0 = std::chrono::steady_clock::now();
    SimHooks<T> hooks(p, hw_, o);
    const double programming = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ProgramResult res = run_with_hooks(p, inputs, o, hooks, o.noise);
    res.counters = {hooks.counters.dac, hooks.counters.adc, hooks.counters.dac_clipped, hooks.counters.adc_clipped, hooks.slm_rewrites()};
    res.programming_seconds = programming;
    std::tie(res.tiles, res.half_map_tiles) = hooks.light_maps();
    return res;
  }

  Hardware hw_;
};

}  // namespace

namespace {

// The exact reference run on sample inputs, noting what each converter and product sees.
void observe(const ir::Program& p, const std::map<std::string, ir::Tensor>& inputs, ir::Mode mode,
             std::function<void(long long, long long)> progress, CalibrationHooks& hooks) {
  BackendOptions o;
  o.mode = mode;
  o.progress = std::move(progress);
  run_with_hooks(p, inputs, o, hooks);
}

}  // namespace

int calibrate_converters(ir::Program& p, const std::map<std::string, ir::Tensor>& inputs, double margin, ir::Mode mode,
                         std::function<void(long long, long long)> progress) {
  if (!(margin > 0)) throw Error("calibrate: the margin must be > 0");
  CalibrationHooks hooks(p, 1);
  observe(p, inputs, mode, std::move(progress), hooks);
  int set = 0;
  ir::walk(p.graph.ops, [&](ir::Op& op, int) {
    if (op.kind != ir::OpKind::Convert || !op.attrs.count("bits")) return;
    const auto it = hooks.largest.find(op.name);
    if (it == hooks.largest.end() || !(it->second > 0)) return;
    op.attrs["lo"] = -margin * it->second;
    op.attrs["hi"] = margin * it->second;
    ++set;
  });
  for (ir::OpticalPlan& plan : p.optical) {
    if (const auto it = hooks.largest_sum.find(plan.op); it != hooks.largest_sum.end() && it->second > 0) plan.sum_range = margin * it->second, ++set;
    if (const auto it = hooks.largest_input.find(plan.op); it != hooks.largest_input.end() && it->second > 0) plan.drive_range = margin * it->second, ++set;
  }
  return set;
}

std::map<std::string, std::vector<double>> converter_channel_largest(const ir::Program& p, const std::map<std::string, ir::Tensor>& inputs,
                                                                     ir::Mode mode, std::function<void(long long, long long)> progress) {
  CalibrationHooks hooks(p, 1);
  observe(p, inputs, mode, std::move(progress), hooks);
  return std::move(hooks.channel_largest);
}

std::unique_ptr<ir::Hooks> make_sim_hooks(const ir::Program& p, const Hardware& hw, const BackendOptions& o) {
  if (o.f64) return std::make_unique<SimHooks<double>>(p, hw, o);
  return std::make_unique<SimHooks<float>>(p, hw, o);
}

std::optional<UniformConverter> converter_of(const ir::Op& op) {
  if (op.kind != ir::OpKind::Convert || !op.attrs.count("bits")) return std::nullopt;
  return UniformConverter{ir::attr_number_if(op, "lo").value_or(0), ir::attr_number_if(op, "hi").value_or(1), static_cast<int>(ir::attr_int(op, "bits"))};
}

std::string precision_text(const std::string& precision, const ProgramResult& r) {
  if (r.half_map_tiles == 0) return precision;
  if (r.half_map_tiles == r.tiles) return precision + ", f16 light maps";
  return precision + ", f16 light maps on " + std::to_string(r.half_map_tiles) + " of " + std::to_string(r.tiles) + " tiles";
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
