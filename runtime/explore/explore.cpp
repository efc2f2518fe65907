#include "runtime/explore/explore.hpp"

#include <pagmo/algorithms/nsga2.hpp>
#include <pagmo/bfe.hpp>
#include <pagmo/population.hpp>
#include <pagmo/problem.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>

#include "runtime/explore/front.hpp"
#include "runtime/io/output.hpp"
#include "runtime/io/progress.hpp"
#include "runtime/sweep/ranks.hpp"
#include "runtime/sweep/sweep_eval.hpp"
#include "runtime/sweep/sweep_run.hpp"
#include "sim/error.hpp"
#include "sim/json_reader.hpp"

namespace aoc::explore {

namespace fs = std::filesystem;
using sweep::Header;
using sweep::json;
using sweep::Point;
using sweep::Row;
using sweep::Scenario;

namespace {

std::string key_of(const std::vector<json>& values) { return json(values).dump(); }

// One design's evaluations: each new set of values gets the next index and is evaluated (or read
// back from the journal of a killed run), each repeated set is looked up.
class Ledger {
 public:
  Ledger(sweep::PointEval eval, const Header& h, const std::string& output, bool resume, int threads, Progress& progress,
         const sweep::Ranks& ranks)
      : eval_(std::move(eval)), header_(h), output_(output), threads_(threads), progress_(progress), ranks_(ranks) {
    std::vector<Row> before;
    if (ranks.rank() == 0) {  // rank 0 alone reads and writes the files
      const std::string jp = sweep::journal_path(output);
      std::error_code ec;
      if (resume && !fs::exists(jp, ec) && fs::exists(output, ec)) {  // finished before: its rows replay
        sweep::Results old = sweep::read_results_h5(output);
        if (old.header.config_hash != h.config_hash)
          throw Error(output + ": --resume: written by another scenario, seed or other input files (config hash " + old.header.config_hash +
                      ", now " + h.config_hash + ")");
        before = std::move(old.rows);
      }
      journal_ = std::make_unique<sweep::Journal>(jp, h, resume);
      if (before.empty()) before = journal_->rows();
      else journal_->append(before);
    }
    if (ranks.size() > 1) before = share(before, true);
    for (Row& r : before) {
      const std::size_t i = r.index;
      if (i >= replay_.size()) replay_.resize(i + 1);
      replay_[i] = std::move(r);
    }
    done_before_ = before.size();
  }

  // The rows of these points' values, in their order; the new ones evaluated on the threads.
  std::vector<const Row*> rows_for(const std::vector<std::vector<json>>& values) {
    std::vector<Point> fresh;
    std::vector<std::string> keys;
    for (const auto& v : values) {
      keys.push_back(key_of(v));
      if (by_key_.count(keys.back())) continue;
      const std::size_t i = next_++;
      if (i < replay_.size() && replay_[i]) {
        if (key_of(replay_[i]->params) != keys.back())
          throw Error(sweep::journal_path(output_) + ": evaluation " + std::to_string(i) +
                      " holds other values than the search asks for now (a journal of another search?): remove it to start again");
        by_key_.emplace(keys.back(), std::move(*replay_[i]));
        continue;
      }
      by_key_.emplace(keys.back(), Row{});  // reserved: a repeat in this batch is not evaluated twice
      fresh.push_back(Point{i, v});
    }
    const auto keep = [&](std::vector<Row>& rows) {
      if (journal_) journal_->append(rows);
      for (Row& r : rows) {
        failed_ += r.status == "error", screened_ += r.status == "screened";
        by_key_[key_of(r.params)] = std::move(r);
      }
      ran_ += rows.size();
      std::string note = screened_ ? std::to_string(screened_) + " stopped by the screen" : "";
      if (failed_) note += (note.empty() ? "" : ", ") + std::to_string(failed_) + " failed";
      progress_.update(static_cast<long long>(ran_), static_cast<long long>(budget_ - std::min(budget_, done_before_)), true, note);
    };
    if (ranks_.size() == 1) {
      if (!fresh.empty()) sweep::evaluate_points(eval_, fresh, threads_, keep);  // each row journaled as it finishes
    } else {
      // Every rank asks for the same points: each evaluates every size-th from its rank, then all
      // have every row (rank 0 journals them), so all go on to the same next generation.
      std::vector<Point> mine;
      for (std::size_t i = static_cast<std::size_t>(ranks_.rank()); i < fresh.size(); i += static_cast<std::size_t>(ranks_.size()))
        mine.push_back(fresh[i]);
      std::vector<Row> done;
      if (!mine.empty())
        sweep::evaluate_points(eval_, mine, threads_, [&](std::vector<Row>& rows) { done.insert(done.end(), rows.begin(), rows.end()); });
      std::vector<Row> all = share(done, false);
      keep(all);
    }
    std::vector<const Row*> out;
    for (const std::string& k : keys) out.push_back(&by_key_.at(k));
    return out;
  }

  void set_budget(std::size_t n) { budget_ = n; }
  std::size_t evaluations() const { return next_; }
  std::size_t done_before() const { return std::min(done_before_, next_); }

  // Every row, by index.
  std::vector<Row> rows() const {
    std::vector<Row> out;
    for (const auto& [k, r] : by_key_) out.push_back(r);
    std::sort(out.begin(), out.end(), [](const Row& a, const Row& b) { return a.index < b.index; });
    return out;
  }

  // The results file (and CSV) from every row; the journal goes.
  void write(const std::string& csv) {
    if (!journal_) return;  // not rank 0
    sweep::Results res{header_, rows()};
    sweep::write_results_h5(output_, res);
    if (!csv.empty()) sweep::write_results_csv(csv, res);
    journal_->remove();
  }

 private:
  sweep::PointEval eval_;
  Header header_;
  std::string output_;
  int threads_;
  Progress& progress_;
  const sweep::Ranks& ranks_;
  std::unique_ptr<sweep::Journal> journal_;  // rank 0's

  // Rows from every rank (or rank 0's alone) on every rank, as journal lines: the same bits.
  std::vector<Row> share(const std::vector<Row>& rows, bool root_only) const {
    std::string text;
    for (const Row& r : rows) text += sweep::row_line(r) + "\n";
    const std::vector<std::string> parts = root_only ? std::vector<std::string>{ranks_.broadcast(text)} : ranks_.allgather(text);
    std::vector<Row> out;
    for (const std::string& part : parts)
      for (std::size_t at = 0; at < part.size();) {
        const std::size_t end = part.find('\n', at);
        out.push_back(sweep::parse_row(part.substr(at, end - at), header_));
        at = end + 1;
      }
    return out;
  }
  std::vector<std::optional<Row>> replay_;
  std::map<std::string, Row> by_key_;
  std::size_t next_ = 0, done_before_ = 0, ran_ = 0, failed_ = 0, screened_ = 0, budget_ = 0;
};

// The search's coordinates, one per free parameter: continuous ones first, then the whole numbers
// (pagmo's NSGA-II takes the last get_nix() as integers): a list's index, an integer range's value
// from its lowest, a range with steps its step. On whole numbers the search can land on a range's
// ends, where an objective that only improves towards one end has its best value.
struct Dim {
  std::size_t param = 0;  // in Scenario::params
  long long levels = 0;   // 0: continuous on [0, 1]; else 0 .. levels - 1
};

// How many values a free parameter takes: a list's entries, a range's steps, an integer range's
// whole numbers; 0 for a continuous range.
long long levels_of(const sweep::Param& p) {
  if (!p.values.empty()) return static_cast<long long>(p.values.size());
  if (p.steps) return p.steps;
  return p.integer && !p.log ? static_cast<long long>(std::floor(p.hi) - std::ceil(p.lo)) + 1 : 0;
}

std::vector<Dim> dims_of(const Scenario& s) {
  std::vector<Dim> cont, whole;
  for (std::size_t k = 0; k < s.params.size(); ++k)
    if (!s.params[k].fixed) (levels_of(s.params[k]) ? whole : cont).push_back(Dim{k, levels_of(s.params[k])});
  cont.insert(cont.end(), whole.begin(), whole.end());
  return cont;
}

// A parameter's value at unit coordinate u; a range with steps at the step nearest u (a grid's values).
json value_of(const sweep::Param& p, double u) {
  if (p.values.empty() && p.steps > 1) u = std::round(std::clamp(u, 0.0, 1.0) * (p.steps - 1)) / (p.steps - 1);
  return sweep::value_at(p, u);
}

// The values of a point at unit coordinates u (one per free parameter, in the scenario's order).
std::vector<json> decode(const Scenario& s, const double* u) {
  std::vector<json> v;
  std::size_t k = 0;
  for (const sweep::Param& p : s.params) v.push_back(p.fixed ? p.values[0] : value_of(p, u[k++]));
  return v;
}

// The values of a point at the search's coordinates x (dims_of's order).
std::vector<json> decode(const Scenario& s, const std::vector<Dim>& dims, const double* x) {
  std::vector<double> u(s.params.size());
  for (std::size_t i = 0; i < dims.size(); ++i) {
    const Dim& d = dims[i];
    const sweep::Param& p = s.params[d.param];
    const double k = std::clamp(std::round(x[i]), 0.0, static_cast<double>(d.levels - 1));
    u[d.param] = d.levels == 0                    ? x[i]
                 : !p.values.empty() || !p.steps ? (k + 0.5) / static_cast<double>(d.levels)  // a list's entry, a whole number's share
                 : d.levels == 1                  ? 0.5
                                                  : k / static_cast<double>(d.levels - 1);
  }
  std::vector<json> v;
  for (std::size_t k = 0; k < s.params.size(); ++k) v.push_back(s.params[k].fixed ? s.params[k].values[0] : value_of(s.params[k], u[k]));
  return v;
}

std::size_t free_count(const Scenario& s) {
  return static_cast<std::size_t>(std::count_if(s.params.begin(), s.params.end(), [](const sweep::Param& p) { return !p.fixed; }));
}

// What NSGA-II minimises for a row: its objectives where feasible, else a value worse than any
// feasible one on every objective that grows with the row's violation (so the search is drawn
// towards the feasible region: constraint domination by penalty, as pagmo's NSGA-II has no
// constraints of its own).
pagmo::vector_double fitness_of(const Scenario& s, const Row& r) {
  constexpr double kPenalty = 1e30;
  std::vector<double> f = objectives_of(s, r);
  if (f.empty()) f.assign(s.objectives.size(), kPenalty * (1 + violation(s, r)));  // a failed row's violation is 1000
  return f;
}

// A point through the scenario's screen (docs/scenarios.md, "Screens"): run first on a share of
// its test sequences; stopped there, with those metrics, where its constraints miss by more than
// the margin; else run in full. An error on the share is the point's (the whole would meet it).
Row through_screen(const Scenario& s, const sweep::Evaluator& ev, const Point& p) {
  Row r = ev.evaluate(p, s.screen.fraction);
  if (r.status != "ok") return r;
  if (violation(s, r) <= s.screen.margin) return ev.evaluate(p);
  std::string missed;
  for (const sweep::Constraint& c : s.constraints) {
    const double x = r.metrics[c.column];
    if (!(x >= c.min && x <= c.max))
      missed += (missed.empty() ? "" : ", ") + c.metric + " " + jsonr::num(x) + (x < c.min ? " (min " + jsonr::num(c.min) : " (max " + jsonr::num(c.max)) + ")";
  }
  r.status = "screened";
  r.error = "stopped by the screen on " + jsonr::num(s.screen.fraction) + " of the test data: " + missed + ", beyond the margin " +
            jsonr::num(s.screen.margin);
  return r;
}

struct Stopped {};  // thrown through pagmo when the search reaches ExploreOptions::stop_after

// The search's side of pagmo: the problem's fitness and the batch evaluator both call it.
struct Search {
  const Scenario* s = nullptr;
  Ledger* ledger = nullptr;
  std::vector<Dim> dims;
  std::size_t stop_after = 0;
  pagmo::vector_double batch(const pagmo::vector_double& dvs) const {
    if (stop_after && ledger->evaluations() >= stop_after) throw Stopped{};
    const std::size_t d = dims.size(), n = d ? dvs.size() / d : 0;
    std::vector<std::vector<json>> values;
    for (std::size_t i = 0; i < n; ++i) values.push_back(decode(*s, dims, dvs.data() + i * d));
    pagmo::vector_double f;
    for (const Row* r : ledger->rows_for(values)) {
      const auto x = fitness_of(*s, *r);
      f.insert(f.end(), x.begin(), x.end());
    }
    return f;
  }
};

struct Problem {
  std::shared_ptr<Search> search;
  pagmo::vector_double fitness(const pagmo::vector_double& x) const { return search->batch(x); }
  std::pair<pagmo::vector_double, pagmo::vector_double> get_bounds() const {
    pagmo::vector_double lo, hi;
    for (const Dim& d : search->dims) lo.push_back(0.0), hi.push_back(d.levels ? static_cast<double>(d.levels - 1) : 1.0);
    return {lo, hi};
  }
  pagmo::vector_double::size_type get_nix() const {
    return static_cast<pagmo::vector_double::size_type>(
        std::count_if(search->dims.begin(), search->dims.end(), [](const Dim& d) { return d.levels > 0; }));
  }
  pagmo::vector_double::size_type get_nobj() const { return search->s->objectives.size(); }
  std::string get_name() const { return "aoc design space: " + search->s->name; }
};

struct Batch {
  std::shared_ptr<Search> search;
  pagmo::vector_double operator()(const pagmo::problem&, const pagmo::vector_double& dvs) const { return search->batch(dvs); }
};

// Each design's hypervolume and its curve in one box (the union of the designs' feasible rows).
void score(const Scenario& s, std::vector<Design>& designs, const std::vector<std::vector<Row>>& rows,
           const std::vector<std::vector<std::size_t>>& marks) {
  std::vector<const std::vector<Row>*> all;
  for (const auto& r : rows) all.push_back(&r);
  const Box box = box_of(s, all);
  for (std::size_t d = 0; d < designs.size(); ++d) {
    Design& g = designs[d];
    g.evaluations = rows[d].size();
    g.hypervolume = hypervolume(s, rows[d], box);
    g.front = front(s, rows[d]).size();
    for (const Row& r : rows[d]) {
      g.feasible += !objectives_of(s, r).empty(), g.failed += r.status == "error", g.screened += r.status == "screened";
      // a screened search pays the screen for every point, and the whole run for those it passes
      const double f = d == 0 ? s.screen.fraction : 0;
      g.cost += r.status == "ok" ? 1 + f : f > 0 ? f : 1;
    }
    g.curve = hypervolume_curve(s, rows[d], box, marks[d]);
  }
}

}  // namespace

std::string design_output(const std::string& output, const std::string& design) {
  const fs::path p(output);
  return (p.parent_path() / (p.stem().string() + "." + design + p.extension().string())).string();
}

std::vector<Point> grid_points(const Scenario& s, std::size_t n) {
  // As many values per parameter as n allows, evenly: one more to each in turn while the product fits.
  std::vector<const sweep::Param*> fr;
  for (const sweep::Param& p : s.params)
    if (!p.fixed) fr.push_back(&p);
  const auto most = [](const sweep::Param& p) { return levels_of(p) ? static_cast<double>(levels_of(p)) : HUGE_VAL; };
  std::vector<std::size_t> count(fr.size(), 1);
  for (bool grew = true; grew;) {
    grew = false;
    for (std::size_t k = 0; k < fr.size(); ++k) {
      double product = 1;
      for (std::size_t j = 0; j < fr.size(); ++j) product *= static_cast<double>(count[j] + (j == k));
      if (product <= static_cast<double>(n) && static_cast<double>(count[k]) < most(*fr[k])) ++count[k], grew = true;
    }
  }
  std::size_t total = 1;
  for (const std::size_t c : count) total *= c;
  std::vector<Point> out;
  for (std::size_t i = 0; i < total; ++i) {
    std::vector<double> u(fr.size());
    std::size_t rest = i;
    for (std::size_t k = fr.size(); k-- > 0;) {
      const std::size_t at = rest % count[k];
      rest /= count[k];
      // lo .. hi inclusive; a list's entries at even spacing (the middle of each of count parts)
      u[k] = !fr[k]->values.empty() ? (static_cast<double>(at) + 0.5) / static_cast<double>(count[k])
             : count[k] == 1      ? 0.5
                                  : static_cast<double>(at) / static_cast<double>(count[k] - 1);
    }
    out.push_back(Point{i, decode(s, u.data())});
  }
  return out;
}

namespace {

// One run of the search: its rows, the evaluations after each generation, or where it stopped.
struct SearchRun {
  std::vector<Row> rows;
  std::vector<std::size_t> marks;
  std::size_t generations = 0, done_before = 0, evaluations = 0;
  bool stopped = false;
};

SearchRun nsga2(const Scenario& s, sweep::PointEval eval, const Header& h, const std::string& output, const ExploreOptions& o, int threads,
                Progress& progress, const sweep::Ranks& ranks) {
  SearchRun out;
  Ledger ledger(std::move(eval), h, output, o.resume, threads, progress, ranks);
  ledger.set_budget(static_cast<std::size_t>(s.samples));
  auto search = std::make_shared<Search>();
  search->s = &s, search->ledger = &ledger, search->dims = dims_of(s), search->stop_after = o.stop_after;
  const pagmo::problem prob{Problem{search}};
  const pagmo::bfe bfe{Batch{search}};
  const auto seed = static_cast<unsigned>(s.seed ^ (s.seed >> 32));
  const std::size_t P = static_cast<std::size_t>(s.population);
  try {
    // The first generation a Latin hypercube (every parameter's range covered evenly), evaluated as one batch.
    pagmo::population pop(prob, 0u, seed);
    const auto u = sweep::unit_samples(sweep::Sampling::Lhs, P, search->dims.size(), s.seed);
    pagmo::vector_double xs;
    for (const auto& row : u)
      for (std::size_t i = 0; i < row.size(); ++i) {
        const long long n = search->dims[i].levels;
        xs.push_back(n ? std::min(static_cast<double>(n - 1), std::floor(row[i] * static_cast<double>(n))) : row[i]);
      }
    const pagmo::vector_double fs = search->batch(xs);
    const std::size_t nd = search->dims.size(), nf = s.objectives.size();
    for (std::size_t i = 0; i < P; ++i)
      pop.push_back(pagmo::vector_double(xs.begin() + static_cast<std::ptrdiff_t>(i * nd), xs.begin() + static_cast<std::ptrdiff_t>((i + 1) * nd)),
                    pagmo::vector_double(fs.begin() + static_cast<std::ptrdiff_t>(i * nf), fs.begin() + static_cast<std::ptrdiff_t>((i + 1) * nf)));
    const double d = static_cast<double>(free_count(s));
    // the classic settings (Deb et al. 2002): crossover 0.9 at eta 15, one mutated coordinate per point at eta 20
    pagmo::nsga2 algo(1u, 0.9, 15., 1.0 / d, 20., seed);
    algo.set_bfe(bfe);
    out.marks.push_back(ledger.evaluations());
    for (std::size_t g = 1; g < static_cast<std::size_t>(s.samples) / P; ++g) {
      pop = algo.evolve(pop);
      out.marks.push_back(ledger.evaluations());
      ++out.generations;
    }
  } catch (const Stopped&) {
    out.stopped = true, out.evaluations = ledger.evaluations(), out.done_before = ledger.done_before();
    return out;
  }
  out.done_before = ledger.done_before();
  ledger.write(o.csv);
  out.rows = ledger.rows();
  return out;
}

double since(std::chrono::steady_clock::time_point t) { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count(); }

ExploreSummary search(const std::string& scenario_path, const ExploreOptions& o, const sweep::Ranks& ranks) {
  ExploreSummary sum;
  sum.root = ranks.rank() == 0;
  sum.ranks = ranks.size();
  sum.scenario = sweep::read_scenario(scenario_path);
  Scenario& s = sum.scenario;
  if (s.sampling != sweep::Sampling::Nsga2)
    throw Error(scenario_path + ": sampling.method: aoc explore searches (\"nsga2\"); a " + sweep::sampling_name(s.sampling) +
                " scenario runs with aoc sweep");
  if (o.seed) {
    s.seed = *o.seed;
    const std::string h = s.config_hash + " seed " + std::to_string(*o.seed);
    s.config_hash = digest_hex(h.data(), h.size());
  }
  if (o.output.empty()) throw Error("explore: no output file (-o RESULTS.h5)");
  sum.threads = sweep::default_threads(o.threads);
  const sweep::Evaluator ev(s);
  const auto start = std::chrono::steady_clock::now();
  Progress progress("evaluations", !o.quiet && sum.root);

  std::vector<Design> designs;
  std::vector<std::vector<Row>> rows;
  std::vector<std::vector<std::size_t>> marks;

  progress.phase("explore: nsga2");
  sweep::PointEval eval = [&ev](const Point& p) { return ev.evaluate(p); };
  if (s.screen.fraction > 0) eval = [&ev, &s](const Point& p) { return through_screen(s, ev, p); };
  SearchRun run = nsga2(s, eval, sweep::header_of(s), o.output, o, sum.threads, progress, ranks);
  sum.done_before = run.done_before, sum.generations = run.generations;
  if (run.stopped) {
    progress.finish();
    sum.stopped = true, sum.evaluations = run.evaluations;
    return sum;
  }
  designs.emplace_back().name = "nsga2", designs.back().output = o.output;
  designs.back().seconds = since(start);
  rows.push_back(std::move(run.rows));
  marks.push_back(std::move(run.marks));

  if (o.compare && s.screen.fraction > 0) {
    // The same search without its screen: what the screen cost the front, and what it saved.
    const auto t = std::chrono::steady_clock::now();
    progress.phase("explore: unscreened");
    Header h = sweep::header_of(s);
    h.sampling = "unscreened";
    const std::string out = design_output(o.output, "unscreened");
    ExploreOptions plain = o;
    plain.stop_after = 0, plain.csv.clear();
    const sweep::Evaluator own(s);  // its own compilations: its seconds are what it costs alone
    SearchRun u = nsga2(s, [&own](const Point& p) { return own.evaluate(p); }, h, out, plain, sum.threads, progress, ranks);
    designs.emplace_back().name = "unscreened", designs.back().output = out;
    designs.back().seconds = since(t);
    rows.push_back(std::move(u.rows));
    marks.push_back(std::move(u.marks));
  }
  if (o.compare) {
    // A grid and a random sample of the search's evaluations, as a sweep would run them.
    const std::size_t n = o.compare_points ? o.compare_points : rows[0].size();
    const std::vector<Point> grid = grid_points(s, n);
    const auto u = sweep::unit_samples(sweep::Sampling::Random, n, free_count(s), s.seed);
    std::vector<Point> random;
    for (std::size_t i = 0; i < n; ++i) random.push_back(Point{i, decode(s, u[i].data())});
    for (const auto& [name, pts] : {std::pair<const char*, const std::vector<Point>*>{"grid", &grid}, {"random", &random}}) {
      const auto t = std::chrono::steady_clock::now();
      progress.phase(std::string("explore: ") + name);
      Header h = sweep::header_of(s);
      h.sampling = name, h.points = pts->size();
      const std::string out = design_output(o.output, name);
      const sweep::Evaluator own(s);
      Ledger ledger([&own](const Point& p) { return own.evaluate(p); }, h, out, o.resume, sum.threads, progress, ranks);
      ledger.set_budget(pts->size());
      std::vector<std::vector<json>> values;
      for (const Point& p : *pts) values.push_back(p.values);
      ledger.rows_for(values);
      ledger.write("");
      designs.emplace_back().name = name, designs.back().output = out;
      designs.back().seconds = since(t);
      rows.push_back(ledger.rows());
      marks.push_back(every(static_cast<std::size_t>(s.population), rows.back().size()));
    }
  }
  progress.finish();
  score(s, designs, rows, marks);
  for (const std::size_t i : front(s, rows[0])) sum.front.push_back(rows[0][i]);
  const std::size_t first = s.objectives[0].column;
  std::sort(sum.front.begin(), sum.front.end(), [&](const Row& a, const Row& b) { return a.metrics[first] < b.metrics[first]; });
  sum.designs = std::move(designs);
  sum.seconds = since(start);
  return sum;
}

}  // namespace

ExploreSummary run_explore(const std::string& scenario_path, const ExploreOptions& o) {
  const sweep::Ranks ranks("explore");
  try {
    return search(scenario_path, o, ranks);
  } catch (const Error& e) {
    if (ranks.size() > 1) ranks.abort(e.what());  // the others would wait for this rank's rows
    throw;
  } catch (const std::exception& e) {
    if (ranks.size() > 1) ranks.abort(std::string("internal error: ") + e.what());
    throw;
  }
}

}  // namespace aoc::explore
