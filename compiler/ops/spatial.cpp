// The image ops on x[..., H, W, C] (channels last; the spatial axes are the last three, so that in
// sequential mode x[B, L, H, W, C] is one image per sample and token): pooling and upsampling.
// Conv2d, a product by a programmed matrix, is in linalg.cpp beside Linear, whose path it shares.
#include "compiler/kernels.hpp"
#include "compiler/op_def.hpp"

namespace aoc::ir {

namespace {

// x's [H, W, C], checked: f64, rank >= 3, fixed H and W; and the integer attribute `attr` >= 1.
std::int64_t spatial_input(const InferCtx& c, const Op& o, const std::vector<Type>& in, const char* attr) {
  const Type& x = in[0];
  const std::string xr = c.operand(o, 0, "x");
  c.f64(x, xr), c.rank_at_least(x, xr, 3);
  const std::size_t r = x.shape.size();
  if (!x.shape[r - 3].is_fixed() || !x.shape[r - 2].is_fixed()) c.bad("x " + to_string(x) + " must have fixed sizes for H and W (dims -3 and -2)");
  const std::int64_t v = attr_int(o, attr);
  if (v < 1) c.bad("attribute " + std::string(attr) + " must be >= 1, got " + std::to_string(v));
  return v;
}

std::vector<Type> infer_pool(const InferCtx& c, const Op& o, const std::vector<Type>& in) {
  const std::int64_t size = spatial_input(c, o, in, "size");
  Shape s = in[0].shape;
  const std::size_t r = s.size();
  if (size > s[r - 3].size || size > s[r - 2].size)
    c.bad("the window " + std::to_string(size) + " x " + std::to_string(size) + " does not fit x " + to_string(in[0]));
  s[r - 3] = Dim::fixed(s[r - 3].size / size), s[r - 2] = Dim::fixed(s[r - 2].size / size);
  return {{DType::F64, s}};
}

std::vector<Type> infer_upsample(const InferCtx& c, const Op& o, const std::vector<Type>& in) {
  const std::int64_t scale = spatial_input(c, o, in, "scale");
  Shape s = in[0].shape;
  const std::size_t r = s.size();
  for (std::size_t i : {r - 3, r - 2}) {
    if (s[i].size > kMaxElements / scale) c.bad("attribute scale " + std::to_string(scale) + " makes x " + to_string(in[0]) + " too large");
    s[i] = Dim::fixed(s[i].size * scale);
  }
  return {{DType::F64, s}};
}

DigitalCost cost_pool(const CostCtx& c, const Op& o) {
  const double size = static_cast<double>(attr_int(o, "size"));
  return {size * size * c.per_token(c.type(o.outputs[0])), "size^2 per result element (a sum or a comparison per window element)"};
}

const AttrSpec kSize{"size", AttrKind::Int, true, std::nullopt, {}, ">= 1, the window's side and its stride; H and W are divided by it (floor)"};

}  // namespace

std::vector<OpDef> spatial_ops() {
  using V = std::vector<const Tensor*>;
  std::vector<OpDef> v;
  v.push_back({.kind = OpKind::AvgPool2d, .name = "AvgPool2d",
               .summary = "the mean of each size x size window, stride size: x[..., H, W, C] -> [..., H / size, W / size, C] (floor)",
               .operands = {"x"}, .min_inputs = 1, .max_inputs = 1, .outputs = 1, .attrs = {kSize}, .infer = infer_pool,
               .eval = [](EvalCtx& c, const Op& op, const V& in) { return single(kernels::pool2d(*in[0], attr_int(op, "size"), false, c.where)); },
               .cost = cost_pool, .per_token = spatial_per_token});
  v.push_back({.kind = OpKind::MaxPool2d, .name = "MaxPool2d",
               .summary = "the largest of each size x size window, stride size: x[..., H, W, C] -> [..., H / size, W / size, C] (floor)",
               .operands = {"x"}, .min_inputs = 1, .max_inputs = 1, .outputs = 1, .attrs = {kSize}, .infer = infer_pool,
               .eval = [](EvalCtx& c, const Op& op, const V& in) { return single(kernels::pool2d(*in[0], attr_int(op, "size"), true, c.where)); },
               .cost = cost_pool, .per_token = spatial_per_token});
  v.push_back({.kind = OpKind::Upsample2d, .name = "Upsample2d",
               .summary = "nearest neighbour: x[..., H, W, C] -> [..., H * scale, W * scale, C]",
               .operands = {"x"}, .min_inputs = 1, .max_inputs = 1, .outputs = 1,
               .attrs = {{"scale", AttrKind::Int, true, std::nullopt, {}, ">= 1, the factor on H and W"}}, .infer = infer_upsample,
               .eval = [](EvalCtx& c, const Op& op, const V& in) { return single(kernels::upsample2d(*in[0], attr_int(op, "scale"), c.where)); },
               .cost = [](const CostCtx& c, const Op& o) { return DigitalCost{c.per_token(c.type(o.outputs[0])), "1 per result element (a copy)"}; },
               .per_token = spatial_per_token});
  return v;
}

}  // namespace aoc::ir
