#include "sim/gpu.hpp"

#include <algorithm>
#include <cmath>

#include "sim/error.hpp"
#include "sim/json_reader.hpp"

namespace aoc {

using namespace jsonr;

std::string bundled_gpus_path() { return bundled_path("scenarios/gpus.json"); }

std::vector<GpuSpec> read_gpus(const std::string& path) {
  const json doc = parse_file(path);
  const Reader r(path);
  r.object(doc, "");
  r.only_keys(doc, "", {"about", "gpus"});
  const json& gpus = r.need(doc, "", "gpus");
  r.object(gpus, "gpus");
  std::vector<GpuSpec> out;
  const Range positive{0, kInf, false, false};
  for (const auto& [key, j] : gpus.items()) {
    const std::string f = sub("gpus", key);
    r.object(j, f);
    r.only_keys(j, f, {"name", "dense_tops", "memory_tb_per_s", "memory_gb", "l2_mb", "l2_tb_per_s", "launch_us", "board_watts", "source"});
    GpuSpec g;
    g.key = key;
    g.name = r.text(r.need(j, f, "name"), sub(f, "name"), true);
    const json& tops = r.need(j, f, "dense_tops");
    r.object(tops, sub(f, "dense_tops"));
    r.only_keys(tops, sub(f, "dense_tops"), {"bf16", "fp8", "int8"});
    for (const auto& [p, v] : tops.items()) g.dense_tops[p] = r.number(v, sub(sub(f, "dense_tops"), p), positive);
    if (g.dense_tops.empty()) r.fail(sub(f, "dense_tops"), "no precision given (bf16, fp8, int8)");
    g.memory_tb_per_s = r.number(r.need(j, f, "memory_tb_per_s"), sub(f, "memory_tb_per_s"), positive);
    g.memory_gb = r.number(r.need(j, f, "memory_gb"), sub(f, "memory_gb"), positive);
    g.l2_mb = r.number(r.need(j, f, "l2_mb"), sub(f, "l2_mb"), positive);
    g.l2_tb_per_s = r.number(r.need(j, f, "l2_tb_per_s"), sub(f, "l2_tb_per_s"), positive);
    g.launch_us = r.number(r.need(j, f, "launch_us"), sub(f, "launch_us"), Range{0, kInf, true, false});
    g.board_watts = r.number(r.need(j, f, "board_watts"), sub(f, "board_watts"), positive);
    g.source = r.text(r.need(j, f, "source"), sub(f, "source"), true);
    out.push_back(g);
  }
  if (out.empty()) r.fail("gpus", "no GPU listed");
  return out;
}

GpuSpec find_gpu(const std::string& key) {
  const std::string path = bundled_gpus_path();
  static const std::vector<GpuSpec> gpus = read_gpus(path);  // once per process: sweeps estimate per point
  std::vector<std::string> keys;
  for (const GpuSpec& g : gpus) {
    if (g.key == key) return g;
    keys.push_back(g.key);
  }
  throw Error("--gpu: unknown GPU '" + key + "' (" + path + " has " + join(keys, ", ") + ")");
}

int bytes_per_weight(const std::string& precision) {
  if (precision == "bf16") return 2;
  if (precision == "fp8" || precision == "int8") return 1;
  throw Error("--gpu-precision: unknown precision '" + precision + "' (bf16, fp8, int8)");
}

std::string GpuRoofline::bound() const {
  const double most = std::max({compute_seconds, memory_seconds, l2_seconds, launch_seconds});
  if (most == launch_seconds && launch_seconds > 0) return "launch";
  if (most == l2_seconds && l2_seconds > 0) return "L2";
  if (most == memory_seconds && memory_seconds > compute_seconds) return "memory";
  return "compute";
}

GpuRoofline gpu_roofline(const GpuSpec& g, const std::string& precision, double batch, double macs, double weight_macs,
                         double distinct_weights, double dependent_passes) {
  const int bytes = bytes_per_weight(precision);
  const auto it = g.dense_tops.find(precision);
  if (it == g.dense_tops.end()) {
    std::vector<std::string> have;
    for (const auto& [p, v] : g.dense_tops) have.push_back(p);
    throw Error("--gpu-precision: " + g.key + " has no " + precision + " figure in the GPU catalogue (it has " + join(have, ", ") + ")");
  }
  if (!(batch >= 1)) throw Error("--gpu-batch: " + num(batch) + " must be >= 1");
  if (!(dependent_passes >= 0 && std::isfinite(dependent_passes))) throw Error("gpu: dependent passes must be finite and >= 0, got " + num(dependent_passes));
  GpuRoofline r;
  r.gpu = g.key, r.name = g.name, r.precision = precision, r.source = g.source;
  r.batch = batch;
  r.tops = it->second, r.memory_tb_per_s = g.memory_tb_per_s, r.l2_mb = g.l2_mb, r.watts = g.board_watts;
  r.l2_tb_per_s = g.l2_tb_per_s, r.launch_us = g.launch_us;
  r.macs = macs;
  r.distinct_weight_bytes = distinct_weights * bytes;
  r.weights_in_l2 = r.distinct_weight_bytes <= g.l2_mb * 1e6;
  const double streamed = weight_macs * bytes / batch;  // every pass's weights, one pass per batch
  r.weight_bytes = r.weights_in_l2 ? r.distinct_weight_bytes : streamed;
  r.l2_bytes = r.weights_in_l2 ? streamed : 0;
  r.kernels = dependent_passes / batch;
  r.compute_seconds = 2 * macs / (r.tops * 1e12);
  r.memory_seconds = r.weight_bytes / (r.memory_tb_per_s * 1e12);
  r.l2_seconds = r.l2_bytes / (r.l2_tb_per_s * 1e12);
  r.launch_seconds = r.kernels * r.launch_us * 1e-6;
  r.seconds = std::max({r.compute_seconds, r.memory_seconds, r.l2_seconds}) + r.launch_seconds;
  r.joules = r.watts * r.seconds;
  r.pj_per_mac = macs > 0 ? r.joules / macs * 1e12 : 0;
  r.tops_per_watt = r.joules > 0 ? 2 * macs / r.joules * 1e-12 : 0;
  return r;
}

}  // namespace aoc
