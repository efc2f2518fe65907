// Elementwise ops (numpy broadcasting on trailing dims) and the norms over the last axis.
#include <algorithm>

#include "compiler/kernels.hpp"
#include "compiler/op_def.hpp"
#include "sim/json_reader.hpp"

namespace aoc::ir {

namespace {

std::vector<Type> infer_binary(const InferCtx& c, const Op& o, const std::vector<Type>& in) {
  c.f64(in[0], c.operand(o, 0, "input")), c.f64(in[1], c.operand(o, 1, "input"));
  return {c.broadcast(in[0], in[1])};
}

std::vector<Type> infer_unary(const InferCtx& c, const Op& o, const std::vector<Type>& in) {
  c.f64(in[0], c.operand(o, 0, "input"));
  return {in[0]};
}

template <class F>
std::vector<Tensor> binary(const EvalCtx& c, const std::vector<const Tensor*>& in, F f) {
  return single(kernels::broadcast(*in[0], *in[1], f, c.where));
}

OpDef binary_def(OpKind k, const char* name, const char* summary, std::vector<Tensor> (*eval)(EvalCtx&, const Op&, const std::vector<const Tensor*>&)) {
  return {.kind = k, .name = name, .summary = summary, .operands = {"a", "b"}, .min_inputs = 2, .max_inputs = 2, .outputs = 1,
          .attrs = {}, .infer = infer_binary, .eval = eval};
}

OpDef unary_def(OpKind k, const char* name, const char* summary, std::vector<Tensor> (*eval)(EvalCtx&, const Op&, const std::vector<const Tensor*>&)) {
  return {.kind = k, .name = name, .summary = summary, .operands = {"x"}, .min_inputs = 1, .max_inputs = 1, .outputs = 1,
          .attrs = {}, .infer = infer_unary, .eval = eval};
}

std::vector<Type> infer_clip(const InferCtx& c, const Op& o, const std::vector<Type>& in) {
  c.f64(in[0], c.operand(o, 0, "input"));
  if (!(attr_number(o, "min") <= attr_number(o, "max"))) c.bad("attribute min must be <= max");
  return {in[0]};
}

std::vector<Tensor> eval_clip(EvalCtx& c, const Op& op, const std::vector<const Tensor*>& in) {
  const double lo = attr_number(op, "min"), hi = attr_number(op, "max");
  if (!(lo <= hi)) c.fail("min " + jsonr::num(lo) + " is above max " + jsonr::num(hi));
  return single(kernels::unary(*in[0], [=](double x) { return std::min(std::max(x, lo), hi); }));
}

std::vector<Type> infer_norm(const InferCtx& c, const Op& o, const std::vector<Type>& in) {
  const Type& x = in[0];
  const Type& g = in.back();
  const std::string xr = c.operand(o, 0, "x"), gr = c.operand(o, in.size() - 1, "g");
  c.f64(x, xr), c.f64(g, gr), c.rank_at_least(x, xr, 1), c.rank(g, gr, 1);
  if (o.kind == OpKind::GatedRMSNorm) {
    c.f64(in[1], c.operand(o, 1, "gate"));
    if (!(in[1] == x)) c.bad("gate " + to_string(in[1]) + " must have x's type " + to_string(x));
  }
  if (!(g.shape[0] == x.shape.back())) c.bad("g " + to_string(g) + " must have x's last dim " + to_string(x.shape.back()));
  if (!(attr_number(o, "eps") > 0)) c.bad("attribute eps must be > 0");
  return {x};
}

std::vector<Tensor> eval_rmsnorm(EvalCtx& c, const Op& op, const std::vector<const Tensor*>& in) {
  return single(kernels::rmsnorm(*in[0], *in[1], attr_number(op, "eps"), c.where));
}

std::vector<Tensor> eval_gated_rmsnorm(EvalCtx& c, const Op& op, const std::vector<const Tensor*>& in) {
  if (in[0]->shape != in[1]->shape)
    c.fail("x " + shape_text(in[0]->shape) + " and gate " + shape_text(in[1]->shape) + " differ in shape");
  Tensor u = kernels::make(in[0]->shape);
  const std::int64_t n = static_cast<std::int64_t>(u.data.size());
  kernels::for_each_index(n, n, [&](std::int64_t i) { u.data[i] = in[0]->data[i] * kernels::silu(in[1]->data[i]); });
  return single(kernels::rmsnorm(u, *in[2], attr_number(op, "eps"), c.where));
}


const AttrSpec kEps{"eps", AttrKind::Number, false, Attr{1e-5}, {}, "> 0, added to the mean square"};

}  // namespace

std::vector<OpDef> elementwise_ops() {
  using V = std::vector<const Tensor*>;
  std::vector<OpDef> v;
  v.push_back(binary_def(OpKind::Add, "Add", "a + b", [](EvalCtx& c, const Op&, const V& in) { return binary(c, in, [](double a, double b) { return a + b; }); }));
  v.push_back(binary_def(OpKind::Sub, "Sub", "a - b", [](EvalCtx& c, const Op&, const V& in) { return binary(c, in, [](double a, double b) { return a - b; }); }));
  v.push_back(binary_def(OpKind::Mul, "Mul", "a * b", [](EvalCtx& c, const Op&, const V& in) { return binary(c, in, [](double a, double b) { return a * b; }); }));
  v.push_back(unary_def(OpKind::Tanh, "Tanh", "tanh(x)", [](EvalCtx&, const Op&, const V& in) { return single(kernels::unary(*in[0], [](double x) { return std::tanh(x); })); }));
  v.push_back(unary_def(OpKind::Sigmoid, "Sigmoid", "1 / (1 + exp(-x))", [](EvalCtx&, const Op&, const V& in) { return single(kernels::unary(*in[0], kernels::sigmoid)); }));
  v.push_back(unary_def(OpKind::SiLU, "SiLU", "x sigmoid(x)", [](EvalCtx&, const Op&, const V& in) { return single(kernels::unary(*in[0], kernels::silu)); }));
  v.push_back(unary_def(OpKind::Softplus, "Softplus", "log(1 + exp(x))", [](EvalCtx&, const Op&, const V& in) { return single(kernels::unary(*in[0], kernels::softplus)); }));
  v.push_back(unary_def(OpKind::Exp, "Exp", "exp(x)", [](EvalCtx&, const Op&, const V& in) { return single(kernels::unary(*in[0], [](double x) { return std::exp(x); })); }));
  v.push_back(unary_def(OpKind::Neg, "Neg", "-x", [](EvalCtx&, const Op&, const V& in) { return single(kernels::unary(*in[0], [](double x) { return -x; })); }));
  v.push_back(unary_def(OpKind::Relu, "Relu", "max(x, 0) (NaN stays NaN)",
                        [](EvalCtx&, const Op&, const V& in) { return single(kernels::unary(*in[0], [](double x) { return x < 0 ? 0.0 : x; })); }));
  v.push_back({.kind = OpKind::Softmax, .name = "Softmax", .summary = "exp(x) / sum(exp(x)) over the last dim", .operands = {"x"},
               .min_inputs = 1, .max_inputs = 1, .outputs = 1, .attrs = {}, .infer = infer_unary,
               .eval = [](EvalCtx& c, const Op&, const V& in) { return single(kernels::softmax(*in[0], c.where)); },
               .cost = [](const CostCtx& c, const Op& o) { return DigitalCost{3 * c.per_token(c.type(o.outputs[0])), "3 per element (exp, sum, divide)"}; },
               .per_token = last_axis_per_token});
  v.push_back({.kind = OpKind::Clip, .name = "Clip", .summary = "min(max(x, min), max)", .operands = {"x"}, .min_inputs = 1, .max_inputs = 1,
               .outputs = 1,
               .attrs = {{"min", AttrKind::Number, true, std::nullopt, {}, "the lower bound, <= max"},
                         {"max", AttrKind::Number, true, std::nullopt, {}, "the upper bound"}},
               .infer = infer_clip, .eval = eval_clip});
  v.push_back({.kind = OpKind::RMSNorm, .name = "RMSNorm", .summary = "x / sqrt(mean(x^2 over the last dim) + eps) * g",
               .operands = {"x", "g"}, .min_inputs = 2, .max_inputs = 2, .outputs = 1, .attrs = {kEps}, .infer = infer_norm,
               .eval = eval_rmsnorm,
               .cost = [](const CostCtx& c, const Op& o) { return DigitalCost{3 * c.per_token(c.type(o.outputs[0])), "3 per element (square, sum, scale)"}; },
               .per_token = last_axis_per_token});
  v.push_back({.kind = OpKind::GatedRMSNorm, .name = "GatedRMSNorm", .summary = "RMSNorm(x * SiLU(gate)) * g (Mamba2's gated norm)",
               .operands = {"x", "gate", "g"}, .min_inputs = 3, .max_inputs = 3, .outputs = 1, .attrs = {kEps}, .infer = infer_norm,
               .eval = eval_gated_rmsnorm,
               .cost = [](const CostCtx& c, const Op& o) {
                 return DigitalCost{5 * c.per_token(c.type(o.outputs[0])), "5 per element (SiLU gate, product, square, sum, scale)"};
               },
               .per_token = last_axis_per_token});
  return v;
}

}  // namespace aoc::ir
