// One record per op kind: everything aoc knows about an op is in its record (compiler/ops/*.cpp):
// its name, operands, attributes (kind, default, allowed values), shape inference (the verifier),
// evaluation (the interpreter), the sequential-mode rule, and the digital op count the estimate
// charges. The verifier, the JSON reader, the interpreter and the estimate read these records and
// nothing else about an op (docs/ir.md, "Adding an op").
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "compiler/interpret.hpp"
#include "compiler/ir.hpp"

namespace aoc::ir {

// What an attribute holds. Number attributes accept an integer too. Reshape's "shape" is Ints in the
// ONNX convention: 0 copies the input's dim at that position (symbols included), -1 (at most once)
// is inferred from the element count.
enum class AttrKind { Number, Int, String, Ints };

struct AttrSpec {
  const char* name;
  AttrKind kind;
  bool required = false;
  std::optional<Attr> dflt;           // the value when absent (none: the absence means something, e.g. no RoPE)
  std::vector<std::string> choices;   // String: the allowed values (empty: any)
  const char* doc = "";               // the meaning and range, for docs/ir.md and --help
};

// Shape inference's tools: each check fails with one line naming the op ("verify: op #4 Linear
// 'proj': input W ...").
struct InferCtx {
  const Graph* graph = nullptr;
  std::string where;  // "verify: op #4 Linear 'proj': "
  // FixedPoint: verifies the body with the iterate's type z and the captures' types; returns z.
  std::function<Type(const Op&, const Type& z, const std::vector<Type>& in)> region;

  [[noreturn]] void bad(const std::string& what) const;
  std::string operand(const Op& o, std::size_t i, const char* role) const;  // "W 'layer0.w'"
  void f64(const Type& t, const std::string& role) const;
  void rank(const Type& t, const std::string& role, std::size_t r) const;
  void rank_at_least(const Type& t, const std::string& role, std::size_t r) const;
  Type broadcast(const Type& a, const Type& b) const;  // numpy rules on trailing dims
  std::int64_t norm_axis(std::int64_t axis, std::size_t rank) const;
};

// What a kernel may use of the interpreter's state.
struct EvalCtx {
  std::string where;  // "interpret: op #3 Linear 'proj'"
  int threads = 1;
  const Hooks* hooks = nullptr;
  OpContext ctx;
  bool sequential = false;
  std::vector<Tensor>* state = nullptr;  // sequential mode, a stateful op: its instance's state
  bool commit = true;                    // whether this evaluation may update `state`
  // FixedPoint: solves the op's body on the operands (the interpreter's stop rules).
  std::function<Tensor(const Op&, const std::vector<const Tensor*>&)> solve;

  [[noreturn]] void fail(const std::string& msg) const;
};

// The digital op count of an op run on the CPU next to the core (docs/energy.md, "Programs"), per
// token, and the rule that gives it (printed in the estimate's report).
struct CostCtx {
  std::function<const Type&(const std::string&)> type;  // every value's type
  double seq_len = 1;                                    // the estimate's sequence length
  double per_token(const Type& t) const;                 // elements per token: symbols count 1
  static double dim(const Dim& d) { return d.is_fixed() ? static_cast<double>(d.size) : 1.0; }  // a symbol counts 1
};
struct DigitalCost {
  double ops = 0;
  std::string rule;
};

struct OpDef {
  OpKind kind;
  const char* name;
  const char* summary;
  std::vector<const char*> operands;  // roles, in order ("x", "W", "b"); the last may repeat when max_inputs < 0
  int min_inputs, max_inputs;         // max -1: unbounded
  int outputs;                        // -1: one or more (Split)
  std::vector<AttrSpec> attrs;
  std::vector<Type> (*infer)(const InferCtx&, const Op&, const std::vector<Type>&);
  std::vector<Tensor> (*eval)(EvalCtx&, const Op&, const std::vector<const Tensor*>&);
  DigitalCost (*cost)(const CostCtx&, const Op&) = nullptr;  // nullptr: 1 op per result element
  // Sequential mode: refuses (ctx.fail) an op that would act along axis 1 of the operands `seq`
  // (those carrying the sequence); nullptr: the op is per-token for any operand.
  void (*per_token)(const EvalCtx&, const Op&, const std::vector<const Tensor*>&, const std::vector<std::size_t>& seq) = nullptr;
  bool stateful = false;  // keeps a state from token to token in sequential mode
  bool region = false;    // owns a body (FixedPoint)
};

const OpDef& op_def(OpKind k);
std::string arity_text(const OpDef& d);  // how many operands it takes: "2", "2 to 3", "at least 1"

// For the records: one result; the per_token rule of an op acting along x's last axis (operand 0),
// which is the sequence axis at rank 2.
inline std::vector<Tensor> single(Tensor t) {
  std::vector<Tensor> v;
  v.push_back(std::move(t));
  return v;
}
void last_axis_per_token(const EvalCtx& c, const Op& op, const std::vector<const Tensor*>& in, const std::vector<std::size_t>& seq);
// The per_token rule of an op acting on x's last three axes [H, W, C] (operand 0): at rank < 5 one
// of them is the sequence axis ([B, L, H, W, C] is a token's image per sample).
void spatial_per_token(const EvalCtx& c, const Op& op, const std::vector<const Tensor*>& in, const std::vector<std::size_t>& seq);
std::optional<OpKind> op_kind(const std::string& name);  // nullopt: unknown op
std::vector<std::string> op_names();                     // every op, in OpKind order
const AttrSpec* attr_spec(OpKind k, const std::string& attr);  // nullptr: not an attribute of k

// The one attribute reader: an op's attribute, or its record's default when absent. Throws
// aoc::Error naming the attribute when it is missing without a default or holds another kind.
double attr_number(const Op& op, const std::string& name);
std::int64_t attr_int(const Op& op, const std::string& name);
std::string attr_string(const Op& op, const std::string& name);
std::vector<std::int64_t> attr_ints(const Op& op, const std::string& name);
// Absent without a default (an attribute whose absence means something, e.g. no RoPE, not yet lowered): nullopt.
std::optional<double> attr_number_if(const Op& op, const std::string& name);
std::optional<std::int64_t> attr_int_if(const Op& op, const std::string& name);
std::optional<std::string> attr_string_if(const Op& op, const std::string& name);

// Where the compiler put an op (the attribute `place`; Unplaced before the lowering passes).
enum class Place { Unplaced, Optical, Analog, Digital };
Place place(const Op& op);
void set_place(Op& op, Place p);
const char* to_string(Place p);

// Calls f on every op of ops and, depth first, of their bodies; depth 0 at the top.
void walk(const std::vector<Op>& ops, const std::function<void(const Op&, int depth)>& f, int depth = 0);
void walk(std::vector<Op>& ops, const std::function<void(Op&, int depth)>& f, int depth = 0);

// The family lists the registry is built from (compiler/ops/*.cpp); each holds its ops' records.
std::vector<OpDef> linalg_ops();
std::vector<OpDef> elementwise_ops();
std::vector<OpDef> sequence_ops();
std::vector<OpDef> data_ops();
std::vector<OpDef> spatial_ops();
std::vector<OpDef> control_ops();

}  // namespace aoc::ir
