// The ops along the sequence axis (axis 1): each keeps a state from token to token in sequential
// mode (kernels::*_step), and acts along the whole sequence otherwise.
#include <algorithm>

#include "compiler/kernels.hpp"
#include "compiler/op_def.hpp"
#include "sim/json_reader.hpp"

namespace aoc::ir {

namespace {

std::vector<Type> infer_conv(const InferCtx& c, const Op& o, const std::vector<Type>& in) {
  const Type &x = in[0], &w = in[1];
  const std::string xr = c.operand(o, 0, "x"), wr = c.operand(o, 1, "w");
  c.f64(x, xr), c.f64(w, wr), c.rank_at_least(x, xr, 3), c.rank(w, wr, 2);
  const Dim& C = x.shape.back();
  if (!(w.shape[0] == C)) c.bad("w " + to_string(w) + " must have x's " + to_string(C) + " channels as rows, x is " + to_string(x));
  if (in.size() == 3) {
    const std::string br = c.operand(o, 2, "b");
    c.f64(in[2], br), c.rank(in[2], br, 1);
    if (!(in[2].shape[0] == C)) c.bad("bias b " + to_string(in[2]) + " must have x's " + to_string(C) + " channels");
  }
  return {x};
}

std::vector<Tensor> eval_conv(EvalCtx& c, const Op&, const std::vector<const Tensor*>& in) {
  const Tensor* b = in.size() > 2 ? in[2] : nullptr;
  if (c.sequential) return single(kernels::conv1d_causal_step(*in[0], *in[1], b, *c.state, c.commit, c.where));
  return single(kernels::conv1d_causal(*in[0], *in[1], b, c.where));
}

std::vector<Type> infer_scan(const InferCtx& c, const Op& o, const std::vector<Type>& in) {
  const Type &a = in[0], &x = in[1];
  const std::string ar = c.operand(o, 0, "a"), xr = c.operand(o, 1, "x");
  c.f64(a, ar), c.f64(x, xr), c.rank_at_least(a, ar, 2), c.rank_at_least(x, xr, 2);
  if (a.shape.size() > x.shape.size() || !std::equal(a.shape.begin(), a.shape.end(), x.shape.begin()))
    c.bad("a " + to_string(a) + " must match the leading dims of x " + to_string(x));
  if (in.size() == 3) {
    Shape h = x.shape;
    h.erase(h.begin() + 1);
    c.f64(in[2], c.operand(o, 2, "h0"));
    if (!(in[2].shape == h)) c.bad("h0 " + to_string(in[2]) + " must be " + to_string(Type{DType::F64, h}) + " (x without axis 1)");
  }
  return {x};
}

std::vector<Tensor> eval_scan(EvalCtx& c, const Op&, const std::vector<const Tensor*>& in) {
  const Tensor* h0 = in.size() > 2 ? in[2] : nullptr;
  if (c.sequential) return single(kernels::scan_step(*in[0], *in[1], h0, *c.state, c.commit, c.threads, c.where));
  return single(kernels::scan(*in[0], *in[1], h0, c.threads, c.where));
}

std::vector<Type> infer_delay(const InferCtx& c, const Op& o, const std::vector<Type>& in) {
  const std::string xr = c.operand(o, 0, "x");
  c.f64(in[0], xr), c.rank_at_least(in[0], xr, 2);
  return {in[0]};
}

std::vector<Tensor> eval_delay(EvalCtx& c, const Op&, const std::vector<const Tensor*>& in) {
  if (c.sequential) return single(kernels::delay_step(*in[0], *c.state, c.commit, c.where));
  return single(kernels::delay(*in[0], c.where));
}

std::vector<Type> infer_attention(const InferCtx& c, const Op& o, const std::vector<Type>& in) {
  const Type& qt = in[0];
  const std::string qr = c.operand(o, 0, "q");
  c.f64(qt, qr), c.rank(qt, qr, 3);
  if (!(in[1] == qt)) c.bad(c.operand(o, 1, "k") + " is " + to_string(in[1]) + ", q is " + to_string(qt) + ": q, k, v must have one type");
  if (!(in[2] == qt)) c.bad(c.operand(o, 2, "v") + " is " + to_string(in[2]) + ", q is " + to_string(qt) + ": q, k, v must have one type");
  const std::int64_t heads = attr_int(o, "heads");
  if (heads < 1) c.bad("attribute heads must be >= 1");
  if (!qt.shape[2].is_fixed()) c.bad("q " + to_string(qt) + " must have a fixed last dim (split into heads)");
  if (qt.shape[2].size % heads != 0)
    c.bad("the last dim " + std::to_string(qt.shape[2].size) + " of q " + to_string(qt) + " is not divisible by heads " + std::to_string(heads));
  if (const auto theta = attr_number_if(o, "rope_theta")) {
    if (!(*theta > 0)) c.bad("attribute rope_theta must be > 0");
    if ((qt.shape[2].size / heads) % 2 != 0) c.bad("RoPE (rope_theta) needs an even head dim, got " + std::to_string(qt.shape[2].size / heads));
  }
  return {qt};
}

std::vector<Tensor> eval_attention(EvalCtx& c, const Op& op, const std::vector<const Tensor*>& in) {
  const std::int64_t heads = attr_int(op, "heads");
  const std::optional<double> theta = attr_number_if(op, "rope_theta");
  if (c.sequential) return single(kernels::causal_attention_step(*in[0], *in[1], *in[2], heads, theta, *c.state, c.commit, c.where));
  return single(kernels::causal_attention(*in[0], *in[1], *in[2], heads, theta, c.where));
}

DigitalCost cost_attention(const CostCtx& c, const Op& o) {
  const double context = c.seq_len / 2;
  return {2 * c.per_token(c.type(o.outputs[0])) * context,
          "2 x D x context per token (q.k and the weighted sum of v), context = seq_len / 2 = " + jsonr::num(context)};
}

}  // namespace

std::vector<OpDef> sequence_ops() {
  std::vector<OpDef> v;
  v.push_back({.kind = OpKind::Conv1dCausal, .name = "Conv1dCausal", .summary = "depthwise causal convolution along axis 1: x[B, L, ..., C], w[C, K] (, b[C]) -> x's shape; the taps of channel c "
                          "shared by every position between L and C",
               .operands = {"x", "w", "b"}, .min_inputs = 2, .max_inputs = 3, .outputs = 1, .attrs = {}, .infer = infer_conv, .eval = eval_conv,
               .cost = [](const CostCtx& c, const Op& o) {
                 return DigitalCost{c.dim(c.type(o.inputs[1]).shape[1]) * c.per_token(c.type(o.outputs[0])), "K (kernel width) per element"};
               },
               .stateful = true});
  v.push_back({.kind = OpKind::Scan, .name = "Scan",
               .summary = "diagonal linear recurrence along axis 1: h_t = a_t * h_{t-1} + x_t (a broadcast over x's trailing dims); a[B, L, ...], x[B, L, ...] (, h0[B, ...])",
               .operands = {"a", "x", "h0"}, .min_inputs = 2, .max_inputs = 3, .outputs = 1, .attrs = {}, .infer = infer_scan, .eval = eval_scan,
               .cost = [](const CostCtx& c, const Op& o) { return DigitalCost{2 * c.per_token(c.type(o.outputs[0])), "2 per element (a h + x)"}; },
               .stateful = true});
  v.push_back({.kind = OpKind::CausalAttention, .name = "CausalAttention",
               .summary = "q, k, v [B, L, D] -> [B, L, D]: heads of D/heads, RoPE (rotate-half) on q, k when rope_theta is given, causal softmax with scale 1/sqrt(d_head)",
               .operands = {"q", "k", "v"}, .min_inputs = 3, .max_inputs = 3, .outputs = 1,
               .attrs = {{"heads", AttrKind::Int, true, std::nullopt, {}, ">= 1, divides D"},
                         {"rope_theta", AttrKind::Number, false, std::nullopt, {}, "> 0: the RoPE base (absent: no RoPE)"}},
               .infer = infer_attention, .eval = eval_attention, .cost = cost_attention, .stateful = true});
  v.push_back({.kind = OpKind::Delay, .name = "Delay",
               .summary = "the previous token along axis 1: y[:, t] = x[:, t-1], zeros at t = 0 (the state memory of a recurrence)",
               .operands = {"x"}, .min_inputs = 1, .max_inputs = 1, .outputs = 1, .attrs = {}, .infer = infer_delay, .eval = eval_delay,
               .cost = [](const CostCtx&, const Op&) { return DigitalCost{0, "0 (the state memory: the last token's value kept)"}; },
               .stateful = true});
  return v;
}

}  // namespace aoc::ir
