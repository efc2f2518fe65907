// Outputs are written durably (issue 22): a temporary file next to the target, flushed, renamed into
// place, the directory flushed; temporary files of runs that died are removed by the next write of
// the same target; a failed write says why (a full disk, a missing directory).
#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <string>

#include "graph_support.hpp"
#include "sim/error.hpp"
#include "sim/files.hpp"

using namespace aoc;
namespace fs = std::filesystem;

namespace {

// A process id that no process has now.
pid_t dead_pid() {
  for (pid_t p = 4000000; p > 1000; p -= 997)
    if (::kill(p, 0) != 0 && errno == ESRCH) return p;
  FAIL("no free process id found");
  return 0;
}

fs::path leftover(const fs::path& dir, const std::string& name, pid_t pid) {
  const fs::path p = dir / ("." + name + "." + std::to_string(pid) + ".tmp");
  std::ofstream(p) << "half";
  return p;
}

}  // namespace

TEST_CASE("files: a write removes the temporary files a dead run left for the same target, not a live run's") {
  const fs::path dir = test::temp_dir() / "leftovers";
  fs::create_directories(dir);
  const fs::path dead = leftover(dir, "out.json", dead_pid()), live = leftover(dir, "out.json", ::getppid()),
                 other = leftover(dir, "other.json", dead_pid());
  write_file_atomic((dir / "out.json").string(), "{}\n");
  CHECK_FALSE(fs::exists(dead));
  CHECK(fs::exists(live));   // a run still writing
  CHECK(fs::exists(other));  // another target's
  CHECK(fs::exists(dir / "out.json"));
}

TEST_CASE("files: a write into a missing directory says so, and leaves nothing") {
  const fs::path dir = test::temp_dir() / "no-such-dir";
  fs::remove_all(dir);
  CHECK_THROWS_WITH(write_file_atomic((dir / "x.json").string(), "{}"),
                    (dir / "x.json").string() + ": cannot write: its directory " + dir.string() + " does not exist");
  CHECK_FALSE(fs::exists(dir));
}

TEST_CASE("files: a full disk is reported as a full disk, not as a missing directory") {
  CHECK(write_failure("r.h5", ENOSPC) == "r.h5: the disk is full (or the quota is used up)");
  CHECK(write_failure("r.h5", EDQUOT) == "r.h5: the disk is full (or the quota is used up)");
}

TEST_CASE("files: a finished write replaces the target whole, with no temporary file left") {
  const fs::path dir = test::temp_dir() / "whole";
  fs::remove_all(dir);
  fs::create_directories(dir);
  write_file_atomic((dir / "a.txt").string(), "one");
  write_file_atomic((dir / "a.txt").string(), "two");
  std::ifstream in(dir / "a.txt");
  std::string s;
  in >> s;
  CHECK(s == "two");
  CHECK(std::distance(fs::directory_iterator(dir), fs::directory_iterator()) == 1);
}
