#include "runtime/optimize/ising.hpp"

#include <Eigen/Eigenvalues>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "sim/error.hpp"
#include "sim/files.hpp"
#include "sim/json_reader.hpp"
#include "sim/noise.hpp"

namespace aoc {

namespace {

using noise::Source;

// The generators' Philox streams (Source::Optimize, counter word a); sampler and baselines use 10+.
enum Stream : std::uint32_t { kSkSigns = 1, kMaxcutEdges = 2, kWishartColumns = 3, kPlanted = 4 };

std::vector<std::uint32_t> words(std::uint64_t seed, std::uint32_t stream, std::uint32_t row, int n) {
  std::vector<std::uint32_t> w(static_cast<size_t>(std::max(n, 0)));
  if (n > 0) noise::philox_words(seed, Source::Optimize, stream, row, 0, n, w.data());
  return w;
}

void check_n(int n, const char* what, int most) {
  if (n < 2 || n > most) throw Error(std::string(what) + ": n must be in [2, " + std::to_string(most) + "], got " + std::to_string(n));
}

}  // namespace

bool IsingProblem::all_binary() const {
  return std::all_of(binary.begin(), binary.end(), [](std::uint8_t b) { return b != 0; });
}

Eigen::VectorXd ising_energy(const IsingProblem& p, const MatrixXdR& S) {
  const MatrixXdR JS = S * p.J;  // J symmetric
  Eigen::VectorXd e(S.rows());
  for (Eigen::Index r = 0; r < S.rows(); ++r) e(r) = -0.5 * JS.row(r).dot(S.row(r)) - S.row(r).dot(p.h) + p.offset;
  return e;
}

double ising_energy(const IsingProblem& p, const Eigen::VectorXd& s) { return -0.5 * s.dot(p.J * s) - s.dot(p.h) + p.offset; }

double objective_of(const IsingProblem& p, double energy) {
  if (p.maxcut_total) return (*p.maxcut_total - energy) / 2;
  return p.sense * energy;
}

double energy_of(const IsingProblem& p, double objective) {
  if (p.maxcut_total) return *p.maxcut_total - 2 * objective;
  return p.sense * objective;
}

void check_ising(const IsingProblem& p, const std::string& where) {
  const int n = p.n();
  if (n < 1) throw Error(where + ": the problem has no variables");
  if (p.J.cols() != n) throw Error(where + ": J: expected " + std::to_string(n) + " x " + std::to_string(n));
  if (p.h.size() != n) throw Error(where + ": h: expected " + std::to_string(n) + " values, got " + std::to_string(p.h.size()));
  if (static_cast<int>(p.binary.size()) != n) throw Error(where + ": binary: expected " + std::to_string(n) + " flags");
  if (!p.J.allFinite() || !p.h.allFinite() || !std::isfinite(p.offset)) throw Error(where + ": the problem holds NaN or infinity");
  for (int i = 0; i < n; ++i) {
    if (p.binary[static_cast<size_t>(i)] && p.J(i, i) != 0)
      throw Error(where + ": J[" + std::to_string(i) + "][" + std::to_string(i) + "]: must be 0 on a binary variable (fold it into the offset)");
    for (int j = 0; j < i; ++j)
      if (p.J(i, j) != p.J(j, i)) throw Error(where + ": J: not symmetric at [" + std::to_string(i) + "][" + std::to_string(j) + "]");
  }
}

IsingProblem from_quadratic(const MatrixXdR& Q, const Eigen::VectorXd& b, double q, const std::vector<std::uint8_t>& binary,
                            const Eigen::VectorXd& lower, const Eigen::VectorXd& upper, int sense) {
  const int n = static_cast<int>(Q.rows());
  const double s = sense >= 0 ? 1.0 : -1.0;  // minimise s * f
  Eigen::VectorXd m(n), r(n);
  for (int i = 0; i < n; ++i) {
    if (binary[static_cast<size_t>(i)]) {
      m(i) = r(i) = 0.5;
    } else {
      if (!std::isfinite(lower(i)) || !std::isfinite(upper(i)) || !(lower(i) <= upper(i)))
        throw Error("variable " + std::to_string(i + 1) + ": a continuous variable needs finite bounds lower <= upper");
      m(i) = 0.5 * (upper(i) + lower(i)), r(i) = 0.5 * (upper(i) - lower(i));
    }
  }
  const MatrixXdR Qs = s * Q;
  const Eigen::VectorXd bs = s * b;
  const MatrixXdR A = r.asDiagonal() * Qs * r.asDiagonal();
  IsingProblem p;
  p.J = -A;
  p.h = -(r.asDiagonal() * (Qs * m) + r.cwiseProduct(bs));
  p.binary = binary;
  p.offset = 0.5 * m.dot(Qs * m) + bs.dot(m) + s * q;
  for (int i = 0; i < n; ++i)
    if (binary[static_cast<size_t>(i)]) p.offset += 0.5 * A(i, i), p.J(i, i) = 0;
  p.sense = static_cast<int>(s);
  return p;
}

IsingProblem from_maxcut(const MatrixXdR& A) {
  IsingProblem p;
  p.J = -A;
  p.h = Eigen::VectorXd::Zero(A.rows());
  p.binary.assign(static_cast<size_t>(A.rows()), 1);
  p.maxcut_total = A.sum() / 2;
  return p;
}

// ---- readers ----------------------------------------------------------------------------------

namespace {

// Lines of a text file without comments (from '#' or '%') and blanks, each with its line number.
struct Lines {
  std::string path;
  std::vector<std::pair<int, std::string>> rows;
  size_t next = 0;

  explicit Lines(const std::string& p) : path(p) {
    std::ifstream in(p);
    if (!in) throw Error(p + ": cannot open the file");
    std::string line;
    for (int k = 1; std::getline(in, line); ++k) {
      const size_t c = line.find_first_of("#%");
      if (c != std::string::npos) line.resize(c);
      if (line.find_first_not_of(" \t\r") != std::string::npos) rows.emplace_back(k, line);
    }
  }
  [[noreturn]] void fail(const std::string& field, const std::string& what) const {
    const int line = next == 0 ? 1 : rows[std::min(next, rows.size()) - 1].first;
    throw Error(jsonr::one_line(path + ": line " + std::to_string(line) + ": " + field + ": " + what));
  }
  std::istringstream take(const std::string& field) {
    if (next >= rows.size()) fail(field, "missing (the file ends early)");
    return std::istringstream(rows[next++].second);
  }
  std::string word(const std::string& field) {
    auto in = take(field);
    std::string w;
    in >> w;
    return w;
  }
  double number(std::istringstream& in, const std::string& field) {
    std::string t;
    if (!(in >> t)) fail(field, "expected a number");
    char* end = nullptr;
    const double v = std::strtod(t.c_str(), &end);
    if (end == t.c_str() || *end != '\0') fail(field, "expected a number, got '" + t + "'");
    if (!std::isfinite(v)) fail(field, t + " is not a finite number");
    return v;
  }
  long long integer(std::istringstream& in, const std::string& field, long long lo, long long hi) {
    const double v = number(in, field);
    if (v != std::floor(v) || v < static_cast<double>(lo) || v > static_cast<double>(hi))
      fail(field, "expected a whole number in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + jsonr::num(v));
    return static_cast<long long>(v);
  }
  double number(const std::string& field) {
    auto in = take(field);
    return number(in, field);
  }
  long long integer(const std::string& field, long long lo, long long hi) {
    auto in = take(field);
    return integer(in, field, lo, hi);
  }
};

constexpr int kMaxVariables = 8192;  // J is kept dense: 512 MB at this size; larger is an error (aoc-scale's module holds 2048)

std::string stem(const std::string& path) { return std::filesystem::path(path).stem().string(); }

}  // namespace

IsingProblem read_gset(const std::string& path) {
  Lines f(path);
  auto head = f.take("header 'n m'");
  const int n = static_cast<int>(f.integer(head, "n (nodes)", 1, kMaxVariables));
  const long long m = f.integer(head, "m (edges)", 0, static_cast<long long>(n) * n);
  MatrixXdR A = MatrixXdR::Zero(n, n);
  for (long long e = 0; e < m; ++e) {
    const std::string field = "edge " + std::to_string(e + 1) + " of " + std::to_string(m);
    auto in = f.take(field);
    const int i = static_cast<int>(f.integer(in, field + ": i", 1, n)) - 1, j = static_cast<int>(f.integer(in, field + ": j", 1, n)) - 1;
    const double w = f.number(in, field + ": w");
    if (i == j) f.fail(field, "a self-loop (" + std::to_string(i + 1) + ", " + std::to_string(i + 1) + ") has no cut");
    A(i, j) += w, A(j, i) += w;
  }
  if (f.next < f.rows.size()) {
    f.next++;
    f.fail("edges", "more lines than the header's " + std::to_string(m) + " edges");
  }
  IsingProblem p = from_maxcut(A);
  p.name = stem(path);
  return p;
}

IsingProblem read_qplib(const std::string& path) {
  Lines f(path);
  const std::string name = f.word("name");
  const std::string type = f.word("problem type");
  if (type.size() != 3) f.fail("problem type", "expected three letters such as QBN, got '" + type + "'");
  const char o = type[0], v = type[1], c = type[2];
  if (std::string("LDCQ").find(o) == std::string::npos) f.fail("problem type", "unknown objective type '" + std::string(1, o) + "'");
  if (v != 'B' && v != 'C')
    f.fail("problem type", "variables '" + std::string(1, v) + "' are not supported (binary B or continuous C; mixed and integer ones are not)");
  if (c != 'N' && c != 'B') f.fail("problem type", "constraints '" + std::string(1, c) + "' are not supported (none N or box B)");
  std::string sense = f.word("objective sense");
  std::transform(sense.begin(), sense.end(), sense.begin(), [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  if (sense != "minimize" && sense != "maximize") f.fail("objective sense", "expected minimize or maximize, got '" + sense + "'");
  const int n = static_cast<int>(f.integer("number of variables", 1, kMaxVariables));
  MatrixXdR Q = MatrixXdR::Zero(n, n);
  if (o != 'L') {
    const long long terms = f.integer("number of quadratic terms in the objective", 0, static_cast<long long>(n) * n);
    for (long long t = 0; t < terms; ++t) {
      const std::string field = "quadratic term " + std::to_string(t + 1);
      auto in = f.take(field);
      const int i = static_cast<int>(f.integer(in, field + ": row", 1, n)) - 1, j = static_cast<int>(f.integer(in, field + ": column", 1, n)) - 1;
      const double q = f.number(in, field + ": value");
      Q(i, j) += q;
      if (i != j) Q(j, i) += q;  // the lower triangle of a symmetric Q0
    }
  }
  Eigen::VectorXd b = Eigen::VectorXd::Constant(n, f.number("default linear coefficient"));
  const long long nb = f.integer("number of non-default linear coefficients", 0, n);
  for (long long t = 0; t < nb; ++t) {
    const std::string field = "linear coefficient " + std::to_string(t + 1);
    auto in = f.take(field);
    const int j = static_cast<int>(f.integer(in, field + ": index", 1, n)) - 1;
    b(j) = f.number(in, field + ": value");
  }
  const double q0 = f.number("objective constant");
  const double inf = std::abs(f.number("infinity"));
  Eigen::VectorXd lower = Eigen::VectorXd::Zero(n), upper = Eigen::VectorXd::Ones(n);
  if (v == 'C') {
    for (Eigen::VectorXd* bound : {&lower, &upper}) {
      const std::string which = bound == &lower ? "lower" : "upper";
      bound->setConstant(f.number("default " + which + " bound"));
      const long long k = f.integer("number of non-default " + which + " bounds", 0, n);
      for (long long t = 0; t < k; ++t) {
        const std::string field = which + " bound " + std::to_string(t + 1);
        auto in = f.take(field);
        const int j = static_cast<int>(f.integer(in, field + ": index", 1, n)) - 1;
        (*bound)(j) = f.number(in, field + ": value");
      }
    }
    for (int j = 0; j < n; ++j)
      if (std::abs(lower(j)) >= inf || std::abs(upper(j)) >= inf || !(lower(j) <= upper(j)))
        f.fail("variable " + std::to_string(j + 1), "a continuous variable needs finite bounds lower <= upper (QUMO's box)");
  }
  // the starting point and names that may follow do not change the problem
  IsingProblem p = from_quadratic(Q, b, q0, std::vector<std::uint8_t>(static_cast<size_t>(n), v == 'B'), lower, upper, sense == "maximize" ? -1 : 1);
  p.name = name;
  return p;
}

IsingProblem read_ising_json(const std::string& path) {
  const jsonr::json j = jsonr::parse_file(path);
  const jsonr::Reader r(path);
  r.object(j, "");
  r.only_keys(j, "", {"format", "version", "name", "n", "couplings", "field", "binary", "offset", "sense", "maxcut_total", "best_known",
                      "best_known_source", "best_state", "provenance"});
  if (r.text(r.need(j, "", "format"), "format", true) != "aoc-ising") r.fail("format", "expected \"aoc-ising\"");
  if (r.number(r.need(j, "", "version"), "version", {1, 1, true, true}) != 1) r.fail("version", "expected 1");
  IsingProblem p;
  p.name = r.text(r.need(j, "", "name"), "name", true);
  const double nd = r.number(r.need(j, "", "n"), "n", {1, kMaxVariables, true, true});
  if (nd != std::floor(nd)) r.fail("n", "expected a whole number");
  const int n = static_cast<int>(nd);
  p.J = MatrixXdR::Zero(n, n);
  const jsonr::json& cs = r.need(j, "", "couplings");
  if (!cs.is_array()) r.fail("couplings", "expected an array of [i, j, J_ij] (0-based, i <= j)");
  for (size_t k = 0; k < cs.size(); ++k) {
    const auto t = r.numbers(cs[k], jsonr::elem("couplings", k), 3);
    const double i = t[0], jj = t[1];
    if (i != std::floor(i) || jj != std::floor(jj) || i < 0 || jj < 0 || i >= n || jj >= n || i > jj)
      r.fail(jsonr::elem("couplings", k), "indices must be whole, 0 <= i <= j < n");
    p.J(static_cast<int>(i), static_cast<int>(jj)) = t[2], p.J(static_cast<int>(jj), static_cast<int>(i)) = t[2];
  }
  const auto h = r.numbers(r.need(j, "", "field"), "field", static_cast<size_t>(n));
  p.h = Eigen::Map<const Eigen::VectorXd>(h.data(), n);
  const auto bin = r.numbers(r.need(j, "", "binary"), "binary", static_cast<size_t>(n), {0, 1, true, true});
  for (size_t k = 0; k < bin.size(); ++k) {
    if (bin[k] != 0 && bin[k] != 1) r.fail(jsonr::elem("binary", k), "expected 0 or 1");
    p.binary.push_back(bin[k] != 0);
  }
  if (const auto* v = r.find(j, "offset")) p.offset = r.number(*v, "offset");
  if (const auto* v = r.find(j, "sense")) {
    const double s = r.number(*v, "sense");
    if (s != 1 && s != -1) r.fail("sense", "expected 1 (minimise) or -1 (a maximisation)");
    p.sense = static_cast<int>(s);
  }
  if (const auto* v = r.find(j, "maxcut_total")) p.maxcut_total = r.number(*v, "maxcut_total");
  if (const auto* v = r.find(j, "best_known")) {
    p.best_known = r.number(*v, "best_known");
    p.best_known_source = r.text(r.need(j, "", "best_known_source"), "best_known_source", true);
  }
  if (const auto* v = r.find(j, "best_state")) {
    const auto s = r.numbers(*v, "best_state", static_cast<size_t>(n), {-1, 1, true, true});
    p.best_state = Eigen::Map<const Eigen::VectorXd>(s.data(), n);
  }
  check_ising(p, path);
  if (p.best_known && p.best_state) {
    const double got = objective_of(p, ising_energy(p, *p.best_state));
    if (std::abs(got - *p.best_known) > 1e-9 * std::max(1.0, std::abs(*p.best_known)))
      r.fail("best_state", "its objective " + jsonr::num(got) + " is not best_known " + jsonr::num(*p.best_known));
  }
  return p;
}

void write_ising_json(const IsingProblem& p, const std::string& path, const std::string& provenance) {
  nlohmann::ordered_json j;
  j["format"] = "aoc-ising";
  j["version"] = 1;
  j["name"] = p.name;
  j["n"] = p.n();
  auto cs = nlohmann::ordered_json::array();
  for (int i = 0; i < p.n(); ++i)
    for (int k = i; k < p.n(); ++k)
      if (p.J(i, k) != 0) cs.push_back({i, k, p.J(i, k)});
  j["couplings"] = std::move(cs);
  j["field"] = std::vector<double>(p.h.data(), p.h.data() + p.n());
  j["binary"] = std::vector<int>(p.binary.begin(), p.binary.end());
  j["offset"] = p.offset;
  j["sense"] = p.sense;
  if (p.maxcut_total) j["maxcut_total"] = *p.maxcut_total;
  if (p.best_known) j["best_known"] = *p.best_known, j["best_known_source"] = p.best_known_source;
  if (p.best_state) j["best_state"] = std::vector<double>(p.best_state->data(), p.best_state->data() + p.n());
  j["provenance"] = provenance;
  write_file_atomic(path, j.dump(1) + "\n");
}

IsingProblem read_problem(const std::string& path) {
  const std::string ext = std::filesystem::path(path).extension().string();
  if (ext == ".json") return read_ising_json(path);  // it checks the problem before its best state
  IsingProblem p = ext == ".qplib" ? read_qplib(path) : read_gset(path);
  check_ising(p, path);
  return p;
}

// ---- generators -------------------------------------------------------------------------------

IsingProblem generate_sk(int n, std::uint64_t seed) {
  check_n(n, "sk", 4096);
  IsingProblem p;
  p.name = "sk-n" + std::to_string(n) + "-seed" + std::to_string(seed);
  p.J = MatrixXdR::Zero(n, n);
  for (int i = 0; i < n; ++i) {
    const auto w = words(seed, kSkSigns, static_cast<std::uint32_t>(i), n);
    for (int j = i + 1; j < n; ++j) p.J(i, j) = p.J(j, i) = (w[static_cast<size_t>(j)] & 1u) ? 1.0 : -1.0;
  }
  p.h = Eigen::VectorXd::Zero(n);
  p.binary.assign(static_cast<size_t>(n), 1);
  return p;
}

IsingProblem generate_maxcut(int n, double density, std::uint64_t seed) {
  check_n(n, "maxcut", 4096);
  if (!(density > 0 && density <= 1)) throw Error("maxcut: density must be in (0, 1], got " + jsonr::num(density));
  MatrixXdR A = MatrixXdR::Zero(n, n);
  for (int i = 0; i < n; ++i) {
    const auto w = words(seed, kMaxcutEdges, static_cast<std::uint32_t>(i), n);
    for (int j = i + 1; j < n; ++j)
      if (unit_uniform(w[static_cast<size_t>(j)]) < density) A(i, j) = A(j, i) = 1;
  }
  IsingProblem p = from_maxcut(A);
  p.name = "maxcut-n" + std::to_string(n) + "-d" + jsonr::num(density) + "-seed" + std::to_string(seed);
  return p;
}

IsingProblem generate_wishart(int n, double alpha, std::uint64_t seed) {
  check_n(n, "wishart", 4096);
  if (!(alpha > 0 && alpha <= 16)) throw Error("wishart: alpha must be in (0, 16], got " + jsonr::num(alpha));
  const int m = std::max(1, static_cast<int>(std::lround(alpha * n)));
  Eigen::VectorXd t(n);  // the planted state (a random gauge, so that it is not all +1)
  const auto tw = words(seed, kPlanted, 0, n);
  for (int i = 0; i < n; ++i) t(i) = (tw[static_cast<size_t>(i)] & 1u) ? 1.0 : -1.0;
  MatrixXdR W(n, m);
  std::vector<double> col(static_cast<size_t>(n));
  for (int k = 0; k < m; ++k) {
    noise::normals(seed, Source::Optimize, kWishartColumns, static_cast<std::uint32_t>(k), 0, n, col.data());
    Eigen::Map<Eigen::VectorXd> w(col.data(), n);
    w -= (w.dot(t) / n) * t;  // orthogonal to t: t'WW't = 0, the least s'WW's can be
    W.col(k) = w;
  }
  IsingProblem p;
  p.name = "wishart-n" + std::to_string(n) + "-a" + jsonr::num(alpha) + "-seed" + std::to_string(seed);
  p.J = -(W * W.transpose()) / n;
  p.J.diagonal().setZero();
  p.h = Eigen::VectorXd::Zero(n);
  p.binary.assign(static_cast<size_t>(n), 1);
  p.best_state = t;
  p.best_known = objective_of(p, ising_energy(p, t));
  p.best_known_source = "planted (Wishart ensemble, alpha " + jsonr::num(alpha) + ", " + std::to_string(m) + " columns): a ground state by construction";
  return p;
}

void solve_exhaustive(IsingProblem& p) {
  const int n = p.n();
  if (!p.all_binary()) throw Error("exhaustive search: every variable must be binary");
  if (n > 30) throw Error("exhaustive search: at most 30 variables, got " + std::to_string(n));
  // Without a field H(s) = H(-s): fix the last variable at +1 and enumerate the others.
  const bool symmetric = p.h.isZero(0);
  const int free = symmetric ? n - 1 : n;
  Eigen::VectorXd s = -Eigen::VectorXd::Ones(n);
  if (symmetric) s(n - 1) = 1;
  Eigen::VectorXd field = p.J * s + p.h;  // f = Js + h; flipping k changes H by 2 s_k f_k
  double e = ising_energy(p, s), best = e;
  Eigen::VectorXd best_s = s;
  const std::uint64_t states = std::uint64_t{1} << free;
  for (std::uint64_t k = 1; k < states; ++k) {
    const int i = __builtin_ctzll(k);  // the Gray code's flip
    e += 2 * s(i) * field(i);
    const double d = -2 * s(i);
    s(i) = -s(i);
    field += d * p.J.col(i);
    if (e < best) best = e, best_s = s;
  }
  best = ising_energy(p, best_s);  // without the running sum's rounding
  p.best_known = objective_of(p, best);
  p.best_state = best_s;
  p.best_known_source = "exhaustive search over 2^" + std::to_string(free) + " states";
}

}  // namespace aoc
