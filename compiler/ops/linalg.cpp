// The products: what the optical core runs when the second operand is a programmed weight.
#include "compiler/kernels.hpp"
#include "compiler/op_def.hpp"

namespace aoc::ir {

namespace {

// Whether an op's product by its programmed matrix runs on the hardware's hook (the backend's tiles,
// SLM codes, noise and converters): placed optical, which the compiler does for a product by a
// weight without bias (optical_capable). Else the exact product of kernels::linear's dot_rows.
bool on_optics(const EvalCtx& c, const Op& op, std::size_t operands) { return c.hooks && operands == 2 && place(op) == Place::Optical; }

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
  if (on_optics(c, op, in.size())) return single(c.hooks->optical(op, *in[0], *in[1], c.ctx));
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
  if (on_optics(c, op, in.size())) return single(c.hooks->optical(op, *in[0], *in[1], c.ctx));
  return single(kernels::matmul(*in[0], *in[1], c.threads, c.where));
}

DigitalCost cost_matmul(const CostCtx& c, const Op& o) {
  const Shape& b = c.type(o.inputs[1]).shape;  // [k, n]
  const double k = CostCtx::dim(b[0]), rows = c.per_token(c.type(o.inputs[0])) / k;
  return {rows * k * CostCtx::dim(b[1]), "k x n per vector"};
}

std::vector<Type> infer_conv2d(const InferCtx& c, const Op& o, const std::vector<Type>& in) {
  const Type &x = in[0], &W = in[1];
  const std::string xr = c.operand(o, 0, "x"), wr = c.operand(o, 1, "W");
  c.f64(x, xr), c.f64(W, wr), c.rank_at_least(x, xr, 3), c.rank(W, wr, 4);
  const std::size_t r = x.shape.size();
  const Dim &H = x.shape[r - 3], &Wd = x.shape[r - 2], &C = x.shape[r - 1];
  if (!H.is_fixed() || !Wd.is_fixed() || !C.is_fixed()) c.bad(xr + " " + to_string(x) + " must have fixed sizes for H, W and C (its last three dims)");
  if (!(W.shape[3] == C))
    c.bad(wr + " " + to_string(W) + " has " + to_string(W.shape[3]) + " input channels, " + xr + " " + to_string(x) + " has " + to_string(C));
  const std::int64_t stride = attr_int(o, "stride"), kh = W.shape[1].size, kw = W.shape[2].size;
  if (stride < 1) c.bad("attribute stride must be >= 1, got " + std::to_string(stride));
  if (kh < 1 || kw < 1 || kh > H.size || kw > Wd.size)
    c.bad("the kernel " + std::to_string(kh) + " x " + std::to_string(kw) + " of " + wr + " " + to_string(W) + " does not fit x's " + std::to_string(H.size) +
          " x " + std::to_string(Wd.size) + " (valid padding)");
  if (in.size() == 3) {
    const std::string br = c.operand(o, 2, "b");
    c.f64(in[2], br), c.rank(in[2], br, 1);
    if (!(in[2].shape[0] == W.shape[0])) c.bad("bias " + br + " " + to_string(in[2]) + " does not match W's " + to_string(W.shape[0]) + " output channels");
  }
  Shape out(x.shape.begin(), x.shape.end() - 3);
  out.insert(out.end(), {Dim::fixed((H.size - kh) / stride + 1), Dim::fixed((Wd.size - kw) / stride + 1), W.shape[0]});
  return {{DType::F64, out}};
}

// The product path of Linear on im2col's patches: on the optics each output position's patch is
// one vector through the programmed matrix W [Cout, kh*kw*Cin] (the noise keys of the hook's rows
// are then the positions, distinct per sample and token).
std::vector<Tensor> eval_conv2d(EvalCtx& c, const Op& op, const std::vector<const Tensor*>& in) {
  const std::int64_t stride = attr_int(op, "stride");
  if (on_optics(c, op, in.size())) return single(c.hooks->optical(op, kernels::im2col(*in[0], *in[1], stride, c.where), *in[1], c.ctx));
  return single(kernels::conv2d(*in[0], *in[1], in.size() > 2 ? in[2] : nullptr, stride, c.threads, c.where));
}

DigitalCost cost_conv2d(const CostCtx& c, const Op& o) {
  const Shape& W = c.type(o.inputs[1]).shape;  // [Cout, kh, kw, Cin]
  const double patch = CostCtx::dim(W[1]) * CostCtx::dim(W[2]) * CostCtx::dim(W[3]);
  const double out = c.per_token(c.type(o.outputs[0]));  // positions x Cout
  return {out * patch + (o.inputs.size() > 2 ? out : 0), "kh x kw x Cin per output element (+ 1 with a bias)"};
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
  v.push_back({.kind = OpKind::Conv2d, .name = "Conv2d",
               .summary = "2-D convolution, channels last, valid padding: x[..., H, W, Cin], W[Cout, kh, kw, Cin], b[Cout] -> "
                          "[..., (H - kh) / stride + 1, (W - kw) / stride + 1, Cout]",
               .operands = {"x", "W", "b"}, .min_inputs = 2, .max_inputs = 3, .outputs = 1,
               .attrs = {{"stride", AttrKind::Int, false, Attr{std::int64_t{1}}, {}, ">= 1, the step between windows along H and W"}},
               .infer = infer_conv2d, .eval = eval_conv2d, .cost = cost_conv2d, .per_token = spatial_per_token});
  return v;
}

}  // namespace aoc::ir
