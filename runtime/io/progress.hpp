// A progress meter on stderr for long runs (aoc run PROG, aoc check, aoc sweep): what runs, done
// of total, the rate and the time left. Short runs print nothing: the meter keeps quiet for its
// first second. Then on a terminal it redraws one line (\r) at most 5 times a second; elsewhere (a
// CI log, a file) it writes a line every 10 s, so logs stay short. Once it has shown anything, it
// ends with a last line and a newline.
#pragma once
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>

namespace aoc {

class Progress {
 public:
  // `unit` names what is counted ("tokens", "steps", "points"); `on` false: silent (--quiet).
  explicit Progress(std::string unit, bool on = true);
  // Where the lines go, whether that is a terminal, and a clock in seconds (tests drive it).
  Progress(std::string unit, bool on, std::FILE* out, bool tty, std::function<double()> seconds);
  ~Progress() { finish(); }
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // What runs now, leading the line ("run", "check: sim, seed 2"). The work is `parts` runs of
  // about equal length and this is run `part` (from 0): the time left covers the runs to come.
  void phase(std::string what, int part = 0, int parts = 1);
  // `done` of `total` units of the current run; `at_most`: total is a bound (a fixed point's
  // max_iter, which it may stop well before), so is the time left of one run; with several, the
  // time left comes from the runs done. `note` ends the line.
  void update(long long done, long long total, bool at_most = false, const std::string& note = "");
  // The callback a backend calls (BackendOptions::progress).
  std::function<void(long long, long long)> counter(bool at_most);
  // The last line and a newline, if anything was shown; then silent.
  void finish();

 private:
  void show(bool last);

  std::string unit_, what_, note_;
  bool on_, tty_, shown_any_ = false, at_most_ = false;
  std::FILE* out_;
  std::function<double()> seconds_;
  int part_ = 0, parts_ = 1;
  long long done_ = 0, total_ = 0;
  double start_, count_start_, last_shown_ = 0;  // count_start_: when the current count began at 0
};

}  // namespace aoc
