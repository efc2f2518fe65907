// Training for a hardware file (`aoc train --hw`, docs/models.md): the model's products in the
// training's forward pass are the machine's, computed as a compiled program computes them. Before
// each step the model's current weights go through the compiler's pipeline for the machine (tiles
// at their places in the cores, each tile compensated for the measured optical chain, SLM codes per
// tile, every converter calibrated on the task's calibration split), and each product is read on the
// sim backend's tiles of that program (runtime/backend/backend.hpp): its input DAC, the chain at its
// operating point, every noise source of the file, the partial-sum ADC of a split matrix, its
// output ADC. The backward pass is the exact product's (straight-through). One model of the
// machine, the one `aoc run` and `aoc check` use.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "compiler/program.hpp"
#include "models/model.hpp"
#include "models/tasks.hpp"
#include "runtime/backend/backend.hpp"
#include "sim/hardware.hpp"

namespace aoc {

struct MachineTraining {
  std::string hardware = "aoc-48";       // a bundled machine's name or a hardware file
  std::vector<std::string> overrides;    // --set section.field=value
  bool noise = true;                     // the file's noise section
  bool optics = true;                    // the measured chain, compensated (false: ideal optics)
  std::uint64_t seed = 0;                // the noise draws (a new programming each step)
  int calibration_batch = 16;            // sequences of the calibration split the converters see
  double balance = 0;                    // the compiler's balance pass at this strength (0: none; aoc compile --balance)
};

class CompiledMachine final : public models::OpticalMachine {
 public:
  // m gives the graph (its weights come at each program()); the calibration sequences are the
  // task's calibration split at the training's length, keyed by data_seed.
  CompiledMachine(const MachineTraining& o, const models::SequenceModel& m, const tasks::Task& task, int length, std::uint64_t data_seed);
  ~CompiledMachine() override;

  void program(const models::SequenceModel& m, int step) override;
  ad::Mat product(const std::string& weight, const ad::Mat& x, int read) const override;

  const Hardware& hardware() const { return hw_; }
  const ir::Program& compiled() const { return p_; }  // the last step's program

 private:
  struct Product {
    const ir::Op* op = nullptr;
    const ir::Op* dac = nullptr;  // the Convert that feeds it, if any
    const ir::Op* adc = nullptr;  // the Convert that reads it, if it is its only reader
    const ir::Tensor* weight = nullptr;  // as programmed (scaled where the balance pass moved its DAC's scales in)
    const ir::Tensor* balance = nullptr;  // the balance pass's 1 / s per input channel before the DAC, if any
  };
  MachineTraining o_;
  Hardware hw_;
  ir::Graph graph_;
  ir::Target target_;
  std::map<std::string, ir::Tensor> calibration_;
  BackendOptions run_;
  ir::Program p_;
  std::unique_ptr<ir::Hooks> hooks_;
  std::map<std::string, Product> by_weight_;
};

}  // namespace aoc
