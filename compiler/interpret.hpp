// The graph interpreter: runs a Graph in double precision, op by op, exactly as ir.hpp and
// docs/ir.md define the ops. It is the semantic ground truth every lowering is tested against. A run
// first plans each region once (a slot per value, each operand resolved, each value freed after its
// last reader, a FixedPoint's captures bound by reference, the fused selective-scan steps chosen),
// then runs the plan for every token and iteration without looking anything up by name.
//
// It does not need the verifier: it checks the shapes it relies on and throws aoc::Error with one
// line naming the op ("interpret: op #3 Linear 'proj': ..."; ops are numbered from 0 in definition
// order; an op inside a FixedPoint body is named after its FixedPoint: "... FixedPoint 'fp' body op
// #1 Mul 'm': ..."). Symbols in the declared input (and weight) shapes are bound from the tensors
// given; a tensor whose fixed dims differ from its declaration is an error naming it.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "compiler/ir.hpp"

namespace aoc::ir {

// How the sequence (axis 1) is run (docs/ir.md, "Sequential mode"). Simultaneous: every op sees the
// whole [B, L, ...] sequence and a FixedPoint iterates all tokens at once. Sequential: the graph runs
// token by token on the [B, 1, ...] slices of the inputs of rank >= 2; Conv1dCausal, Scan and
// CausalAttention carry their state from token to token, a FixedPoint solves each token with the
// earlier tokens' states held fixed and then commits the states. Both have the same fixed points on
// a contractive model.
enum class Mode { Simultaneous, Sequential };

// Where an op runs, for hooks that model the hardware (noise keys, conversion counts).
struct OpContext {
  int iteration = -1;  // the step of the innermost FixedPoint, from 0; -1 outside any loop
  int token = -1;      // the token in sequential mode; -1 in simultaneous mode
  int tokens = 1;      // the sequence length in sequential mode (so that (row, token) names one solve)
};

// How a lowered program's hardware ops are computed (runtime/backend/backend.hpp implements them). Without
// hooks an optical op is its exact product and a Convert the identity.
struct Hooks {
  virtual ~Hooks() = default;
  // An op placed optical: y[..., out] = sum_in x[..., in] W(out, in), W the op's weight operand
  // (Linear: w[out, in]; MatMul: w[in, out]).
  virtual Tensor optical(const Op& op, const Tensor& x, const Tensor& w, const OpContext& ctx) const = 0;
  virtual Tensor convert(const Op& op, const Tensor& x, const OpContext& ctx) const = 0;
};

struct InterpretOptions {
  int threads = 1;     // OpenMP threads for the contractions (results do not depend on it)
  bool trace = false;  // return every top-level value, not only the graph's outputs (sequential
                       // mode: those that carry the sequence concatenated over the tokens)
  const Hooks* hooks = nullptr;
  Mode mode = Mode::Simultaneous;
  // FixedPoint ops under the relative rule stop a sample at the noise floor after this many steps
  // without progress (SolverOptions::floor_patience; the sim backend sets it when noise is on).
  int floor_patience = 0;
  bool fuse = true;  // a FixedPoint body's selective-scan steps as one pass (the same values; false: the ops as written)
  // Called after each token (sequential mode: done = tokens run, total = L) and after each step of
  // a top-level FixedPoint (simultaneous mode: done = steps, total = its max_iter), for progress.
  std::function<void(long long done, long long total)> progress;
};

// One top-level FixedPoint op's run: per sample (the iterate's leading axis), the steps it took and
// whether it met the tolerance, with the same meaning as sim/solver.hpp's SolveResult. In sequential
// mode each token is a solve of its own: B*L entries, sample-major (entry b*L + t is batch row b at
// token t), and the steps do not count the one committing evaluation that follows each solve.
struct FixedPointStats {
  std::string op;  // the op's name (its first output's name when it has none)
  std::vector<int> iterations;
  std::vector<std::uint8_t> converged;
  std::vector<std::uint8_t> at_floor;  // stopped at the noise floor (InterpretOptions::floor_patience)
  std::vector<std::size_t> shape;  // of iterations and converged: [B], or [B, L] in sequential mode
};

struct InterpretResult {
  std::map<std::string, Tensor> values;  // the graph's outputs (every top-level value when trace)
  std::vector<FixedPointStats> fixed_points;  // top-level FixedPoint ops, in execution order
  long long fused_steps = 0;  // evaluations of a body's selective-scan step (Einsum, Scan, Einsum) run as one pass
};

// Runs g on the given inputs (by name; exactly the declared inputs), with weights looked up by name
// in w (visible everywhere, also inside FixedPoint bodies).
InterpretResult interpret(const Graph& g, const WeightStore& w, const std::map<std::string, Tensor>& inputs,
                          const InterpretOptions& options = {});

}  // namespace aoc::ir
