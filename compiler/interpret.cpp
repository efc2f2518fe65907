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

// ---- the schedule ----
// A region (the graph's ops, or a FixedPoint's body) is planned once per run: each value gets a
// slot, each operand its slot or its weight, each op its message prefix, its fused selective-scan
// step, its sequential state and, for a FixedPoint, its body's own plan (one per instance, so that
// bodies shared by several FixedPoints keep apart states). The plan holds its frame, the region's
// values, reused across the tokens and iterations that evaluate it: nothing is looked up by name
// while running, and the captures of a body are its caller's tensors, not copies.

struct Plan;

struct Operand {
  int slot = -1;                  // the region's value, or -1
  const Tensor* weight = nullptr;  // else this weight; neither: an unknown value (an error when read)
};

struct Step {
  const Op* op = nullptr;
  std::string where;           // "interpret: op #3 Linear 'proj'"
  std::vector<Operand> in;
  std::vector<int> out;        // the results' slots
  int redefined = -1;          // the first result whose name is already defined, or -1
  bool fused = false;          // starts a selective-scan step run fused (this op and the next two)
  std::vector<int> release;    // slots whose last reader is this op (not the region's results)
  std::vector<Tensor> state;   // sequential mode, a stateful op: its state from token to token
  std::unique_ptr<Plan> body;  // FixedPoint: its body's plan
  EvalCtx ctx;                 // what the op's record is given, filled once
  std::vector<const Tensor*> args;  // the operands of the current evaluation
  std::vector<char> args_seq;       // sequential mode: which of them carry the sequence
};

struct Plan {
  std::vector<std::string> names;  // per slot, the value's name; slots [0, args) are the region's args
  std::size_t args = 0;
  std::vector<Step> steps;
  std::vector<Operand> results;  // a body's results
  // the frame
  std::vector<const Tensor*> val;  // per slot, its value (nullptr: not computed)
  std::vector<Tensor> own;         // the values the region's ops computed (and sliced inputs)
  std::vector<char> seq;           // sequential mode: the value's axis 1 is the sequence axis

  void clear() {  // frees the frame's values (a solve done: as a body's scope was dropped)
    for (std::size_t s = 0; s < val.size(); ++s) val[s] = nullptr;
    for (Tensor& t : own) t = Tensor();
  }
};

// ---- the walker ----

class Interp {
 public:
  Interp(const WeightStore& w, const InterpretOptions& opt) : w_(w), opt_(opt) {}
  std::vector<FixedPointStats> stats;
  long long fused_steps = 0;

  // The plan of ops (a region) whose values start with args; results: a body's (whose
  // selective-scan steps run fused); keep: values never released (the graph's outputs, or all
  // when tracing).
  std::unique_ptr<Plan> plan(const std::vector<Op>& ops, const std::string& head, bool top, const std::vector<std::string>& args,
                             const std::vector<std::string>* results, const std::set<std::string>* keep, bool keep_all) {
    auto p = std::make_unique<Plan>();
    p->names = args, p->args = args.size();
    std::map<std::string, int> defined;
    for (std::size_t i = 0; i < args.size(); ++i) defined[args[i]] = static_cast<int>(i);
    auto resolve = [&](const std::string& name) {
      Operand o;
      if (auto it = defined.find(name); it != defined.end()) o.slot = it->second;
      else if (auto wt = w_.find(name); wt != w_.end()) o.weight = &wt->second;
      return o;
    };
    const std::vector<char> fused = results && opt_.fuse ? ssd_steps(ops, *results) : std::vector<char>(ops.size(), 0);
    p->steps.resize(ops.size());
    for (std::size_t i = 0; i < ops.size(); ++i) {
      Step& s = p->steps[i];
      const Op& op = ops[i];
      s.op = &op, s.where = where_of(ops, i, head), s.fused = fused[i];
      for (const std::string& name : op.inputs) s.in.push_back(resolve(name));
      for (std::size_t k = 0; k < op.outputs.size(); ++k) {
        if (s.redefined < 0 && defined.count(op.outputs[k])) s.redefined = static_cast<int>(k);
        const int slot = static_cast<int>(p->names.size());
        p->names.push_back(op.outputs[k]);
        defined[op.outputs[k]] = slot;
        s.out.push_back(slot);
      }
      if (op.kind == OpKind::FixedPoint && op.body)
        s.body = plan(op.body->ops, s.where + " body", false, op.body->args, &op.body->results, nullptr, false);
    }
    if (results)
      for (const std::string& r : *results) p->results.push_back(resolve(r));
    // lifetimes: an op's value is freed after its last reader, unless the region returns it
    if (!keep_all) {
      std::vector<int> last(p->names.size(), -1);
      for (std::size_t i = 0; i < p->steps.size(); ++i)
        for (const Operand& o : p->steps[i].in)
          if (o.slot >= 0) last[static_cast<std::size_t>(o.slot)] = static_cast<int>(i);
      std::vector<char> kept(p->names.size(), 0);
      for (const Operand& o : p->results)
        if (o.slot >= 0) kept[static_cast<std::size_t>(o.slot)] = 1;
      for (std::size_t v = p->args; v < p->names.size(); ++v)
        if (keep && keep->count(p->names[v])) kept[v] = 1;
      for (std::size_t v = p->args; v < p->names.size(); ++v)
        if (!kept[v] && last[v] >= 0) p->steps[static_cast<std::size_t>(last[v])].release.push_back(static_cast<int>(v));
    }
    p->val.assign(p->names.size(), nullptr);
    p->own.resize(p->names.size());
    p->seq.assign(p->names.size(), 0);
    for (Step& s : p->steps) {  // the records' context, now that the steps stay where they are
      EvalCtx& c = s.ctx;
      c.where = s.where, c.threads = opt_.threads, c.hooks = opt_.hooks, c.sequential = sequential();
      if (op_def(s.op->kind).region) {
        Step* st = &s;
        const bool t = top;
        c.solve = [this, st, t](const Op&, const std::vector<const Tensor*>& args) { return fixed_point(*st, args, t); };
      }
    }
    return p;
  }

  // Runs a planned region on its frame (its args bound). Stats are kept for top-level FixedPoints
  // only.
  void run(Plan& p) {
    for (std::size_t i = 0; i < p.steps.size(); ++i) {
      Step& s = p.steps[i];
      const Op& op = *s.op;
      if (s.fused && ssd_step(p, i)) {
        for (std::size_t k = i; k < i + 3; ++k) release(p, p.steps[k]);
        i += 2;
        continue;
      }
      s.args.clear(), s.args_seq.clear();
      bool any_seq = false;
      for (std::size_t k = 0; k < s.in.size(); ++k) {
        s.args.push_back(&value(p, s.in[k], op.inputs[k], s.where));
        const bool q = s.in[k].slot >= 0 && p.seq[static_cast<std::size_t>(s.in[k].slot)];
        s.args_seq.push_back(q), any_seq = any_seq || q;
      }
      const bool per_token_results = sequential() && any_seq && per_token(s);
      std::vector<Tensor> out = eval(s);
      if (out.size() != op.outputs.size())
        fail(s.where, "makes " + std::to_string(out.size()) + " results but names " + std::to_string(op.outputs.size()));
      for (std::size_t k = 0; k < out.size(); ++k) {
        if (static_cast<int>(k) == s.redefined) fail(s.where, "value '" + op.outputs[k] + "' is already defined");
        const std::size_t slot = static_cast<std::size_t>(s.out[k]);
        if (per_token_results) {
          one_token_result(out[k], op.outputs[k], s.where);
          p.seq[slot] = 1;
        }
        p.own[slot] = std::move(out[k]);
        p.val[slot] = &p.own[slot];
      }
      release(p, s);
    }
  }

  static void release(Plan& p, const Step& s) {
    for (int v : s.release) p.val[static_cast<std::size_t>(v)] = nullptr, p.own[static_cast<std::size_t>(v)] = Tensor();
  }

  // An operand's value: the region's or a weight.
  const Tensor& value(const Plan& p, const Operand& o, const std::string& name, const std::string& where) const {
    if (o.slot >= 0)
      if (const Tensor* t = p.val[static_cast<std::size_t>(o.slot)]) return *t;
    if (o.weight) return *o.weight;
    fail(where, "unknown value '" + name + "'");
  }
  // A value of the top-level plan by name (an output), else a weight.
  const Tensor& lookup(const Plan& p, const std::string& name, const std::string& where) const {
    for (std::size_t s = p.names.size(); s-- > 0;)
      if (p.names[s] == name && p.val[s]) return *p.val[s];
    if (auto it = w_.find(name); it != w_.end()) return it->second;
    fail(where, "unknown value '" + name + "'");
  }
  bool carries_sequence(const Plan& p, const std::string& name) const {
    for (std::size_t s = p.names.size(); s-- > 0;)
      if (p.names[s] == name) return p.seq[s] != 0;
    return false;
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
  // traffic. Which ops of a body start one is decided when the body is planned.
  static std::vector<char> ssd_steps(const std::vector<Op>& ops, const std::vector<std::string>& results) {
    std::vector<char> at(ops.size(), 0);
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

  // The step at steps[i .. i + 2]; false (nothing done) where the operands' shapes are not the
  // step's, so that the three ops run (and report) as written.
  bool ssd_step(Plan& p, size_t i) {
    Step &in_s = p.steps[i], &scan_s = p.steps[i + 1], &out_s = p.steps[i + 2];
    const Op &in_op = *in_s.op, &scan_op = *scan_s.op, &out_op = *out_s.op;
    const std::string& where = out_s.where;
    const Tensor &dt = value(p, in_s.in[0], in_op.inputs[0], in_s.where), &Bm = value(p, in_s.in[1], in_op.inputs[1], in_s.where),
                 &x = value(p, in_s.in[2], in_op.inputs[2], in_s.where);
    const Tensor &a = value(p, scan_s.in[0], scan_op.inputs[0], scan_s.where), &C = value(p, out_s.in[0], out_op.inputs[0], where);
    const Tensor* h0 = scan_op.inputs.size() > 2 ? &value(p, scan_s.in[2], scan_op.inputs[2], scan_s.where) : nullptr;
    if (x.shape.size() != 4 || Bm.shape.size() != 3) return false;
    const std::int64_t B = x.shape[0], L = x.shape[1], H = x.shape[2], P = x.shape[3], N = Bm.shape[2];
    if (dt.shape != Dims{B, L, H} || a.shape != Dims{B, L, H} || Bm.shape != Dims{B, L, N} || C.shape != Dims{B, L, N}) return false;
    if (h0 && h0->shape != Dims{B, H, P, N}) return false;
    std::vector<Tensor>* state = nullptr;
    const Tensor* prev = h0;
    if (sequential()) {
      if (L != 1) return false;
      state = &scan_s.state;
      if (!state->empty()) {
        if ((*state)[0].shape != Dims{B, H, P, N}) return false;
        prev = &(*state)[0];
      }
    }
    if (out_s.redefined == 0) fail(where, "value '" + out_op.outputs[0] + "' is already defined");
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
    for (const Step* s : {&in_s, &scan_s, &out_s})
      for (const Operand& o : s->in) carries = carries || (o.slot >= 0 && p.seq[static_cast<std::size_t>(o.slot)]);
    const std::size_t slot = static_cast<std::size_t>(out_s.out[0]);
    if (sequential() && carries) {
      one_token_result(y, out_op.outputs[0], where);
      p.seq[slot] = 1;
    }
    p.own[slot] = std::move(y);
    p.val[slot] = &p.own[slot];
    ++fused_steps;
    return true;
  }

  void set_token(int t, int tokens) { ctx_.token = t, ctx_.tokens = tokens; }

 private:
  const WeightStore& w_;
  const InterpretOptions& opt_;
  OpContext ctx_;  // what the hooks are told about the op they compute
  bool commit_ = true;  // sequential mode: whether this evaluation updates the states (false in FixedPoint iterations)

  bool sequential() const { return opt_.mode == Mode::Sequential; }

  // Refuses an op that would make a token's result depend on other tokens, which one token at a
  // time cannot compute: one that acts along axis 1 of an operand carrying the sequence (its record's
  // per_token rule, from attributes and ranks); what moves axis 1 otherwise (a Reshape to [B, L*D])
  // is caught on its result by one_token_result. Called when an operand carries the sequence: its
  // results do.
  bool per_token(const Step& s) const {
    std::vector<size_t> seq;
    for (size_t i = 0; i < s.args_seq.size(); ++i)
      if (s.args_seq[i]) seq.push_back(i);
    if (const auto rule = op_def(s.op->kind).per_token) rule(s.ctx, *s.op, s.args, seq);
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
  std::vector<Tensor> eval(Step& s) {
    const Op& op = *s.op;
    const OpDef& def = op_def(op.kind);
    const size_t n = s.args.size();
    if (n < static_cast<size_t>(def.min_inputs) || (def.max_inputs >= 0 && n > static_cast<size_t>(def.max_inputs)))
      fail(s.where, "takes " + arity_text(def) + " operands, got " + std::to_string(n));
    if (def.outputs >= 0 && op.outputs.size() != static_cast<size_t>(def.outputs))
      fail(s.where, "must have " + std::to_string(def.outputs) + " result, names " + std::to_string(op.outputs.size()));
    EvalCtx& c = s.ctx;
    c.ctx = ctx_;
    c.state = def.stateful && sequential() ? &s.state : nullptr;
    c.commit = commit_;
    try {
      return def.eval(c, op, s.args);
    } catch (const Error& e) {  // an attribute reader's message names no op
      if (std::string(e.what()).rfind("interpret:", 0) == 0) throw;
      fail(s.where, e.what());
    }
  }

  // The op's loop is sim/solver's, with the samples along the iterate's leading axis: the body runs
  // on the whole batch every step (compact = false); under the per-sample rule a sample that has
  // stopped keeps its value (its results do not depend on the others as long as the body treats
  // samples independently, as models do).
  Tensor fixed_point(Step& fp, const std::vector<const Tensor*>& in, bool top) {
    const Op& op = *fp.op;
    const std::string& where = fp.where;
    if (!op.body) fail(where, "has no body");
    const Region& region = *op.body;
    Plan& body = *fp.body;
    if (region.args.size() != in.size() + 1)
      fail(where, "body takes " + std::to_string(region.args.size()) + " args, expected " + std::to_string(in.size() + 1) +
                      " (the iterate, then each operand)");
    if (region.results.size() != 1) fail(where, "body must have 1 result, has " + std::to_string(region.results.size()));
    const double tol = attr_number(op, "tol"), damping = attr_number(op, "damping");  // checked by the record
    const std::int64_t max_iter = attr_int(op, "max_iter");
    const std::string rule = attr_string(op, "rule"), like = attr_string(op, "like");
    const auto li = std::find(op.inputs.begin(), op.inputs.end(), like);
    const std::size_t like_at = static_cast<std::size_t>(li - op.inputs.begin());
    const Dims zshape = in[like_at]->shape;
    const std::int64_t S = zshape.empty() ? 1 : zshape[0];
    const std::int64_t N = S == 0 ? 0 : numel(zshape) / S;
    if (sequential()) {  // the body's args carry the sequence when the values bound to them do
      body.seq[0] = fp.args_seq[like_at];  // run() filled them for these operands
      for (size_t i = 0; i < in.size(); ++i) body.seq[i + 1] = fp.args_seq[i];
    }
    for (size_t i = 0; i < in.size(); ++i) body.val[i + 1] = in[i];  // the captures, by reference

    const int outer_iteration = ctx_.iteration;
    int step = 0;
    auto f = [&](const Tensor& z) -> const Tensor& {
      ctx_.iteration = step++;
      body.val[0] = &z;
      run(body);
      const Tensor& fz = value(body, body.results[0], region.results[0], where + " body");
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
      const Tensor& fz = f(zt);
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
    body.clear();
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
InterpretResult run_sequential(const Graph& g, const Env& inputs, Interp& run, Plan& top, bool trace,
                               const std::function<void(long long, long long)>& progress) {
  std::int64_t L = -1;
  std::string first;
  for (const auto& [name, x] : inputs) {
    if (x.shape.size() < 2) continue;
    if (L >= 0 && x.shape[1] != L)
      throw Error("interpret: sequential mode: input '" + name + "' has " + std::to_string(x.shape[1]) +
                  " tokens along axis 1, input '" + first + "' has " + std::to_string(L));
    if (L < 0) L = x.shape[1], first = name;
  }
  if (L < 0) throw Error("interpret: sequential mode needs an input with a sequence axis (rank >= 2, axis 1); graph '" + g.name + "' has none");
  if (L == 0) throw Error("interpret: sequential mode needs at least one token, input '" + first + "' has none along axis 1");

  std::map<std::string, std::vector<Tensor>> parts;  // per returned value, its result at each token
  std::vector<FixedPointStats> fps;
  for (std::int64_t t = 0; t < L; ++t) {
    std::size_t a = 0;
    for (const auto& [name, x] : inputs) {  // the top plan's args, in the same order
      if (x.shape.size() >= 2) top.own[a] = token_slice(x, t), top.val[a] = &top.own[a], top.seq[a] = 1;
      else top.val[a] = &x;
      ++a;
    }
    run.stats.clear();
    run.set_token(static_cast<int>(t), static_cast<int>(L));
    run.run(top);
    for (const auto& name : g.outputs) {
      const std::string where = "interpret: output '" + name + "'";
      const Tensor& y = run.lookup(top, name, where);
      if (!run.carries_sequence(top, name))
        throw Error(where + " has no sequence axis (it depends on no input of rank >= 2); sequential mode returns per-token outputs");
      if (!trace) parts[name].push_back(y);
    }
    if (trace)
      for (std::size_t s = 0; s < top.names.size(); ++s)
        if (top.val[s]) parts[top.names[s]].push_back(*top.val[s]);
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
    if (!run.carries_sequence(top, name)) {  // traced, computed without the sequence: the same at every token
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
  std::set<std::string> declared;
  for (const Value& v : g.inputs) {
    auto it = inputs.find(v.name);
    if (it == inputs.end()) throw Error("interpret: input '" + v.name + "' is not given");
    bind_symbols("input", v, it->second, syms);
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
  std::vector<std::string> args;
  for (const auto& [name, x] : inputs) args.push_back(name);
  const std::set<std::string> outputs(g.outputs.begin(), g.outputs.end());
  const std::unique_ptr<Plan> top = run.plan(g.ops, "interpret:", true, args, nullptr, &outputs, options.trace);
  if (options.mode == Mode::Sequential) return run_sequential(g, inputs, run, *top, options.trace, options.progress);
  std::size_t a = 0;
  for (const auto& [name, x] : inputs) top->val[a++] = &x;  // the inputs, by reference
  run.run(*top);

  InterpretResult res;
  for (const auto& name : g.outputs) res.values[name] = run.lookup(*top, name, "interpret: output '" + name + "'");
  if (options.trace)
    for (std::size_t s = 0; s < top->names.size(); ++s)
      if (top->val[s]) res.values[top->names[s]] = *top->val[s];
  res.fixed_points = std::move(run.stats);
  res.fused_steps = run.fused_steps;
  return res;
}

}  // namespace aoc::ir
