#include "compiler/passes.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <tuple>

#include "compiler/verify.hpp"
#include "sim/error.hpp"
#include "sim/programming.hpp"
#include "sim/quantize.hpp"

namespace aoc::ir {

namespace {

const Value& weight_decl(const Graph& g, const std::string& n) {
  for (const Value& v : g.weights)
    if (v.name == n) return v;
  throw Error("compile: weight '" + n + "' is not declared");
}

// A Delay is the state memory of a recurrence: analog where the machine holds the previous token's
// value in its electronics (architecture.state_memory), else the host keeps it.
bool analog_capable(const Target& t, const Op& o) {
  if (o.kind == OpKind::Delay) return t.analog_state_memory;
  return std::find(t.analog_functions.begin(), t.analog_functions.end(), op_def(o.kind).name) != t.analog_functions.end();
}

// The loop's leak, alpha z: a Mul of a loop's state by a fixed gain per channel (a weight of rank
// <= 1). The electronics of every AOC apply it (the loop equation's alpha z, with the gain and the
// injection), whether or not the target lists Mul among its analog functions, which are for signals
// computed from signals.
bool loop_leak(const Graph& g, const Region& body, const Op& o) {
  if (o.kind != OpKind::Mul || o.inputs.size() != 2 || body.args.empty()) return false;
  for (int k = 0; k < 2; ++k)
    if (o.inputs[k] == body.args[0] && is_weight(g, o.inputs[1 - k]) && weight_decl(g, o.inputs[1 - k]).type.shape.size() <= 1) return true;
  return false;
}

// Calls f on every region (the top level first, then each body, depth first).
template <class F>
void each_region(std::vector<Op>& ops, F&& f) {
  f(ops);
  for (Op& o : ops)
    if (o.body) each_region(o.body->ops, f);
}

// Every value name of the graph (inputs, weights, results, body args), for making fresh names.
void collect_names(const std::vector<Op>& ops, std::set<std::string>& names) {
  walk(ops, [&](const Op& o, int) {
    names.insert(o.outputs.begin(), o.outputs.end());
    if (o.body) names.insert(o.body->args.begin(), o.body->args.end());
  });
}

std::set<std::string> all_names(const Graph& g) {
  std::set<std::string> n;
  for (const Value& v : g.inputs) n.insert(v.name);
  for (const Value& v : g.weights) n.insert(v.name);
  collect_names(g.ops, n);
  return n;
}

std::string fresh(std::set<std::string>& taken, const std::string& base) {
  std::string n = base;
  for (int k = 2; taken.count(n); ++k) n = base + "." + std::to_string(k);
  taken.insert(n);
  return n;
}

bool used_anywhere(const std::vector<Op>& ops, const std::string& name) {
  bool used = false;
  walk(ops, [&](const Op& o, int) { used = used || std::find(o.inputs.begin(), o.inputs.end(), name) != o.inputs.end(); });
  return used;
}

}  // namespace

// ---- name-ops --------------------------------------------------------------------------------

void pass_name_ops(Program& p, const PassOptions&, PassStats& stats) {
  std::set<std::string> taken;
  walk(p.graph.ops, [&](Op& o, int) {
    const std::string before = o.name;
    o.name = fresh(taken, op_label(o));
    stats.add("ops");
    if (o.name != before) stats.add("named");
  });
}

// ---- gather-linear ---------------------------------------------------------------------------

void pass_gather_linear(Program& p, const PassOptions&, PassStats& stats) {
  Graph& g = p.graph;
  std::set<std::string> names = all_names(g), op_names;
  each_region(g.ops, [&](std::vector<Op>& ops) { for (const Op& o : ops) op_names.insert(o.name); });
  std::set<std::string> retired;  // weights merged into a stacked one
  each_region(g.ops, [&](std::vector<Op>& ops) {
    std::map<std::string, std::vector<std::size_t>> by_input;
    std::vector<std::string> order;
    for (std::size_t i = 0; i < ops.size(); ++i)
      if (ops[i].kind == OpKind::Linear && optical_capable(g, ops[i])) {
        auto& v = by_input[ops[i].inputs[0]];
        if (v.empty()) order.push_back(ops[i].inputs[0]);
        v.push_back(i);
      }
    std::set<std::size_t> drop;
    std::map<std::size_t, std::vector<Op>> replace;
    for (const std::string& x : order) {
      const auto& idx = by_input[x];
      if (idx.size() < 2) continue;
      std::string label;
      std::vector<std::int64_t> sizes;
      std::int64_t rows = 0;
      const std::int64_t cols = weight_decl(g, ops[idx[0]].inputs[1]).type.shape[1].size;
      for (std::size_t i : idx) {
        label += (label.empty() ? "" : "+") + ops[i].name;
        sizes.push_back(weight_decl(g, ops[i].inputs[1]).type.shape[0].size);
        rows += sizes.back();
      }
      const std::string W = fresh(names, "stacked." + ops[idx[0]].name);
      g.weights.push_back({W, {DType::F64, {Dim::fixed(rows), Dim::fixed(cols)}}});
      if (!p.weights.empty()) {
        Tensor t{{rows, cols}, {}};
        t.data.reserve(static_cast<std::size_t>(rows * cols));
        for (std::size_t i : idx) {
          const Tensor& wi = p.weights.at(ops[i].inputs[1]);
          t.data.insert(t.data.end(), wi.data.begin(), wi.data.end());
        }
        p.weights[W] = std::move(t);
      }
      const std::string y = fresh(names, ops[idx[0]].outputs[0] + ".stacked");
      std::vector<std::string> outs;
      for (std::size_t i : idx) outs.push_back(ops[i].outputs[0]), retired.insert(ops[i].inputs[1]);
      const std::string merged = fresh(op_names, label);
      replace[idx[0]] = {make_op(OpKind::Linear, {x, W}, {y}, {}, merged),
                         make_op(OpKind::Split, {y}, outs, {{"sizes", sizes}, {"axis", std::int64_t{-1}}}, fresh(op_names, merged + ".split"))};
      drop.insert(idx.begin() + 1, idx.end());
      stats.add("gathers");
      stats.add("linears gathered", static_cast<long long>(idx.size()));
    }
    if (replace.empty()) return;
    std::vector<Op> out;
    for (std::size_t i = 0; i < ops.size(); ++i) {
      if (auto r = replace.find(i); r != replace.end()) out.insert(out.end(), r->second.begin(), r->second.end());
      else if (!drop.count(i)) out.push_back(std::move(ops[i]));
    }
    ops = std::move(out);
  });
  // A weight that only fed the merged ops is gone from the program.
  for (const std::string& w : retired)
    if (!used_anywhere(g.ops, w)) {
      g.weights.erase(std::remove_if(g.weights.begin(), g.weights.end(), [&](const Value& v) { return v.name == w; }), g.weights.end());
      p.weights.erase(w);
    }
}

// ---- loop-form -------------------------------------------------------------------------------

void pass_loop_form(Program& p, const PassOptions&, PassStats& stats) {
  std::set<std::string> names = all_names(p.graph), op_names;
  each_region(p.graph.ops, [&](std::vector<Op>& ops) { for (const Op& o : ops) op_names.insert(o.name); });
  each_region(p.graph.ops, [&](std::vector<Op>& ops) {
    for (Op& o : ops) {
      if (o.kind != OpKind::FixedPoint) continue;
      // A biased product in the loop: its matrix on the optics, its bias added by the electronics
      // (an Add of the product and the bias) rather than the whole op digital. Exact: the same sums.
      std::vector<Op> body;
      for (Op& b : o.body->ops) {
        const bool biased = (b.kind == OpKind::Linear || b.kind == OpKind::Conv2d) && b.inputs.size() == 3 &&
                            is_weight(p.graph, b.inputs[1]) && is_weight(p.graph, b.inputs[2]);
        if (!biased) {
          body.push_back(std::move(b));
          continue;
        }
        const std::string bias = b.inputs[2], y = b.outputs[0], product = fresh(names, y + ".product");
        b.inputs.pop_back();
        b.outputs[0] = product;
        const std::string add = fresh(op_names, b.name + ".bias");
        body.push_back(std::move(b));
        body.push_back(make_op(OpKind::Add, {product, bias}, {y}, {}, add));
        stats.add("biases split from their products");
      }
      o.body->ops = std::move(body);
      const bool native = std::all_of(o.body->ops.begin(), o.body->ops.end(), [&](const Op& b) {
        return optical_capable(p.graph, b) || analog_capable(p.target, b) || loop_leak(p.graph, *o.body, b);
      });
      o.attrs["layout"] = std::string(native ? "native" : "assisted");
      stats.add(native ? "native loops" : "assisted loops");
    }
  });
}

// ---- partition -------------------------------------------------------------------------------

namespace {

class Partitioner {
 public:
  explicit Partitioner(Program& p) : p_(p), g_(p.graph), names_(all_names(p.graph)) {}

  void run() {
    std::map<std::string, bool> analog;  // value -> lives in the analog domain
    for (const Value& v : g_.inputs) analog[v.name] = false;
    region(g_.ops, analog);
    // What leaves the program is digital, under the graph's name: an analog output's value is
    // renamed inside the program and its ADC writes the name the user asked for.
    std::vector<Op> tail;
    for (const std::string& out : g_.outputs)
      if (analog.at(out)) {
        const std::string inner = fresh(names_, out + ".analog");
        rename(out, inner);
        tail.push_back(convert_op(inner, out, false, out + ".adc"));
      }
    g_.ops.insert(g_.ops.end(), tail.begin(), tail.end());
  }

 private:
  Program& p_;
  Graph& g_;
  std::set<std::string> names_, op_names_;

  Op convert_op(const std::string& from, const std::string& to_name, bool to_analog, const std::string& label = "") {
    std::map<std::string, Attr> a{{"to", std::string(to_analog ? "analog" : "digital")}};
    const Target& t = p_.target;
    if (t.slm_bits > 0) {
      a["bits"] = std::int64_t{to_analog ? t.dac_bits : t.adc_bits};
      a["lo"] = to_analog ? t.dac_lo : t.adc_lo;
      a["hi"] = to_analog ? t.dac_hi : t.adc_hi;
    }
    return make_op(OpKind::Convert, {from}, {to_name}, std::move(a), label.empty() ? to_name : label);
  }

  // Value `from` becomes `to` in the top-level ops (a FixedPoint's body reads its captures through
  // its own arguments, so no body names a top-level value).
  void rename(const std::string& from, const std::string& to) {
    for (Op& o : g_.ops) {
      for (auto* names : {&o.inputs, &o.outputs})
        for (std::string& n : *names)
          if (n == from) n = to;
      if (const auto like = o.attrs.find("like"); like != o.attrs.end() && std::get_if<std::string>(&like->second) &&
                                                  std::get<std::string>(like->second) == from)
        like->second = to;
    }
  }

  std::string convert(const std::string& v, bool to_analog, std::vector<Op>& out) {
    const std::string n = fresh(names_, v + (to_analog ? ".dac" : ".adc"));
    out.push_back(convert_op(v, n, to_analog));
    return n;
  }

  // loop: the body these ops are of (null at the top level), for its leak (loop_leak).
  void region(std::vector<Op>& ops, std::map<std::string, bool>& analog, const Region* loop = nullptr) {
    std::map<std::pair<std::string, bool>, std::string> converted;  // one conversion per value and direction
    const auto operand = [&](const std::string& v, bool want_analog, std::vector<Op>& out) -> std::string {
      if (is_weight(g_, v) || analog.at(v) == want_analog) return v;
      auto [it, fresh_key] = converted.try_emplace({v, want_analog});
      if (fresh_key) it->second = convert(v, want_analog, out), analog[it->second] = want_analog;
      return it->second;
    };
    std::vector<Op> out;
    for (Op& o : ops) {
      if (o.kind == OpKind::FixedPoint) {
        fixed_point(o, analog, operand, out);
        out.push_back(std::move(o));
        continue;
      }
      Place at = Place::Digital;
      if (optical_capable(g_, o)) {
        at = Place::Optical;
      } else if ((analog_capable(p_.target, o) || (loop && loop_leak(g_, *loop, o))) &&
                 std::all_of(o.inputs.begin(), o.inputs.end(), [&](const std::string& v) { return is_weight(g_, v) || analog.at(v); })) {
        at = Place::Analog;
      }
      const bool in_analog = at != Place::Digital;
      for (std::size_t i = 0; i < o.inputs.size(); ++i)
        if (!(o.kind == OpKind::MatMul && i == 1)) o.inputs[i] = operand(o.inputs[i], in_analog, out);
      set_place(o, at);
      for (const auto& r : o.outputs) analog[r] = in_analog;
      out.push_back(std::move(o));
    }
    ops = std::move(out);
  }

  template <class Operand>
  void fixed_point(Op& o, std::map<std::string, bool>& analog, const Operand& operand, std::vector<Op>& out) {
    Region& body = *o.body;
    const bool z_analog = attr_string_if(o, "layout") == "native";
    std::map<std::string, bool> inner;
    for (const Value& w : g_.weights) inner[w.name] = false;
    inner[body.args[0]] = z_analog;
    // A capture that an optical or analog op reads is converted once per fixed point, outside the
    // loop (the injection); inside, it is an analog signal held for the whole solve.
    for (std::size_t i = 0; i < o.inputs.size(); ++i) {
      const std::string& arg = body.args[i + 1];
      const bool used_analog = std::any_of(body.ops.begin(), body.ops.end(), [&](const Op& b) {
        return (optical_capable(g_, b) || analog_capable(p_.target, b)) &&
               std::find(b.inputs.begin(), b.inputs.end(), arg) != b.inputs.end() && !(b.kind == OpKind::MatMul && b.inputs[1] == arg);
      });
      const std::string before = o.inputs[i];
      o.inputs[i] = operand(o.inputs[i], used_analog, out);
      if (attr_string(o, "like") == before) o.attrs["like"] = o.inputs[i];
      inner[arg] = used_analog;
    }
    region(body.ops, inner, &body);
    const std::string& res = body.results[0];
    if (inner.at(res) != z_analog) {
      const std::string n = convert(res, z_analog, body.ops);
      body.results[0] = n;
    }
    for (const auto& r : o.outputs) analog[r] = z_analog;
  }
};

}  // namespace

void pass_partition(Program& p, const PassOptions&, PassStats& stats) {
  Partitioner(p).run();
  walk(p.graph.ops, [&](const Op& o, int) {
    if (o.kind == OpKind::Convert) stats.add(attr_string(o, "to") == "analog" ? "DACs" : "ADCs");
    else if (o.kind != OpKind::FixedPoint) stats.add(to_string(place(o)));
  });
}

// ---- tile ------------------------------------------------------------------------------------

void pass_tile(Program& p, const PassOptions& options, PassStats& stats) {
  p.optical.clear();
  if (options.tile_size) {  // a what-if machine: the target's cores cut to tile_size channels
    if (options.tile_size < 1 || options.tile_size > p.target.channels)
      throw Error("compile: tile: tile_size " + std::to_string(options.tile_size) + " is not in 1.." + std::to_string(p.target.channels) +
                  ", the channels of " + p.target.hardware);
    p.target.channels = options.tile_size;
  }
  Target& t = p.target;
  if (t.channels < 1 || t.modules < 1) throw Error("compile: tile: the target has no channels or modules");
  // A what-if core keeps the dark LEDs it holds; untiled matrices ignore them (one tile whatever its size).
  std::erase_if(t.dark_leds, [&](int d) { return d >= t.channels; });
  if (!options.tile) t.dark_leds.clear();
  const std::int64_t lit = t.channels - static_cast<std::int64_t>(t.dark_leds.size());  // LED channels inputs can use
  if (lit < 1) throw Error("compile: tile: every LED channel of " + t.hardware + " is dark");
  // Tiles are packed in program order down the diagonal of a core (module, pass) while they fit
  // (rows and LED channels both left), then the next module; past the last module the next pass.
  int module = 0, pass = 0;
  std::int64_t at_row = 0, at_col = 0, total_tiles = 0;
  const auto next_core = [&] {
    at_row = at_col = 0;
    if (++module == t.modules) module = 0, ++pass;
  };
  const std::function<void(const std::vector<Op>&, const std::string&)> walk = [&](const std::vector<Op>& ops, const std::string& loop) {
    for (const Op& o : ops) {
      if (o.body) walk(o.body->ops, o.name);
      if (place(o) != Place::Optical) continue;
      OpticalPlan plan;
      plan.op = o.name;
      plan.weight = o.inputs[1];
      plan.aoc_layout = o.kind == OpKind::MatMul;
      std::tie(plan.rows, plan.cols) = optical_matrix(o.kind, weight_decl(p.graph, plan.weight).type.shape);
      plan.loop = loop;
      const std::int64_t C = options.tile ? t.channels : std::max<std::int64_t>({plan.rows, plan.cols, 1});
      const std::int64_t Cin = options.tile ? lit : C;  // inputs per tile: the lit LED channels
      // An op whose tiles fit the modules of one pass does not straddle two: its tiles then run in
      // parallel, one loop period.
      const std::int64_t count = ((plan.rows + C - 1) / C) * ((plan.cols + Cin - 1) / Cin);
      total_tiles += count;
      if (total_tiles > kMaxTiles)
        throw Error("compile: tile: op '" + o.name + "' [" + std::to_string(plan.rows) + " x " + std::to_string(plan.cols) + "] brings the program to " +
                    std::to_string(total_tiles) + " tiles of " + std::to_string(C) + " x " + std::to_string(C) + ", more than the " +
                    std::to_string(kMaxTiles) + " a program may hold");
      const int used = module + (at_row > 0 ? 1 : 0);
      if (count > 1 && count <= t.modules && used + count > t.modules) {
        module = 0, ++pass, at_row = at_col = 0;
      }
      for (std::int64_t r = 0; r < plan.rows; r += C)
        for (std::int64_t c = 0; c < plan.cols; c += Cin) {
          const std::int64_t rows = std::min(C, plan.rows - r), cols = std::min(Cin, plan.cols - c);
          Tile tile{r, c, rows, cols, module, pass, at_row, at_col};
          if (!options.tile || at_row + rows > t.channels || at_col + led_span(t, tile) > t.channels) {
            if (at_row > 0) next_core(), tile.module = module, tile.pass = pass, tile.core_row0 = at_row, tile.core_col0 = at_col;
          }
          plan.tiles.push_back(tile);
          at_row += rows, at_col += led_span(t, tile);
          if (!options.tile) next_core();
        }
      stats.add("plans");
      stats.add("tiles", static_cast<long long>(plan.tiles.size()));
      p.optical.push_back(std::move(plan));
    }
  };
  walk(p.graph.ops, "");
  // Each core's tiles are moved, together, to the middle of the core: its edge channels are its
  // dimmest (the LEDs' fan-in and the SLM columns' response fall off toward the edges: on aoc-48 to
  // half the middle's), so tiles that leave room sit where the optics pass the most light.
  if (options.tile) {
    std::map<std::pair<int, int>, std::vector<Tile*>> cores;
    for (OpticalPlan& plan : p.optical)
      for (Tile& tile : plan.tiles) cores[{tile.module, tile.pass}].push_back(&tile);
    for (auto& [where, tiles] : cores) {
      std::int64_t rows = 0;
      for (const Tile* tile : tiles) rows += tile->rows;
      const auto lay = [&](std::int64_t from) {  // the tiles' LED channels from `from` on; the end
        for (Tile* tile : tiles) tile->core_col0 = from, from += led_span(t, *tile);
        return from;
      };
      std::int64_t shift = (t.channels - lay(0)) / 2;
      while (shift > 0 && lay(shift) > t.channels) --shift;
      lay(shift);
      const std::int64_t down = (t.channels - rows) / 2;
      for (Tile* tile : tiles) tile->core_row0 += down;
    }
  }
  int passes = 0;
  for (const OpticalPlan& plan : p.optical)
    for (const Tile& tile : plan.tiles) passes = std::max(passes, tile.pass + 1);
  if (passes > 1) stats.add("reload passes", passes - 1);
}

// ---- quantize --------------------------------------------------------------------------------

namespace {
// A tile's block in the AOC convention (t.cols x t.rows) from its [out, in] elements' values.
template <class Value>
MatrixXdR tile_matrix(const OpticalPlan& plan, const Tile& t, Value value) {
  MatrixXdR B(t.cols, t.rows);
  for (std::int64_t i = 0; i < t.rows; ++i)
    for (std::int64_t c = 0; c < t.cols; ++c) B(c, i) = value(plan.element(t, i, c), i, c);
  return B;
}
}  // namespace

MatrixXdR tile_block(const OpticalPlan& plan, const Tile& t, const Tensor& w, bool programmed) {
  if (programmed && !plan.programmed.empty())
    return tile_matrix(plan, t, [&](std::size_t e, std::int64_t, std::int64_t) { return plan.programmed[e]; });
  return tile_matrix(plan, t, [&](std::size_t, std::int64_t i, std::int64_t c) { return plan.weight_at(w, t.row0 + i, t.col0 + c); });
}

MatrixXdR tile_code_block(const OpticalPlan& plan, std::size_t k) {
  return tile_matrix(plan, plan.tiles[k], [&](std::size_t e, std::int64_t, std::int64_t) { return plan.codes[e] * plan.code_step[k]; });
}

MatrixXdR spread_over_leds(const Target& target, const Tile& t, const MatrixXdR& B) {
  if (target.dark_leds.empty()) return B;
  const std::vector<int> leds = tile_leds(target, t);
  MatrixXdR S = MatrixXdR::Zero(led_span(target, t), B.cols());
  for (std::size_t c = 0; c < leds.size(); ++c) S.row(leds[c] - t.core_col0) = B.row(static_cast<Eigen::Index>(c));
  return S;
}

// ---- balance ---------------------------------------------------------------------------------

// A DAC has one range for all its channels: a channel whose values stay small uses few of its codes.
// Moving a scale s_c per channel from the signal to the weights (x_c / s_c through the DAC, input c's
// weights times s_c) keeps every product and spreads the channels over the DAC's codes. alpha < 1
// leaves part of the spread where it was: the SLM codes of a column scaled down are coarser for it.
void pass_balance(Program& p, const PassOptions& o, PassStats& stats) {
  if (!(o.balance > 0 && o.balance <= 1)) throw Error("compile: balance: the strength must be in (0, 1]");
  if (!o.channel_largest) throw Error("compile: balance: needs sample inputs (aoc compile --calibrate)");
  if (p.weights.empty()) throw Error("compile: balance: needs the weights (compile with --weights)");
  const std::map<std::string, std::vector<double>> seen = o.channel_largest(p);
  Graph& g = p.graph;
  std::set<std::string> names = all_names(g), op_names;
  std::map<std::string, int> uses;  // per weight: how many operands name it
  walk(g.ops, [&](const Op& op, int) {
    op_names.insert(op.name);
    for (const std::string& v : op.inputs) ++uses[v];
  });
  each_region(g.ops, [&](std::vector<Op>& ops) {
    std::vector<Op> out;
    out.reserve(ops.size());
    for (std::size_t i = 0; i < ops.size(); ++i) {
      Op& dac = ops[i];
      const auto m = seen.find(dac.name);
      if (dac.kind != OpKind::Convert || attr_string_if(dac, "to") != "analog" || !dac.attrs.count("bits") || m == seen.end()) {
        out.push_back(std::move(dac));
        continue;
      }
      // Its readers: optical products of it alone, so that every one can take the scales.
      std::vector<Op*> readers;
      bool all_products = true;
      for (std::size_t k = i + 1; k < ops.size(); ++k) {
        if (std::find(ops[k].inputs.begin(), ops[k].inputs.end(), dac.outputs[0]) == ops[k].inputs.end()) continue;
        readers.push_back(&ops[k]);
        all_products = all_products && p.plan(ops[k].name) && ops[k].kind != OpKind::Conv2d && ops[k].inputs.size() == 2 &&
                       ops[k].inputs[0] == dac.outputs[0];
      }
      const std::vector<double>& mc = m->second;
      const double top = mc.empty() ? 0 : *std::max_element(mc.begin(), mc.end());
      if (readers.empty() || !all_products || !(top > 0)) {
        out.push_back(std::move(dac));
        continue;
      }
      std::vector<double> s(mc.size()), inv(mc.size());
      for (std::size_t c = 0; c < mc.size(); ++c) {
        s[c] = mc[c] > 0 ? std::pow(mc[c] / top, o.balance) : 1.0;
        inv[c] = 1.0 / s[c];
      }
      for (Op* r : readers) {
        OpticalPlan& plan = *p.plan(r->name);
        if (plan.cols != static_cast<std::int64_t>(s.size()))
          throw Error("compile: balance: op '" + r->name + "' takes " + std::to_string(plan.cols) + " inputs, its DAC '" + dac.name + "' " +
                      std::to_string(s.size()) + " channels");
        Tensor w = p.weights.at(plan.weight);
        for (std::int64_t row = 0; row < plan.rows; ++row)
          for (std::int64_t c = 0; c < plan.cols; ++c)
            w.data[static_cast<std::size_t>(plan.aoc_layout ? c * plan.rows + row : row * plan.cols + c)] *= s[static_cast<std::size_t>(c)];
        if (uses[plan.weight] > 1) {  // shared (a tied embedding): this product gets its own copy
          const std::string copy = fresh(names, plan.weight + kBalancedCopy);
          g.weights.push_back({copy, weight_decl(g, plan.weight).type});
          --uses[plan.weight], uses[copy] = 1;
          r->inputs[1] = plan.weight = copy;
        }
        p.weights[plan.weight] = std::move(w);
        stats.add("weights scaled", plan.weights());
      }
      const std::string gain = fresh(names, dac.name + kBalanceScale), scaled = fresh(names, dac.inputs[0] + kBalancedCopy);
      const auto n = static_cast<std::int64_t>(inv.size());
      g.weights.push_back({gain, {DType::F64, {Dim::fixed(n)}}});
      p.weights[gain] = Tensor{{n}, inv};
      Op mul = make_op(OpKind::Mul, {dac.inputs[0], gain}, {scaled}, {}, fresh(op_names, dac.name + kBalanceScale));
      set_place(mul, Place::Digital);
      out.push_back(std::move(mul));
      dac.inputs[0] = scaled;
      out.push_back(std::move(dac));
      stats.add("converters balanced");
    }
    ops = std::move(out);
  });
}

void pass_compensate(Program& p, const PassOptions& o, PassStats& stats) {
  if (!o.compensate) throw Error("compile: compensate: needs the machine the program is compiled for");
  if (p.weights.empty()) {  // a shapes-only program: nothing to program
    stats.add("plans without weights", static_cast<long long>(p.optical.size()));
    return;
  }
  const Hardware& hw = *o.compensate;
  const CoreConfig chain = program_chain(hw);
  // what the tiles' LED drivers make of a value: each path's swing and common light (the model the
  // programming corrects against must be the machine's own, or the common light is left as an offset)
  const DriveCalibration drive = drive_calibration(hw, chain);
  struct Job {
    OpticalPlan* plan;
    std::size_t k;
  };
  std::vector<Job> jobs;
  for (OpticalPlan& plan : p.optical) {
    plan.programmed.assign(static_cast<std::size_t>(plan.rows * plan.cols), 0.0);
    plan.compensation.assign(plan.tiles.size(), {});
    for (std::size_t k = 0; k < plan.tiles.size(); ++k) jobs.push_back({&plan, k});
  }
  // Tiles are programmed independently, each the same whatever thread takes it.
  std::vector<std::string> errors(jobs.size());
#pragma omp parallel for schedule(dynamic)
  for (std::size_t j = 0; j < jobs.size(); ++j) {
    OpticalPlan& plan = *jobs[j].plan;
    const Tile& t = plan.tiles[jobs[j].k];
    try {
      const ChainProgramming g =
          program_for_chain(hw, chain, spread_over_leds(p.target, t, tile_block(plan, t, p.weights.at(plan.weight), false)), drive,
                            {static_cast<int>(t.core_col0), static_cast<int>(t.core_row0), hw.channels}, 40, o.trim_range);
      const std::vector<int> leds = tile_leds(p.target, t);
      for (std::int64_t i = 0; i < t.rows; ++i)
        for (std::int64_t c = 0; c < t.cols; ++c)
          plan.programmed[plan.element(t, i, c)] = g.W(leds[static_cast<std::size_t>(c)] - t.core_col0, i);
      TileProgramming& r = plan.compensation[jobs[j].k];
      r.residual = g.residual, r.rms_residual = g.rms_residual, r.dark = g.dark, r.rounds = g.rounds;
      r.offset.assign(g.offset.data(), g.offset.data() + g.offset.size());
      r.gain.assign(g.gain.data(), g.gain.data() + g.gain.size());
    } catch (const std::exception& e) {
      errors[j] = "plan '" + plan.op + "': tile " + std::to_string(jobs[j].k) + ": " + e.what();
    }
  }
  for (const std::string& e : errors)
    if (!e.empty()) throw Error("compile: compensate: " + e);
  CompensationSummary all;
  for (const OpticalPlan& plan : p.optical) all.add(plan);
  stats.add("tiles compensated", all.tiles);
  stats.add("dark weights", all.dark);
  stats.add("program-and-verify reads", all.reads);
  stats.add("detector gains trimmed", all.trimmed);
  stats.add("worst residual (ppm of max |w|)", std::llround(all.worst * 1e6));
}

void pass_quantize(Program& p, const PassOptions&, PassStats& stats) {
  if (p.target.slm_bits < 2)
    throw Error("compile: quantize: " + p.target.hardware + " has no converters section with slm_bits (compile with --no-quantize)");
  for (OpticalPlan& plan : p.optical) {
    plan.slm_bits = p.target.slm_bits;
    plan.codes.clear(), plan.code_step.clear();
    stats.add("plans");
    if (p.weights.empty()) continue;  // a shapes-only program: the bits are known, the codes are not
    const Tensor& W = p.weights.at(plan.weight);
    plan.codes.assign(static_cast<std::size_t>(plan.rows * plan.cols), 0);
    for (const Tile& t : plan.tiles) {
      const MatrixXdR block = tile_block(plan, t, W, true);  // what the SLM holds: compensated where it ran
      if (block.cwiseAbs().maxCoeff() == 0) {  // an all-zero tile is all-zero codes
        plan.code_step.push_back(0);
        continue;
      }
      const WeightCodes q = quantize_weights(block, plan.slm_bits);
      plan.code_step.push_back(q.scale);
      for (std::int64_t r = 0; r < t.rows; ++r)
        for (std::int64_t c = 0; c < t.cols; ++c) plan.codes[plan.element(t, r, c)] = q.codes(c, r);
      stats.add("tiles quantized");
    }
  }
}

// ---- the pipeline ----------------------------------------------------------------------------

void PassStats::add(const std::string& name, long long n) {
  for (auto& [k, v] : counts)
    if (k == name) {
      v += n;
      return;
    }
  counts.emplace_back(name, n);
}

long long PassStats::get(const std::string& name) const {
  for (const auto& [k, v] : counts)
    if (k == name) return v;
  return 0;
}

std::string PassStats::text() const {
  std::string t;
  for (const auto& [k, v] : counts) t += (t.empty() ? "" : ", ") + k + " " + std::to_string(v);
  return t;
}

std::vector<NamedPass> pipeline(const PassOptions& o) {
  std::vector<NamedPass> v{{"name-ops", pass_name_ops, ""}};
  if (o.gather) v.push_back({"gather-linear", pass_gather_linear, ""});
  v.push_back({"loop-form", pass_loop_form, ""});
  v.push_back({"partition", pass_partition, ""});
  std::string tile;
  if (!o.tile) tile = "{tile = false}";
  else if (o.tile_size) tile = "{tile_size = " + std::to_string(o.tile_size) + "}";
  v.push_back({"tile", pass_tile, tile});
  if (o.balance > 0) {
    char strength[64];
    std::snprintf(strength, sizeof strength, "{alpha = %g}", o.balance);
    v.push_back({"balance", pass_balance, strength});
  }
  if (o.compensate) v.push_back({"compensate", pass_compensate, ""});
  if (o.quantize) v.push_back({"quantize", pass_quantize, ""});
  if (o.calibrate)
    v.push_back({"calibrate",
                 [](Program& p, const PassOptions& opt, PassStats& stats) {
                   if (p.weights.empty()) throw Error("compile: calibrate: needs the weights (a shapes-only program cannot run: compile it with --weights, or without --calibrate)");
                   stats.add("ranges set", opt.calibrate(p));
                 },
                 ""});
  return v;
}

void run_pipeline(Program& p, const PassOptions& options, const AfterPass& after_pass) {
  try {
    verify_program(p);
  } catch (const Error& e) {
    throw Error(std::string("compile: the input graph: ") + e.what());
  }
  for (const NamedPass& pass : pipeline(options)) {
    PassStats stats;
    pass.run(p, options, stats);
    p.passes.push_back(pass.name);
    try {
      verify_program(p);
    } catch (const Error& e) {
      throw Error(std::string("compile: after pass ") + pass.name + ": " + e.what());
    }
    if (after_pass) after_pass(pass, p, stats);
  }
}

}  // namespace aoc::ir
