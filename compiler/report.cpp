#include "compiler/report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include "compiler/verify.hpp"

namespace aoc::ir {

using ojson = nlohmann::ordered_json;

namespace {

struct RegionCounts {
  std::map<std::string, int> placed;  // optical / analog / digital / convert
  std::int64_t dac = 0, adc = 0;      // elements converted per token (per iteration inside a loop)
};

// ADC reads of partial sums per token of one optical op: when the machine adds the partial sums of a
// split matrix digitally, every tile's outputs are converted, for each product (a Conv2d: each position).
std::int64_t partial_sum_adc(const Program& p, const Op& o, const std::map<std::string, Type>& types) {
  if (p.target.analog_partial_sums) return 0;
  const OpticalPlan* pl = p.plan(o.name);
  if (!pl) return 0;
  std::int64_t adc = 0;
  for (const Tile& t : pl->tiles) adc += t.rows;
  return pl->column_blocks() > 1 ? adc * static_cast<std::int64_t>(products_per_token(*pl, types.at(o.outputs[0]))) : 0;
}

RegionCounts count(const Program& p, const std::vector<Op>& ops, const std::map<std::string, Type>& types) {
  RegionCounts c;
  for (const Op& o : ops) {
    c.adc += partial_sum_adc(p, o, types);
    if (o.kind == OpKind::FixedPoint) continue;
    if (o.kind == OpKind::Convert) {
      ++c.placed["convert"];
      (attr_string(o, "to") == "analog" ? c.dac : c.adc) += per_token_elements(types.at(o.outputs[0]));
      continue;
    }
    ++c.placed[to_string(place(o))];
  }
  return c;
}

// Why an op of a loop's body runs digitally: what the machine lacks for it, or what it reads.
std::string why_digital(const Program& p, const Op& o, const std::set<std::string>& analog_values) {
  const bool product = o.kind == OpKind::Linear || o.kind == OpKind::MatMul || o.kind == OpKind::Conv2d;
  if (product) return "its matrix is computed, not a weight";
  const auto& fns = p.target.analog_functions;
  if (std::find(fns.begin(), fns.end(), op_def(o.kind).name) == fns.end()) return "not an analog function of " + p.target.hardware;
  for (const auto& v : o.inputs)
    if (!analog_values.count(v)) return "an operand is digital";
  return "placed digital";
}

ojson counts_json(const RegionCounts& c) {
  ojson j{{"ops", c.placed}, {"dac_per_token", c.dac}, {"adc_per_token", c.adc}};
  return j;
}

}  // namespace

ojson mapping_report(const Program& p) {
  const auto types = verify(p.graph);
  const Target& t = p.target;
  ojson r{{"program", p.graph.name}, {"passes", p.passes}};
  r["target"] = {{"hardware", t.hardware}, {"channels", t.channels}, {"modules", t.modules},
                 {"analog_functions", t.analog_functions},
                 {"partial_sums", t.analog_partial_sums ? "analog" : "digital"},
                 {"state_memory", t.analog_state_memory ? "analog" : "digital"},
                 {"slm_bits", t.slm_bits}, {"dac_bits", t.dac_bits}, {"adc_bits", t.adc_bits}};
  r["top_level"] = counts_json(count(p, p.graph.ops, types));
  ojson loops = ojson::array();
  for (const Op& o : p.graph.ops) {
    if (o.kind != OpKind::FixedPoint) continue;
    const RegionCounts c = count(p, o.body->ops, types);
    ojson l{{"name", o.name}, {"layout", attr_string_if(o, "layout").value_or("")}, {"max_iter", attr_int(o, "max_iter")},
            {"ops", c.placed}, {"dac_per_token_iteration", c.dac}, {"adc_per_token_iteration", c.adc}};
    std::int64_t tiles = 0, weights = 0;
    int passes = 0;
    for (const OpticalPlan& pl : p.optical)
      if (pl.loop == o.name) {
        tiles += static_cast<std::int64_t>(pl.tiles.size()), weights += pl.weights();
        for (const Tile& tl : pl.tiles) passes = std::max(passes, tl.pass + 1);
      }
    l["tiles"] = tiles;
    l["weights"] = weights;
    // what stayed digital in the loop, and why (kind -> reason -> count)
    std::set<std::string> analog_values;
    for (const Op& b : o.body->ops)
      if (place(b) != Place::Digital && b.kind != OpKind::Convert)
        for (const auto& v : b.outputs) analog_values.insert(v);
    for (const Op& b : o.body->ops)
      if (b.kind == OpKind::Convert && attr_string(b, "to") == "analog") analog_values.insert(b.outputs[0]);
    for (const auto& w : p.graph.weights) analog_values.insert(w.name);
    std::map<std::string, std::map<std::string, int>> digital;
    for (const Op& b : o.body->ops)
      if (b.kind != OpKind::Convert && place(b) == Place::Digital) ++digital[op_def(b.kind).name][why_digital(p, b, analog_values)];
    ojson d = ojson::array();
    for (const auto& [kind, whys] : digital)
      for (const auto& [why, n] : whys) d.push_back({{"op", kind}, {"count", n}, {"why", why}});
    l["digital"] = d;
    l["state_between_tokens"] = t.analog_state_memory ? "analog memory" : "digital memory";
    loops.push_back(l);
  }
  r["loops"] = loops;
  std::int64_t tiles = 0, weights = 0;
  int rounds = 0;
  std::set<int> modules;
  std::set<std::pair<int, int>> cores;
  std::map<std::string, const Op*> optical_ops;
  walk(p.graph.ops, [&](const Op& o, int) {
    if (place(o) == Place::Optical) optical_ops[o.name] = &o;
  });
  ojson plans = ojson::array();
  CompensationSummary all;
  for (const OpticalPlan& pl : p.optical) {
    int pl_rounds = 0;
    std::set<int> pl_modules;
    for (const Tile& tl : pl.tiles)
      pl_rounds = std::max(pl_rounds, tl.pass + 1), pl_modules.insert(tl.module), modules.insert(tl.module), cores.insert({tl.module, tl.pass});
    tiles += static_cast<std::int64_t>(pl.tiles.size()), weights += pl.weights(), rounds = std::max(rounds, pl_rounds);
    // A Conv2d's matrix is programmed once and used for every output position of a token.
    const auto op = optical_ops.find(pl.op);
    const double products = op == optical_ops.end() ? 1.0 : products_per_token(pl, types.at(op->second->outputs[0]));
    plans.push_back({{"op", pl.op}, {"loop", pl.loop}, {"rows", pl.rows}, {"cols", pl.cols}, {"tiles", pl.tiles.size()},
                     {"modules", pl_modules.size()}, {"slm_bits", pl.slm_bits}, {"products_per_token", products},
                     {"programmings", pl_rounds}});
    if (pl.compensated()) {
      CompensationSummary c;
      c.add(pl);
      all.add(pl);
      plans.back()["compensation"] = {{"worst_residual", c.worst}, {"rms_residual", c.rms}, {"dark_weights", c.dark}, {"program_and_verify_reads", c.reads},
                                      {"detectors_trimmed", c.trimmed}, {"deepest_trim", c.deepest}};
    }
  }
  const double core = static_cast<double>(t.channels) * t.channels;
  r["optical"] = {{"ops", p.optical.size()},
                  {"tiles", tiles},
                  {"weights", weights},
                  {"modules_used", modules.size()},
                  {"programming_rounds", rounds},
                  {"module_programmings", cores.size()},
                  {"modules_for_weight_stationary", cores.size()},
                  {"weight_reloads_needed", rounds > 1},
                  {"utilisation", cores.empty() ? 0.0 : static_cast<double>(weights) / (static_cast<double>(cores.size()) * core)}};
  // compensate: the tiles programmed for the measured chain, the worst tile's residual (relative to
  // its largest weight), the weights it cannot reach and the chain reads it took
  // and the detectors whose gain it trimmed (the deepest trim: 1 / the smallest gain)
  r["compensation"] = {{"tiles", all.tiles}, {"worst_residual", all.worst}, {"dark_weights", all.dark}, {"program_and_verify_reads", all.reads},
                       {"detectors_trimmed", all.trimmed}, {"deepest_trim", all.deepest}};
  r["plans"] = plans;
  return r;
}

std::string mapping_report_text(const ojson& r) {
  std::string s;
  char buf[512];
  const auto& t = r["target"];
  std::snprintf(buf, sizeof buf, "mapping of \"%s\" onto %s: %d x %d weights per module, %d module(s)\n",
                r["program"].get<std::string>().c_str(), t["hardware"].get<std::string>().c_str(), t["channels"].get<int>(),
                t["channels"].get<int>(), t["modules"].get<int>());
  s += buf;
  std::string fns;
  for (const auto& f : t["analog_functions"]) fns += (fns.empty() ? "" : ", ") + f.get<std::string>();
  s += "  analog electronics: " + fns + "; partial sums " + t["partial_sums"].get<std::string>() + "; state between tokens in " +
       t["state_memory"].get<std::string>() + " memory\n";
  const auto ops = [](const ojson& m) {
    std::string o;
    for (const auto& [k, v] : m.items()) o += (o.empty() ? "" : ", ") + std::to_string(v.get<int>()) + " " + k;
    return o.empty() ? std::string("none") : o;
  };
  const auto& top = r["top_level"];
  std::snprintf(buf, sizeof buf, "  top level: %s; per token %lld DAC and %lld ADC conversions\n", ops(top["ops"]).c_str(),
                top["dac_per_token"].get<long long>(), top["adc_per_token"].get<long long>());
  s += buf;
  for (const auto& l : r["loops"]) {
    std::snprintf(buf, sizeof buf,
                  "  loop '%s' (%s, max_iter %lld): %s; per token and iteration %lld DAC and %lld ADC conversions; %lld tiles, %lld weights\n",
                  l["name"].get<std::string>().c_str(), l["layout"].get<std::string>().c_str(), l["max_iter"].get<long long>(),
                  ops(l["ops"]).c_str(), l["dac_per_token_iteration"].get<long long>(), l["adc_per_token_iteration"].get<long long>(),
                  l["tiles"].get<long long>(), l["weights"].get<long long>());
    s += buf;
    if (!l["digital"].empty()) {
      std::string d;
      for (const auto& e : l["digital"])
        d += (d.empty() ? "" : ", ") + std::to_string(e["count"].get<int>()) + " " + e["op"].get<std::string>() + " (" + e["why"].get<std::string>() + ")";
      s += "    digital in the loop: " + d + "\n";
    }
  }
  const auto& o = r["optical"];
  std::snprintf(buf, sizeof buf,
                "  optical: %lld ops, %lld tiles, %lld weights in %lld module programming(s) on %lld module(s), %d round(s)%s; utilisation %.1f%%\n",
                o["ops"].get<long long>(), o["tiles"].get<long long>(), o["weights"].get<long long>(),
                o["module_programmings"].get<long long>(), o["modules_used"].get<long long>(),
                o["programming_rounds"].get<int>(),
                o["weight_reloads_needed"].get<bool>()
                    ? (" (weights are reloaded: " + std::to_string(o["modules_for_weight_stationary"].get<long long>()) +
                       " modules would hold them all)").c_str()
                    : "",
                100.0 * o["utilisation"].get<double>());
  s += buf;
  if (const auto& c = r["compensation"]; c["tiles"].get<long long>() > 0) {
    std::snprintf(buf, sizeof buf,
                  "  compensated for the measured optical chain: %lld tiles, worst residual %.2g of a tile's largest weight, %lld dark weights "
                  "left, %lld program-and-verify reads, %lld detector gains trimmed (down to 1/%.3g)\n",
                  c["tiles"].get<long long>(), c["worst_residual"].get<double>(), c["dark_weights"].get<long long>(),
                  c["program_and_verify_reads"].get<long long>(), c["detectors_trimmed"].get<long long>(), c["deepest_trim"].get<double>());
    s += buf;
  }
  for (const auto& pl : r["plans"])
    if (pl.contains("products_per_token") && pl["products_per_token"].get<double>() > 1) {
      std::snprintf(buf, sizeof buf, "  weights reused: '%s' [%lld x %lld], %.4g products per token (per iteration in a loop) through its %lld tile(s), programmings %d\n",
                    pl["op"].get<std::string>().c_str(), pl["rows"].get<long long>(), pl["cols"].get<long long>(),
                    pl["products_per_token"].get<double>(), pl["tiles"].get<long long>(), pl["programmings"].get<int>());
      s += buf;
    }
  return s;
}

}  // namespace aoc::ir
