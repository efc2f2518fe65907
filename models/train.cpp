#include "models/train.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "models/optim.hpp"
#include "models/tasks.hpp"
#include "sim/error.hpp"
#include "sim/threads.hpp"

namespace aoc::models {

using ad::Mat;
using ad::Tape;
using ad::Var;

namespace {

// The gradient-free solve: steps z <- (1 - d) z + d f(z) from z = 0 until every sample's relative residual
// ||f(z) - z|| / (||f(z)|| + 1e-9) (over its L x D block) is below tol, keeping each sample's best
// iterate. Returns that iterate and the steps taken.
std::pair<Mat, int> solve(SequenceModel& m, const Mat& u, int B, int L, int max_steps, double tol, double d) {
  const Eigen::Index D = m.width();
  Mat z = Mat::Zero(u.rows(), D), best = z;
  std::vector<double> best_rel(static_cast<std::size_t>(B), std::numeric_limits<double>::infinity());
  int k = 0;
  for (; k < max_steps;) {
    Tape t(false);
    const Mat fz = t.value(m.body(t, t.constant(z), t.constant(u), L));
    ++k;
    double worst = 0;
    for (int b = 0; b < B; ++b) {
      const Eigen::Index r0 = static_cast<Eigen::Index>(b) * L;
      const double rel = (fz.middleRows(r0, L) - z.middleRows(r0, L)).norm() / (fz.middleRows(r0, L).norm() + 1e-9);
      if (rel < best_rel[static_cast<std::size_t>(b)]) {
        best_rel[static_cast<std::size_t>(b)] = rel;
        best.middleRows(r0, L) = fz.middleRows(r0, L);
      }
      worst = std::max(worst, rel);
    }
    z = d == 1.0 ? fz : Mat((1 - d) * z + d * fz);
    if (worst < tol) break;
  }
  return {best, k};
}

}  // namespace

void train(SequenceModel& m, const TrainOptions& o, const std::function<void(const TrainStep&)>& log, TrainState* state) {
  const tasks::Task task = tasks::parse_task(o.task);
  if (task.vocab != m.vocab())
    throw Error("train: task " + o.task + " has " + std::to_string(task.vocab) + " tokens, the model " + std::to_string(m.vocab()));
  if (o.steps < 1 || o.batch < 1 || o.length < 1) throw Error("train: steps, batch and length must be at least 1");
  TrainState fresh;
  TrainState& st = state ? *state : fresh;
  if (o.average_last < 0 || o.average_last > o.steps)
    throw Error("train: average_last " + std::to_string(o.average_last) + " is not between 0 and the " + std::to_string(o.steps) + " steps");
  if (st.step < 0 || st.step > o.steps)
    throw Error("train: resuming at step " + std::to_string(st.step) + " of " + std::to_string(o.steps));
  ad::AdamW& opt = st.opt;
  opt.beta2 = o.beta2;
  opt.weight_decay = o.weight_decay;
  const std::vector<ad::Param*> params = m.params();
  const int bounded = bounded_steps(o);
  const int L = o.length;
  // One thread for the tape's Eigen products: with more, Eigen blocks their sums differently, and the
  // weights would depend on the machine's core count (they are small: a second thread only spins).
  const ScopedThreads one(1);
  const auto t0 = std::chrono::steady_clock::now();
  m.set_hardware_aware(o.hardware);
  for (int step = st.step; step < o.steps; ++step) {
    const tasks::SeqBatch data = tasks::sample(task, o.batch, L, o.seed, static_cast<std::uint64_t>(step), tasks::Split::Train);
    for (ad::Param* p : params) p->zero_grad();
    m.program_machine(step);
    Tape t;
    const Var e = m.embed(t, data.tokens);
    Var z;
    int solve_steps = 0;
    if (!m.implicit()) {
      z = m.explicit_forward(t, e, L);
    } else {
      const Var u = m.inject(t, e);
      const auto damped = [&](Var zk) { return t.add(t.scale(zk, 1 - o.tau), t.scale(m.body(t, zk, u, L), o.tau)); };
      if (step < bounded) {
        z = m.body(t, t.constant(Mat::Zero(t.value(e).rows(), m.width())), u, L);
        for (int k = 1; k < o.unroll; ++k) z = damped(z);
      } else {
        auto [zs, k] = solve(m, t.value(u), o.batch, L, o.solve_max, o.solve_tol, o.solve_damping);
        solve_steps = k;
        z = t.constant(zs);
        for (int k2 = 0; k2 < o.phantom; ++k2) z = damped(z);
      }
    }
    const Var loss = t.cross_entropy(m.head(t, z), data.targets);
    if (!std::isfinite(t.value(loss)(0, 0)))
      throw Error("train: step " + std::to_string(step) + ": the loss is NaN or inf, the weights diverged (lower train.lr or train.clip)");
    t.backward(loss);
    const double norm = ad::clip_grad_norm(params, o.clip);
    const double lr = ad::warmup_cosine(step, o.steps, o.warmup, o.lr);
    opt.step(params, lr);
    // the k-th step of the average: a running mean (k = 1 starts it from this step's weights)
    if (const int k = step - (o.steps - o.average_last) + 1; o.average_last > 0 && k >= 1) {
      if (k == 1) {
        st.average.clear();
        for (const ad::Param* p : params) st.average.push_back(p->value);
      } else {
        if (st.average.size() != params.size())
          throw Error("train: step " + std::to_string(step) + " averages the weights but the run's state has no average (a checkpoint of a run without average_last?)");
        for (std::size_t i = 0; i < params.size(); ++i) st.average[i] += (params[i]->value - st.average[i]) / static_cast<double>(k);
      }
    }
    st.step = step + 1;
    if (log)
      log({step, t.value(loss)(0, 0), lr, norm, solve_steps,
           std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()});
  }
  m.set_hardware_aware({});
  if (o.average_last > 0 && st.average.size() == params.size())
    for (std::size_t i = 0; i < params.size(); ++i) params[i]->value = st.average[i];
}

PositionScores score_positions(const std::vector<std::int64_t>& guesses, const std::vector<int>& targets, int B, int L) {
  const std::size_t n = static_cast<std::size_t>(B) * static_cast<std::size_t>(L);
  if (B < 1 || L < 1 || guesses.size() != n || targets.size() != n)
    throw Error("score_positions: " + std::to_string(guesses.size()) + " guesses and " + std::to_string(targets.size()) + " labels for " +
                std::to_string(B) + " sequences of " + std::to_string(L));
  PositionScores s;
  std::vector<long long> right_at(static_cast<std::size_t>(L), 0), labelled_at(static_cast<std::size_t>(L), 0);
  long long right = 0, counted = 0, right10 = 0, n10 = 0, last = 0, sequences = 0, whole = 0, with_error = 0;
  double first_sum = 0;
  for (int b = 0; b < B; ++b) {
    int first = -1, labelled = 0;
    bool last_ok = false;
    for (int t = 0; t < L; ++t) {
      const std::size_t row = static_cast<std::size_t>(b) * L + t;
      if (targets[row] < 0) continue;  // a position without a label
      const bool ok = guesses[row] == targets[row];
      right += ok, ++counted, ++labelled, last_ok = ok;
      right_at[t] += ok, ++labelled_at[t];
      if (t >= L - 10) right10 += ok, ++n10;
      if (!ok && first < 0) first = t;
    }
    if (!labelled) continue;
    ++sequences, last += last_ok;
    if (first < 0) ++whole;
    else ++with_error, first_sum += first;
  }
  const auto frac = [](long long a, long long b) { return b ? static_cast<double>(a) / static_cast<double>(b) : 0.0; };
  s.accuracy = frac(right, counted), s.last10 = frac(right10, n10), s.last = frac(last, sequences), s.whole = frac(whole, sequences);
  if (with_error) s.first_error = first_sum / static_cast<double>(with_error);
  s.per_position.resize(static_cast<std::size_t>(L));
  for (int t = 0; t < L; ++t)
    s.per_position[t] = labelled_at[t] ? frac(right_at[t], labelled_at[t]) : std::numeric_limits<double>::quiet_NaN();
  return s;
}

int bounded_steps(const TrainOptions& o) { return static_cast<int>(std::lround(o.bounded_fraction * o.steps)); }

EvalResult evaluate(const SequenceModel& m, const EvalOptions& o) {
  const tasks::Task task = tasks::parse_task(o.task);
  const tasks::SeqBatch data = tasks::sample(task, o.batch, o.length, o.seed, 0, tasks::Split::Eval);
  const ir::Imported g = m.export_graph();
  ir::InterpretOptions io;
  io.mode = o.mode;
  io.threads = o.threads;
  const ir::InterpretResult r = ir::interpret(g.graph, g.weights, {{"tokens", data.tokens_tensor()}}, io);
  const ir::Tensor& logits = r.values.at("logits");
  const std::vector<std::int64_t> guesses = ir::argmax_last(logits);
  EvalResult e;
  const PositionScores s = score_positions(guesses, data.targets, o.batch, o.length);
  e.accuracy = s.accuracy, e.last10 = s.last10, e.last = s.last, e.whole = s.whole, e.first_error = s.first_error;
  for (const auto& fp : r.fixed_points)
    for (std::size_t i = 0; i < fp.iterations.size(); ++i) e.mean_iterations += fp.iterations[i], ++e.solves, e.converged += fp.converged[i];
  if (e.solves) e.mean_iterations /= static_cast<double>(e.solves);
  return e;
}

}  // namespace aoc::models
