// What training and evaluation need of a trainable sequence model (models/train.hpp), and the
// hardware-aware pieces every model's forward pass shares.
//
// A model computes on an autodiff tape, simultaneous over the rows b*L + t of [B*L, D] matrices:
//   implicit:  e = embed(tokens), u = inject(e), z* = body(z*, u), logits = head(z*)
//   explicit:  logits = head(explicit_forward(embed(tokens)))
// and exports as a graph of the compiler's IR with its weights, which is what evaluation, the
// compiler and the backends run (the tape forward is tested against the interpreter per model).
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "compiler/import_config.hpp"
#include "models/autodiff.hpp"

namespace aoc::models {

// Hardware-aware training: the simulator's physics in the training's forward pass. The optical
// products are reads of the simulator's tile (sim/tile.hpp, ideal optics) programmed with the SLM
// codes of `slm_bits` (sim/quantize.hpp, per matrix over +-max|W|, as the compiler quantizes) and
// with receiver noise of rms `output_noise`, fresh per read (keyed by `seed` and a draw counter);
// the crossings between digital and analog see a DAC of `dac_bits` and an ADC of `adc_bits`, each
// over +-max|x| of the batch (what calibrated converters do, runtime/backend/backend.hpp). Quantizers pass
// the gradient straight through. Where the crossings are is each model's (as the compiler's
// partition puts them). 0 switches each off.
//
// With a machine (training for a hardware file: `aoc train --hw`), the products are the machine's
// instead, and the other fields stay 0: each product is read on the tiles of the model compiled for
// the machine, with the program's converters around it (runtime/train/train_machine.hpp).
class OpticalMachine;
struct HardwareAware {
  int slm_bits = 0;
  double output_noise = 0;
  int dac_bits = 0, adc_bits = 0;
  std::uint64_t seed = 0;
  OpticalMachine* machine = nullptr;  // not owned; outlives the training
};

class SequenceModel {
 public:
  virtual ~SequenceModel() = default;

  virtual std::string kind() const = 0;  // "mamba2", "aoc-ssm"
  virtual bool implicit() const = 0;
  virtual int vocab() const = 0;   // tokens and classes
  virtual int width() const = 0;   // columns of the iterate z (and of e)
  // The config.json a trained model folder holds (`aoc import` reads it back).
  virtual nlohmann::ordered_json config() const = 0;

  virtual std::vector<ad::Param*> params() = 0;
  std::int64_t parameter_count();

  virtual ad::Var embed(ad::Tape& t, const std::vector<int>& tokens) = 0;
  virtual ad::Var inject(ad::Tape& t, ad::Var e) = 0;
  virtual ad::Var body(ad::Tape& t, ad::Var z, ad::Var u, int L) = 0;
  virtual ad::Var explicit_forward(ad::Tape& t, ad::Var e, int L) = 0;
  virtual ad::Var head(ad::Tape& t, ad::Var z) = 0;

  // The graph and its weights (the compiler's IR names).
  virtual ir::Imported export_graph() const = 0;
  virtual ir::WeightStore weights() const = 0;

  void set_hardware_aware(const HardwareAware& h) { hw_ = h; }
  // Before a training step: the machine (if any) programmed with the current weights.
  void program_machine(int step);
  // The hardware-aware noise counter: a training checkpoint stores it so a resumed run draws on.
  std::uint64_t noise_draws() const { return draws_; }
  void set_noise_draws(std::uint64_t d) { draws_ = d; }

 protected:
  HardwareAware hw_;
  std::uint64_t draws_ = 0;  // noise draws so far (the Philox counter)
  int reads_ = 0;            // the machine's products since it was programmed

  // x W^T as the optics compute it under hw_ (SLM codes, receiver noise; or the machine's product
  // of the weight named `weight`).
  ad::Var optical(ad::Tape& t, ad::Var x, ad::Var W, const std::string& weight);
  // A crossing's converter of `bits` under hw_ (0: ideal).
  ad::Var convert(ad::Tape& t, ad::Var x, int bits);
};

// The machine a model is trained for, as a compiled program runs it: the model's weights compiled
// for a hardware file (tiles, compensation for the measured chain, SLM codes per tile, calibrated
// converters) and each product read on the simulated machine's tiles with every noise source of
// the file. runtime/train/train_machine.hpp implements it.
class OpticalMachine {
 public:
  virtual ~OpticalMachine() = default;
  // Before each training step: the model's current weights programmed, with the step's draw of the
  // programming-time noise (a new SLM pattern each step, as each programming of the machine).
  virtual void program(const SequenceModel& m, int step) = 0;
  // x [R, in] through the optical op of the weight named `weight`: its input DAC, its tiles, its
  // output ADC, where the program has them. `read` counts the reads since program() (fresh per-read
  // noise each).
  virtual ad::Mat product(const std::string& weight, const ad::Mat& x, int read) const = 0;
};

// `aoc import`: a config.json to a graph. With o.weights_path an aoc weights file (HDF5, told by
// its content) the weights are that file's, checked by name and shape against the graph (an error
// names the tensor). Otherwise model_type "aoc_ssm" is this layer's AOC-native model (seeded
// weights; a safetensors checkpoint is an error) and any other goes to the importer (ir::import_config).
ir::Imported import_model_config(const std::string& path, const ir::ImportOptions& o);

}  // namespace aoc::models
