#include "runtime/estimate/estimate_json.hpp"

#include "sim/hardware.hpp"

namespace aoc {

nlohmann::ordered_json band_json(const Band& b) { return {{"min", b.min}, {"typ", b.typ}, {"max", b.max}}; }

nlohmann::ordered_json gpu_json(const EnergyReport& r, const std::string& what) {
  const GpuRoofline& g = r.gpu;
  return {{"gpu", g.gpu}, {"name", g.name}, {"what", what}, {"precision", g.precision}, {"batch", g.batch},
          {"dense_tops", g.tops}, {"memory_tb_per_s", g.memory_tb_per_s}, {"board_watts", g.watts}, {"macs", g.macs},
          {"l2_mb", g.l2_mb}, {"l2_tb_per_s", g.l2_tb_per_s}, {"launch_us", g.launch_us},
          {"distinct_weight_bytes", g.distinct_weight_bytes}, {"weights_in_l2", g.weights_in_l2},
          {"weight_bytes", g.weight_bytes}, {"l2_bytes", g.l2_bytes}, {"kernels", g.kernels},
          {"compute_seconds", g.compute_seconds}, {"memory_seconds", g.memory_seconds}, {"l2_seconds", g.l2_seconds},
          {"launch_seconds", g.launch_seconds}, {"bound", g.bound()}, {"seconds", g.seconds}, {"joules", g.joules},
          {"pj_per_mac", g.pj_per_mac}, {"tops_per_watt", g.tops_per_watt},
          {"energy_ratio_gpu_over_aoc_typ", g.joules / r.total_joules.typ}, {"source", g.source}};
}

nlohmann::ordered_json energy_json(const EnergyReport& r, double scale) {
  nlohmann::ordered_json a = nlohmann::ordered_json::array();
  for (const auto& l : r.energy)
    a.push_back({{"name", l.name}, {"action", l.action}, {"count", l.count}, {"per_action_typ", l.per_action},
                 {"unit", l.action == "second" ? "W" : "pJ"}, {"joules", band_json(l.joules)},
                 {"per_sequence_j", band_json({l.joules.min * scale, l.joules.typ * scale, l.joules.max * scale})},
                 {"source", l.source}});
  return a;
}

nlohmann::ordered_json area_json(const Hardware& hw) {
  if (!hw.area) return nullptr;
  const AreaReport a = area_report(hw);
  nlohmann::ordered_json lines = nlohmann::ordered_json::array();
  for (const auto& l : a.lines)
    lines.push_back({{"name", l.name}, {"per", l.per}, {"count_per_module", l.count}, {"resolution_factor", l.scale},
                     {"mm2_per_module", band_json(l.mm2)}, {"source", l.source}});
  return {{"channels", a.channels}, {"modules", a.modules}, {"components", lines}, {"module_mm2", band_json(a.module_mm2)},
          {"machine_mm2", band_json(a.machine_mm2)}, {"not_counted", a.not_counted}};
}

nlohmann::ordered_json program_estimate_json(const ProgramEstimate& e, const Hardware& hw, const std::string& hw_path,
                                             const std::vector<std::string>& overrides, const std::string& how) {
  const EnergyReport& r = e.token;
  const Workload& w = r.work;
  const double L = static_cast<double>(e.seq_len);
  const Band per_seq{r.total_joules.min * L, r.total_joules.typ * L, r.total_joules.max * L};
  nlohmann::ordered_json j{{"tool", "aoc estimate"}, {"version", AOC_VERSION}, {"program", e.program}, {"source", how},
                           {"hardware", hw.name}, {"hardware_path", hw_path}, {"overrides", overrides},
                           {"seq_len", e.seq_len}, {"batch", e.batch}};
  for (const auto& l : e.loops)
    j["loops"].push_back({{"name", l.name}, {"layout", l.layout}, {"iterations", l.iterations}, {"upper_bound", l.upper_bound},
                          {"iterations_from", l.from}, {"depth", l.depth}});
  if (e.loops.empty()) j["loops"] = nlohmann::ordered_json::array();
  j["mapping"] = {{"parameters", e.parameters}, {"optical_weights", e.optical_weights}, {"channels", e.channels},
                  {"tiles", e.tiles}, {"modules", e.modules}, {"modules_used", e.modules_used},
                  {"cores", e.cores}, {"modules_weight_stationary", e.cores}, {"passes", e.passes}, {"utilisation", e.utilisation}};
  j["placement"] = e.placement;
  j["optical_ops"] = nlohmann::ordered_json::array();
  for (const auto& u : e.optical_ops)
    j["optical_ops"].push_back({{"op", u.op}, {"rows", u.rows}, {"cols", u.cols}, {"tiles", u.tiles}, {"programmings", u.programmings},
                                {"products", u.products}, {"products_per_token", u.per_token}});
  j["per_token"] = {{"analog_macs", r.analog_macs}, {"tile_runs", e.tile_runs},
                    {"led_channel_iterations", *w.led_channel_iterations},
                    {"receiver_channel_iterations", *w.receiver_channel_iterations},
                    {"dac_conversions", w.dac_conversions}, {"adc_conversions", w.adc_conversions},
                    {"partial_sum_adc_conversions", e.partial_sum_adc}, {"digital_ops", w.digital_macs},
                    {"weight_reloads", w.weight_reloads}, {"weight_writes", w.weight_writes},
                    {"reloaded_channels", *w.reloaded_channels},
                    {"control_runs", w.fixed_points}, {"loop_periods", *w.loop_periods}, {"settle_events", *w.settle_events},
                    {"dac_steps", *w.dac_steps}, {"adc_samples", *w.adc_samples}};
  for (const auto& [kind, d] : e.digital) j["digital_ops_by_kind"][kind] = {{"ops", d.ops}, {"rule", d.rule}};
  for (const auto& l : r.latency)
    j["latency"].push_back({{"name", l.name}, {"per_token_s", l.seconds}, {"per_sequence_s", l.seconds * L},
                            {"formula", l.formula}, {"source", l.source}});
  j["latency_per_token_s"] = r.total_seconds;
  j["latency_per_sequence_s"] = r.total_seconds * L;
  j["energy"] = energy_json(r, L);
  j["energy_per_token_j"] = band_json(r.total_joules);
  j["energy_per_sequence_j"] = band_json(per_seq);
  j["ops_per_token"] = r.ops;
  j["tops_per_watt"] = band_json(r.tops_per_watt);
  j["initial_programming"] = {{"weight_writes", e.initial_writes}, {"seconds", e.load.total_seconds},
                              {"joules", band_json(e.load.total_joules)}};
  j["area"] = area_json(hw);
  j["gpu"] = gpu_json(r, "the same work: the analog MACs and the digital ops (one MAC each), per token");
  j["notes"] = e.notes;
  for (const auto& n : r.notes) j["notes"].push_back(n);
  return j;
}

}  // namespace aoc
