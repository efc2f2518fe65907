// The ops that are not arithmetic: the domain crossings the partition pass puts in, and the
// fixed-point loop that owns a region.
#include <algorithm>

#include "compiler/kernels.hpp"
#include "compiler/op_def.hpp"
#include "sim/json_reader.hpp"

namespace aoc::ir {

namespace {

std::vector<Type> infer_convert(const InferCtx& c, const Op& o, const std::vector<Type>& in) {
  if (o.attrs.count("bits") && attr_int(o, "bits") < 1) c.bad("attribute bits must be >= 1");
  if (o.attrs.count("lo") != o.attrs.count("hi")) c.bad("attributes lo and hi go together");
  if (o.attrs.count("lo") && !(attr_number(o, "lo") < attr_number(o, "hi"))) c.bad("attribute lo must be below hi");
  c.f64(in[0], c.operand(o, 0, "input"));
  return {in[0]};
}

std::vector<Tensor> eval_convert(EvalCtx& c, const Op& op, const std::vector<const Tensor*>& in) {
  return single(c.hooks ? c.hooks->convert(op, *in[0], c.ctx) : *in[0]);  // without hooks an ideal converter
}

// The loop's attributes checked: empty when they are fine (the verifier and the interpreter both ask).
std::string fixed_point_problem(const Op& o) {
  const double tol = attr_number(o, "tol"), damping = attr_number(o, "damping");
  const std::int64_t max_iter = attr_int(o, "max_iter");
  if (!(tol >= 0)) return "attribute tol must be >= 0, got " + jsonr::num(tol);
  if (max_iter < 1 || max_iter > std::numeric_limits<int>::max()) return "attribute max_iter must be >= 1, got " + std::to_string(max_iter);
  if (!(damping > 0 && damping <= 1)) return "attribute damping must be in (0, 1], got " + jsonr::num(damping);
  const std::string like = attr_string(o, "like");
  if (std::find(o.inputs.begin(), o.inputs.end(), like) == o.inputs.end())
    return "attribute like \"" + like + "\" must name one of the op's inputs (the iterate has its type)";
  return {};
}

std::vector<Type> infer_fixed_point(const InferCtx& c, const Op& o, const std::vector<Type>& in) {
  if (const std::string p = fixed_point_problem(o); !p.empty()) c.bad(p);
  const auto it = std::find(o.inputs.begin(), o.inputs.end(), attr_string(o, "like"));
  const Type z = in[static_cast<std::size_t>(it - o.inputs.begin())];
  c.f64(z, "the iterate (like '" + *it + "')");
  return {c.region(o, z, in)};
}

std::vector<Tensor> eval_fixed_point(EvalCtx& c, const Op& op, const std::vector<const Tensor*>& in) {
  if (const std::string p = fixed_point_problem(op); !p.empty()) c.fail(p);
  return single(c.solve(op, in));
}

}  // namespace

std::vector<OpDef> control_ops() {
  std::vector<OpDef> v;
  v.push_back({.kind = OpKind::Convert, .name = "Convert",
               .summary = "a crossing between the analog and the digital domain (the partition pass puts it in): the identity in the interpreter, a quantizer on the simulator",
               .operands = {"x"}, .min_inputs = 1, .max_inputs = 1, .outputs = 1,
               .attrs = {{"to", AttrKind::String, true, std::nullopt, {"analog", "digital"}, "digital: an ADC; analog: a DAC"},
                         {"bits", AttrKind::Int, false, std::nullopt, {}, ">= 1: the converter's resolution (absent: the target's)"},
                         {"lo", AttrKind::Number, false, std::nullopt, {}, "the full-scale range's low end, with hi"},
                         {"hi", AttrKind::Number, false, std::nullopt, {}, "the full-scale range's high end, above lo"}},
               .infer = infer_convert, .eval = eval_convert,
               .cost = [](const CostCtx&, const Op&) { return DigitalCost{0, "0 (counted as conversions)"}; }});
  v.push_back({.kind = OpKind::FixedPoint, .name = "FixedPoint",
               .summary = "z* = f(z*; captures): iterates its body from z = 0 until the stop rule holds",
               .operands = {"capture"}, .min_inputs = 1, .max_inputs = -1, .outputs = 1,
               .attrs = {{"tol", AttrKind::Number, true, std::nullopt, {}, ">= 0: the stop rule's tolerance (0: run max_iter steps)"},
                         {"max_iter", AttrKind::Int, true, std::nullopt, {}, ">= 1: the most steps"},
                         {"like", AttrKind::String, true, std::nullopt, {}, "the input whose type the iterate has"},
                         {"damping", AttrKind::Number, false, Attr{1.0}, {}, "in (0, 1]: z <- (1 - d) z + d f(z)"},
                         {"rule", AttrKind::String, false, Attr{std::string("relative")}, {"relative", "fixed", "twin", "released"},
                          "the stop rule (docs/ir.md, \"FixedPoint\")"},
                         {"layout", AttrKind::String, false, std::nullopt, {"native", "assisted"},
                          "set by the loop-form pass: native, the loop closes in the analog domain; assisted, digital ops inside it"}},
               .infer = infer_fixed_point, .eval = eval_fixed_point, .region = true});
  return v;
}

}  // namespace aoc::ir
