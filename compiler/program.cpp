#include "compiler/program.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>
#include <sstream>

#include "compiler/verify.hpp"
#include "sim/error.hpp"
#include "sim/hardware.hpp"
#include "sim/json_reader.hpp"

namespace aoc::ir {

std::string op_label(const Op& op) { return !op.name.empty() ? op.name : !op.outputs.empty() ? op.outputs[0] : std::string(); }

Target target_of(const Hardware& hw, const std::string& path, const std::vector<std::string>& overrides) {
  if (!hw.architecture)
    throw Error(hw.path + ": architecture: missing (the compiler needs the module count and the analog functions, docs/hardware.md)");
  Target t;
  t.hardware = hw.name;
  t.hardware_path = path;
  t.overrides = overrides;
  t.channels = hw.channels;
  t.modules = hw.architecture->modules;
  t.analog_functions = hw.architecture->analog_functions;
  t.analog_partial_sums = hw.architecture->partial_sums == ArchitectureSpec::Sum::Analog;
  t.analog_state_memory = hw.architecture->state_memory == ArchitectureSpec::Memory::Analog;
  for (int ch = 0; ch < hw.channels && ch < static_cast<int>(std::min(hw.fan_in_pos.size(), hw.fan_in_neg.size())); ++ch)
    if (!(hw.fan_in_pos[static_cast<std::size_t>(ch)] > 0 && hw.fan_in_neg[static_cast<std::size_t>(ch)] > 0)) t.dark_leds.push_back(ch);
  if (hw.converters) {
    const ConverterSpec& c = *hw.converters;
    t.slm_bits = c.slm_bits, t.dac_bits = c.dac_bits, t.adc_bits = c.adc_bits;
    t.dac_lo = c.dac_range[0], t.dac_hi = c.dac_range[1], t.adc_lo = c.adc_range[0], t.adc_hi = c.adc_range[1];
  }
  return t;
}

std::vector<int> tile_leds(const Target& target, const Tile& t) {
  std::vector<int> leds;
  leds.reserve(static_cast<std::size_t>(t.cols));
  auto dark = std::lower_bound(target.dark_leds.begin(), target.dark_leds.end(), static_cast<int>(t.core_col0));
  for (std::int64_t ch = t.core_col0; static_cast<std::int64_t>(leds.size()) < t.cols; ++ch) {
    if (dark != target.dark_leds.end() && *dark == ch) {
      ++dark;
      continue;
    }
    leds.push_back(static_cast<int>(ch));
  }
  return leds;
}

std::int64_t led_span(const Target& target, const Tile& t) {
  std::int64_t span = t.cols;
  for (int d : target.dark_leds) span += d >= t.core_col0 && d < t.core_col0 + span;  // sorted: each one inside pushes the end on
  return span;
}

void CompensationSummary::add(const OpticalPlan& plan) {
  double sum = rms * rms * static_cast<double>(tiles);
  for (const TileProgramming& c : plan.compensation) {
    ++tiles, worst = std::max(worst, c.residual), sum += c.rms_residual * c.rms_residual, dark += c.dark, reads += c.rounds;
    for (double g : c.gain) trimmed += g < 1, deepest = std::max(deepest, 1 / g);
  }
  rms = tiles ? std::sqrt(sum / static_cast<double>(tiles)) : 0.0;
}

double OpticalPlan::drive_range_on(const Target& t) const {
  if (drive_range > 0) return drive_range;
  const double dac = std::max(std::fabs(t.dac_lo), std::fabs(t.dac_hi));
  return dac > 0 ? dac : 1.0;
}

std::int64_t OpticalPlan::column_blocks() const {
  std::set<std::int64_t> c;
  for (const Tile& t : tiles) c.insert(t.col0);
  return static_cast<std::int64_t>(c.size());
}

std::pair<std::int64_t, std::int64_t> optical_matrix(OpKind k, const Shape& w) {
  const auto size = [&](std::size_t i) { return i < w.size() ? w[i].size : std::int64_t{0}; };
  if (k == OpKind::MatMul) return {size(1), size(0)};
  std::int64_t cols = w.size() > 1 ? 1 : 0;  // Linear: W[1]; Conv2d: kh * kw * Cin
  for (std::size_t i = 1; i < w.size(); ++i) cols *= w[i].size;
  return {size(0), cols};
}

std::int64_t per_token_elements(const Type& t) {
  std::int64_t n = 1;
  for (const Dim& d : t.shape)
    if (d.is_fixed()) n *= d.size;
  return n;
}

double products_per_token(const OpticalPlan& plan, const Type& result) {
  return plan.rows == 0 ? 0.0 : static_cast<double>(per_token_elements(result)) / static_cast<double>(plan.rows);
}

const OpticalPlan* Program::plan(const std::string& op) const {
  for (const auto& p : optical)
    if (p.op == op) return &p;
  return nullptr;
}

OpticalPlan* Program::plan(const std::string& op) { return const_cast<OpticalPlan*>(std::as_const(*this).plan(op)); }

namespace {

[[noreturn]] void bad_plan(const OpticalPlan& p, const std::string& what) {
  throw Error("verify program: plan '" + p.op + "': " + what);
}

// The first two tiles (by index) that share a matrix element, if any. On the grid of every tile's
// edges no cell may be covered twice; tiles cut from a block grid cover one cell each, so this is
// near-linear. A grid far larger than the tile count (staggered tiles) falls back to every pair.
std::optional<std::pair<std::size_t, std::size_t>> overlapping_tiles(const std::vector<Tile>& tiles) {
  const auto overlap = [](const Tile& a, const Tile& b) {
    return a.row0 < b.row0 + b.rows && b.row0 < a.row0 + a.rows && a.col0 < b.col0 + b.cols && b.col0 < a.col0 + a.cols;
  };
  std::vector<std::int64_t> rs, cs;
  for (const Tile& t : tiles) rs.insert(rs.end(), {t.row0, t.row0 + t.rows}), cs.insert(cs.end(), {t.col0, t.col0 + t.cols});
  for (auto* v : {&rs, &cs}) std::sort(v->begin(), v->end()), v->erase(std::unique(v->begin(), v->end()), v->end());
  const std::size_t R = rs.empty() ? 0 : rs.size() - 1, C = cs.empty() ? 0 : cs.size() - 1;
  if (R * C > 16 * tiles.size() + 4096) {
    for (std::size_t i = 0; i < tiles.size(); ++i)
      for (std::size_t j = i + 1; j < tiles.size(); ++j)
        if (overlap(tiles[i], tiles[j])) return std::pair{i, j};
    return std::nullopt;
  }
  const auto at = [](const std::vector<std::int64_t>& v, std::int64_t x) {
    return static_cast<std::size_t>(std::lower_bound(v.begin(), v.end(), x) - v.begin());
  };
  std::vector<std::size_t> owner(R * C, 0);  // 1 + the index of the tile covering each cell
  for (std::size_t i = 0; i < tiles.size(); ++i) {
    const Tile& t = tiles[i];
    for (std::size_t r = at(rs, t.row0); r < at(rs, t.row0 + t.rows); ++r)
      for (std::size_t c = at(cs, t.col0); c < at(cs, t.col0 + t.cols); ++c) {
        std::size_t& o = owner[r * C + c];
        if (o) return std::pair{o - 1, i};
        o = i + 1;
      }
  }
  return std::nullopt;
}

void check_plan(const Program& prog, const OpticalPlan& p, const Op& o, const std::map<std::string, Type>& types) {
  const auto wt = types.find(p.weight);
  if (wt == types.end() || wt->second.shape.size() != (o.kind == OpKind::Conv2d ? 4u : 2u))
    bad_plan(p, "weight '" + p.weight + "' is not a " + (o.kind == OpKind::Conv2d ? "[Cout, kh, kw, Cin] kernel" : "matrix") + " of the graph");
  const auto [rows, cols] = optical_matrix(o.kind, wt->second.shape);
  if (rows != p.rows || cols != p.cols)
    bad_plan(p, "is " + std::to_string(p.rows) + " x " + std::to_string(p.cols) + ", its weight " + to_string(wt->second));
  // Tiles cover every element once and fit a core.
  std::int64_t covered = 0;
  for (std::size_t i = 0; i < p.tiles.size(); ++i) {
    const Tile& t = p.tiles[i];
    const std::string ti = "tile " + std::to_string(i) + " ";
    if (t.rows < 1 || t.cols < 1 || t.row0 < 0 || t.col0 < 0 || t.row0 + t.rows > rows || t.col0 + t.cols > cols)
      bad_plan(p, ti + "covers rows " + std::to_string(t.row0) + ".." + std::to_string(t.row0 + t.rows) + ", cols " +
                      std::to_string(t.col0) + ".." + std::to_string(t.col0 + t.cols) + ", the matrix is " +
                      std::to_string(rows) + " x " + std::to_string(cols));
    if (prog.target.channels > 0 && (t.rows > prog.target.channels || t.cols > prog.target.channels) && p.tiles.size() > 1)
      bad_plan(p, ti + "is larger than a core of " + std::to_string(prog.target.channels) + " channels");
    if (t.module < 0 || t.module >= prog.target.modules || t.pass < 0)
      bad_plan(p, ti + "is on module " + std::to_string(t.module) + " pass " + std::to_string(t.pass) + " of " +
                      std::to_string(prog.target.modules) + " modules");
    if (p.tiles.size() > 1 && (t.core_row0 < 0 || t.core_col0 < 0 || t.core_row0 + t.rows > prog.target.channels ||
                               t.core_col0 + led_span(prog.target, t) > prog.target.channels))
      bad_plan(p, ti + "sits at core row " + std::to_string(t.core_row0) + ", channel " + std::to_string(t.core_col0) +
                      ", outside a core of " + std::to_string(prog.target.channels));
    covered += t.rows * t.cols;
  }
  if (!(std::isfinite(p.drive_range) && p.drive_range >= 0)) bad_plan(p, "drive range " + jsonr::num(p.drive_range) + " is not a finite number >= 0");
  if (covered != rows * cols) bad_plan(p, "tiles cover " + std::to_string(covered) + " elements of " + std::to_string(rows * cols));
  if (const auto pair = overlapping_tiles(p.tiles))
    bad_plan(p, "tiles " + std::to_string(pair->first) + " and " + std::to_string(pair->second) + " overlap");
  if (!p.codes.empty()) {
    if (static_cast<std::int64_t>(p.codes.size()) != rows * cols) bad_plan(p, "has " + std::to_string(p.codes.size()) + " SLM codes for " + std::to_string(rows * cols) + " weights");
    if (p.code_step.size() != p.tiles.size()) bad_plan(p, "has " + std::to_string(p.code_step.size()) + " code steps for " + std::to_string(p.tiles.size()) + " tiles");
    const std::int32_t lim = p.slm_bits >= 1 && p.slm_bits <= 31 ? (1 << (p.slm_bits - 1)) : 0;
    for (std::int32_t c : p.codes)
      if (c < -lim || c > lim - 1) bad_plan(p, "SLM code " + std::to_string(c) + " does not fit " + std::to_string(p.slm_bits) + " bits");
    // A code step is the value of one SLM code: positive, or 0 for a tile of zero weights.
    if (!(std::isfinite(p.sum_range) && p.sum_range >= 0)) bad_plan(p, "partial-sum range " + jsonr::num(p.sum_range) + " is not a finite number >= 0");
    for (std::size_t k = 0; k < p.code_step.size(); ++k)
      if (!(std::isfinite(p.code_step[k]) && p.code_step[k] >= 0))
        bad_plan(p, "tile " + std::to_string(k) + ": code step " + jsonr::num(p.code_step[k]) + " is not a finite number >= 0");
  }
  if (!p.programmed.empty() || p.compensated()) {
    if (static_cast<std::int64_t>(p.programmed.size()) != rows * cols)
      bad_plan(p, "has " + std::to_string(p.programmed.size()) + " compensated values for " + std::to_string(rows * cols) + " weights");
    if (p.compensation.size() != p.tiles.size())
      bad_plan(p, "has the compensation of " + std::to_string(p.compensation.size()) + " tiles for " + std::to_string(p.tiles.size()) + " tiles");
    for (double v : p.programmed)
      if (!std::isfinite(v)) bad_plan(p, "a compensated value is not finite");
    for (std::size_t k = 0; k < p.compensation.size(); ++k) {
      const TileProgramming& c = p.compensation[k];
      const std::string tk = "tile " + std::to_string(k) + ": compensation ";
      if (static_cast<std::int64_t>(c.offset.size()) != p.tiles[k].rows)
        bad_plan(p, tk + "has " + std::to_string(c.offset.size()) + " offsets for " + std::to_string(p.tiles[k].rows) + " outputs");
      for (double v : c.offset)
        if (!std::isfinite(v)) bad_plan(p, tk + "offset is not finite");
      if (static_cast<std::int64_t>(c.gain.size()) != p.tiles[k].rows)
        bad_plan(p, tk + "has " + std::to_string(c.gain.size()) + " detector gains for " + std::to_string(p.tiles[k].rows) + " outputs");
      for (double v : c.gain)
        if (!(v > 0 && v <= 1)) bad_plan(p, tk + "detector gain " + jsonr::num(v) + " is not in (0, 1]");
      if (!(std::isfinite(c.residual) && c.residual >= 0 && std::isfinite(c.rms_residual) && c.rms_residual >= 0))
        bad_plan(p, tk + "residual is not a finite number >= 0");
      if (c.dark < 0 || c.dark > p.tiles[k].rows * p.tiles[k].cols || c.rounds < 0) bad_plan(p, tk + "dark weights or reads out of range");
    }
  }
}

// The optical ops of a region, by name, and their weight operand.
void optical_ops(const std::vector<Op>& ops, std::map<std::string, const Op*>& out) {
  walk(ops, [&](const Op& o, int) {
    if (place(o) == Place::Optical) out[op_label(o)] = &o;
  });
}

}  // namespace

void verify_program(const Program& p) {
  const auto types = verify(p.graph, p.weights.empty() ? nullptr : &p.weights);
  std::map<std::string, const Op*> ops;
  optical_ops(p.graph.ops, ops);
  std::set<std::string> seen;
  for (const OpticalPlan& plan : p.optical) {
    if (!seen.insert(plan.op).second) bad_plan(plan, "is given twice");
    const auto it = ops.find(plan.op);
    if (it == ops.end()) bad_plan(plan, "there is no optical op of that name");
    const Op& o = *it->second;
    if (o.inputs[1] != plan.weight) bad_plan(plan, "names weight '" + plan.weight + "', the op multiplies by '" + o.inputs[1] + "'");
    if (plan.aoc_layout != (o.kind == OpKind::MatMul)) bad_plan(plan, "has the wrong weight layout for a " + std::string(op_def(o.kind).name));
    check_plan(p, plan, o, types);
  }
  // Tiles programmed together share their core block-diagonally: no detector row or LED channel in common.
  std::map<std::pair<int, int>, std::vector<std::pair<const OpticalPlan*, const Tile*>>> cores;
  for (const OpticalPlan& plan : p.optical)
    for (const Tile& t : plan.tiles) cores[{t.module, t.pass}].push_back({&plan, &t});
  // Per core, the tiles' row spans and column spans must each be disjoint: sorted by start, each span
  // starts at or after the end of the one before.
  for (const auto& [where, tiles] : cores) {
    for (const bool by_rows : {true, false}) {
      std::vector<std::size_t> order(tiles.size());
      for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
      const auto start = [&](std::size_t i) { return by_rows ? tiles[i].second->core_row0 : tiles[i].second->core_col0; };
      const auto end = [&](std::size_t i) { return start(i) + (by_rows ? tiles[i].second->rows : led_span(p.target, *tiles[i].second)); };
      std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return start(a) != start(b) ? start(a) < start(b) : a < b; });
      for (std::size_t k = 1; k < order.size(); ++k)
        if (start(order[k]) < end(order[k - 1])) {
          const std::size_t i = std::min(order[k - 1], order[k]), j = std::max(order[k - 1], order[k]);
          bad_plan(*tiles[i].first, "a tile shares detector rows or LED channels of module " + std::to_string(where.first) + " pass " +
                                        std::to_string(where.second) + " with a tile of '" + tiles[j].first->op + "'");
        }
    }
  }
  // Plans exist from the tile pass on; before it no optical op has one.
  if (!p.optical.empty())
    for (const auto& [name, o] : ops)
      if (!seen.count(name)) throw Error("verify program: optical op '" + name + "' has no plan");
}

}  // namespace aoc::ir
