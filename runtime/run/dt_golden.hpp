// Golden cases of Microsoft's AOC digital twin (tests/data/dt_golden.json and any file of the same
// format) and their verification against the simulator: `aoc verify-dt`.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "sim/config.hpp"
#include "sim/stages.hpp"

namespace aoc {

struct DtCase {
  std::string name;
  int hw_n_variables = 48;  // which calibration: 48 or 16
  CoreConfig cfg;
  MatrixXdR W, x, z0, one_step, after_n_iter;
  Eigen::VectorXd bias;
  int n_iter = 0;  // 0: the case has no multi-step reference
  std::map<std::string, MatrixXdR> stages;
};

// Throws aoc::Error naming the file, the case and the field at fault.
std::vector<DtCase> load_dt_golden(const std::string& path);

enum class Precision { F32, F64 };

struct DtCaseReport {
  std::string name, hardware;
  int N = 0, B = 0, n_iter = 0;
  double err_one_step = 0, err_n_iter = -1;  // max abs error; -1: not in the case
  std::vector<std::pair<std::string, double>> stage_errors;  // readable staged path vs the twin's stages
  std::vector<std::string> stages_not_compared;              // stages the file gives that we do not compute
  bool pass = false;
};

struct DtTolerance {
  double one_step = 1e-4, n_iter = 1e-3;
};

DtCaseReport verify_dt_case(const DtCase& c, const Hardware& hw, Precision p, const DtTolerance& tol);

}  // namespace aoc
