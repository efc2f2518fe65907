// Optimisation problems as the AOC solves them: the mixed-Ising form of AOCoptimizer.jl (MIT),
// minimise H(s) = -(1/2) s'Js - h's + offset over s_i in {-1, 1} (binary variables) or [-1, 1]
// (continuous ones), J symmetric with a zero diagonal on the binaries. Every other form (QUBO and
// QUMO, box-constrained QP, Max-Cut, QPLIB files) converts to it and reports in its own terms
// through `offset`, `sense` and `scale`. Readers name the file and the field on bad input.
#pragma once
#include <Eigen/Dense>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/stages.hpp"

namespace aoc {

struct IsingProblem {
  std::string name;
  MatrixXdR J;                        // n x n, symmetric
  Eigen::VectorXd h;                  // n
  std::vector<std::uint8_t> binary;   // n: 1 binary (+-1), 0 continuous ([-1, 1])
  double offset = 0;                  // H's constant: H + offset is the minimised objective
  // What the user's objective is: objective = sense * (H + offset) (sense -1: a maximisation turned
  // into a minimisation); Max-Cut reports the cut, cut = (total_weight - H) / 2.
  int sense = 1;
  std::optional<double> maxcut_total;  // set for a Max-Cut: the graph's total edge weight
  // The best objective known (the user's terms) and where it comes from ("exhaustive search over
  // 2^15 states", "planted (Wishart ensemble)", "file", ...): p counts samples that reach it.
  std::optional<double> best_known;
  std::string best_known_source;
  std::optional<Eigen::VectorXd> best_state;  // a state at the best known, where one is known

  int n() const { return static_cast<int>(J.rows()); }
  bool all_binary() const;
};

// H(s) + offset, the minimised energy, of each row of S (B x n).
Eigen::VectorXd ising_energy(const IsingProblem& p, const MatrixXdR& S);
double ising_energy(const IsingProblem& p, const Eigen::VectorXd& s);
// The user's objective of an energy (sense, offset; a Max-Cut's cut).
double objective_of(const IsingProblem& p, double energy);
double energy_of(const IsingProblem& p, double objective);

// Checks shapes, symmetry, finiteness and the zero diagonal on binaries; throws naming `where`.
void check_ising(const IsingProblem& p, const std::string& where);

// sense * ((1/2) x'Qx + b'x + q) over x_i in {0, 1} (binary) or [lower_i, upper_i] (continuous), Q
// symmetric: the mixed-Ising problem through x = m + r y (binary: m = r = 1/2), y = s.
IsingProblem from_quadratic(const MatrixXdR& Q, const Eigen::VectorXd& b, double q, const std::vector<std::uint8_t>& binary,
                            const Eigen::VectorXd& lower, const Eigen::VectorXd& upper, int sense);
// Max-Cut of a weighted undirected graph (adjacency A, symmetric, zero diagonal): J = -A.
IsingProblem from_maxcut(const MatrixXdR& A);

// Readers. G-set / Biq Mac "mc" edge list: "n m", then m lines "i j w" (1-based, undirected).
IsingProblem read_gset(const std::string& path);
// QPLIB (.qplib, Furini et al. 2019): unconstrained (N) or box-constrained (B) problems over binary
// (B) or continuous (C) variables; a quadratic, diagonal, convex or linear objective.
IsingProblem read_qplib(const std::string& path);
// aoc's own instance file (JSON, docs/optimisation.md): what `aoc problem` writes.
IsingProblem read_ising_json(const std::string& path);
void write_ising_json(const IsingProblem& p, const std::string& path, const std::string& provenance);
// By extension: .qplib, .json, anything else an edge list.
IsingProblem read_problem(const std::string& path);

// Seeded generators (Philox, the same numbers everywhere).
// SK spin glass: J_ij = +-1 (i < j), zero field.
IsingProblem generate_sk(int n, std::uint64_t seed);
// Max-Cut of G(n, density) with unit weights (the arXiv 2204.00276 ensemble's kind).
IsingProblem generate_maxcut(int n, double density, std::uint64_t seed);
// Wishart planted ensemble (Hamze et al., PRE 101, 052102, 2020): J = -(1/n) W W' off the diagonal,
// W's m = alpha n Gaussian columns orthogonal to a planted +-1 state t, which is then a ground state
// (s'WW's >= 0 = t'WW't). Hardness peaks near alpha ~ 0.2-0.5 and falls for larger alpha.
IsingProblem generate_wishart(int n, double alpha, std::uint64_t seed);

// A Philox word (Source::Optimize streams) as a uniform number in (0, 1).
inline double unit_uniform(std::uint32_t word) { return (static_cast<double>(word) + 0.5) * 0x1.0p-32; }

// Exhaustive ground state of an all-binary problem with n <= 30 (Gray code: one flip per state,
// the fields updated in O(n)); sets best_known, best_known_source and best_state.
void solve_exhaustive(IsingProblem& p);

}  // namespace aoc
