#include "models/tasks.hpp"

#include <Random123/philox.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <numeric>

#include "sim/error.hpp"

namespace aoc::tasks {

namespace {

int inversions(const std::vector<int>& p) {
  int n = 0;
  for (size_t i = 0; i < p.size(); ++i)
    for (size_t j = i + 1; j < p.size(); ++j) n += p[i] > p[j];
  return n;
}

constexpr int kMaxModulus = 1024;
constexpr const char* kValidNames = "parity, count:M (2 <= M <= 1024), s3, a5, s5, a5xm, each with an optional :p=P";

[[noreturn]] void fail(const std::string& spec, const std::string& what) {
  throw Error("task \"" + spec + "\": " + what);
}

// The whole of s as a finite double / an int, or false.
bool to_double(const std::string& s, double& v) {
  const char* end = s.data() + s.size();
  const auto r = std::from_chars(s.data(), end, v);
  return !s.empty() && r.ec == std::errc() && r.ptr == end && std::isfinite(v);
}
bool to_int(const std::string& s, int& v) {
  const char* end = s.data() + s.size();
  const auto r = std::from_chars(s.data(), end, v);
  return !s.empty() && r.ec == std::errc() && r.ptr == end;
}

// The shortest text that reads back as v.
std::string shortest(double v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

}  // namespace

std::vector<std::vector<int>> permutations(int k, bool even_only) {
  if (k < 1 || k > 8) throw Error("permutations: k must be in [1, 8], got " + std::to_string(k));
  std::vector<int> p(k);
  std::iota(p.begin(), p.end(), 0);
  std::vector<std::vector<int>> out;
  do {  // std::next_permutation walks the arrays in lexicographic order
    if (!even_only || inversions(p) % 2 == 0) out.push_back(p);
  } while (std::next_permutation(p.begin(), p.end()));
  return out;
}

Table permutation_group(const std::string& name, const std::vector<std::vector<int>>& perms) {
  std::map<std::vector<int>, int> index;
  for (size_t i = 0; i < perms.size(); ++i) index.emplace(perms[i], static_cast<int>(i));
  Table t{name, static_cast<int>(perms.size()), {}};
  t.mul.resize(perms.size() * perms.size());
  for (size_t a = 0; a < perms.size(); ++a)
    for (size_t b = 0; b < perms.size(); ++b) {
      std::vector<int> ab(perms[a].size());
      for (size_t i = 0; i < ab.size(); ++i) ab[i] = perms[b][perms[a][i]];  // a first, then b
      const auto it = index.find(ab);
      if (it == index.end()) throw Error(name + ": the permutations are not closed under the product");
      t.mul[a * perms.size() + b] = it->second;
    }
  return t;
}

Table cyclic_group(int m) {
  if (m < 1) throw Error("cyclic group: the modulus must be at least 1, got " + std::to_string(m));
  Table t{std::string("Z").append(std::to_string(m)), m, std::vector<int>(static_cast<size_t>(m) * m)};
  for (int a = 0; a < m; ++a)
    for (int b = 0; b < m; ++b) t.mul[static_cast<size_t>(a) * m + b] = (a + b) % m;
  return t;
}

Table s3_group() { return permutation_group("S3", permutations(3, false)); }

Table a5_group() { return permutation_group("A5", permutations(5, true)); }

Table s5_group() { return permutation_group("S5", permutations(5, false)); }

Table aperiodic_monoid() {
  enum { E, A, B, X };
  // rows: left factor, columns: right factor
  return {"M", 4, {
      E, A, B, X,   // E·y = y
      A, X, X, X,   // A·E = A, A·A = A·B = A·X = X
      B, A, B, X,   // B·E = B, B·A = A, B·B = B, B·X = X
      X, X, X, X}};  // X absorbing
}

Table trivial_monoid() { return {"1", 1, {0}}; }

Task parse_task(const std::string& spec) {
  std::vector<std::string> fields;
  for (size_t start = 0;;) {
    const size_t colon = spec.find(':', start);
    fields.push_back(spec.substr(start, colon == std::string::npos ? std::string::npos : colon - start));
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  const std::string& name = fields[0];
  Task task;
  task.monoid = trivial_monoid();
  const bool is_count = name == "count";
  if (name == "parity") task.group = cyclic_group(2);
  else if (name == "s3") task.group = s3_group();
  else if (name == "a5") task.group = a5_group();
  else if (name == "s5") task.group = s5_group();
  else if (name == "a5xm") task.group = a5_group(), task.monoid = aperiodic_monoid();
  else if (!is_count) fail(spec, "unknown task \"" + name + "\"; valid: " + kValidNames);

  const std::string valid_params = is_count ? "a modulus M (count:M or count:m=M) and p=P" : "p=P";
  int modulus = 0;
  bool have_p = false;
  for (size_t i = 1; i < fields.size(); ++i) {
    const std::string& f = fields[i];
    const size_t eq = f.find('=');
    const std::string key = eq == std::string::npos ? "" : f.substr(0, eq);
    const std::string value = eq == std::string::npos ? f : f.substr(eq + 1);
    if (is_count && (key == "m" || eq == std::string::npos)) {
      if (modulus) fail(spec, "the modulus is given twice");
      if (!to_int(value, modulus) || modulus < 2 || modulus > kMaxModulus)
        fail(spec, "the modulus must be an integer in [2, " + std::to_string(kMaxModulus) + "], got \"" + value + "\"");
    } else if (key == "p") {
      if (have_p) fail(spec, "p is given twice");
      if (!to_double(value, task.p) || task.p < 0 || task.p > 1)
        fail(spec, "p must be a number in [0, 1], got \"" + value + "\"");
      have_p = true;
    } else {
      fail(spec, "unknown parameter \"" + f + "\" for " + name + "; valid: " + valid_params);
    }
  }
  if (is_count) {
    if (!modulus) fail(spec, "count needs a modulus, e.g. count:5");
    task.group = cyclic_group(modulus);
  }
  // (appended piecewise: ":" + std::to_string(m) trips a GCC 12 -Wrestrict false positive)
  task.name = name;
  if (is_count) task.name.append(":").append(std::to_string(modulus));
  if (task.p != 0) task.name.append(":p=").append(shortest(task.p));
  task.vocab = task.classes = task.group.n * task.monoid.n;
  return task;
}

void prefix_products(const Task& task, const int* x, int* y, int L) {
  for (int t = 0; t < L; ++t) y[t] = t == 0 ? x[0] : task.mul(y[t - 1], x[t]);
}

const char* split_name(Split s) {
  switch (s) {
    case Split::Train: return "train";
    case Split::Eval: return "eval";
    case Split::Test: return "test";
    case Split::Calibration: return "calibration";
  }
  return "?";
}

Split parse_split(const std::string& name) {
  for (Split s : {Split::Train, Split::Eval, Split::Test, Split::Calibration})
    if (name == split_name(s)) return s;
  throw Error("unknown split \"" + name + "\"; valid: train, eval, test, calibration");
}

SeqBatch sample(const Task& task, int B, int L, std::uint64_t seed, std::uint64_t index, Split split) {
  if (B < 1 || L < 1)
    throw Error("task " + task.name + ": a batch needs B >= 1 and L >= 1, got B = " + std::to_string(B) +
                ", L = " + std::to_string(L));
  if (index >> 32) throw Error("task " + task.name + ": batch index " + std::to_string(index) + " is beyond 2^32 - 1");
  using G = r123::Philox4x32;
  const G::key_type key = {{static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32) ^ 0x5441534Bu}};
  const auto uniform_index = [](std::uint32_t word, int n) {
    return static_cast<int>((static_cast<std::uint64_t>(word) * static_cast<std::uint64_t>(n)) >> 32);
  };
  const int nm = task.monoid.n;
  SeqBatch out{B, L, std::vector<int>(static_cast<size_t>(B) * L), std::vector<int>(static_cast<size_t>(B) * L)};
  for (int b = 0; b < B; ++b) {
    int* x = out.tokens.data() + static_cast<size_t>(b) * L;
    for (int t = 0; t < L; ++t) {
      const G::ctr_type ctr = {{static_cast<std::uint32_t>(index), static_cast<std::uint32_t>(split),
                                static_cast<std::uint32_t>(b), static_cast<std::uint32_t>(t)}};
      const G::ctr_type r = G()(ctr, key);
      int g = uniform_index(r[0], task.group.n);
      const std::uint64_t bits = (static_cast<std::uint64_t>(r[1]) << 21) ^ (r[2] >> 11);
      const double u = static_cast<double>(bits & ((1ULL << 53) - 1)) * 0x1.0p-53;  // [0, 1)
      if (u < task.p) g = 0;
      x[t] = g * nm + uniform_index(r[3], nm);
    }
    prefix_products(task, x, out.targets.data() + static_cast<size_t>(b) * L, L);
  }
  return out;
}

}  // namespace aoc::tasks
