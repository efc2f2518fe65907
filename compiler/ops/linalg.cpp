// The products: what the optical core runs when the second operand is a programmed weight.
#include "compiler/kernels.hpp"
#include "compiler/op_def.hpp"

namespace aoc::ir {

namespace {


std::vector<Type> infer_linear(const InferCtx& c, const Op& o, const std::vector<Type>& in) {
  const Type &x = in[0], &W = in[1];
  const std::string xr = c.operand(o, 0, "x"), wr = c.operand(o, 1, "W");
  c.f64(x, xr), c.f64(W, wr), c.rank_at_least(x, xr, 1), c.rank(W, wr, 2);
  if (!(x.shape.back() == W.shape[1]))
    c.bad("input W " + to_string(W) + " has " + to_string(W.shape[1]) + " columns, x " + to_string(x) + " has " + to_string(x.shape.back()));
  if (in.size() == 3) {
    const std::string br = c.operand(o, 2, "b");
    c.f64(in[2], br), c.rank(in[2], br, 1);
    if (!(in[2].shape[0] == W.shape[0])) c.bad("bias b " + to_string(in[2]) + " does not match W's " + to_string(W.shape[0]) + " rows");
  }
  Shape out(x.shape.begin(), x.shape.end() - 1);
  out.push_back(W.shape[0]);
  return {{DType::F64, out}};
}

std::vector<Tensor> eval_linear(EvalCtx& c, const Op& op, const std::vector<const Tensor*>& in) {
  if (c.hooks && in.size() == 2 && place(op) == Place::Optical) return single(c.hooks->optical(op, *in[0], *in[1], c.ctx));
  return single(kernels::linear(*in[0], *in[1], in.size() > 2 ? in[2] : nullptr, c.threads, c.where));
}

DigitalCost cost_linear(const CostCtx& c, const Op& o) {
  const Shape& W = c.type(o.inputs[1]).shape;  // [out, in]
  const double in = CostCtx::dim(W[1]), rows = c.per_token(c.type(o.inputs[0])) / in;
  const double bias = o.inputs.size() > 2 ? c.per_token(c.type(o.outputs[0])) : 0;
  return {rows * in * CostCtx::dim(W[0]) + bias, "in x out per vector (+ out with a bias)"};
}

std::vector<Type> infer_matmul(const InferCtx& c, const Op& o, const std::vector<Type>& in) {
  const Type &a = in[0], &b = in[1];
  const std::string ar = c.operand(o, 0, "a"), br = c.operand(o, 1, "b");
  c.f64(a, ar), c.f64(b, br), c.rank_at_least(a, ar, 1), c.rank(b, br, 2);
  if (!(a.shape.back() == b.shape[0]))
    c.bad("a " + to_string(a) + " has last dim " + to_string(a.shape.back()) + ", b " + to_string(b) + " has " + to_string(b.shape[0]) + " rows");
  Shape out(a.shape.begin(), a.shape.end() - 1);
  out.push_back(b.shape[1]);
  return {{DType::F64, out}};
}

std::vector<Tensor> eval_matmul(EvalCtx& c, const Op& op, const std::vector<const Tensor*>& in) {
  if (c.hooks && place(op) == Place::Optical) return single(c.hooks->optical(op, *in[0], *in[1], c.ctx));
  return single(kernels::matmul(*in[0], *in[1], c.threads, c.where));
}

DigitalCost cost_matmul(const CostCtx& c, const Op& o) {
  const Shape& b = c.type(o.inputs[1]).shape;  // [k, n]
  const double k = CostCtx::dim(b[0]), rows = c.per_token(c.type(o.inputs[0])) / k;
  return {rows * k * CostCtx::dim(b[1]), "k x n per vector"};
}

}  // namespace

std::vector<OpDef> linalg_ops() {
  std::vector<OpDef> v;
  v.push_back({.kind = OpKind::Linear, .name = "Linear", .summary = "y = x W^T (+ b): x[..., in], W[out, in], b[out] -> [..., out] (torch convention)",
               .operands = {"x", "W", "b"}, .min_inputs = 2, .max_inputs = 3, .outputs = 1, .attrs = {},
               .infer = infer_linear, .eval = eval_linear, .cost = cost_linear, .per_token = last_axis_per_token});
  v.push_back({.kind = OpKind::MatMul, .name = "MatMul", .summary = "y = a b: a[..., k], b[k, n] -> [..., n] (AOC convention)",
               .operands = {"a", "b"}, .min_inputs = 2, .max_inputs = 2, .outputs = 1, .attrs = {},
               .infer = infer_matmul, .eval = eval_matmul, .cost = cost_matmul, .per_token = last_axis_per_token});
  return v;
}

}  // namespace aoc::ir
