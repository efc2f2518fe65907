// Design-space sweeps (docs/scenarios.md): a scenario file names a workload, a base machine, the
// parameters to vary and the metrics to collect; this file reads it and lists its points.
//
// A parameter is a dotted hardware path (the `--set` overrides of aoc compile / aoc estimate,
// applied by load_hardware) or one of the run parameters below. Points come from a grid, random
// sampling or a Latin hypercube; random draws are Philox4x32-10 (Random123) keyed on the
// scenario's seed, so the points are a pure function of the file.
#pragma once
#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "compiler/interpret.hpp"

namespace aoc::sweep {

using json = nlohmann::ordered_json;

// The parameters that are not hardware paths, with what they set (docs/scenarios.md).
const std::vector<std::string>& run_parameters();

struct Param {
  std::string name;
  bool hardware = false;  // a hardware path, else a run parameter
  bool fixed = false;     // one value for every point
  std::vector<json> values;  // a list (fixed: its one value); empty for a range
  double lo = 0, hi = 0;     // a range
  bool log = false, integer = false;
  int steps = 0;             // grid points of a range
};

// What runs at each point.
struct Workload {
  enum class Kind { Model, Graph, Config, Problem, Retina } kind = Kind::Config;
  std::string path;                // model folder, graph JSON, importer config, optimisation problem or retina model folder (resolved)
  std::string data;                // retina: the retina file (empty: the default SYNTHETIC retina, made in memory)
  int frames = 0;                  // retina: test frames run (0: all)
  std::string weights, inputs;     // graph: weights (HDF5) and program inputs (HDF5), both optional
  std::string task;                // model: the task spec (models/tasks.hpp)
  int batch = 8, length = 32;      // model: sequences of the task run at each point
  std::uint64_t data_seed = 1000;  // model: the task's data stream
  ir::Mode mode = ir::Mode::Sequential;
  bool calibrate = true;           // set the converters' ranges on the inputs (aoc compile --calibrate)
  bool quantize = true, optics = true;   // the sim backend's options (optics: the calibrated chain; false: ideal)
  int samples = 200, iterations = 500;   // problem: the optimiser's samples and loop iterations (runtime/optimize/optimize.hpp)
  bool runs() const {
    return kind == Kind::Model || kind == Kind::Problem || kind == Kind::Retina || (kind == Kind::Graph && !weights.empty() && !inputs.empty());
  }
};

// Grid, Random and Lhs list their points up front (points()); Nsga2 is a search (aoc explore,
// runtime/explore/explore.hpp): each generation's points follow from the rows of the ones before.
enum class Sampling { Grid, Random, Lhs, Nsga2 };
const char* sampling_name(Sampling s);

// What a search minimises (a metric column, negated where larger is better), and the bounds on a
// metric that make a point feasible (docs/scenarios.md, "Searches").
struct Objective {
  std::string metric;
  std::size_t column = 0;  // in Scenario::columns
  bool maximise = false;   // the column's "better" is "max"
  bool log = false;        // hypervolume on log10 of the value (energy and latency span decades)
};
struct Constraint {
  std::string metric;
  std::size_t column = 0;
  double min = -HUGE_VAL, max = HUGE_VAL;
};

// A search's screen (docs/scenarios.md, "Screens"): each new point of a model's workload is first
// run on `fraction` of its test sequences; a point whose constraints miss there by more than
// `margin` (violation relative to the bounds) is stopped with those metrics, the others run in full.
struct Screen {
  double fraction = 0;  // 0: no screen
  double margin = 0.05;
};

// One column of the results: a metric's name, unit and which way is better ("min", "max" or "").
struct MetricColumn {
  std::string name, unit, better;
};

struct Scenario {
  std::string path, name, description;
  std::string hardware, hardware_path;  // as written; resolved
  Workload workload;
  Sampling sampling = Sampling::Grid;
  int samples = 0;  // random and lhs: points to draw; nsga2: the evaluations it may spend
  int population = 0;  // nsga2: points per generation (a multiple of 4, at least 8)
  std::uint64_t seed = 1;
  std::vector<Param> params;            // in file order: "fixed" first, then "parameters"
  std::vector<std::string> metrics;     // metric groups, as named in the file
  std::vector<MetricColumn> columns;    // their columns, in order
  std::vector<Objective> objectives;    // optional for a sweep (aoc report's hypervolume), two or more for a search
  std::vector<Constraint> constraints;
  Screen screen;
  std::string text;                     // the file, as canonical JSON
  std::string config_hash;              // digest of the text and of every file it names
};

// Reads and checks a scenario; every problem is one aoc::Error line naming the file and field.
Scenario read_scenario(const std::string& path);

// A point: one value per parameter of the scenario (in its order).
struct Point {
  std::size_t index = 0;
  std::vector<json> values;
};

// A free parameter's value at unit coordinate u in [0, 1]: a list is cut into equal parts; a range
// is mapped linearly or logarithmically; an integer range gives each whole number an equal share.
json value_at(const Param& p, double u);

// Every point of the scenario, index 0 .. n-1: a pure function of the file (not for a search). A grid varies its last
// parameter fastest; random and Latin-hypercube points are drawn from the scenario's seed.
std::vector<Point> points(const Scenario& s);

// The unit-cube coordinates of random / Latin-hypercube sampling, n points x d dimensions, each
// in [0, 1): exposed for the tests. Latin hypercube: each dimension's n values lie one in each
// of the n strata [k/n, (k+1)/n).
std::vector<std::vector<double>> unit_samples(Sampling method, std::size_t n, std::size_t d, std::uint64_t seed);

}  // namespace aoc::sweep
