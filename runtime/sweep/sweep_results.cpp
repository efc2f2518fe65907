#include "runtime/sweep/sweep_results.hpp"

#include <H5Cpp.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <set>

#include "sim/error.hpp"
#include "sim/files.hpp"
#include "sim/h5file.hpp"
#include "sim/json_reader.hpp"

namespace aoc::sweep {

namespace fs = std::filesystem;

constexpr const char* kFormat = "aoc-sweep-results";
constexpr const char* kJournalFormat = "aoc-sweep-journal";
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

Header header_of(const Scenario& s) {
  Header h;
  h.scenario = s.path;
  h.name = s.name;
  h.config_hash = s.config_hash;
  h.tool_version = AOC_VERSION;
  h.sampling = sampling_name(s.sampling);
  using K = Workload::Kind;
  const K k = s.workload.kind;
  h.workload = k == K::Model ? "model" : k == K::Graph ? "graph" : k == K::Problem ? "problem" : k == K::Retina ? "retina" : "config";
  h.hardware = s.hardware;
  h.scenario_json = s.text;
  h.seed = s.seed;
  h.points = s.sampling == Sampling::Nsga2 ? static_cast<std::size_t>(s.samples) : points(s).size();
  for (const Param& p : s.params) h.params.push_back({p.name, p.hardware ? "hardware" : "run", p.fixed});
  h.metrics = s.columns;
  return h;
}

namespace {

// A count or an index of the journal: a JSON integer from 0 to 2^64 - 1 (not a float such as 1e30,
// which would not convert to one).
std::uint64_t whole_number(const json& j, const char* key) {
  const json& v = j.at(key);
  if (v.is_number_unsigned()) return v.get<std::uint64_t>();
  if (v.is_number_integer() && v.get<std::int64_t>() >= 0) return static_cast<std::uint64_t>(v.get<std::int64_t>());
  throw Error(std::string(key) + ": expected a whole number from 0 to 2^64 - 1, got " + v.dump());
}

json header_json(const Header& h) {
  json j{{"scenario", h.scenario}, {"name", h.name}, {"config_hash", h.config_hash}, {"tool_version", h.tool_version},
         {"sampling", h.sampling}, {"workload", h.workload}, {"hardware", h.hardware}, {"seed", h.seed}, {"points", h.points}};
  for (const auto& p : h.params) j["params"].push_back({{"name", p.name}, {"kind", p.kind}, {"fixed", p.fixed}});
  for (const auto& m : h.metrics) j["metrics"].push_back({{"name", m.name}, {"unit", m.unit}, {"better", m.better}});
  j["scenario_json"] = h.scenario_json;
  return j;
}

Header header_from(const json& j) {
  Header h;
  h.scenario = j.at("scenario"), h.name = j.at("name"), h.config_hash = j.at("config_hash"), h.tool_version = j.at("tool_version");
  h.sampling = j.at("sampling"), h.workload = j.at("workload"), h.hardware = j.at("hardware"), h.scenario_json = j.at("scenario_json");
  h.seed = whole_number(j, "seed"), h.points = whole_number(j, "points");
  if (j.contains("params"))
    for (const auto& p : j["params"]) h.params.push_back({p.at("name"), p.at("kind"), p.at("fixed")});
  if (j.contains("metrics"))
    for (const auto& m : j["metrics"]) h.metrics.push_back({m.at("name"), m.at("unit"), m.at("better")});
  return h;
}

}  // namespace

std::string row_line(const Row& r) {
  json m = json::array();
  for (double v : r.metrics) m.push_back(std::isfinite(v) ? json(v) : json(nullptr));
  json j{{"index", r.index}, {"seed", r.seed}, {"status", r.status}, {"error", r.error}, {"params", r.params}, {"metrics", m}};
  return j.dump();
}

Row parse_row(const std::string& line, const Header& h) {
  const json j = jsonr::parse_text<json>(line, "journal");
  Row r;
  r.index = whole_number(j, "index"), r.seed = whole_number(j, "seed"), r.status = j.at("status"), r.error = j.at("error");
  for (const json& v : j.at("params")) r.params.push_back(v);
  for (const json& v : j.at("metrics")) r.metrics.push_back(v.is_null() ? kNaN : v.get<double>());
  if (r.params.size() != h.params.size() || r.metrics.size() != h.metrics.size())
    throw Error("a row of " + std::to_string(r.params.size()) + " parameters and " + std::to_string(r.metrics.size()) +
                " metrics, the header has " + std::to_string(h.params.size()) + " and " + std::to_string(h.metrics.size()));
  return r;
}

std::string journal_path(const std::string& output) { return output + ".partial"; }

// ---------------------------------------------------------------------------------------------
// The journal

namespace {

void write_all(int fd, const std::string& s, const std::string& path) {
  std::size_t done = 0;
  while (done < s.size()) {
    const ssize_t n = ::write(fd, s.data() + done, s.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw Error(write_failure(path, n < 0 ? errno : ENOSPC));
    done += static_cast<std::size_t>(n);
  }
  if (::fdatasync(fd) != 0) throw Error(path + ": cannot sync to disk");
}

}  // namespace

Journal::Journal(const std::string& path, const Header& h, bool resume) : path_(path), header_(h) {
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw Error(write_failure(path, errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd_);
    throw Error(path + ": another aoc sweep is writing this output");
  }
  std::string text;
  char buf[1 << 16];
  for (ssize_t n; (n = ::read(fd_, buf, sizeof buf)) > 0;) text.append(buf, static_cast<std::size_t>(n));
  try {
    if (!text.empty() && !resume)
      throw Error(path + ": the finished points of an interrupted sweep: run with --resume to finish it (or remove the file to start again)");
    // A line without its newline was cut short by a kill: drop it (its point runs again).
    const std::size_t keep = text.empty() ? 0 : text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
    if (keep < text.size() && ::ftruncate(fd_, static_cast<off_t>(keep)) != 0) throw Error(path + ": cannot truncate a cut-short line");
    text.resize(keep);
    if (text.empty()) {
      ::lseek(fd_, 0, SEEK_SET);
      write_all(fd_, json{{"format", kJournalFormat}, {"header", header_json(h)}}.dump() + "\n", path);
      return;
    }
    std::size_t line_no = 0;
    std::set<std::size_t> seen;
    for (std::size_t start = 0; start < text.size(); ++line_no) {
      const std::size_t end = text.find('\n', start);
      const std::string line = text.substr(start, end - start);
      start = end + 1;
      try {
        if (line_no == 0) {
          const json j = jsonr::parse_text<json>(line, "journal");
          if (j.at("format") != kJournalFormat) throw Error("not a sweep journal");
          const Header old = header_from(j.at("header"));
          if (old.config_hash != h.config_hash)
            throw Error("written by another scenario or other input files (config hash " + old.config_hash + ", now " + h.config_hash +
                        "): remove it to start again");
          if (old.tool_version != h.tool_version)
            throw Error("written by aoc " + old.tool_version + ", this is aoc " + h.tool_version + ": remove it to start again");
          continue;
        }
        Row r = parse_row(line, h);
        if (r.index >= h.points) throw Error("point " + std::to_string(r.index) + " is not in the scenario");
        if (!seen.insert(r.index).second) throw Error("point " + std::to_string(r.index) + " is there twice");
        rows_.push_back(std::move(r));
      } catch (const Error& e) {
        throw Error(path + ": line " + std::to_string(line_no + 1) + ": " + e.what());
      } catch (const std::exception& e) {
        throw Error(jsonr::one_line(path + ": line " + std::to_string(line_no + 1) + ": unreadable (" + e.what() + ")"));
      }
    }
    ::lseek(fd_, 0, SEEK_END);
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

Journal::~Journal() {
  if (fd_ >= 0) ::close(fd_);
}

void Journal::append(const std::vector<Row>& rows) {
  std::string text;
  for (const Row& r : rows) text += row_line(r) + "\n";
  if (text.empty()) return;
  write_all(fd_, text, path_);
  // What the file holds, so that every output is built from the same values whether or not the sweep was resumed.
  for (const Row& r : rows) rows_.push_back(parse_row(row_line(r), header_));
}

void Journal::remove() {
  std::error_code ec;
  fs::remove(path_, ec);
  sync_directory(fs::path(path_).parent_path());  // the results were renamed into place (and flushed) before
}

// ---------------------------------------------------------------------------------------------
// HDF5 and CSV

namespace {

void put_u64_attr(H5::H5Object& o, const std::string& name, std::uint64_t v) {
  o.createAttribute(name, H5::PredType::STD_U64LE, H5::DataSpace(H5S_SCALAR)).write(H5::PredType::NATIVE_UINT64, &v);
}

template <class T>
void put_numbers(H5::Group& g, const std::string& name, const std::vector<T>& v, const H5::PredType& file, const H5::PredType& mem) {
  const hsize_t n = v.size();
  H5::DataSet d = g.createDataSet(name, file, H5::DataSpace(1, &n), untimed_dataset());
  if (n) d.write(v.data(), mem);
}

double number_of(const json& v) { return v.is_boolean() ? (v.get<bool>() ? 1.0 : 0.0) : v.get<double>(); }

// A parameter column's type in the file, so that readers get back what the scenario gave: "bool"
// (every value true or false: int8 0/1), "integer" (every value a whole JSON number: int64), "float"
// (numbers, booleans among them as 0 and 1), else "text".
std::string column_type(const Results& r, std::size_t k) {
  bool all_bool = !r.rows.empty(), all_int = !r.rows.empty();
  for (const Row& row : r.rows) {
    const json& v = row.params[k];
    if (!v.is_number() && !v.is_boolean()) return "text";
    all_bool = all_bool && v.is_boolean();
    all_int = all_int && v.is_number_integer();
  }
  return all_bool ? "bool" : all_int ? "integer" : "float";
}

std::string text_of(const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

json order_of(const std::vector<std::string>& names) { return json(names); }

}  // namespace

void write_results_h5(const std::string& path, const Results& r) {
  const Header& h = r.header;
  write_h5_atomic(path, [&](H5::H5File& f) {
    h5_put_text_attr(f, "format", kFormat);
    h5_put_text_attr(f, "version", "1");
    h5_put_text_attr(f, "tool", std::string("aoc ") + h.tool_version);
    h5_put_text_attr(f, "tool_version", h.tool_version);
    h5_put_text_attr(f, "scenario", h.scenario);
    h5_put_text_attr(f, "name", h.name);
    h5_put_text_attr(f, "config_hash", h.config_hash);
    h5_put_text_attr(f, "sampling", h.sampling);
    h5_put_text_attr(f, "workload", h.workload);
    h5_put_text_attr(f, "hardware", h.hardware);
    put_u64_attr(f, "seed", h.seed);
    put_u64_attr(f, "points", h.points);
    put_u64_attr(f, "rows", r.rows.size());
    h5_put_text_attr(f, "complete", r.rows.size() == h.points ? "yes" : "no");
    H5::Group root = f.openGroup("/");
    h5_put_texts(root, "scenario_json", {h.scenario_json});

    std::vector<std::uint64_t> index, seed;
    std::vector<std::string> status, error;
    for (const Row& row : r.rows) index.push_back(row.index), seed.push_back(row.seed), status.push_back(row.status), error.push_back(row.error);
    put_numbers(root, "index", index, H5::PredType::STD_U64LE, H5::PredType::NATIVE_UINT64);
    put_numbers(root, "seed", seed, H5::PredType::STD_U64LE, H5::PredType::NATIVE_UINT64);
    h5_put_texts(root, "status", status);
    h5_put_texts(root, "error", error);

    H5::Group params = create_group(f, "parameters");
    std::vector<std::string> names;
    for (std::size_t k = 0; k < h.params.size(); ++k) {
      const ParamColumn& c = h.params[k];
      names.push_back(c.name);
      const std::string type = column_type(r, k);
      if (type == "bool" || type == "integer") {
        std::vector<std::int64_t> v;
        for (const Row& row : r.rows) v.push_back(type == "bool" ? row.params[k].get<bool>() : row.params[k].get<std::int64_t>());
        if (type == "bool") put_numbers(params, c.name, std::vector<std::int8_t>(v.begin(), v.end()), H5::PredType::STD_I8LE, H5::PredType::NATIVE_INT8);
        else put_numbers(params, c.name, v, H5::PredType::STD_I64LE, H5::PredType::NATIVE_INT64);
      } else if (type == "float") {
        std::vector<double> v;
        for (const Row& row : r.rows) v.push_back(number_of(row.params[k]));
        put_numbers(params, c.name, v, H5::PredType::IEEE_F64LE, H5::PredType::NATIVE_DOUBLE);
      } else {
        std::vector<std::string> v;
        for (const Row& row : r.rows) v.push_back(text_of(row.params[k]));
        h5_put_texts(params, c.name, v);
      }
      H5::DataSet d = params.openDataSet(c.name);
      h5_put_text_attr(d, "kind", c.kind);
      h5_put_text_attr(d, "fixed", c.fixed ? "yes" : "no");
      h5_put_text_attr(d, "type", type);
    }
    h5_put_text_attr(params, "order", order_of(names).dump());

    H5::Group metrics = create_group(f, "metrics");
    names.clear();
    for (std::size_t k = 0; k < h.metrics.size(); ++k) {
      const MetricColumn& c = h.metrics[k];
      names.push_back(c.name);
      std::vector<double> v;
      for (const Row& row : r.rows) v.push_back(row.metrics[k]);
      put_numbers(metrics, c.name, v, H5::PredType::IEEE_F64LE, H5::PredType::NATIVE_DOUBLE);
      H5::DataSet d = metrics.openDataSet(c.name);
      h5_put_text_attr(d, "unit", c.unit);
      h5_put_text_attr(d, "better", c.better);
    }
    h5_put_text_attr(metrics, "order", order_of(names).dump());
  });
}

Results read_results_h5(const std::string& path) {
  H5::H5File f = open_h5_read(path);
  Results r;
  Header& h = r.header;
  try {
    // every read checked (type, rank, count) by sim/h5file's reader, each error naming the object
    const auto attr = [&](const H5::H5Object& o, const std::string& object, const std::string& name) -> std::string {
      return h5_string(o.openAttribute(name), path + ": " + object + "attribute " + name);
    };
    const auto count = [&](const std::string& name) {
      const std::vector<std::uint64_t> v = h5_u64s(f.openAttribute(name), path + ": attribute " + name);
      if (v.size() != 1) throw Error(path + ": attribute " + name + ": expected one value, got " + std::to_string(v.size()));
      return v[0];
    };
    if (attr(f, "", "format") != kFormat) throw Error(path + ": not a sweep results file (format is not " + kFormat + ")");
    h.tool_version = attr(f, "", "tool_version");
    h.scenario = attr(f, "", "scenario"), h.name = attr(f, "", "name"), h.config_hash = attr(f, "", "config_hash");
    h.sampling = attr(f, "", "sampling"), h.workload = attr(f, "", "workload"), h.hardware = attr(f, "", "hardware");
    h.seed = count("seed"), h.points = count("points");
    h.scenario_json = h5_string(f.openDataSet("scenario_json"), path + ": /scenario_json");
    const auto index = h5_u64s(f.openDataSet("index"), path + ": /index");
    const std::size_t n = index.size();
    // a column of the table: as many values as /index has
    const auto rows_of = [&](const std::string& name, std::size_t got) {
      if (got != n) throw Error(path + ": /" + name + ": " + std::to_string(got) + " values, /index has " + std::to_string(n));
    };
    const auto seed = h5_u64s(f.openDataSet("seed"), path + ": /seed");
    const auto status = h5_strings(f.openDataSet("status"), path + ": /status"), error = h5_strings(f.openDataSet("error"), path + ": /error");
    rows_of("seed", seed.size()), rows_of("status", status.size()), rows_of("error", error.size());
    r.rows.resize(n);
    for (std::size_t i = 0; i < n; ++i) r.rows[i].index = index[i], r.rows[i].seed = seed[i], r.rows[i].status = status[i], r.rows[i].error = error[i];
    const H5::Group params = f.openGroup("parameters");
    for (const std::string name : jsonr::parse_text<json>(attr(params, "/parameters ", "order"), path + ": /parameters attribute order")) {
      const std::string column = "parameters/" + name, where = path + ": /" + column;
      const H5::DataSet d = params.openDataSet(name);
      h.params.push_back({name, attr(d, "/" + column + " ", "kind"), attr(d, "/" + column + " ", "fixed") == "yes"});
      if (d.getTypeClass() == H5T_STRING) {
        const auto v = h5_strings(d, where);
        rows_of(column, v.size());
        for (std::size_t i = 0; i < n; ++i) r.rows[i].params.push_back(v[i]);
      } else {
        // the column's type (files before it was written: float): integers and booleans come back as such
        const std::string type = d.attrExists("type") ? attr(d, "/" + column + " ", "type") : "float";
        const auto v = h5_numbers(d, where, 1);
        rows_of(column, v.size());
        for (std::size_t i = 0; i < n; ++i) {
          if (type == "bool") r.rows[i].params.push_back(v[i] != 0);
          else if (type == "integer") r.rows[i].params.push_back(static_cast<std::int64_t>(v[i]));
          else r.rows[i].params.push_back(v[i]);
        }
      }
    }
    const H5::Group metrics = f.openGroup("metrics");
    for (const std::string name : jsonr::parse_text<json>(attr(metrics, "/metrics ", "order"), path + ": /metrics attribute order")) {
      const std::string column = "metrics/" + name;
      const H5::DataSet d = metrics.openDataSet(name);
      h.metrics.push_back({name, attr(d, "/" + column + " ", "unit"), attr(d, "/" + column + " ", "better")});
      const auto v = h5_numbers(d, path + ": /" + column, 1);
      rows_of(column, v.size());
      for (std::size_t i = 0; i < n; ++i) r.rows[i].metrics.push_back(v[i]);
    }
  } catch (const H5::Exception& e) {
    throw Error(path + ": not a readable sweep results file (" + e.getDetailMsg() + ")");
  } catch (const json::exception& e) {
    throw Error(jsonr::one_line(path + ": unreadable column order (" + e.what() + ")"));
  }
  return r;
}

void write_results_csv(const std::string& path, const Results& r) {
  const auto quote = [](const std::string& s) {
    if (s.find_first_of(",\"\n") == std::string::npos) return s;
    std::string q = "\"";
    for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c == '\n' ? ' ' : c);
    return q + "\"";
  };
  const auto number = [](double v) {
    if (!std::isfinite(v)) return std::string();
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    return std::string(buf);
  };
  // Built with += (GCC 12 warns falsely on "," + string).
  std::string out = "index,seed,status,error";
  const auto cell = [&](const std::string& s) {
    out += ',';
    out += s;
  };
  for (const auto& p : r.header.params) cell(quote(p.name));
  // A metric named like a parameter (iterations) is "metric.NAME" here; a metric with a unit says
  // it, "energy [J]", as the HDF5 file's unit attribute does (dimensionless ones, unit "1", do not).
  for (const auto& m : r.header.metrics) {
    std::string name =
        std::any_of(r.header.params.begin(), r.header.params.end(), [&](const ParamColumn& p) { return p.name == m.name; })
            ? "metric." + m.name
            : m.name;
    if (!m.unit.empty() && m.unit != "1") name += " [" + m.unit + "]";
    cell(quote(name));
  }
  out += '\n';
  for (const Row& row : r.rows) {
    out += std::to_string(row.index);
    cell(std::to_string(row.seed));
    cell(row.status);
    cell(quote(row.error));
    for (const json& v : row.params) cell(quote(v.is_number() ? number(v.get<double>()) : text_of(v)));
    for (double v : row.metrics) cell(number(v));
    out += '\n';
  }
  write_file_atomic(path, out);
}

std::vector<double> column(const Results& r, const std::string& name, const std::string& path) {
  // "metrics/NAME" and "parameters/NAME" say which when a parameter and a metric share a name.
  const bool only_params = name.rfind("parameters/", 0) == 0, only_metrics = name.rfind("metrics/", 0) == 0;
  const std::string bare = only_params ? name.substr(11) : only_metrics ? name.substr(8) : name;
  std::vector<double> v;
  std::vector<std::string> names;
  for (std::size_t k = 0; k < r.header.metrics.size() && !only_params; ++k) {
    names.push_back(r.header.metrics[k].name);
    if (r.header.metrics[k].name != bare) continue;
    for (const Row& row : r.rows) v.push_back(row.metrics[k]);
    return v;
  }
  for (std::size_t k = 0; k < r.header.params.size() && !only_metrics; ++k) {
    names.push_back(r.header.params[k].name);
    if (r.header.params[k].name != bare) continue;
    for (const Row& row : r.rows) v.push_back(row.params[k].is_number() ? row.params[k].get<double>() : kNaN);
    return v;
  }
  throw Error(path + ": no column " + name + " (the columns: " + jsonr::join(names, ", ") + ")");
}

std::vector<std::size_t> pareto_front(const std::vector<double>& x, const std::vector<double>& y, bool x_max, bool y_max) {
  // Both as "smaller is better"; sorted by x then y, a row is on the front when its y beats every
  // row before it (or ties the row that set the best, with the same x: neither beats the other).
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < x.size(); ++i)
    if (std::isfinite(x[i]) && std::isfinite(y[i])) order.push_back(i);
  const auto X = [&](std::size_t i) { return x_max ? -x[i] : x[i]; };
  const auto Y = [&](std::size_t i) { return y_max ? -y[i] : y[i]; };
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return X(a) != X(b) ? X(a) < X(b) : Y(a) < Y(b); });
  std::vector<std::size_t> front;
  for (std::size_t i : order)
    if (front.empty() || Y(i) < Y(front.back()) || (Y(i) == Y(front.back()) && X(i) == X(front.back()))) front.push_back(i);
  std::sort(front.begin(), front.end(), [&](std::size_t a, std::size_t b) { return x[a] != x[b] ? x[a] < x[b] : a < b; });
  return front;
}

}  // namespace aoc::sweep
