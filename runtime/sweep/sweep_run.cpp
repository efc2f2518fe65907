#include "runtime/sweep/sweep_run.hpp"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <mutex>
#include <numeric>
#include <optional>
#include <set>
#include <thread>

#ifdef AOC_WITH_MPI
#include <mpi.h>
#endif

#include "runtime/io/progress.hpp"
#include "runtime/sweep/ranks.hpp"
#include "runtime/sweep/sweep_eval.hpp"
#include "runtime/sweep/sweep_results.hpp"
#include "sim/error.hpp"

namespace aoc::sweep {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

int env_int(const char* name, int fallback) {
  const char* s = std::getenv(name);
  return s ? std::max(1, std::atoi(s)) : fallback;
}

// The messages between the ranks: a worker asks rank 0 for a point, rank 0 answers with its index
// (-1: none left), the worker sends the finished row back as its journal line.
enum Tag { kAsk = 1, kAssign = 2, kRow = 3 };

// The threads of one process: they evaluate the points put in `todo` and leave the rows in `done`.
class Pool {
 public:
  Pool(int threads, const PointEval& eval, const std::vector<Point>& pts, std::deque<std::size_t> todo, bool closed)
      : todo_(std::move(todo)), closed_(closed) {
    for (int t = 0; t < threads; ++t)
      threads_.emplace_back([this, &eval, &pts] {
        for (;;) {
          std::size_t i;
          {
            std::unique_lock<std::mutex> lock(m_);
            work_.wait(lock, [&] { return !todo_.empty() || closed_; });
            if (todo_.empty()) return;
            i = todo_.front();
            todo_.pop_front();
          }
          Row r = eval(pts[i]);
          {
            std::lock_guard<std::mutex> lock(m_);
            done_.push_back(std::move(r));
          }
          finished_.notify_all();
        }
      });
  }
  ~Pool() { stop(); }

  void add(std::size_t i) {
    {
      std::lock_guard<std::mutex> lock(m_);
      todo_.push_back(i);
    }
    work_.notify_one();
  }
  // A point for another rank (rank 0 hands out its own list).
  std::optional<std::size_t> take() {
    std::lock_guard<std::mutex> lock(m_);
    if (todo_.empty()) return std::nullopt;
    const std::size_t i = todo_.back();
    todo_.pop_back();
    return i;
  }
  std::vector<Row> wait_done(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(m_);
    finished_.wait_for(lock, timeout, [&] { return !done_.empty(); });
    std::vector<Row> out(std::make_move_iterator(done_.begin()), std::make_move_iterator(done_.end()));
    done_.clear();
    return out;
  }
  // No more points: the threads finish the ones they hold and end.
  void stop() {
    {
      std::lock_guard<std::mutex> lock(m_);
      todo_.clear();
      closed_ = true;
    }
    work_.notify_all();
    for (auto& t : threads_)
      if (t.joinable()) t.join();
  }

 private:
  std::mutex m_;
  std::condition_variable work_, finished_;
  std::deque<std::size_t> todo_;
  bool closed_;
  std::deque<Row> done_;
  std::vector<std::thread> threads_;
};

#ifdef AOC_WITH_MPI
// Rank 0's side of the messages: answers every waiting request and collects the rows sent.
void serve(Pool& pool, const Header& h, std::vector<Row>& rows, int& workers_done) {
  for (;;) {
    int waiting = 0;
    MPI_Status st;
    MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &waiting, &st);
    if (!waiting) return;
    if (st.MPI_TAG == kAsk) {
      int dummy = 0;
      MPI_Recv(&dummy, 1, MPI_INT, st.MPI_SOURCE, kAsk, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      const auto i = pool.take();
      const long long answer = i ? static_cast<long long>(*i) : -1;
      workers_done += !i;
      MPI_Send(&answer, 1, MPI_LONG_LONG, st.MPI_SOURCE, kAssign, MPI_COMM_WORLD);
    } else {
      int n = 0;
      MPI_Get_count(&st, MPI_CHAR, &n);
      std::string line(static_cast<std::size_t>(n), '\0');
      MPI_Recv(line.data(), n, MPI_CHAR, st.MPI_SOURCE, kRow, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      rows.push_back(parse_row(line, h));
    }
  }
}

// A worker rank: asks rank 0 for points (a few ahead of its threads), evaluates them, sends the rows.
void work(int threads, const Evaluator& ev, const std::vector<Point>& pts) {
  const PointEval eval = [&ev](const Point& p) { return ev.evaluate(p); };
  Pool pool(threads, eval, pts, {}, false);
  std::size_t held = 0;
  bool none_left = false;
  for (;;) {
    while (!none_left && held < static_cast<std::size_t>(2 * threads)) {
      int ask = 0;
      long long i = -1;
      MPI_Send(&ask, 1, MPI_INT, 0, kAsk, MPI_COMM_WORLD);
      MPI_Recv(&i, 1, MPI_LONG_LONG, 0, kAssign, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      if (i < 0) none_left = true;
      else pool.add(static_cast<std::size_t>(i)), ++held;
    }
    if (none_left && held == 0) break;
    for (const Row& r : pool.wait_done(std::chrono::milliseconds(100))) {
      const std::string line = row_line(r);
      MPI_Send(line.data(), static_cast<int>(line.size()), MPI_CHAR, 0, kRow, MPI_COMM_WORLD);
      --held;
    }
  }
}
#endif

}  // namespace

void evaluate_points(const PointEval& eval, const std::vector<Point>& pts, int threads, const std::function<void(std::vector<Row>&)>& done) {
  std::deque<std::size_t> all(pts.size());
  std::iota(all.begin(), all.end(), std::size_t{0});
  Pool pool(std::max(1, std::min<int>(threads, static_cast<int>(pts.size()))), eval, pts, std::move(all), true);
  for (std::size_t got = 0; got < pts.size();) {
    std::vector<Row> rows = pool.wait_done(std::chrono::milliseconds(200));
    got += rows.size();
    if (!rows.empty()) done(rows);
  }
}

int default_threads(int asked) {
  return asked > 0 ? asked : std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / env_int("OMPI_COMM_WORLD_LOCAL_SIZE", 1));
}

SweepSummary run_sweep(const std::string& scenario_path, const SweepOptions& o) {
  Ranks ranks("sweep");
  SweepSummary sum;
  sum.ranks = ranks.size();
  sum.root = ranks.rank() == 0;
  sum.threads = default_threads(o.threads);

  // Everything that can go wrong before the points start, on every rank; if it did on any, all stop.
  std::optional<Scenario> s;
  std::vector<Point> pts;
  std::unique_ptr<Evaluator> ev;
  std::optional<Header> header;
  std::unique_ptr<Journal> journal;
  std::deque<std::size_t> pending;
  std::string error;
  bool finished_before = false;
  try {
    s.emplace(read_scenario(scenario_path));
    pts = points(*s);
    sum.points = pts.size();
    ev = std::make_unique<Evaluator>(*s);
    if (sum.root) {
      if (o.output.empty()) throw Error("sweep: no output file (-o RESULTS.h5)");
      header = header_of(*s);
      const std::string jp = journal_path(o.output);
      std::error_code ec;
      if (o.resume && !fs::exists(jp, ec) && fs::exists(o.output, ec)) {
        // A sweep that finished: nothing to redo if it is this one.
        const Results old = read_results_h5(o.output);
        if (old.header.config_hash != header->config_hash)
          throw Error(o.output + ": --resume: written by another scenario or other input files (config hash " + old.header.config_hash +
                      ", now " + header->config_hash + ")");
        finished_before = true;
        sum.done_before = old.rows.size();
        for (const Row& r : old.rows) sum.failed += r.status != "ok";
        if (!o.csv.empty()) write_results_csv(o.csv, old);
      } else {
        journal = std::make_unique<Journal>(jp, *header, o.resume);
        std::set<std::size_t> done;
        for (const Row& r : journal->rows()) done.insert(r.index), sum.failed += r.status != "ok";
        sum.done_before = done.size();
        for (const Point& p : pts)
          if (!done.count(p.index)) pending.push_back(p.index);
      }
    }
  } catch (const Error& e) {
    error = e.what();
  }
  const bool root_failed = ranks.any(sum.root && !error.empty());
  if (ranks.any(!error.empty()) || ranks.any(finished_before)) {
    // The root says what went wrong (every rank reads the same scenario); another rank only when
    // the fault is its own.
    if (!error.empty() && (sum.root || !root_failed)) throw Error(error);
    sum.stopped = !finished_before;
    return sum;
  }

  const auto start = Clock::now();
  if (!sum.root) {
#ifdef AOC_WITH_MPI
    try {
      work(sum.threads, *ev, pts);
    } catch (const std::exception& e) {
      ranks.abort(std::string("sweep: rank ") + std::to_string(ranks.rank()) + ": " + e.what());
    }
#endif
    return sum;
  }

  // Rank 0 (or the only process): its threads take points from `pending`, other ranks ask for
  // them; every finished row goes to the journal at once.
  const std::size_t to_run = pending.size();
  Progress progress("points", !o.quiet);
  progress.phase("sweep");
  try {
    const PointEval eval = [&ev](const Point& p) { return ev->evaluate(p); };
    Pool pool(sum.threads, eval, pts, std::move(pending), true);
    int workers_done = 0;
    while (sum.ran < to_run || workers_done < ranks.size() - 1) {
      std::vector<Row> rows = pool.wait_done(std::chrono::milliseconds(ranks.size() > 1 ? 1 : 200));
#ifdef AOC_WITH_MPI
      if (ranks.size() > 1) serve(pool, *header, rows, workers_done);
#endif
      journal->append(rows);
      for (const Row& r : rows) sum.failed += r.status != "ok";
      sum.ran += rows.size();
      progress.update(static_cast<long long>(sum.ran), static_cast<long long>(to_run), false,
                      sum.failed ? std::to_string(sum.failed) + " failed" : "");
    }
    progress.finish();
  } catch (const std::exception& e) {
    if (ranks.size() > 1) ranks.abort(e.what());
    throw;
  }
  sum.seconds = std::chrono::duration<double>(Clock::now() - start).count();

  Results res{*header, journal->rows()};
  std::sort(res.rows.begin(), res.rows.end(), [](const Row& a, const Row& b) { return a.index < b.index; });
  write_results_h5(o.output, res);
  if (!o.csv.empty()) write_results_csv(o.csv, res);
  journal->remove();
  return sum;
}

}  // namespace aoc::sweep
