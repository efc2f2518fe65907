// State-tracking tasks: the algebra is what it claims to be, labels are prefix products, batches
// are pure functions of (task, seed, index), and spec strings parse or fail in one line.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "models/tasks.hpp"
#include "sim/error.hpp"

using namespace aoc;
using namespace aoc::tasks;

namespace {

// Closure, identity 0, two-sided inverses and associativity, checked over the whole table.
void check_group(const Table& g, bool need_inverses = true) {
  INFO(g.name);
  REQUIRE(g.n >= 1);
  REQUIRE(g.mul.size() == static_cast<size_t>(g.n) * g.n);
  for (int v : g.mul) REQUIRE((v >= 0 && v < g.n));
  for (int a = 0; a < g.n; ++a) {
    REQUIRE(g(0, a) == a);
    REQUIRE(g(a, 0) == a);
  }
  if (need_inverses)
    for (int a = 0; a < g.n; ++a) {
      int inverses = 0;
      for (int b = 0; b < g.n; ++b) inverses += g(a, b) == 0 && g(b, a) == 0;
      REQUIRE(inverses == 1);
    }
  for (int a = 0; a < g.n; ++a)
    for (int b = 0; b < g.n; ++b)
      for (int c = 0; c < g.n; ++c)
        if (g(g(a, b), c) != g(a, g(b, c))) FAIL(g.name << " not associative at " << a << ", " << b << ", " << c);
}

// Sign from the cycle decomposition (independent of the inversion count the library uses).
bool is_even(const std::vector<int>& p) {
  std::vector<bool> seen(p.size());
  int transpositions = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    int len = 0;
    for (size_t j = i; !seen[j]; j = p[j]) seen[j] = true, ++len;
    if (len > 0) transpositions += len - 1;
  }
  return transpositions % 2 == 0;
}

// x_1 · ... · x_t of permutations, applied in reading order, by direct composition.
std::vector<int> apply_in_order(const std::vector<std::vector<int>>& perms, const int* g, int t) {
  std::vector<int> state(perms[0].size());
  for (size_t i = 0; i < state.size(); ++i) state[i] = static_cast<int>(i);
  for (int s = 0; s < t; ++s)
    for (int& v : state) v = perms[g[s]][v];
  return state;
}

// The product of a word over M = {E, A, B, X} without the table: drop the E's; empty -> E; any X
// -> X; an A anywhere but last -> X; else the last letter (B^k -> B, B^k A -> A).
int monoid_word(const std::vector<int>& w) {
  enum { E, A, B, X };
  std::vector<int> v;
  for (int m : w)
    if (m != E) v.push_back(m);
  if (v.empty()) return E;
  if (std::count(v.begin(), v.end(), X)) return X;
  if (std::find(v.begin(), v.end() - 1, A) != v.end() - 1) return X;
  return v.back();
}

std::string error_of(const std::string& spec) {
  try {
    parse_task(spec);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("tasks: Z_m, S3, A5 and S5 satisfy the group axioms") {
  for (int m : {1, 2, 5, 7}) check_group(cyclic_group(m));
  check_group(s3_group());
  check_group(a5_group());
  check_group(s5_group());
  CHECK(s3_group().n == 6);
  CHECK(a5_group().n == 60);
  CHECK(s5_group().n == 120);
  // S3 and A5 are not abelian, Z_m is
  const Table s3 = s3_group(), a5 = a5_group();
  CHECK(s3(1, 2) != s3(2, 1));
  int noncommuting = 0;
  for (int a = 0; a < 60; ++a)
    for (int b = 0; b < 60; ++b) noncommuting += a5(a, b) != a5(b, a);
  CHECK(noncommuting > 0);
}

TEST_CASE("tasks: A5 is the 60 even permutations in lexicographic order") {
  const auto perms = permutations(5, true);
  REQUIRE(perms.size() == 60);
  CHECK(std::set<std::vector<int>>(perms.begin(), perms.end()).size() == 60);
  CHECK(std::is_sorted(perms.begin(), perms.end()));
  for (const auto& p : perms) CHECK(is_even(p));
  CHECK(perms[0] == std::vector<int>{0, 1, 2, 3, 4});
  CHECK(perms[1] == std::vector<int>{0, 1, 3, 4, 2});
  // S3: all six, lexicographic
  const auto s3 = permutations(3, false);
  CHECK(s3 == std::vector<std::vector<int>>{{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}});
  // the table is "a first, then b"
  const Table a5 = a5_group();
  for (int a = 0; a < 60; ++a)
    for (int b = 0; b < 60; ++b) {
      std::vector<int> ab(5);
      for (int i = 0; i < 5; ++i) ab[i] = perms[b][perms[a][i]];
      REQUIRE(perms[a5(a, b)] == ab);
    }
  // a list that is not a group is refused
  CHECK_THROWS_AS(permutation_group("bad", {{0, 1, 2}, {1, 0, 2}, {0, 2, 1}}), Error);
}

TEST_CASE("tasks: the aperiodic monoid is associative with identity E and absorbing X") {
  enum { E, A, B, X };
  const Table m = aperiodic_monoid();
  REQUIRE(m.n == 4);
  check_group(m, /*need_inverses=*/false);
  CHECK(m(A, A) == X);
  CHECK(m(A, B) == X);
  CHECK(m(A, X) == X);
  CHECK(m(A, E) == A);
  CHECK(m(B, E) == B);
  CHECK(m(B, A) == A);
  CHECK(m(B, B) == B);
  CHECK(m(B, X) == X);
  for (int y = 0; y < 4; ++y) CHECK((m(X, y) == X && m(y, X) == X));
  // aperiodic: x^2 = x^3 for every element; not a group: A has no inverse
  for (int x = 0; x < 4; ++x) CHECK(m(x, x) == m(m(x, x), x));
  for (int y = 0; y < 4; ++y) CHECK(m(A, y) != E);
}

TEST_CASE("tasks: S3 labels follow the left to right convention of a hand example") {
  const Task s3 = parse_task("s3");
  // element 2 = [1,0,2] swaps points 0 and 1; element 1 = [0,2,1] swaps 1 and 2.
  // [1,0,2] then [0,2,1] is [2,0,1] = element 4; the other order is [1,2,0] = element 3.
  const std::vector<int> x = {2, 1, 1};
  std::vector<int> y(3);
  prefix_products(s3, x.data(), y.data(), 3);
  CHECK(y == std::vector<int>{2, 4, 2});  // the second swap undone by the third
  const std::vector<int> x2 = {1, 2};
  std::vector<int> y2(2);
  prefix_products(s3, x2.data(), y2.data(), 2);
  CHECK(y2 == std::vector<int>{1, 3});
}

TEST_CASE("tasks: labels are the prefix products of the tokens") {
  const auto s3p = permutations(3, false), a5p = permutations(5, true);
  const int L = 40;
  for (const std::string spec : {"parity", "count:5", "s3", "a5:p=0.5", "a5xm:p=0.5"}) {
    INFO(spec);
    const Task task = parse_task(spec);
    const SeqBatch batch = sample(task, 3, L, 17, 4, Split::Train);
    REQUIRE(batch.tokens.size() == static_cast<size_t>(3 * L));
    REQUIRE(batch.targets.size() == batch.tokens.size());
    for (int b = 0; b < 3; ++b) {
      const int* x = batch.tokens.data() + b * L;
      const int* y = batch.targets.data() + b * L;
      for (int t = 1; t <= L; ++t) {
        REQUIRE((x[t - 1] >= 0 && x[t - 1] < task.vocab));
        REQUIRE((y[t - 1] >= 0 && y[t - 1] < task.classes));
        int want = 0;
        if (spec == "parity" || spec == "count:5") {
          const int m = spec == "parity" ? 2 : 5;
          for (int s = 0; s < t; ++s) want = (want + x[s]) % m;
        } else if (spec == "s3") {
          const auto state = apply_in_order(s3p, x, t);
          want = static_cast<int>(std::find(s3p.begin(), s3p.end(), state) - s3p.begin());
        } else if (spec == "a5:p=0.5") {
          const auto state = apply_in_order(a5p, x, t);
          want = static_cast<int>(std::find(a5p.begin(), a5p.end(), state) - a5p.begin());
        } else {  // a5xm: token = g * 4 + m, componentwise
          std::vector<int> g(t), w(t);
          for (int s = 0; s < t; ++s) g[s] = x[s] / 4, w[s] = x[s] % 4;
          const auto state = apply_in_order(a5p, g.data(), t);
          want = static_cast<int>(std::find(a5p.begin(), a5p.end(), state) - a5p.begin()) * 4 + monoid_word(w);
        }
        REQUIRE(y[t - 1] == want);
      }
    }
  }
}

TEST_CASE("tasks: a batch is a pure function of seed and index and sample b does not depend on B") {
  const Task task = parse_task("a5xm:p=0.5");
  const SeqBatch a = sample(task, 8, 32, 123, 7, Split::Train);
  const SeqBatch again = sample(task, 8, 32, 123, 7, Split::Train);
  CHECK(a.B == 8);
  CHECK(a.L == 32);
  CHECK(a.tokens == again.tokens);
  CHECK(a.targets == again.targets);
  CHECK(sample(task, 8, 32, 123, 8, Split::Train).tokens != a.tokens);
  CHECK(sample(task, 8, 32, 124, 7, Split::Train).tokens != a.tokens);
  CHECK(sample(task, 8, 32, 123, 7, Split::Test).tokens != a.tokens);  // another split, another stream
  // the first 3 samples of a batch of 8 are the batch of 3
  const SeqBatch narrow = sample(task, 3, 32, 123, 7, Split::Train);
  CHECK(std::equal(narrow.tokens.begin(), narrow.tokens.end(), a.tokens.begin()));
  CHECK(std::equal(narrow.targets.begin(), narrow.targets.end(), a.targets.begin()));
  // and a shorter sequence is a prefix of the longer one
  const SeqBatch shorter = sample(task, 8, 10, 123, 7, Split::Train);
  for (int b = 0; b < 8; ++b)
    for (int t = 0; t < 10; ++t) {
      REQUIRE(shorter.tokens[b * 10 + t] == a.tokens[b * 32 + t]);
      REQUIRE(shorter.targets[b * 10 + t] == a.targets[b * 32 + t]);
    }
  // samples within a batch differ
  CHECK(!std::equal(a.tokens.begin(), a.tokens.begin() + 32, a.tokens.begin() + 32));
  CHECK_THROWS_AS(sample(task, 0, 32, 1, 0, Split::Train), Error);
  CHECK_THROWS_AS(sample(task, 4, 0, 1, 0, Split::Train), Error);
}

TEST_CASE("tasks: S5 labels are the permutation of the tokens applied in order, and A5 sits in it as the even ones") {
  const auto s5p = permutations(5, false);
  const Task s5 = parse_task("s5");
  CHECK(s5.vocab == 120);
  const SeqBatch b = sample(s5, 2, 30, 11, 0, Split::Test);
  for (int r = 0; r < 2; ++r)
    for (int t = 1; t <= 30; ++t) {
      const auto state = apply_in_order(s5p, b.tokens.data() + r * 30, t);
      REQUIRE(b.targets[r * 30 + t - 1] == static_cast<int>(std::find(s5p.begin(), s5p.end(), state) - s5p.begin()));
    }
  const auto a5p = permutations(5, true);
  for (const auto& p : a5p) CHECK(std::find(s5p.begin(), s5p.end(), p) != s5p.end());
}

TEST_CASE("tasks: each split is its own stream and the train split is the trainer's") {
  const Task task = parse_task("s3");
  const SeqBatch train = sample(task, 16, 64, 5, 0, Split::Train);
  std::set<std::vector<int>> seen{train.tokens};
  for (Split s : {Split::Eval, Split::Test, Split::Calibration}) {
    INFO(split_name(s));
    CHECK(seen.insert(sample(task, 16, 64, 5, 0, s).tokens).second);
    CHECK(parse_split(split_name(s)) == s);
  }
  // a split's batch 1 is not another split's batch 0 either: the split is a counter word of its own
  CHECK(sample(task, 16, 64, 5, 1, Split::Train).tokens != sample(task, 16, 64, 5, 0, Split::Eval).tokens);
  CHECK_THROWS_WITH(parse_split("validation"), "unknown split \"validation\"; valid: train, eval, test, calibration");
  CHECK_THROWS_AS(sample(task, 1, 1, 5, 1ULL << 32, Split::Train), Error);
}

TEST_CASE("tasks: p = 1 gives only identity group components and constant labels") {
  for (const std::string spec : {"parity:p=1", "count:5:p=1", "s3:p=1", "a5:p=1"}) {
    INFO(spec);
    const SeqBatch b = sample(parse_task(spec), 4, 50, 3, 0, Split::Train);
    CHECK(std::all_of(b.tokens.begin(), b.tokens.end(), [](int v) { return v == 0; }));
    CHECK(std::all_of(b.targets.begin(), b.targets.end(), [](int v) { return v == 0; }));
  }
  // a5xm: the group component is the identity; the monoid component stays uniform
  const SeqBatch b = sample(parse_task("a5xm:p=1"), 4, 50, 3, 0, Split::Train);
  std::set<int> monoid;
  for (size_t i = 0; i < b.tokens.size(); ++i) {
    REQUIRE(b.tokens[i] / 4 == 0);
    REQUIRE(b.targets[i] / 4 == 0);
    monoid.insert(b.tokens[i] % 4);
  }
  CHECK(monoid.size() == 4);
}

TEST_CASE("tasks: p = 0.9 leaves about 10 percent hard tokens") {
  // hard = group component not the identity: probability (1 - p) (1 - 1/|G|); bound 5 sigma
  const auto hard_fraction_ok = [](const std::string& spec, int monoid_n, double want) {
    const SeqBatch b = sample(parse_task(spec), 64, 256, 99, 1, Split::Train);
    const double n = static_cast<double>(b.tokens.size());
    double hard = 0;
    for (int v : b.tokens) hard += v / monoid_n != 0;
    const double sigma = std::sqrt(n * want * (1 - want));
    INFO(spec << ": " << hard << " hard of " << n << ", want " << n * want << " +- " << sigma);
    return std::abs(hard - n * want) < 5 * sigma;
  };
  CHECK(hard_fraction_ok("a5:p=0.9", 1, 0.1 * 59 / 60));
  CHECK(hard_fraction_ok("a5xm:p=0.9", 4, 0.1 * 59 / 60));
  CHECK(hard_fraction_ok("s3:p=0.5", 1, 0.5 * 5 / 6));
  CHECK(hard_fraction_ok("a5", 1, 59.0 / 60));
  // p = 0: every element about equally often (s3, 6 classes, 5 sigma each)
  const SeqBatch b = sample(parse_task("s3"), 64, 256, 5, 0, Split::Train);
  std::vector<double> counts(6);
  for (int v : b.tokens) counts[v] += 1;
  const double n = static_cast<double>(b.tokens.size()), sigma = std::sqrt(n * (1.0 / 6) * (5.0 / 6));
  for (double c : counts) CHECK(std::abs(c - n / 6) < 5 * sigma);
}

TEST_CASE("tasks: spec strings parse to the documented tasks") {
  const Task parity = parse_task("parity");
  CHECK(parity.name == "parity");
  CHECK(parity.vocab == 2);
  CHECK(parity.classes == 2);
  CHECK(parity.p == 0);
  const Task count = parse_task("count:5");
  CHECK(count.name == "count:5");
  CHECK(count.vocab == 5);
  CHECK(count.group.name == "Z5");
  CHECK(parse_task("count:m=7").name == "count:7");
  const Task cp = parse_task("count:5:p=0.25");
  CHECK(cp.name == "count:5:p=0.25");
  CHECK(cp.p == 0.25);
  const Task s3 = parse_task("s3:p=0.5");
  CHECK(s3.name == "s3:p=0.5");
  CHECK(s3.vocab == 6);
  CHECK(s3.p == 0.5);
  CHECK(parse_task("s3:p=0").name == "s3");
  const Task a5 = parse_task("a5");
  CHECK(a5.vocab == 60);
  CHECK(a5.monoid.n == 1);
  const Task a5xm = parse_task("a5xm:p=0.9");
  CHECK(a5xm.name == "a5xm:p=0.9");
  CHECK(a5xm.vocab == 240);
  CHECK(a5xm.classes == 240);
  CHECK(a5xm.group.n == 60);
  CHECK(a5xm.monoid.n == 4);
  CHECK(a5xm.p == 0.9);
  // the canonical name parses back to the same task
  CHECK(parse_task(cp.name).name == cp.name);
}

TEST_CASE("tasks: bad spec strings give one line errors naming the valid choices") {
  const std::string unknown = error_of("s7");
  CHECK_THAT(unknown, Catch::Contains("unknown task \"s7\"") && Catch::Contains("parity") &&
                          Catch::Contains("count:M") && Catch::Contains("a5xm") && Catch::Contains(":p=P"));
  CHECK_THAT(error_of(""), Catch::Contains("unknown task"));
  CHECK_THAT(error_of("s3:q=1"), Catch::Contains("unknown parameter \"q=1\" for s3; valid: p=P"));
  CHECK_THAT(error_of("parity:5"), Catch::Contains("unknown parameter \"5\""));
  CHECK_THAT(error_of("count:5:x=1"), Catch::Contains("valid: a modulus M"));
  CHECK_THAT(error_of("s3:p=1.5"), Catch::Contains("p must be a number in [0, 1], got \"1.5\""));
  CHECK_THAT(error_of("s3:p=abc"), Catch::Contains("p must be a number"));
  CHECK_THAT(error_of("s3:p=0.5x"), Catch::Contains("p must be a number"));
  CHECK_THAT(error_of("s3:p=0.1:p=0.2"), Catch::Contains("p is given twice"));
  CHECK_THAT(error_of("count"), Catch::Contains("count needs a modulus, e.g. count:5"));
  CHECK_THAT(error_of("count:1"), Catch::Contains("the modulus must be an integer in [2, 1024], got \"1\""));
  CHECK_THAT(error_of("count:5000"), Catch::Contains("the modulus must be"));
  CHECK_THAT(error_of("count:2.5"), Catch::Contains("the modulus must be"));
  CHECK_THAT(error_of("count:5:7"), Catch::Contains("the modulus is given twice"));
  for (const std::string spec : {"s7", "s3:q=1", "count", "a5xm:p=-1"}) {
    const std::string e = error_of(spec);
    CHECK_THAT(e, Catch::StartsWith("task \"" + spec + "\": "));
    CHECK(e.find('\n') == std::string::npos);
  }
}
