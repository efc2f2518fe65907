#include "compiler/interpret.hpp"

#include "compiler/kernels.hpp"
#include "compiler/op_def.hpp"
#include "sim/solver.hpp"
#include "sim/threads.hpp"

#include <algorithm>
#include <cstdint>
#if defined(__AVX2__)
#include <immintrin.h>
#endif
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>
#include <set>
#include <sstream>

#include "sim/error.hpp"
#include "sim/json_reader.hpp"

namespace aoc::ir {

namespace {

using namespace kernels;
using Env = std::map<std::string, Tensor>;

// ---- the walker ----

class Interp {
 public:
  Interp(const WeightStore& w, const InterpretOptions& opt) : w_(w), opt_(opt) {}
  std::vector<FixedPointStats> stats;
  long long fused_steps = 0;

  // Runs ops in order in env. head is "interpret:" at the top level, "<FixedPoint's where> body"
  // inside a body; stats are kept for top-level FixedPoints only. A body's selective-scan steps
  // (ssd_steps: results, the body's results) run fused.
  void run_ops(const std::vector<Op>& ops, Env& env, const std::string& head, bool top, const std::vector<std::string>* results = nullptr) {
    const std::vector<char>* fused = results && opt_.fuse ? &ssd_steps(ops, *results) : nullptr;
    for (size_t i = 0; i < ops.size(); ++i) {
      const Op& op = ops[i];
      const std::string where = where_of(ops, i, head);
      if (fused && (*fused)[i] && ssd_step(ops, i, env, head)) {
        i += 2;
        continue;
      }
      std::vector<const Tensor*> in;
      for (const auto& name : op.inputs) in.push_back(&lookup(env, name, where));
      const bool per_token_results = sequential() && per_token(op, in, where);
      std::vector<Tensor> out = eval(op, in, where, top);
      if (out.size() != op.outputs.size())
        fail(where, "makes " + std::to_string(out.size()) + " results but names " + std::to_string(op.outputs.size()));
      for (size_t k = 0; k < out.size(); ++k) {
        if (env.count(op.outputs[k])) fail(where, "value '" + op.outputs[k] + "' is already defined");
        if (per_token_results) {
          one_token_result(out[k], op.outputs[k], where);
          seq_.insert(op.outputs[k]);
        }
        env.emplace(op.outputs[k], std::move(out[k]));
      }
    }
  }

  static std::string where_of(const std::vector<Op>& ops, size_t i, const std::string& head) {
    const Op& op = ops[i];
    const std::string label = !op.name.empty() ? op.name : !op.outputs.empty() ? op.outputs[0] : std::string();
    return head + " op #" + std::to_string(i) + " " + op_def(op.kind).name + " '" + label + "'";
  }

  // ---- a selective-scan step, fused ----
  // Mamba2's recurrence as the importer writes it: Einsum blh,bln,blhp->blhpn (dt_h B_n x_hp), Scan
  // (h = a_h h_prev + that), Einsum bln,blhpn->blhp (y = C . h), where no other op reads the two
  // [B, L, H, P, N] intermediates. Run as one pass over the state, each element's arithmetic the
  // three ops' own (the same values, tests/test_interpret.cpp), without writing the intermediates:
  // one token at a time through a large implicit model they are most of the digital work's memory
  // traffic. Which ops of a body start one, computed once per body.
  const std::vector<char>& ssd_steps(const std::vector<Op>& ops, const std::vector<std::string>& results) {
    auto [it, fresh] = ssd_.try_emplace(&ops);
    if (!fresh) return it->second;
    std::vector<char>& at = it->second;
    at.assign(ops.size(), 0);
    auto canonical = [](const Op& op) {  // the spec with its letters renamed in order of appearance
      std::string spec, out;
      const auto it = op.attrs.find("spec");
      const std::string* text = it == op.attrs.end() ? nullptr : std::get_if<std::string>(&it->second);
      if (text) spec = kernels::parse_einsum(*text).text;
      std::map<char, char> name;
      for (char c : spec) out += c >= 'a' && c <= 'z' ? name.try_emplace(c, static_cast<char>('a' + name.size())).first->second : c;
      return out;
    };
    auto read_elsewhere = [&](const std::string& v, size_t reader) {
      if (std::find(results.begin(), results.end(), v) != results.end()) return true;
      for (size_t k = 0; k < ops.size(); ++k)
        if (k != reader && std::find(ops[k].inputs.begin(), ops[k].inputs.end(), v) != ops[k].inputs.end()) return true;
      return false;
    };
    for (size_t i = 0; i + 2 < ops.size(); ++i) {
      const Op &in = ops[i], &sc = ops[i + 1], &out = ops[i + 2];
      if (in.kind != OpKind::Einsum || sc.kind != OpKind::Scan || out.kind != OpKind::Einsum) continue;
      if (in.inputs.size() != 3 || in.outputs.size() != 1 || sc.inputs.size() < 2 || sc.inputs.size() > 3 || sc.outputs.size() != 1 ||
          out.inputs.size() != 2 || out.outputs.size() != 1)
        continue;
      if (sc.inputs[1] != in.outputs[0] || out.inputs[1] != sc.outputs[0]) continue;
      if (canonical(in) != "abc,abd,abce->abced" || canonical(out) != "abc,abdec->abde") continue;
      if (read_elsewhere(in.outputs[0], i + 1) || read_elsewhere(sc.outputs[0], i + 2)) continue;
      at[i] = 1;
    }
    return at;
  }

  // The step at ops[i .. i + 2]; false (nothing done) where the operands' shapes are not the step's,
  // so that the three ops run (and report) as written.
  bool ssd_step(const std::vector<Op>& ops, size_t i, Env& env, const std::string& head) {
    const Op &in_op = ops[i], &scan_op = ops[i + 1], &out_op = ops[i + 2];
    const std::string where = where_of(ops, i + 2, head), in_where = where_of(ops, i, head), scan_where = where_of(ops, i + 1, head);
    const Tensor &dt = lookup(env, in_op.inputs[0], in_where), &Bm = lookup(env, in_op.inputs[1], in_where), &x = lookup(env, in_op.inputs[2], in_where);
    const Tensor &a = lookup(env, scan_op.inputs[0], scan_where), &C = lookup(env, out_op.inputs[0], where);
    const Tensor* h0 = scan_op.inputs.size() > 2 ? &lookup(env, scan_op.inputs[2], scan_where) : nullptr;
    if (x.shape.size() != 4 || Bm.shape.size() != 3) return false;
    const std::int64_t B = x.shape[0], L = x.shape[1], H = x.shape[2], P = x.shape[3], N = Bm.shape[2];
    if (dt.shape != Dims{B, L, H} || a.shape != Dims{B, L, H} || Bm.shape != Dims{B, L, N} || C.shape != Dims{B, L, N}) return false;
    if (h0 && h0->shape != Dims{B, H, P, N}) return false;
    std::vector<Tensor>* state = nullptr;
    const Tensor* prev = h0;
    if (sequential()) {
      if (L != 1) return false;
      state = &states_[scan_where];
      if (!state->empty()) {
        if ((*state)[0].shape != Dims{B, H, P, N}) return false;
        prev = &(*state)[0];
      }
    }
    if (env.count(out_op.outputs[0])) fail(where, "value '" + out_op.outputs[0] + "' is already defined");
    Tensor y = make({B, L, H, P});
    // A committing step writes the new state over the old one in place (each element is read and
    // written by its own lane alone); the first token's, from h0 or zeros, goes to a new tensor.
    const bool commit = state && commit_;
    Tensor first_state;
    double* h_out = nullptr;
    if (commit) h_out = state->empty() ? (first_state = make({B, H, P, N})).data.data() : (*state)[0].data.data();
    constexpr std::int64_t kLanes = 8;  // states p .. p + 7 together: their readout sums interleave
    const std::int64_t jobs = B * H;
#pragma omp parallel for num_threads(opt_.threads) if (opt_.threads > 1 && jobs > 1) schedule(static)
    for (std::int64_t job = 0; job < jobs; ++job) {
      const std::int64_t b = job / H, hh = job % H;
      // rows[l N + n]: the state of p0 + l at n, each lane's states contiguous in n like the states
      // it reads, so that the update vectorises (readout8 transposes them for the readout)
      thread_local std::vector<double> rows;
      rows.resize(static_cast<size_t>(kLanes * N));
      for (std::int64_t p0 = 0; p0 < P; p0 += kLanes) {
        const std::int64_t lanes = std::min(kLanes, P - p0);
        for (std::int64_t t = 0; t < L; ++t) {
          const std::int64_t bt = b * L + t;
          const double a_h = a.data[static_cast<size_t>(bt * H + hh)], dt_h = dt.data[static_cast<size_t>(bt * H + hh)];
          const double* Bn = Bm.data.data() + bt * N;
          const double* Cn = C.data.data() + bt * N;
          for (std::int64_t l = 0; l < lanes; ++l) {
            const double xv = x.data[static_cast<size_t>((bt * H + hh) * P + p0 + l)];
            double* r = rows.data() + l * N;
            const double* from = t > 0 ? r : prev ? prev->data.data() + ((b * H + hh) * P + p0 + l) * N : nullptr;
            if (!from) std::fill_n(r, N, 0.0), from = r;
            for (std::int64_t n = 0; n < N; ++n) {
              const double dbx = 0.0 + (dt_h * Bn[n]) * xv;  // Einsum: 1 x dt x B x x, then the sum of one term
              r[n] = fmadd(a_h, from[n], dbx);               // Scan
            }
          }
          static_assert(kLanes == 8, "readout8 reads out 8 lanes");
          double acc[kLanes];
          readout8(rows.data(), N, Cn, acc);  // Einsum: the sum over n in order, 1 x C x h per term
          for (std::int64_t l = 0; l < lanes; ++l) y.data[static_cast<size_t>((bt * H + hh) * P + p0 + l)] = acc[l];
        }
        if (commit)
          for (std::int64_t l = 0; l < lanes; ++l)
            std::copy_n(rows.data() + l * N, N, h_out + ((b * H + hh) * P + p0 + l) * N);
      }
    }
    if (commit && state->empty()) state->push_back(std::move(first_state));
    bool carries = false;
    for (const Op* op : {&in_op, &scan_op, &out_op})
      for (const std::string& v : op->inputs) carries = carries || seq_.count(v) > 0;
    if (sequential() && carries) {
      one_token_result(y, out_op.outputs[0], where);
      seq_.insert(out_op.outputs[0]);
    }
    env.emplace(out_op.outputs[0], std::move(y));
    ++fused_steps;
    return true;
  }

  const Tensor& lookup(const Env& env, const std::string& name, const std::string& where) const {
    if (auto it = env.find(name); it != env.end()) return it->second;
    if (auto it = w_.find(name); it != w_.end()) return it->second;
    fail(where, "unknown value '" + name + "'");
  }

  // Sequential mode: marks a value whose axis 1 is the sequence axis (a graph input of rank >= 2);
  // values computed from such values are marked as they are defined.
  void mark_sequence(const std::string& name) { seq_.insert(name); }
  bool carries_sequence(const std::string& name) const { return seq_.count(name) > 0; }
  void set_token(int t, int tokens) { ctx_.token = t, ctx_.tokens = tokens; }

 private:
  const WeightStore& w_;
  const InterpretOptions& opt_;
  OpContext ctx_;  // what the hooks are told about the op they compute

  // ---- sequential mode state (unused in simultaneous mode) ----
  // The state of each stateful op instance, keyed by its position (`where`: the region path and
  // the op's index, unique per instance even where FixedPoints share a body); empty before the
  // first token.
  std::map<std::string, std::vector<Tensor>> states_;
  bool commit_ = true;        // whether this evaluation updates the states (false in FixedPoint iterations)
  std::set<std::string> seq_;  // values whose axis 1 is the sequence axis
  std::map<const std::vector<Op>*, std::vector<char>> ssd_;  // per body: where its fused steps start

  bool sequential() const { return opt_.mode == Mode::Sequential; }

  // Refuses an op that would make a token's result depend on other tokens, which one token at a
  // time cannot compute: one that acts along axis 1 of an operand carrying the sequence (its record's
  // per_token rule, from attributes and ranks); what moves axis 1 otherwise (a Reshape to [B, L*D])
  // is caught on its result by one_token_result. Returns whether the op's results carry the sequence.
  bool per_token(const Op& op, const std::vector<const Tensor*>& in, const std::string& where) const {
    std::vector<size_t> seq;
    for (size_t i = 0; i < op.inputs.size(); ++i)
      if (seq_.count(op.inputs[i])) seq.push_back(i);
    if (seq.empty()) return false;
    if (const auto rule = op_def(op.kind).per_token) {
      EvalCtx c;
      c.where = where;
      rule(c, op, in, seq);
    }
    return true;
  }

  // A result computed from the sequence is one token, [B, 1, ...]; any other shape means the op
  // moved or merged axis 1.
  static void one_token_result(const Tensor& t, const std::string& name, const std::string& where) {
    if (t.shape.size() < 2 || t.shape[1] != 1)
      fail(where, "result '" + name + "' is " + shape_text(t.shape) + " at one token, not [B, 1, ...]: the op moves the sequence axis; " +
                      "sequential mode needs per-token ops");
  }

  // The op's record evaluates it; the interpreter supplies the context (the hooks, the sequential
  // state of this op instance, and the solve of a FixedPoint's body).
  std::vector<Tensor> eval(const Op& op, const std::vector<const Tensor*>& in, const std::string& where, bool top) {
    const OpDef& def = op_def(op.kind);
    const size_t n = in.size();
    if (n < static_cast<size_t>(def.min_inputs) || (def.max_inputs >= 0 && n > static_cast<size_t>(def.max_inputs)))
      fail(where, "takes " + arity_text(def) + " operands, got " + std::to_string(n));
    if (def.outputs >= 0 && op.outputs.size() != static_cast<size_t>(def.outputs))
      fail(where, "must have " + std::to_string(def.outputs) + " result, names " + std::to_string(op.outputs.size()));
    EvalCtx c;
    c.where = where;
    c.threads = opt_.threads;
    c.hooks = opt_.hooks;
    c.ctx = ctx_;
    c.sequential = sequential();
    c.state = def.stateful && sequential() ? &states_[where] : nullptr;
    c.commit = commit_;
    if (def.region) c.solve = [&](const Op& fp, const std::vector<const Tensor*>& args) { return fixed_point(fp, args, where, top); };
    try {
      return def.eval(c, op, in);
    } catch (const Error& e) {  // an attribute reader's message names no op
      if (std::string(e.what()).rfind("interpret:", 0) == 0) throw;
      fail(where, e.what());
    }
  }

  // The op's loop is sim/solver's, with the samples along the iterate's leading axis: the body runs
  // on the whole batch every step (compact = false); under the per-sample rule a sample that has
  // stopped keeps its value (its results do not depend on the others as long as the body treats
  // samples independently, as models do).
  Tensor fixed_point(const Op& op, const std::vector<const Tensor*>& in, const std::string& where, bool top) {
    if (!op.body) fail(where, "has no body");
    const Region& body = *op.body;
    if (body.args.size() != in.size() + 1)
      fail(where, "body takes " + std::to_string(body.args.size()) + " args, expected " + std::to_string(in.size() + 1) +
                      " (the iterate, then each operand)");
    if (body.results.size() != 1) fail(where, "body must have 1 result, has " + std::to_string(body.results.size()));
    const double tol = attr_number(op, "tol"), damping = attr_number(op, "damping");  // checked by the record
    const std::int64_t max_iter = attr_int(op, "max_iter");
    const std::string rule = attr_string(op, "rule"), like = attr_string(op, "like");
    const auto li = std::find(op.inputs.begin(), op.inputs.end(), like);
    const Dims zshape = in[li - op.inputs.begin()]->shape;
    const std::int64_t S = zshape.empty() ? 1 : zshape[0];
    const std::int64_t N = S == 0 ? 0 : numel(zshape) / S;
    const std::string body_head = where + " body";
    if (sequential()) {  // the body's args carry the sequence when the values bound to them do
      if (seq_.count(like)) seq_.insert(body.args[0]);
      for (size_t i = 0; i < in.size(); ++i)
        if (seq_.count(op.inputs[i])) seq_.insert(body.args[i + 1]);
    }

    const int outer_iteration = ctx_.iteration;
    int step = 0;
    auto f = [&](const Tensor& z) {
      ctx_.iteration = step++;
      Env scope;
      scope[body.args[0]] = z;
      for (size_t i = 0; i < in.size(); ++i) scope[body.args[i + 1]] = *in[i];
      run_ops(body.ops, scope, body_head, false, &body.results);
      Tensor fz = lookup(scope, body.results[0], body_head);
      if (fz.shape != z.shape) fail(where, "body result has shape " + shape_text(fz.shape) + ", the iterate " + shape_text(z.shape));
      if (top && !sequential() && opt_.progress) opt_.progress(step, max_iter);
      return fz;
    };
    if (S > std::numeric_limits<int>::max() || N > std::numeric_limits<int>::max())
      fail(where, "the iterate " + shape_text(zshape) + " has too many samples or elements per sample");
    SolverOptions so;
    so.rule = rule == "relative" ? StopRule::Relative : rule == "fixed" ? StopRule::FixedCount : rule == "twin" ? StopRule::Twin : StopRule::Released;
    so.max_iter = static_cast<int>(max_iter), so.tol = tol, so.damping = damping, so.compact = false;
    so.floor_patience = opt_.floor_patience;
    const bool commit = commit_;
    commit_ = false;  // sequential mode: the iterations read the committed states and leave them
    Tensor zt = make(zshape);
    const StepFn<double> step_fn = [&](const Batch<double>& z, const Batch<double>&, const Batch<double>*, Batch<double>& out,
                                       const StepContext& sc) {
      for (std::int64_t r = 0; r < S; ++r) std::copy_n(z.row(static_cast<int>(r)), N, zt.data.begin() + r * N);
      if (sc.final) commit_ = commit;  // the released rule's final call commits the states
      const Tensor fz = f(zt);
      for (std::int64_t r = 0; r < S; ++r) std::copy_n(fz.data.begin() + r * N, N, out.row(static_cast<int>(r)));
    };
    const Batch<double> zero(static_cast<int>(S), static_cast<int>(N));
    const SolveResult sr = solve_fixed_point<double>(step_fn, zero, zero, so);

    FixedPointStats st;
    st.op = op.name.empty() ? op.outputs[0] : op.name;
    st.iterations = sr.iterations;
    st.converged = sr.converged;
    st.at_floor = sr.at_floor;
    st.shape = {static_cast<std::size_t>(S)};
    Tensor result = make(zshape);
    for (std::int64_t r = 0; r < S; ++r)
      for (std::int64_t j = 0; j < N; ++j) result.data[r * N + j] = sr.z(r, j);
    // Sequential mode: under the rules without a final call, one more evaluation at the result
    // updates the states of the body's stateful ops (when the enclosing evaluation commits), as the
    // reference's final call does; the op's result stays the iterate the rule returned.
    commit_ = commit;
    if (sequential() && so.rule != StopRule::Released) {
      // the step after the cap, whatever the batch's other samples took: the noise of this read is
      // keyed by its step, and a sample's result must not depend on the batch it ran in
      step = static_cast<int>(max_iter);
      f(result);
    }
    ctx_.iteration = outer_iteration;
    if (top) stats.push_back(std::move(st));
    return result;
  }
};

// Checks a given tensor against its declaration, binding the declaration's symbols.
void bind_symbols(const std::string& what, const Value& decl, const Tensor& t, std::map<std::string, std::int64_t>& syms) {
  const std::string where = "interpret: " + what + " '" + decl.name + "'";
  if (static_cast<std::int64_t>(t.data.size()) != numel(t.shape))
    fail(where, "has shape " + shape_text(t.shape) + " but " + std::to_string(t.data.size()) + " numbers");
  const Shape& s = decl.type.shape;
  if (t.shape.size() != s.size())
    fail(where, "declared " + to_string(decl.type) + ", got shape " + shape_text(t.shape));
  for (size_t i = 0; i < s.size(); ++i) {
    // an empty batch or sequence has nothing to run (and nothing to divide its work by)
    if (t.shape[i] == 0)
      fail(where, "has shape " + shape_text(t.shape) + ": no elements along axis " + std::to_string(i) +
                      (s[i].is_fixed() ? std::string() : " (" + s[i].sym + " = 0)") + ": nothing to run");
    if (s[i].is_fixed()) {
      if (t.shape[i] != s[i].size)
        fail(where, "declared " + to_string(decl.type) + ", got shape " + shape_text(t.shape) + " (dim " + std::to_string(i) + ")");
    } else {
      auto [it, fresh] = syms.emplace(s[i].sym, t.shape[i]);
      if (!fresh && it->second != t.shape[i])
        fail(where, "declared " + to_string(decl.type) + ", got shape " + shape_text(t.shape) + ": " + s[i].sym + " is already " +
                        std::to_string(it->second));
    }
  }
}

// Sequential mode (docs/ir.md, "Sequential mode"): the graph once per token t on the [B, 1, ...]
// slices of the inputs of rank >= 2 (the others whole), run keeping the stateful ops' states from
// token to token; each output is its per-token results concatenated along axis 1.
InterpretResult run_sequential(const Graph& g, const Env& inputs, Interp& run, bool trace,
                               const std::function<void(long long, long long)>& progress) {
  std::int64_t L = -1;
  std::string first;
  for (const auto& [name, x] : inputs) {
    if (x.shape.size() < 2) continue;
    if (L >= 0 && x.shape[1] != L)
      throw Error("interpret: sequential mode: input '" + name + "' has " + std::to_string(x.shape[1]) +
                  " tokens along axis 1, input '" + first + "' has " + std::to_string(L));
    if (L < 0) L = x.shape[1], first = name;
    run.mark_sequence(name);
  }
  if (L < 0) throw Error("interpret: sequential mode needs an input with a sequence axis (rank >= 2, axis 1); graph '" + g.name + "' has none");
  if (L == 0) throw Error("interpret: sequential mode needs at least one token, input '" + first + "' has none along axis 1");

  std::map<std::string, std::vector<Tensor>> parts;  // per returned value, its result at each token
  std::vector<FixedPointStats> fps;
  for (std::int64_t t = 0; t < L; ++t) {
    Env env;
    for (const auto& [name, x] : inputs) env[name] = x.shape.size() >= 2 ? token_slice(x, t) : x;
    run.stats.clear();
    run.set_token(static_cast<int>(t), static_cast<int>(L));
    run.run_ops(g.ops, env, "interpret:", true);
    for (const auto& name : g.outputs) {
      const std::string where = "interpret: output '" + name + "'";
      const Tensor& y = run.lookup(env, name, where);
      if (!run.carries_sequence(name))
        throw Error(where + " has no sequence axis (it depends on no input of rank >= 2); sequential mode returns per-token outputs");
      if (!trace) parts[name].push_back(y);
    }
    if (trace)
      for (auto& [name, x] : env) parts[name].push_back(std::move(x));
    if (progress) progress(t + 1, L);
    // the top-level FixedPoints run in the same order at every token; their stats go sample-major
    if (t == 0)
      for (const auto& st : run.stats) {
        const size_t n = st.iterations.size() * static_cast<size_t>(L);
        fps.push_back({st.op, std::vector<int>(n, 0), std::vector<std::uint8_t>(n, 0), std::vector<std::uint8_t>(n, 0),
                       {st.iterations.size(), static_cast<size_t>(L)}});
      }
    if (run.stats.size() != fps.size()) throw Error("interpret: sequential mode: token " + std::to_string(t) + " ran another set of FixedPoints");
    for (size_t k = 0; k < fps.size(); ++k)
      for (size_t b = 0; b < run.stats[k].iterations.size(); ++b) {
        const size_t at = b * static_cast<size_t>(L) + static_cast<size_t>(t);
        fps[k].iterations[at] = run.stats[k].iterations[b];
        fps[k].converged[at] = run.stats[k].converged[b];
        if (!run.stats[k].at_floor.empty()) fps[k].at_floor[at] = run.stats[k].at_floor[b];
      }
  }

  InterpretResult res;
  for (const auto& [name, xs] : parts) {
    if (!run.carries_sequence(name)) {  // traced, computed without the sequence: the same at every token
      res.values[name] = xs.back();
      continue;
    }
    std::vector<const Tensor*> ptrs;
    for (const Tensor& x : xs) ptrs.push_back(&x);
    res.values[name] = concat(ptrs, 1, "interpret: output '" + name + "'");
  }
  res.fixed_points = std::move(fps);
  res.fused_steps = run.fused_steps;
  return res;
}

}  // namespace

InterpretResult interpret(const Graph& g, const WeightStore& w, const std::map<std::string, Tensor>& inputs,
                          const InterpretOptions& options) {
  if (options.threads < 1) throw Error("interpret: threads must be at least 1, got " + std::to_string(options.threads));
  std::map<std::string, std::int64_t> syms;
  Env env;
  std::set<std::string> declared;
  for (const Value& v : g.inputs) {
    auto it = inputs.find(v.name);
    if (it == inputs.end()) throw Error("interpret: input '" + v.name + "' is not given");
    bind_symbols("input", v, it->second, syms);
    env[v.name] = it->second;
    declared.insert(v.name);
  }
  for (const auto& [name, t] : inputs)
    if (!declared.count(name)) throw Error("interpret: '" + name + "' is not an input of graph '" + g.name + "'");
  for (const Value& v : g.weights) {
    auto it = w.find(v.name);
    if (it == w.end()) throw Error("interpret: weight '" + v.name + "' is missing from the weights");
    bind_symbols("weight", v, it->second, syms);
  }

  const ScopedThreads threads(options.threads);  // the kernels' elementwise loops
  Interp run(w, options);
  if (options.mode == Mode::Sequential) return run_sequential(g, env, run, options.trace, options.progress);
  run.run_ops(g.ops, env, "interpret:", true);

  InterpretResult res;
  for (const auto& name : g.outputs) res.values[name] = run.lookup(env, name, "interpret: output '" + name + "'");
  if (options.trace)
    for (auto& [name, t] : env) res.values[name] = t;
  res.fixed_points = std::move(run.stats);
  res.fused_steps = run.fused_steps;
  return res;
}

}  // namespace aoc::ir
