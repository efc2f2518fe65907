// A multi-objective design-space search (`aoc explore`, docs/scenarios.md, "Searches"): NSGA-II
// (pagmo2) over a scenario's parameters, every evaluation a sweep's row (the same Evaluator, the
// same results file), a generation's points evaluated at once on the process's threads, and under
// mpirun split over the ranks, every rank running the same search on every row.
//
// The search is a pure function of the scenario and its seed: each point the algorithm asks for
// gets the next evaluation index, unless a point with the same values was evaluated before (it is
// then looked up, not run or counted again). Every finished row goes to the journal at once, so
// a killed search resumes by running the algorithm again from the start with the journal's rows
// in place of their evaluations: the same points in the same order, the same front.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/sweep/sweep.hpp"
#include "runtime/sweep/sweep_results.hpp"

namespace aoc::explore {

struct ExploreOptions {
  std::string output;  // RESULTS.h5
  std::string csv;     // also the rows as CSV (optional)
  bool resume = false;
  bool quiet = false;
  int threads = 0;                    // 0: the machine's cores
  std::optional<std::uint64_t> seed;  // instead of the scenario's (a new search: its own config hash)
  bool compare = false;               // also a grid and a random sample of as many evaluations (and the search without its screen)
  std::size_t compare_points = 0;     // ... or of this many (0: as many as the search's)
  std::size_t stop_after = 0;         // stop once this many evaluations are in the journal (0: never); --resume goes on
};

// One design's evaluations and what they found.
struct Design {
  std::string name;    // "nsga2", "unscreened" (the search without its screen), "grid", "random"
  std::string output;  // its results file
  std::size_t evaluations = 0, feasible = 0, front = 0, failed = 0;
  std::size_t screened = 0;  // stopped by the screen (the search's, where the scenario has one)
  double cost = 0;           // in whole evaluations: a screen costs its fraction, a point it passes 1 + that
  double seconds = 0;        // this run's, each design compiling its own programs (a resumed design's evaluations before it not counted)
  double hypervolume = 0;
  // The hypervolume of the first n evaluations (the search: after each generation), n and value.
  std::vector<std::pair<std::size_t, double>> curve;
};

struct ExploreSummary {
  sweep::Scenario scenario;
  std::size_t done_before = 0;  // evaluations read back from the journal
  std::size_t generations = 0;
  double seconds = 0;
  int threads = 1;  // per rank
  int ranks = 1;    // MPI ranks (mpirun), each evaluating its share of every generation
  bool root = true; // this process wrote the results (rank 0)
  bool stopped = false;          // by stop_after: the journal holds the evaluations, no results file yet
  std::size_t evaluations = 0;   // the search's, when stopped
  std::vector<Design> designs;   // the search, then (compare) the grid and the random sample
  std::vector<sweep::Row> front;  // the search's front, ascending in its first objective
};

ExploreSummary run_explore(const std::string& scenario_path, const ExploreOptions& o);

// The grid of a scenario's free parameters with at most n points, as even as n allows (each range
// from lo to hi inclusive, each list at evenly spaced entries), the last parameter fastest.
std::vector<sweep::Point> grid_points(const sweep::Scenario& s, std::size_t n);

// Where the comparison designs of -o RESULTS.h5 go: RESULTS.unscreened.h5, RESULTS.grid.h5, RESULTS.random.h5.
std::string design_output(const std::string& output, const std::string& design);

}  // namespace aoc::explore
