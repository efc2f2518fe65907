// The lowering pipeline: passes that each do one job on a Program, with the program verifier
// after every pass (MLIR-style). docs/program.md describes each pass.
//
//   name-ops        every op gets a unique name (plans, reports and noise keys refer to it)
//   gather-linear   Linear ops of one region that read the same input become one Linear with the
//                   weights stacked (a block matrix), followed by a Split: one optical pass instead of k
//   loop-form       each FixedPoint becomes an AOC loop: "native" when every body op runs on the
//                   optics or the analog electronics (the whole iteration stays in the loop),
//                   "assisted" when digital ops sit inside it; optical ops get their block of the
//                   loop's matrix; a biased Linear or Conv2d in a loop is split into its product
//                   (optical) and an Add of its bias (the electronics)
//   partition       every op is placed optical, analog or digital; a Convert (ADC or DAC) is put
//                   on every crossing; captures used in analog are converted once per fixed point
//   tile            every optical matrix is split into core-sized tiles placed on modules, passes
//                   beyond the module count reload weights
//   balance         (with sample inputs and a strength) each DAC before optical products gets a scale
//                   per channel, SmoothQuant-style: the digital side divides channel c by s_c before
//                   the DAC and the products' weights for input c are multiplied by s_c, so that
//                   channels of small range use more of the DAC's codes (the same products exactly)
//   compensate      each tile programmed for the machine's measured optical chain (sim/programming.hpp):
//                   the SLM values whose product through the chain is the tile's block, the chain's
//                   offset taken out at its detectors; residual and dark pixels per tile
//   quantize        SLM codes per tile at the machine's weight bits (of the compensated values)
//   calibrate       (when given sample inputs) each converter's range from the values it sees
//
// Each pass reads its own options (PassOptions, printed with the pass by --print-after-all) and
// counts what it did (PassStats, MLIR's pass statistics).
#pragma once
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "compiler/program.hpp"
#include "sim/programming.hpp"
#include "sim/quantize.hpp"

namespace aoc {
struct Hardware;
}

namespace aoc::ir {

// The most tiles one program may hold (2^24; the 1.3B implicit Mamba2 on aoc-48 has 589,960): a bound on
// the compiler's work and memory whatever shapes a graph declares.
inline constexpr std::int64_t kMaxTiles = std::int64_t{1} << 24;

struct PassOptions {
  bool gather = true;    // gather-linear runs
  bool tile = true;      // tile: false, one tile per matrix whatever its size (the untiled reference)
  int tile_size = 0;     // tile: cut tiles of this size, a what-if machine of tile_size channels (0: the target's)
  // compensate runs where there are weights, for this machine's measured chain (null: no compensate
  // pass; the compiler's callers give the hardware the program is compiled for). It must outlive
  // the pipeline.
  const Hardware* compensate = nullptr;
  double trim_range = kDetectorTrimRange;  // compensate: how far a detector's gain may be trimmed (1: none)
  bool quantize = true;  // quantize runs (needs the converters section)
  // calibrate: runs the program on sample inputs and sets each converter's range, returning how
  // many it set (runtime/backend/backend.hpp, calibrate_converters); empty: no calibrate pass.
  std::function<int(Program&)> calibrate = {};
  // balance: the strength alpha in (0, 1] of s_c = (m_c / max m)^alpha, m_c the largest |value| of
  // channel c (the last axis) a DAC's input takes on the sample inputs, as channel_largest returns
  // them per Convert op (runtime/backend/backend.hpp, converter_channel_largest); 0: no balance pass.
  double balance = 0;
  std::function<std::map<std::string, std::vector<double>>(const Program&)> channel_largest = {};
};

// The names the balance pass gives what it adds: the weight of 1 / s_c before a DAC is
// `<dac>.balance`, a shared weight's scaled copy for a product `<weight>.balanced` (a fresh name may
// add ".N"); hardware-aware training maps them back to the model's (runtime/train/train_machine.cpp).
inline constexpr const char* kBalanceScale = ".balance";
inline constexpr const char* kBalancedCopy = ".balanced";

// What a pass did, counted by name in the order it first counted each (MLIR's pass statistics).
struct PassStats {
  std::vector<std::pair<std::string, long long>> counts;
  void add(const std::string& name, long long n = 1);
  long long get(const std::string& name) const;  // 0 when never counted
  std::string text() const;                      // "tiles 12, plans 3"
};

using Pass = std::function<void(Program&, const PassOptions&, PassStats&)>;
struct NamedPass {
  const char* name;
  Pass run;
  std::string options;  // the options this pass reads, as given: "{tile_size = 32}" ("" when none)
};

// The passes in pipeline order (those switched off by the options are left out).
std::vector<NamedPass> pipeline(const PassOptions& options);

// Runs the pipeline on p, verifying after each pass; after_pass (if given) sees the program and the
// pass's statistics after each one (--print-after-all). A verifier failure names the pass that broke
// the program.
using AfterPass = std::function<void(const NamedPass& pass, const Program&, const PassStats&)>;
void run_pipeline(Program& p, const PassOptions& options, const AfterPass& after_pass = {});

// The passes, one function each (exposed for tests: run one on a parsed program, print, compare).
void pass_name_ops(Program& p, const PassOptions&, PassStats&);
void pass_gather_linear(Program& p, const PassOptions&, PassStats&);
void pass_loop_form(Program& p, const PassOptions&, PassStats&);
void pass_partition(Program& p, const PassOptions&, PassStats&);
void pass_tile(Program& p, const PassOptions&, PassStats&);
void pass_balance(Program& p, const PassOptions&, PassStats&);
void pass_compensate(Program& p, const PassOptions&, PassStats&);
void pass_quantize(Program& p, const PassOptions&, PassStats&);

// The block tile t programs, in the AOC convention (t.cols x t.rows: LED channel c drives detector
// i by B(c, i)): from the weight w, or the compensated values where `programmed` and the plan has them.
MatrixXdR tile_block(const OpticalPlan& plan, const Tile& t, const Tensor& w, bool programmed);
// Its SLM codes' values (codes times the tile's step) in the same convention (the plan has codes).
MatrixXdR tile_code_block(const OpticalPlan& plan, std::size_t k);
// A tile's block B (t.cols x t.rows) laid over the LED channels it spans from t.core_col0
// (led_span rows): input c on row tile_leds[c] - core_col0, the dark LEDs' rows zero.
MatrixXdR spread_over_leds(const Target& target, const Tile& t, const MatrixXdR& B);

}  // namespace aoc::ir
