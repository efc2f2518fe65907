#include "runtime/io/progress.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>

namespace aoc {

namespace {

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// "42 s", "3 min 05 s", "2 h 07 min".
std::string duration_text(double s) {
  char b[48];
  const long long t = std::llround(std::max(0.0, s));
  if (t < 60) std::snprintf(b, sizeof b, "%lld s", t);
  else if (t < 3600) std::snprintf(b, sizeof b, "%lld min %02lld s", t / 60, t % 60);
  else std::snprintf(b, sizeof b, "%lld h %02lld min", t / 3600, t / 60 % 60);
  return b;
}

}  // namespace

Progress::Progress(std::string unit, bool on) : Progress(std::move(unit), on, stderr, ::isatty(2) != 0, steady_seconds) {}

Progress::Progress(std::string unit, bool on, std::FILE* out, bool tty, std::function<double()> seconds)
    : unit_(std::move(unit)), on_(on), tty_(tty), out_(out), seconds_(std::move(seconds)) {
  start_ = count_start_ = seconds_();
}

void Progress::phase(std::string what, int part, int parts) {
  what_ = std::move(what), part_ = part, parts_ = std::max(1, parts);
  done_ = total_ = 0;
  count_start_ = seconds_();
}

void Progress::update(long long done, long long total, bool at_most, const std::string& note) {
  if (!on_) return;
  const double now = seconds_();
  if (done < done_) count_start_ = now;  // a new count within the run (its next fixed point)
  done_ = done, total_ = total, at_most_ = at_most, note_ = note;
  // Quiet for the first second; then a few redraws a second on a terminal, a line every 10 s in a log.
  const double every = tty_ ? 0.2 : 10.0;
  if (now - start_ < (tty_ ? 1.0 : every) || (shown_any_ && now - last_shown_ < every)) return;
  show(false);
}

std::function<void(long long, long long)> Progress::counter(bool at_most) {
  return [this, at_most](long long done, long long total) { update(done, total, at_most); };
}

void Progress::finish() {
  if (on_ && shown_any_) show(true);
  on_ = false;
}

void Progress::show(bool last) {
  const double now = seconds_(), elapsed = now - start_, counting = now - count_start_;
  const double rate = counting > 0 ? static_cast<double>(done_) / counting : 0;
  double run = total_ > 0 ? std::min(1.0, static_cast<double>(done_) / static_cast<double>(total_)) : 0;
  if (at_most_ && parts_ > 1) run = 0;  // a fixed point stops well before its bound: count the runs done only
  const double all = (part_ + run) / parts_;  // of the whole work
  // One run: what is left of its count at the current rate (a bound when the count is). Several:
  // the elapsed time scaled by the part of the work still to do (the runs taken as equally long).
  double left = -1;
  if (parts_ == 1 && rate > 0) left = static_cast<double>(std::max(0LL, total_ - done_)) / rate;
  else if (parts_ > 1 && all > 0) left = elapsed * (1 - all) / all;
  const bool bound = at_most_ && parts_ == 1;

  const int width = 20, filled = static_cast<int>(width * all);
  std::string line = what_ + " [" + std::string(static_cast<std::size_t>(filled), '#') + std::string(static_cast<std::size_t>(width - filled), '-') + "] ";
  char b[160];
  std::snprintf(b, sizeof b, "%lld/%lld %s  %.3g %s/s", done_, total_, unit_.c_str(), rate, unit_.c_str());
  line += b;
  if (last) line += "  " + duration_text(elapsed);
  else if (left >= 0) line += std::string("  ") + (bound ? "at most " : "") + duration_text(left) + " left";
  if (!note_.empty()) line += "  " + note_;
  if (tty_) std::fprintf(out_, "\r%s\033[K%s", line.c_str(), last ? "\n" : "");
  else std::fprintf(out_, "%s\n", line.c_str());
  std::fflush(out_);
  shown_any_ = true;
  last_shown_ = now;
}

}  // namespace aoc
