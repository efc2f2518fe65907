// The fronts of a search or a sweep and their hypervolume (docs/scenarios.md, "Searches"): which
// rows are feasible under the scenario's constraints, which of those no other beats on every
// objective, and the volume they dominate in a box shared by the designs compared.
#pragma once
#include <vector>

#include "runtime/sweep/sweep.hpp"
#include "runtime/sweep/sweep_results.hpp"

namespace aoc::explore {

// A row's objectives as values to minimise (negated where larger is better, log10 where the
// objective's scale is log); empty where the row is not feasible: an error, a NaN objective, a
// constraint unmet (or its metric NaN), or a log objective not above 0.
std::vector<double> objectives_of(const sweep::Scenario& s, const sweep::Row& r);

// How far a row is from feasible: 0 where it meets every constraint, else the sum of each unmet
// bound's shortfall relative to the bound; an error or a NaN is 1000.
double violation(const sweep::Scenario& s, const sweep::Row& r);

// The indices (into rows) of the feasible rows no other feasible row beats: none is at least as good
// on every objective and better on one. In row order; of equal rows, the first.
std::vector<std::size_t> front(const sweep::Scenario& s, const std::vector<sweep::Row>& rows);

// A results file's objectives and constraints (its scenario's, against its metric columns): what
// front() and hypervolume() need of a scenario. None where the scenario names none (a sweep may).
sweep::Scenario goals_of(const sweep::Results& r);

// The box the hypervolume is measured in: per objective, the best and worst value over the feasible
// rows of every design compared (objectives_of's values).
struct Box {
  std::vector<double> lo, hi;
};
Box box_of(const sweep::Scenario& s, const std::vector<const std::vector<sweep::Row>*>& designs);

// The hypervolume of rows' feasible front (pagmo), with each objective mapped onto [0, 1] by the box
// and the reference point at 1.1 on every axis: from 0 (no feasible row) to 1.1^objectives.
double hypervolume(const sweep::Scenario& s, const std::vector<sweep::Row>& rows, const Box& box);

// The hypervolume of the first n rows for each n of `marks` (ascending), in one box: how a design's
// front grows with its evaluations. every(step, n): step, 2 step, ... and n.
std::vector<std::pair<std::size_t, double>> hypervolume_curve(const sweep::Scenario& s, const std::vector<sweep::Row>& rows, const Box& box,
                                                              const std::vector<std::size_t>& marks);
std::vector<std::size_t> every(std::size_t step, std::size_t n);

}  // namespace aoc::explore
