#include "runtime/run/program_check.hpp"

#include <algorithm>
#include <cmath>

#include "models/train.hpp"
#include "runtime/run/program_run.hpp"
#include "sim/error.hpp"
#include "sim/quantize.hpp"

namespace aoc {

namespace {

// The ADC that reads an output out: the Convert that produces it (its calibrated range), else the
// target's ADC.
UniformConverter output_adc(const ir::Program& p, const std::string& name) {
  for (const ir::Op& op : p.graph.ops)
    if (op.outputs[0] == name)
      if (const auto c = converter_of(op)) return *c;
  return {p.target.adc_lo, p.target.adc_hi, std::max(p.target.adc_bits, 1)};
}

}  // namespace

Comparison compare_runs(const ir::Program& p, const ProgramResult& dut, const ProgramResult& ref) {
  Comparison c;
  long long pos = 0, same = 0, elems = 0, same_codes = 0;
  for (const auto& name : p.graph.outputs) {
    const UniformConverter adc = output_adc(p, name);
    const ir::Tensor &a = dut.values.at(name), &b = ref.values.at(name);
    double scale = 0;
    for (double v : b.data) scale = std::max(scale, std::fabs(v));
    for (std::size_t i = 0; i < a.data.size(); ++i) {
      const double d = std::fabs(a.data[i] - b.data[i]);
      c.max_abs = std::max(c.max_abs, d);
      c.max_rel = std::max(c.max_rel, scale > 0 ? d / scale : d);
      if (p.target.adc_bits > 0) same_codes += adc.code(a.data[i]) == adc.code(b.data[i]);
    }
    elems += static_cast<long long>(a.data.size());
    const auto da = ir::argmax_last(a), db = ir::argmax_last(b);
    for (std::size_t i = 0; i < da.size(); ++i, ++pos) same += da[i] == db[i];
  }
  c.argmax = pos ? static_cast<double>(same) / pos : 1.0;
  c.codes = p.target.adc_bits > 0 && elems ? static_cast<double>(same_codes) / elems : 1.0;
  const IterationSummary s = summarize(dut);
  c.failures = static_cast<int>(s.solves - s.converged - s.at_floor);
  c.at_floor = static_cast<int>(s.at_floor);
  c.iterations = s.mean;
  for (std::size_t k = 0; k < dut.fixed_points.size() && k < ref.fixed_points.size(); ++k)
    for (std::size_t i = 0; i < dut.fixed_points[k].iterations.size() && i < ref.fixed_points[k].iterations.size(); ++i)
      c.iterations_differ += dut.fixed_points[k].iterations[i] != ref.fixed_points[k].iterations[i];
  return c;
}

Stat stat(const std::vector<double>& v) {
  Stat s;
  s.min = *std::min_element(v.begin(), v.end()), s.max = *std::max_element(v.begin(), v.end());
  for (double x : v) s.mean += x / static_cast<double>(v.size());
  for (double x : v) s.sd += (x - s.mean) * (x - s.mean) / static_cast<double>(v.size());
  s.sd = std::sqrt(s.sd);
  return s;
}

SeedStats check_over_seeds(const Backend& dut, const ir::Program& p, const std::map<std::string, ir::Tensor>& inputs,
                           const BackendOptions& base, int seeds, const ProgramResult& ref,
                           const std::function<void(int, BackendOptions&)>& before,
                           const std::function<void(int, const ProgramResult&)>& after) {
  if (seeds < 1) throw Error("check: at least one seed is needed, got " + std::to_string(seeds));
  std::vector<double> abs, rel, arg, codes, fails, floor, iters, differ;
  for (int k = 0; k < seeds; ++k) {
    BackendOptions o = base;
    o.seed = base.seed + static_cast<std::uint64_t>(k);
    if (before) before(k, o);
    const ProgramResult r = dut.run(p, inputs, o);
    const Comparison c = compare_runs(p, r, ref);
    abs.push_back(c.max_abs), rel.push_back(c.max_rel), arg.push_back(c.argmax), codes.push_back(c.codes);
    fails.push_back(c.failures), floor.push_back(c.at_floor), iters.push_back(c.iterations), differ.push_back(c.iterations_differ);
    if (after) after(k, r);
  }
  return {stat(abs), stat(rel), stat(arg), stat(codes), stat(fails), stat(floor), stat(iters), stat(differ)};
}

LabelScore label_score(const ir::Program& p, const ProgramResult& r, const ir::Tensor* labels, const std::string& file) {
  if (!labels) return {};
  try {
    const ir::Tensor& y = r.values.at(p.graph.outputs.at(0));
    LabelScore s;
    s.all = s.last = s.whole = ir::label_accuracy(y, *labels);  // checks the labels (integers, a class or negative) against the outputs
    s.per_position = {s.all};
    if (labels->shape.size() < 2 || labels->shape[0] < 1 || labels->data.empty()) return s;
    const int B = static_cast<int>(labels->shape[0]), L = static_cast<int>(labels->data.size() / labels->shape[0]);
    const models::PositionScores ps = models::score_positions(ir::argmax_last(y), std::vector<int>(labels->data.begin(), labels->data.end()), B, L);
    s.last = ps.last, s.whole = ps.whole, s.per_position = ps.per_position;
    return s;
  } catch (const Error& e) {
    throw Error(file + ": /" + e.what());  // "labels.h5: /labels: 12 labels for 8 positions"
  }
}

}  // namespace aoc
