// The results of a sweep (docs/scenarios.md, "Results"): one row per point, its parameters,
// metrics, seed and status. While a sweep runs, every finished row is appended at once to a journal
// next to the output (RESULTS.h5.partial: JSON lines, the header first, fsync after each line), so
// no finished point is lost to a crash or a kill; when the last point is in, the HDF5 file (and the
// CSV) is built from the journal, written to a temporary file and renamed into place, and the
// journal removed. `aoc sweep --resume` reads the journal back and runs only the missing points.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/sweep/sweep.hpp"

namespace aoc::sweep {

struct Row {
  std::size_t index = 0;       // the point's index in the scenario
  std::uint64_t seed = 0;      // its noise seed
  std::string status = "ok";   // "ok", "error", or "screened" (a search's screen stopped it: the metrics are the screen's)
  std::string error;           // the error's (or the screen's) one line
  std::vector<json> params;    // one value per parameter column
  std::vector<double> metrics; // one per metric column; NaN where not computed
};

struct ParamColumn {
  std::string name, kind;  // kind: "hardware" (a hardware path) or "run"
  bool fixed = false;
};

// Everything a results file says besides its rows.
struct Header {
  std::string scenario, name, config_hash, tool_version, sampling, workload, hardware, scenario_json;
  std::uint64_t seed = 0;
  std::size_t points = 0;  // in the scenario
  std::vector<ParamColumn> params;
  std::vector<MetricColumn> metrics;
};

struct Results {
  Header header;
  std::vector<Row> rows;  // ascending index
};

Header header_of(const Scenario& s);

// A row as one line of JSON (no newline), and back; doubles round-trip exactly, NaN is null.
std::string row_line(const Row& r);
Row parse_row(const std::string& line, const Header& h);

// The journal of a running sweep. open() creates it with the header, or (resume) reads the rows it
// holds, dropping a last line cut short by a kill, and checks that it belongs to this scenario. The
// file is locked, so a second sweep into the same output stops with an error.
class Journal {
 public:
  Journal(const std::string& path, const Header& h, bool resume);
  ~Journal();
  Journal(const Journal&) = delete;
  Journal& operator=(const Journal&) = delete;
  const std::vector<Row>& rows() const { return rows_; }  // read back on resume, then every append
  void append(const std::vector<Row>& rows);  // written and fsync'ed (once for all of them) before it returns
  void remove();              // the sweep is complete and written

 private:
  std::string path_;
  int fd_ = -1;
  Header header_;
  std::vector<Row> rows_;
};

std::string journal_path(const std::string& output);

void write_results_h5(const std::string& path, const Results& r);
Results read_results_h5(const std::string& path);
void write_results_csv(const std::string& path, const Results& r);

// A numeric column by name, a metric or a parameter (a metric first; "parameters/NAME" or
// "metrics/NAME" to say which), one value per row (NaN where not a number); an unknown name is an
// error listing the columns.
std::vector<double> column(const Results& r, const std::string& name, const std::string& path);

// The rows no other row beats: none is at least as good on both columns and better on one. `max`:
// larger is better on that column. Rows with a NaN are left out. Ascending x.
std::vector<std::size_t> pareto_front(const std::vector<double>& x, const std::vector<double>& y, bool x_max, bool y_max);

}  // namespace aoc::sweep
