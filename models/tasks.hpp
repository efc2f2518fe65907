// State-tracking tasks: the word problem of a small finite group (or group × monoid), as in the
// implicit-SSM paper's released generator (research notes docs/research/implicit_ssm.md §3.1, §5.1).
//
// Algebra. Every structure is a multiplication table over elements 0 .. n-1, element 0 the
// identity. Permutations are arrays p with p[i] the image of point i, and the product is
// "left then right":
//     (a · b)[i] = b[a[i]]        (apply a first, then b)
// so a prefix product x_1 · x_2 · ... · x_t applies the tokens in reading order. Example in S3
// (see s3_group): x_1 = [1,0,2] (swap points 0,1), x_2 = [0,2,1] (swap 1,2):
//     x_1 · x_2 = [2,0,1],   x_2 · x_1 = [1,2,0].
//   * Z_m: element k is k, a · b = (a + b) mod m.
//   * S3: the 6 permutations of {0,1,2} in lexicographic order of their arrays:
//     [0,1,2] [0,2,1] [1,0,2] [1,2,0] [2,0,1] [2,1,0] = elements 0 .. 5.
//   * A5: the 60 even permutations of {0,..,4} in lexicographic order of their arrays (odd ones
//     skipped); element 0 is the identity [0,1,2,3,4], element 1 is [0,1,3,4,2].
//   * M: the 4-element aperiodic monoid {E, A, B, X} = elements 0, 1, 2, 3 ("no substring aa"):
//     E identity; A·A = A·B = A·X = X, A·E = A; B·E = B, B·A = A, B·B = B, B·X = X; X absorbing.
//
// Tasks. A task is a group G times a monoid M (the trivial one-element monoid for the pure word
// problems). Token and label index: g * |M| + m, so the vocabulary and the label classes are both
// |G|·|M| and token 0 is the identity (identity of G, E of M). Labels are the aligned prefix
// products, left to right, componentwise in G × M:
//     y_1 = x_1,   y_t = y_{t-1} · x_t.
// Spec strings (parse_task):
//     parity        Z_2, tokens {0,1}, label = running XOR
//     count:M       Z_M (2 <= M <= 1024), label = running sum mod M; also count:m=M
//     s3            S3 word problem (6 tokens)
//     a5            A5 word problem (60 tokens)
//     s5            S5 word problem (120 tokens: all permutations of 5 points, lexicographic)
//     a5xm          A5 × M, vocabulary 240: the released generator
// each with an optional ":p=P", P in [0, 1]: the probability that a token's group component is
// replaced by the identity (so 1-P is the fraction of "hard" tokens); for a5xm the monoid
// component is always uniform, as in the reference. Fields are ':'-separated: "count:5:p=0.5".
//
// Sampling. sample(task, B, L, seed, index, split) is batch `index` (< 2^32) of the stream of `split`
// for `seed`, a pure function of its arguments. Each position draws one Philox4x32-10 block
// (Random123) with
//     key     = (seed low 32 bits, seed high 32 bits ^ 0x5441534B "TASK")
//     counter = (index, split, sample b, position t)
// (the tag keeps the stream apart from sim/noise's for the same seed). The splits are the uses of
// the data: train 0 (the trainer's batch at each step), eval 1 (its evaluation), test 2 (aoc task's
// default: what tables score), calibration 3 (converter ranges); a counter word apart, no two
// splits share a block whatever the seeds, so scored data never was trained or calibrated on. Word 0 picks g uniform in
// G, words 1-2 form a 53-bit uniform u in [0, 1) and g becomes the identity when u < p, word 3
// picks m uniform in M. A uniform index in [0, n) is (word · n) >> 32 (bias below n / 2^32).
// So sample b of a batch does not depend on B, nor position t on L: a longer or wider batch for
// the same (seed, index) extends the smaller one.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "compiler/ir.hpp"

namespace aoc::tasks {

// A finite monoid as its multiplication table: mul[a * n + b] = a · b, element 0 the identity.
struct Table {
  std::string name;
  int n = 0;
  std::vector<int> mul;
  int operator()(int a, int b) const { return mul[static_cast<size_t>(a) * n + b]; }
};

// All permutations of {0, .., k-1} (only the even ones if even_only) in lexicographic order.
std::vector<std::vector<int>> permutations(int k, bool even_only);
// The group of the given permutations under (a · b)[i] = b[a[i]]; throws aoc::Error if the list
// is not closed under the product.
Table permutation_group(const std::string& name, const std::vector<std::vector<int>>& perms);

Table cyclic_group(int m);  // Z_m, named "Z<m>"
Table s3_group();           // S3, 6 elements (order above)
Table a5_group();           // A5, 60 elements (order above)
Table s5_group();           // S5, 120 elements (all permutations of 5 points, lexicographic)
Table aperiodic_monoid();   // M = {E, A, B, X}
Table trivial_monoid();     // {E}

struct Task {
  std::string name;  // the canonical spec, e.g. "count:5", "a5xm:p=0.9"
  int vocab = 0;     // tokens 0 .. vocab-1
  int classes = 0;   // labels 0 .. classes-1 (= vocab)
  Table group;       // G
  Table monoid;      // M (trivial_monoid() unless a5xm)
  double p = 0;      // probability that a token's group component is the identity
  // The product in G × M of two encoded elements (g * |M| + m).
  int mul(int a, int b) const {
    return group(a / monoid.n, b / monoid.n) * monoid.n + monoid(a % monoid.n, b % monoid.n);
  }
};

// A task from its spec string; aoc::Error (one line, listing the valid names or parameters) on
// anything else.
Task parse_task(const std::string& spec);

// The aligned prefix products of tokens x[0 .. L-1]: y[0] = x[0], y[t] = y[t-1] · x[t].
void prefix_products(const Task& task, const int* x, int* y, int L);

// B sequences of length L, row-major: tokens[b * L + t], targets[b * L + t].
struct SeqBatch {
  int B = 0, L = 0;
  std::vector<int> tokens, targets;
  // As [B, L] tensors: the model's input (i64 ids as doubles) and the labels (ir::label_accuracy).
  ir::Tensor tokens_tensor() const { return as_tensor(tokens); }
  ir::Tensor targets_tensor() const { return as_tensor(targets); }

 private:
  ir::Tensor as_tensor(const std::vector<int>& v) const {
    ir::Tensor t;
    t.shape = {B, L};
    t.data.assign(v.begin(), v.end());
    return t;
  }
};

// The uses of task data, each its own stream (see the header comment).
enum class Split : std::uint32_t { Train = 0, Eval = 1, Test = 2, Calibration = 3 };
const char* split_name(Split s);
Split parse_split(const std::string& name);  // "train", "eval", "test", "calibration"; aoc::Error otherwise

// Batch `index` of `split`'s stream for `seed` (see the header comment); B >= 1, L >= 1, index < 2^32.
SeqBatch sample(const Task& task, int B, int L, std::uint64_t seed, std::uint64_t index, Split split);

}  // namespace aoc::tasks
