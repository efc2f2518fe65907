// Outputs are written durably (issue 22): a temporary file next to the target, flushed, renamed into
// place, the directory flushed; temporary files of runs that died are removed by the next write of
// the same target; a failed write says why (a full disk, a missing directory).
#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "graph_support.hpp"
#include "tests/support.hpp"
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

namespace {

// `aoc ARGS` with every file it writes limited to `blocks` x 512 bytes: to a writer, a full disk
// (write() fails, with EFBIG; SIGXFSZ ignored as the shell leaves it). The exit status (-1: a signal).
test::Run aoc_on_small_disk(int blocks, const std::string& args) {
  return test::run_shell("trap '' XFSZ; ulimit -f " + std::to_string(blocks) + "; exec " + AOC_BINARY + " " + args + " 2>&1");
}

std::string bytes_of(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace

TEST_CASE("files: every writer on a full disk fails by name or writes the same bytes, never a signal, a temporary or a lost file", "[slow]") {
  const fs::path dir = test::temp_dir() / "full-disk";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string model = std::string(AOC_SOURCE_DIR) + "/models/trained/parity-implicit";
  const auto at = [&](const char* f) { return (dir / f).string(); };
  REQUIRE(test::run_aoc("import " + model + "/config.json -o " + at("g.json")).status == 0);
  REQUIRE(test::run_aoc("compile " + at("g.json") + " --weights " + at("g.h5") + " -o " + at("p.h5")).status == 0);
  REQUIRE(test::run_aoc("run " + at("p.h5") + " --example-input " + at("x.h5") + " --batch 2 --length 4").status == 0);
  // each writer: its command with OUT (and OUT2) for its outputs, and whether equal inputs give equal bytes
  struct Writer {
    std::string name, args;
    std::vector<std::string> outputs;
    bool same_bytes;
  };
  const std::vector<Writer> writers = {
      {"compile", "compile " + at("g.json") + " --weights " + at("g.h5") + " -o OUT", {"OUT"}, true},
      {"import", "import " + model + "/config.json -o OUT --weights-out OUT2", {"OUT", "OUT2"}, true},
      {"task", "task parity --batch 64 --length 64 --tokens OUT --labels OUT2", {"OUT", "OUT2"}, true},
      {"example-input", "run " + at("p.h5") + " --example-input OUT --batch 16 --length 64", {"OUT"}, true},
      {"run", "run " + at("p.h5") + " --inputs " + at("x.h5") + " --backend cpu -o OUT", {"OUT"}, false},
  };
  for (const Writer& w : writers) {
    const fs::path full = dir / (w.name + "-full"), small = dir / (w.name + "-small");
    fs::create_directories(full);
    const auto args_in = [&](const fs::path& d) {
      std::string a = w.args;
      for (const char* key : {"OUT2", "OUT"})
        for (std::size_t p; (p = a.find(key)) != std::string::npos;) a.replace(p, std::string(key).size(), (d / (std::string(key) == "OUT" ? "out" : "out2")).string());
      return a;
    };
    const test::Run ref = test::run_aoc(args_in(full));
    INFO(w.name << ": " << ref.out);
    REQUIRE(ref.status == 0);
    for (int blocks : {1, 8, 40, 120, 400}) {
      fs::remove_all(small);
      fs::create_directories(small);
      for (const char* f : {"out", "out2"}) std::ofstream(small / f) << "the old output";  // what a failed write must keep
      const test::Run r = aoc_on_small_disk(blocks, args_in(small));
      INFO(w.name << " at " << blocks * 512 << " bytes: status " << r.status << ": " << r.out);
      CHECK(r.status >= 0);  // no signal
      CHECK(r.status < 128);
      CHECK(r.out.find("internal error") == std::string::npos);
      for (const auto& e : fs::directory_iterator(small)) CHECK(e.path().extension() != ".tmp");
      for (std::size_t i = 0; i < w.outputs.size(); ++i) {
        const char* f = i == 0 ? "out" : "out2";
        if (r.status != 0) {
          CHECK(bytes_of(small / f) == "the old output");  // all or none: every output kept
          CHECK(r.out.find("\n") == r.out.size() - 1);    // one line
        } else if (w.same_bytes) {
          CHECK(bytes_of(small / f) == bytes_of(full / f));
        } else {
          CHECK(bytes_of(small / f) != "the old output");
        }
      }
    }
  }
  fs::remove_all(dir);
}
