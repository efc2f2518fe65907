// Seeded synthetic loop problems: weights like a freshly initialised torch Linear layer
// (U(-1/sqrt(N), 1/sqrt(N)), in AOC convention) and inputs like the twin's golden cases
// (x ~ U(-1.3, 1.3)). The same seed gives the same numbers on every platform.
#pragma once
#include <cstdint>

#include "sim/stages.hpp"

namespace aoc {

struct LoopProblem {
  MatrixXdR W, x, z0;
  Eigen::VectorXd bias;
};

// Samples first_sample .. first_sample + batch - 1 of the seed's inputs (the same weights): a batch
// split over several problems gives the rows of one.
LoopProblem random_problem(int n, int batch, std::uint64_t seed, int first_sample = 0);

}  // namespace aoc
