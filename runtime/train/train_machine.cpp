#include "runtime/train/train_machine.hpp"

#include "compiler/op_def.hpp"
#include "compiler/passes.hpp"
#include "sim/error.hpp"

namespace aoc {

CompiledMachine::CompiledMachine(const MachineTraining& o, const models::SequenceModel& m, const tasks::Task& task, int length,
                                 std::uint64_t data_seed)
    : o_(o), hw_(load_hardware(resolve_hardware_path(o.hardware), o.overrides)) {
  if (!hw_.architecture) throw Error(hw_.path + ": architecture: missing (training for a machine compiles the model for it)");
  if (o.noise && !hw_.noise) throw Error(hw_.path + ": noise: missing (train without noise to skip it)");
  ir::Imported g = m.export_graph();
  graph_ = std::move(g.graph);
  if (graph_.inputs.size() != 1) throw Error("train: the model's graph has " + std::to_string(graph_.inputs.size()) + " inputs, not its tokens alone");
  target_ = ir::target_of(hw_, hw_.path, o.overrides);
  calibration_[graph_.inputs[0].name] =
      tasks::sample(task, o.calibration_batch, length, data_seed, 0, tasks::Split::Calibration).tokens_tensor();
  run_.noise = o.noise;
  run_.optics = o.optics;
  run_.quantize = true;
  run_.f64 = true;  // the tape is double; the machine's products in the tiles' double precision
  run_.threads = 1;
}

CompiledMachine::~CompiledMachine() = default;

void CompiledMachine::program(const models::SequenceModel& m, int step) {
  hooks_.reset();
  by_weight_.clear();
  p_ = {};
  p_.graph = graph_;
  p_.weights = m.weights();
  p_.target = target_;
  ir::PassOptions po;
  po.quantize = hw_.converters.has_value();
  if (o_.optics) po.compensate = &hw_;
  if (po.quantize) po.calibrate = [&](ir::Program& q) { return calibrate_converters(q, calibration_); };
  if (o_.balance > 0) {
    po.balance = o_.balance;
    po.channel_largest = [&](const ir::Program& q) { return converter_channel_largest(q, calibration_); };
  }
  ir::run_pipeline(p_, po);
  // Each step a new programming of the machine: its SLM pattern and its per-read noise drawn anew.
  run_.seed = o_.seed ^ (0x9E3779B97F4A7C15ull * (static_cast<std::uint64_t>(step) + 1));
  hooks_ = make_sim_hooks(p_, hw_, run_);
  std::map<std::string, const ir::Op*> producer, op_named;
  std::map<std::string, std::vector<const ir::Op*>> readers;
  ir::walk(p_.graph.ops, [&](const ir::Op& op, int) {
    op_named[op.name] = &op;
    for (const std::string& v : op.outputs) producer[v] = &op;
    for (const std::string& v : op.inputs) readers[v].push_back(&op);
  });
  const ir::WeightStore model_weights = m.weights();
  for (const ir::OpticalPlan& plan : p_.optical) {
    // The model's name for the weight: the balance pass gives a product of a shared weight its own
    // scaled copy (ir::kBalancedCopy).
    std::string name = plan.weight;
    if (!model_weights.count(name))
      if (const auto at = name.rfind(ir::kBalancedCopy); at != std::string::npos && model_weights.count(name.substr(0, at))) name.resize(at);
    Product& pr = by_weight_[name];
    if (pr.op) throw Error("train: weight '" + name + "' is the weight of two optical ops (" + pr.op->name + ", " + plan.op + ")");
    pr.op = op_named.at(plan.op);
    pr.weight = &p_.weights.at(plan.weight);
    if (const auto it = producer.find(pr.op->inputs[0]); it != producer.end() && it->second->kind == ir::OpKind::Convert) {
      pr.dac = it->second;
      const auto scale = producer.find(pr.dac->inputs[0]);
      if (scale != producer.end() && scale->second->kind == ir::OpKind::Mul && scale->second->inputs.size() == 2 &&
          scale->second->inputs[1].rfind(pr.dac->name + ir::kBalanceScale, 0) == 0)
        pr.balance = &p_.weights.at(scale->second->inputs[1]);
    }
    if (const auto it = readers.find(pr.op->outputs[0]); it != readers.end() && it->second.size() == 1 && it->second[0]->kind == ir::OpKind::Convert)
      pr.adc = it->second[0];
  }
}

ad::Mat CompiledMachine::product(const std::string& weight, const ad::Mat& x, int read) const {
  if (!hooks_) throw Error("train: the machine's product before it was programmed");
  const auto it = by_weight_.find(weight);
  if (it == by_weight_.end())
    throw Error("train: weight '" + weight + "' is not the weight of an optical op of the model compiled for " + hw_.name +
                " (a product the compiler merged or placed digital)");
  const Product& pr = it->second;
  ir::Tensor v;
  v.shape = {x.rows(), x.cols()};
  v.data.assign(x.data(), x.data() + x.size());  // ad::Mat is row-major
  ir::OpContext ctx;
  ctx.iteration = read;
  if (pr.balance) {
    const std::size_t n = pr.balance->data.size();
    if (static_cast<std::size_t>(x.cols()) != n) throw Error("train: the balance of '" + weight + "' has another width than its input");
    for (std::size_t i = 0; i < v.data.size(); ++i) v.data[i] *= pr.balance->data[i % n];
  }
  if (pr.dac) v = hooks_->convert(*pr.dac, v, ctx);
  v = hooks_->optical(*pr.op, v, *pr.weight, ctx);
  if (pr.adc) v = hooks_->convert(*pr.adc, v, ctx);
  if (v.shape.size() != 2 || v.shape[0] != x.rows()) throw Error("train: the machine's product of '" + weight + "' has another shape");
  ad::Mat y(x.rows(), v.shape[1]);
  std::copy(v.data.begin(), v.data.end(), y.data());
  return y;
}

}  // namespace aoc
