#include "runtime/run/loop_problem.hpp"

#include <cmath>
#include <random>

namespace aoc {

LoopProblem random_problem(int n, int batch, std::uint64_t seed, int first_sample) {
  std::mt19937_64 rng(seed);
  // (bits >> 11) * 2^-53 rather than std::uniform_real_distribution, whose algorithm the standard
  // leaves to the library: the same seed must give the same problem everywhere.
  auto u = [&](double lo, double hi) { return lo + (hi - lo) * static_cast<double>(rng() >> 11) * 0x1.0p-53; };
  LoopProblem p;
  const double w = 1.0 / std::sqrt(static_cast<double>(n));
  p.W.resize(n, n);
  for (auto& v : p.W.reshaped()) v = u(-w, w);
  p.bias.resize(n);
  for (auto& v : p.bias) v = u(-w, w);
  // sample by sample (row-major), so that a sample's inputs depend on its index, not on the batch
  p.x.resize(batch, n);
  rng.discard(static_cast<unsigned long long>(first_sample) * static_cast<unsigned long long>(n));  // the earlier samples' inputs
  for (auto& v : p.x.reshaped<Eigen::RowMajor>()) v = u(-1.3, 1.3);
  p.z0 = MatrixXdR::Zero(batch, n);
  return p;
}

}  // namespace aoc
