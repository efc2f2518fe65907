#include "runtime/estimate/program_estimate.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <functional>
#include <set>

#include "compiler/passes.hpp"
#include "compiler/verify.hpp"
#include "sim/error.hpp"
#include "sim/hardware.hpp"
#include "sim/json_reader.hpp"

namespace aoc {

using namespace ir;

namespace {

// Elements of one token's share of a value (program.hpp), as a count of actions.
double per_token(const Type& t) { return static_cast<double>(per_token_elements(t)); }

// Which op reads a value (every region), and whether a value leaves a region (a body's result, a
// graph output).
struct Uses {
  std::map<std::string, std::vector<const Op*>> readers;
  std::set<std::string> results;
  void add(const std::vector<Op>& ops) {
    walk(ops, [this](const Op& o, int) {
      for (const auto& in : o.inputs) readers[in].push_back(&o);
      if (o.body) results.insert(o.body->results.begin(), o.body->results.end());
    });
  }
};

class Counter {
 public:
  Counter(const Program& p, const Hardware& hw, const ProgramEstimateOptions& o, ProgramEstimate& e)
      : p_(p), hw_(hw), o_(o), e_(e), types_(verify(p.graph)) {
    uses_.add(p.graph.ops);
    uses_.results.insert(p.graph.outputs.begin(), p.graph.outputs.end());
    parallel_ = static_cast<double>(p.target.channels) * p.target.modules;
    readout_hold_ = hold_periods(*hw.timing, 0);  // no loop iterations count toward a readout's settle here
  }


  // The counts of one token: every op of the top level once, a body K times.
  void count() { region(p_.graph.ops, 1.0, 0); }

  // Weight reloads and writes of one token in steady state: the modules start with the pass-0
  // tiles (the initial programming); a first token is simulated from there, the second from where
  // the first left the modules, and its counts are the per-token ones.
  void reloads() {
    // What each (module, pass) programming writes: all of its tiles, packed in one core.
    for (const OpticalPlan& plan : p_.optical)
      for (const Tile& t : plan.tiles) frame_[{t.module, t.pass}] += static_cast<double>(t.rows * t.cols);
    std::vector<int> state(static_cast<std::size_t>(p_.target.modules), -1);
    for (const auto& [where, writes] : frame_)
      if (where.second == 0) {
        state[static_cast<std::size_t>(where.first)] = 0, e_.initial_writes += writes;
        initial_reloaded_channels += p_.target.channels;
      }
    simulate(p_.graph.ops, state);
    const Reload steady = simulate(p_.graph.ops, state);
    e_.work.weight_reloads = steady.events;
    e_.work.weight_writes = steady.writes;
    e_.work.reloaded_channels = steady.modules * p_.target.channels;
  }

  // The channels of the modules the initial programming loads (those holding a pass-0 tile).
  double initial_reloaded_channels = 0;

  Workload& w() { return e_.work; }

 private:
  const Program& p_;
  const Hardware& hw_;
  const ProgramEstimateOptions& o_;
  ProgramEstimate& e_;
  std::map<std::string, Type> types_;
  Uses uses_;
  double parallel_ = 1;  // converters that work at once: one per channel of every module
  double readout_hold_ = 0;  // loop periods a readout keeps its channels on: settle + window
  std::map<std::pair<int, int>, double> frame_;  // weights programmed per (module, pass)

  const Type& type(const std::string& v) const {
    const auto it = types_.find(v);
    if (it == types_.end()) throw Error("estimate: internal: no type for value '" + v + "'");
    return it->second;
  }

  // K of a FixedPoint and where it came from: given for every loop, measured for this one, or its
  // max_iter (an upper bound).
  double iterations(const Op& fp, bool& upper, std::string* from = nullptr) const {
    upper = false;
    if (o_.iterations) {
      if (from) *from = "given (--iterations)";
      return *o_.iterations;
    }
    if (const auto it = o_.measured.find(op_label(fp)); it != o_.measured.end()) {
      if (from) *from = it->second.from;
      return it->second.k;
    }
    upper = true;
    const std::int64_t m = attr_int(fp, "max_iter");
    if (m < 1) throw Error("estimate: FixedPoint '" + op_label(fp) + "' has no max_iter; give --iterations");
    if (from) *from = "its max_iter: an UPPER BOUND (give --iterations K or --iterations-from RUN.h5)";
    return static_cast<double>(m);
  }

  // Evaluations of a FixedPoint's body per execution: its K steps, and under the released rule
  // the final call that gives the result.
  static double evaluations(const Op& fp, double K) { return K + (attr_string(fp, "rule") == "released" ? 1 : 0); }

  const OpticalPlan& plan(const Op& o) const {
    const OpticalPlan* pl = p_.plan(op_label(o));
    if (!pl) throw Error("estimate: optical op '" + op_label(o) + "' has no plan (the program was not tiled)");
    return *pl;
  }

  static int passes_of(const OpticalPlan& pl) {
    std::set<int> s;
    for (const Tile& t : pl.tiles) s.insert(t.pass);
    return static_cast<int>(s.size());
  }

  // A conversion of `elements` values to analog (DAC) or digital (ADC), `mult` times per token:
  // the channels of every module convert at once, so a value takes ceil(elements / (channels x
  // modules)) steps; each ADC step waits for the signal to settle and takes the readout window.
  void convert(double elements, bool to_analog, double mult) {
    const double steps = std::ceil(elements / parallel_);
    if (to_analog) {
      w().dac_conversions += mult * elements;
      *w().dac_steps += mult * steps;
    } else {
      w().adc_conversions += mult * elements;
      *w().settle_events += mult * steps;
      *w().adc_samples += mult * steps * hw_.timing->readout_samples;
      // the channels holding the value stay lit and detected through the settle and the window
      *w().led_channel_iterations += mult * elements * readout_hold_;
      *w().receiver_channel_iterations += mult * elements * readout_hold_;
    }
  }

  void digital(const std::string& kind, double ops, const std::string& rule) {
    DigitalCount& d = e_.digital[kind];
    d.ops += ops;
    d.rule = rule;
    w().digital_macs += ops;
    *w().serial_digital_macs += ops;
  }

  void region(const std::vector<Op>& ops, double mult, int depth) {
    for (const Op& o : ops) {
      if (o.kind == OpKind::FixedPoint) {
        bool upper = false;
        std::string from;
        const double K = iterations(o, upper, &from);
        e_.loops.push_back({op_label(o), attr_string_if(o, "layout").value_or("?"), K, upper, from, depth});
        w().fixed_points += mult;  // the control runs each fixed point
        region(o.body->ops, mult * evaluations(o, K), depth + 1);
        continue;
      }
      if (o.kind == OpKind::Convert) {
        convert(per_token(type(o.inputs[0])), attr_string(o, "to") == "analog", mult);
        continue;
      }
      const Place at = place(o);
      if (at == Place::Optical) optical(o, mult, depth);
      else if (at != Place::Analog) digital_op(o, mult);  // unplaced ops run digitally
      // analog: the analog electronics' work, counted per receiver channel-iteration
    }
  }

  void optical(const Op& o, double mult, int depth) {
    const OpticalPlan& pl = plan(o);
    // Vectors per token: 1 for a Linear on [B, L, in], a Conv2d's output positions.
    const double vectors = products_per_token(pl, type(o.outputs[0]));
    const double runs = mult * vectors;
    e_.optical_ops.push_back({pl.op, pl.rows, pl.cols, static_cast<int>(pl.tiles.size()), passes_of(pl), vectors, runs});
    for (const Tile& t : pl.tiles) {
      *w().led_channel_iterations += runs * static_cast<double>(t.cols);
      *w().receiver_channel_iterations += runs * static_cast<double>(t.rows);
      *w().analog_macs += runs * static_cast<double>(t.rows) * static_cast<double>(t.cols);
      e_.tile_runs += runs;
    }
    // The tiles of one pass run at once on their modules; the passes one after another.
    *w().loop_periods += runs * passes_of(pl);
    if (depth == 0) w().fixed_points += runs;  // a run of the core outside any loop: one control sequence
    // Column tiles summed in digital: every column tile beyond the first is read out and added.
    const double extra = static_cast<double>(pl.column_blocks()) - 1;
    if (!p_.target.analog_partial_sums && extra > 0) {
      const double rows = static_cast<double>(pl.rows);
      w().adc_conversions += runs * extra * rows;
      e_.partial_sum_adc += runs * extra * rows;
      digital("partial sums", runs * extra * rows, "architecture.partial_sums digital: rows adds per column tile beyond the first");
      // A sum that stays in the analog domain (not read by an ADC next) goes back through a DAC,
      // and the first column tile is read out too.
      const auto rd = uses_.readers.find(o.outputs[0]);
      const bool read_digital = rd != uses_.readers.end() && !uses_.results.count(o.outputs[0]) &&
                                std::all_of(rd->second.begin(), rd->second.end(), [](const Op* r) {
                                  return r->kind == OpKind::Convert && attr_string(*r, "to") == "digital";
                                });
      // (When an ADC reads the sum next, the partial sums are read out with it, on the other
      // modules' ADCs: no extra time.)
      if (!read_digital) {
        e_.partial_sum_adc += runs * rows;
        convert(rows, false, runs);
        convert(rows, true, runs);
      }
    }
  }

  // The documented op count of a digital op (docs/energy.md, "Programs"): its record's cost rule.
  void digital_op(const Op& o, double mult) {
    const OpDef& def = op_def(o.kind);
    const CostCtx c{[this](const std::string& v) -> const Type& { return type(v); }, static_cast<double>(o_.seq_len)};
    DigitalCost cost;
    if (def.cost) {
      cost = def.cost(c, o);
    } else {
      for (const auto& r : o.outputs) cost.ops += c.per_token(type(r));
      cost.rule = "1 per element";
    }
    digital(def.name, mult * cost.ops, cost.rule);
  }

  struct Reload {
    double events = 0, writes = 0;
    double modules = 0;  // modules reprogrammed, summed over the events
  };

  // Walks the ops in order with the tile each module holds: an op's tiles of one pass that are not
  // in place are programmed together (one reload event: the modules load in parallel, the core
  // waits); a loop counts its first iteration from the entry state and K - 1 more from the state
  // one iteration leaves (which repeats).
  Reload simulate(const std::vector<Op>& ops, std::vector<int>& state) {
    Reload r;
    for (const Op& o : ops) {
      if (o.kind == OpKind::FixedPoint) {
        bool upper = false;
        const double K = iterations(o, upper);
        const double E = evaluations(o, K);
        const Reload first = simulate(o.body->ops, state);
        Reload next;
        if (E > 1) next = simulate(o.body->ops, state);
        const double rest = std::max(0.0, E - 1), f = std::min(1.0, E);
        r.events += f * first.events + rest * next.events;
        r.writes += f * first.writes + rest * next.writes;
        r.modules += f * first.modules + rest * next.modules;
        continue;
      }
      if (place(o) != Place::Optical) continue;
      const OpticalPlan& pl = plan(o);
      std::map<int, std::vector<const Tile*>> by_pass;
      for (const Tile& t : pl.tiles) by_pass[t.pass].push_back(&t);
      for (const auto& [pass, tiles] : by_pass) {
        bool any = false;
        for (const Tile* t : tiles) {
          int& held = state[static_cast<std::size_t>(t->module)];
          if (held != t->pass) {
            held = t->pass, any = true;
            r.writes += frame_.at({t->module, t->pass});
            r.modules += 1;
          }
        }
        if (any) r.events += 1;
      }
    }
    return r;
  }
};

void count_places(const std::vector<Op>& ops, std::map<std::string, int>& m) {
  walk(ops, [&](const Op& o, int) {
    if (o.kind == OpKind::Convert) ++m[attr_string(o, "to") == "analog" ? "convert to analog (DAC)" : "convert to digital (ADC)"];
    else if (o.kind == OpKind::FixedPoint) ++m["fixed point, " + attr_string_if(o, "layout").value_or("?")];
    else ++m[to_string(place(o))];
  });
}

// The auto-zero's reads after `reloads` programmings of `channels` channels in all: each channel's
// ADC samples them one after another (the modules in parallel), lit and detected meanwhile.
void add_zero_reads(const Hardware& hw, int reads, double reloads, double channels, Workload& w) {
  if (!hw.timing) throw Error(hw.path + ": timing: the auto-zero's reads need the readout rate and loop period (or --zero-reads 0)");
  const TimingSpec& t = *hw.timing;
  const double lit = reads / (t.readout_rate_mhz * 1e6) / (t.loop_period_ns * 1e-9);  // loop periods per channel
  w.adc_conversions += reads * channels;
  *w.adc_samples += reads * reloads;
  *w.led_channel_iterations += lit * channels, *w.receiver_channel_iterations += lit * channels;
}

}  // namespace

namespace {

// What write-verify multiplies: each weight's two pixels (the two paths) fail a write with
// probability p = P(|sigma N(0,1)| > tol) and are written again, so a weight takes 1 + 2 (p + p^2
// + ... + p^R) writes; a programming of a core's C x C pixels pairs takes its first write and one
// more round (an SLM frame written again: one more reload's time) while any of its 2 C^2 pixels
// still fails, 1 + sum_k 1 - (1 - p^k)^(2 C^2) reloads.
struct VerifyCost {
  double writes = 1, reloads = 1;
  std::string note;
};

VerifyCost write_verify_cost(const Hardware& hw, const ProgramEstimateOptions& o, int channels) {
  VerifyCost v;
  if (!(o.write_verify > 0)) return v;
  if (o.verify_rounds < 1) throw Error("estimate: --verify-rounds must be at least 1");
  if (!hw.noise || !(hw.noise->slm_fixed_pattern_sigma > 0))
    throw Error(hw.path + ": noise.slm_fixed_pattern_sigma: write-verify needs the SLM's fixed pattern (a noise section with it above 0)");
  const double sigma = hw.noise->slm_fixed_pattern_sigma, p = std::erfc(o.write_verify / (sigma * std::sqrt(2.0)));
  const double pixels = 2.0 * channels * channels;
  double pk = 1;
  for (int k = 1; k <= o.verify_rounds; ++k) {
    pk *= p;
    v.writes += 2 * pk;
    v.reloads += 1 - std::pow(1 - pk, pixels);
  }
  v.note = "write-verify to " + jsonr::num(o.write_verify) + " of each transmission (noise.slm_fixed_pattern_sigma " + jsonr::num(sigma) +
           ": a write fails with probability " + jsonr::num(p) + "), at most " + std::to_string(o.verify_rounds) +
           " writes again: x" + jsonr::num(v.writes) + " weight writes and x" + jsonr::num(v.reloads) +
           " reloads (each round an SLM frame written again, its reload time; the read-backs' own time is not counted)";
  return v;
}

}  // namespace

ProgramEstimate estimate_program(const Program& p, const Hardware& hw, const ProgramEstimateOptions& o) {
  if (hw.name != p.target.hardware)
    throw Error("estimate: the program was compiled for " + p.target.hardware + ", the hardware file " + hw.path + " is " + hw.name);
  if (!hw.architecture) throw Error(hw.path + ": architecture: missing (needed to estimate a program)");
  if (hw.channels != p.target.channels || hw.architecture->modules != p.target.modules)
    throw Error("estimate: the program was compiled for " + std::to_string(p.target.channels) + " channels and " +
                std::to_string(p.target.modules) + " modules, " + hw.path + " has " + std::to_string(hw.channels) + " and " +
                std::to_string(hw.architecture->modules) + ": compile it again for this hardware");
  if (!hw.timing) throw Error(hw.path + ": timing: missing (needed for the latency of the estimate)");
  if (o.seq_len < 1) throw Error("estimate: --seq-len must be at least 1, got " + std::to_string(o.seq_len));
  if (o.iterations && !(*o.iterations >= 1 && std::isfinite(*o.iterations)))
    throw Error("estimate: --iterations must be at least 1 for a program, got " + jsonr::num(*o.iterations));
  if (std::find(p.passes.begin(), p.passes.end(), "tile") == p.passes.end())
    throw Error("estimate: the program has not been through the tile pass (compile it fully)");

  ProgramEstimate e;
  e.program = p.graph.name;
  e.machine = hw.name;
  e.channels = p.target.channels;
  e.modules = p.target.modules;
  e.seq_len = o.seq_len;
  for (const Value& v : p.graph.weights) {
    std::int64_t n = 1;
    for (const Dim& d : v.type.shape) n *= d.is_fixed() ? d.size : 1;
    e.parameters += n;
  }
  std::set<int> used;
  std::set<std::pair<int, int>> cores;
  for (const OpticalPlan& pl : p.optical) {
    e.optical_weights += pl.weights();
    e.tiles += static_cast<int>(pl.tiles.size());
    for (const Tile& t : pl.tiles) used.insert(t.module), cores.insert({t.module, t.pass}), e.passes = std::max(e.passes, t.pass + 1);
  }
  e.modules_used = static_cast<int>(used.size());
  e.cores = static_cast<int>(cores.size());
  count_places(p.graph.ops, e.placement);

  // The explicit counts start at 0 (n = 0: not the loop form).
  Workload& w = e.work;
  w.n = 0;
  w.fixed_points = 0;
  w.photons_per_sample = o.photons_per_sample;
  w.led_channel_iterations = w.receiver_channel_iterations = w.analog_macs = 0;
  w.loop_periods = w.settle_events = w.dac_steps = w.adc_samples = 0;
  w.serial_digital_macs = 0;
  w.modules = std::max(1, e.modules_used);

  if (!(o.batch >= 1 && std::isfinite(o.batch))) throw Error("estimate: the batch must be >= 1");
  e.batch = o.batch;
  Counter c(p, hw, o, e);
  c.count();
  c.reloads();
  const VerifyCost verify = write_verify_cost(hw, o, e.channels);  // x1 without write-verify
  w.weight_writes *= verify.writes, w.weight_reloads *= verify.reloads, *w.reloaded_channels *= verify.reloads;
  if (!verify.note.empty()) e.notes.push_back(verify.note);
  if (o.batch > 1 && w.weight_reloads > 0) {
    w.weight_reloads /= o.batch, w.weight_writes /= o.batch, *w.reloaded_channels /= o.batch;
    e.notes.push_back("batch " + jsonr::num(o.batch) + ": the sequences step together, so each module programming serves " +
                      jsonr::num(o.batch) + " vectors before the next reload; a sequence-token's share of the reloads, weight "
                      "writes and the electronics' wait through them is 1/" + jsonr::num(o.batch) + " (one token of the whole "
                      "batch takes " + jsonr::num(o.batch) + " x the latency per sequence-token)");
  }
  if (o.zero_reads < 0) throw Error("estimate: --zero-reads must be 0 or more");
  if (o.zero_reads > 0 && w.weight_reloads > 0) {
    add_zero_reads(hw, o.zero_reads, w.weight_reloads, *w.reloaded_channels, w);
    e.notes.push_back("auto-zero after each programming (aoc run --zero-reads " + std::to_string(o.zero_reads) + "): " +
                      std::to_string(o.zero_reads) + " ADC samples of each reprogrammed channel with the values at 0, in series at "
                      "the readout rate, the channels lit and detected meanwhile");
  }
  w.gpu_macs = *w.analog_macs + w.digital_macs;
  w.gpu_distinct_weights = static_cast<double>(e.parameters);  // the GPU holds every parameter
  e.utilisation = e.tile_runs > 0 ? *w.analog_macs / (e.tile_runs * static_cast<double>(e.channels) * e.channels) : 0;
  e.token = estimate(hw, w, o.gpu);
  if (o.zero_every_us) {
    // The tokens run between the zeros: a zero every T takes zero_us of it, so a token of t seconds
    // carries t / (T - zero_us) zeros, on every channel of the modules in use (in parallel).
    const double T = *o.zero_every_us;
    if (!(T > 0 && std::isfinite(T))) throw Error("estimate: --zero-every-us must be a number above 0");
    if (o.zero_reads <= 0) throw Error("estimate: --zero-every-us bills the auto-zero's reads, so it needs --zero-reads above 0");
    if (!hw.timing) throw Error(hw.path + ": timing: the auto-zero's reads need the readout rate (or no --zero-every-us)");
    const double zero_us = o.zero_reads / hw.timing->readout_rate_mhz;
    if (T <= zero_us)
      throw Error("estimate: --zero-every-us " + jsonr::g4(T) + " is no longer than one zero's " + std::to_string(o.zero_reads) + " reads (" +
                  jsonr::g4(zero_us) + " us at the readout rate)");
    const double zeros = e.token.total_seconds * 1e6 / (T - zero_us), channels = std::max(1, e.modules_used) * static_cast<double>(e.channels);
    add_zero_reads(hw, o.zero_reads, zeros, channels * zeros, w);
    e.token = estimate(hw, w, o.gpu);
    e.notes.push_back("auto-zero taken again every " + jsonr::g4(T) + " us (aoc run --zero-every-us): " + std::to_string(o.zero_reads) +
                      " ADC samples of each of the " + jsonr::g4(channels) + " channels of the modules in use, " + jsonr::g4(zero_us) +
                      " us at the readout rate, " + jsonr::g4(100 * zero_us / T) + " % of the clock; a token carries " + jsonr::g4(zeros) +
                      " of a zero");
  }

  // The initial programming, once per model load: the pass-0 tiles in one reload (the modules in
  // parallel), the SLMs drawing their static power meanwhile.
  Workload load;
  load.n = 0;
  load.fixed_points = 0;
  load.weight_writes = e.initial_writes * verify.writes;
  load.weight_reloads = e.initial_writes > 0 ? verify.reloads : 0;
  load.reloaded_channels = c.initial_reloaded_channels * verify.reloads;
  load.modules = std::max(1, e.modules_used);
  load.photons_per_sample = o.photons_per_sample;
  if (o.zero_reads > 0 && load.weight_reloads > 0) {
    load.adc_conversions = 0, load.adc_samples = load.led_channel_iterations = load.receiver_channel_iterations = 0;
    add_zero_reads(hw, o.zero_reads, load.weight_reloads, *load.reloaded_channels, load);
  }
  e.load = estimate(hw, load, o.gpu);

  e.notes.push_back("always on: each ADC readout keeps the channels holding its value lit and detected through the settle and "
                    "the readout window, " + jsonr::num(hold_periods(*hw.timing, 0)) + " loop periods per value (counted as channel-iterations "
                    "of the LEDs, receivers and analog electronics); here the settle starts at the readout, not at the loop's "
                    "closure (a loop's iterations do not shorten it)");
  const bool upper = std::any_of(e.loops.begin(), e.loops.end(), [](const LoopCount& l) { return l.upper_bound; });
  if (upper)
    e.notes.push_back("iterations: a FixedPoint counted at its max_iter, an upper bound (its mean iterations are not known "
                      "here; give --iterations K, or --iterations-from the output of an `aoc run` of this program)");
  else if (o.iterations && !e.loops.empty())
    e.notes.push_back("iterations: given (--iterations " + jsonr::num(*o.iterations) + ") for every FixedPoint");
  for (const auto& [name, m] : o.measured)
    if (std::none_of(e.loops.begin(), e.loops.end(), [&](const LoopCount& l) { return l.name == name; }))
      throw Error("estimate: measured iterations for '" + name + "', which is not a FixedPoint of the program");
  if (e.passes > 1)
    e.notes.push_back(std::to_string(e.tiles) + " tiles in " + std::to_string(e.cores) + " module programmings on " +
                      std::to_string(e.modules) + " modules: the weights are not stationary; modules are reprogrammed during each "
                      "token (a weight-stationary mapping needs " + std::to_string(e.cores) + " modules: --set architecture.modules=" +
                      std::to_string(e.cores) + ")");
  return e;
}

EstimateTarget estimate_target(const ir::Program& p, const std::string& program_name, const std::string& hw_given,
                               const std::vector<std::string>& set) {
  EstimateTarget t;
  const std::string recorded = p.target.hardware_path.empty() ? p.target.hardware : p.target.hardware_path;
  t.path = resolve_hardware_path(hw_given.empty() ? recorded : hw_given);
  // a program compiled elsewhere: its recorded file may not exist here, its bundled name may
  if (hw_given.empty() && !std::filesystem::exists(t.path)) t.path = resolve_hardware_path(p.target.hardware);
  t.overrides = p.target.overrides;
  t.overrides.insert(t.overrides.end(), set.begin(), set.end());
  t.hw = load_hardware(t.path, t.overrides);
  t.source = "program " + program_name + ", compiled for " + p.target.hardware + " (passes: ";
  for (std::size_t i = 0; i < p.passes.size(); ++i) t.source += (i ? ", " : "") + p.passes[i];
  t.source += ")";
  return t;
}

Program compile_for_estimate(const Graph& g, const Hardware& hw, const std::string& hw_path,
                             const std::vector<std::string>& overrides) {
  Program p;
  p.graph = g;
  p.target = target_of(hw, hw_path, overrides);
  PassOptions opt;
  opt.quantize = false;  // shapes only: the bits are the target's, there are no codes to make
  run_pipeline(p, opt);
  return p;
}

}  // namespace aoc
