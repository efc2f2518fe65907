// A compiled program: the graph after the lowering passes (every op placed optical, analog or
// digital, Convert ops at every crossing), its weights, and one optical plan per optical op (its
// tiles on the modules, its SLM codes). docs/program.md documents it and its HDF5 form.
//
// The graph stays an ordinary ir::Graph, so the verifier, the printer and the interpreter work on
// programs too (Convert is the identity there): a program run on the CPU reference is the
// interpreter.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "compiler/ir.hpp"

namespace aoc {
struct Hardware;
}

namespace aoc::ir {

// One core-sized block of an optical op's matrix (torch convention [out, in]: rows are outputs).
struct Target;

struct Tile {
  std::int64_t row0 = 0, col0 = 0, rows = 0, cols = 0;
  int module = 0;  // which optical module holds it
  int pass = 0;    // which programming of that module (pass > 0: reloaded over earlier tiles)
  // Where it sits in the module's core: detector rows core_row0.., LED channels core_col0... Tiles
  // of one programming share a core block-diagonally (no row or channel in common, the twin's block
  // layouts), so each can be lit while the others are dark, or all at once.
  std::int64_t core_row0 = 0, core_col0 = 0;
};

// A tile programmed for the machine's measured optical chain (the compensate pass,
// sim/programming.hpp): how close the chain's product comes to the tile's block, and the offset its
// outputs carry, which the machine takes out at the tile's detectors (a bias it injects there).
struct TileProgramming {
  double residual = 0;      // max |product - block| / max |block|
  double rms_residual = 0;  // rms (product - block) / max |block|
  int dark = 0;             // weights the chain passes at under a tenth (dark SLM pixels), left as they are
  int rounds = 0;           // program-and-verify reads of the chain
  std::vector<double> offset;  // the tile's rows (outputs)
  // Each output's detector gain trim in (0, 1] (sim/programming.hpp): the SLM holds the row that
  // much brighter, its detector's gain stage turned down by as much. The tile's rows (outputs).
  std::vector<double> gain;
};

struct OpticalPlan {
  std::string op;      // the op's name (unique in the program)
  std::string weight;  // its weight operand
  bool aoc_layout = false;  // MatMul: the weight is stored [in, out]; Linear: [out, in]
  std::int64_t rows = 0, cols = 0;  // out, in
  std::string loop;    // the FixedPoint it runs in ("" at the top level)
  std::vector<Tile> tiles;
  int slm_bits = 0;                  // 0: the weights are exact (not quantized)
  std::vector<std::int32_t> codes;   // rows * cols signed SLM codes, [out, in] row-major (when quantized and weights exist)
  std::vector<double> code_step;     // per tile: the value of one code step
  // Where a split matrix's partial sums are added digitally, the range +-sum_range of the ADC that
  // reads each tile's outputs (aoc compile --calibrate: the largest |partial sum| on the reference,
  // times the margin); 0: the machine's ADC range.
  double sum_range = 0;
  // The range +-drive_range of the values the LED drivers take (LedModel::Driver: the range is set
  // to the electronics' swing; a value past it is held at the rail): aoc compile --calibrate: the
  // largest |input| on the reference, times the margin; 0: the machine's DAC range (1 without one).
  double drive_range = 0;
  // compensate: what each tile's SLM is programmed with so that the measured chain's product is the
  // weights (rows * cols, [out, in] row-major; quantize cuts the codes from it), and per tile how
  // well that went. Empty: the weights are programmed as they are (ideal optics, or --no-compensate).
  std::vector<double> programmed;
  std::vector<TileProgramming> compensation;

  bool compensated() const { return !compensation.empty(); }
  std::int64_t weights() const { return rows * cols; }
  double drive_range_on(const Target& t) const;  // drive_range, or what 0 stands for on t
  // Where element (t.row0 + i, t.col0 + c) of the [out, in] matrix sits in codes and programmed.
  std::size_t element(const Tile& t, std::int64_t i, std::int64_t c) const {
    return static_cast<std::size_t>((t.row0 + i) * cols + t.col0 + c);
  }
  // Element (r, c) of the [out, in] matrix from the op's weight, whatever its stored layout.
  double weight_at(const Tensor& w, std::int64_t r, std::int64_t c) const {
    return aoc_layout ? w.data[static_cast<std::size_t>(c * rows + r)] : w.data[static_cast<std::size_t>(r * cols + c)];
  }
  // Distinct column blocks: more than one means partial sums to add.
  std::int64_t column_blocks() const;
};

// The compensation of one or more plans in figures: the worst tile's residual, the rms over tiles,
// the dark weights and program-and-verify reads (pass statistics, printed form, mapping report).
struct CompensationSummary {
  std::int64_t tiles = 0;
  double worst = 0, rms = 0;  // rms: over the tiles' rms residuals
  long long dark = 0, reads = 0;
  long long trimmed = 0;  // detectors whose gain is trimmed down (gain < 1)
  double deepest = 1;     // the largest trim, 1 / the smallest gain
  void add(const OpticalPlan& plan);
};

// The matrix [rows = outputs, cols = inputs] an optical op of kind k programs, from its weight's
// (fixed) shape: Linear W[out, in]; MatMul W[in, out] (the AOC layout); Conv2d W[Cout, kh, kw, Cin],
// whose row-major data is the matrix [Cout, kh*kw*Cin] (the patch order of kernels::im2col).
std::pair<std::int64_t, std::int64_t> optical_matrix(OpKind k, const Shape& w);

// Elements of one token of a value: its fixed dims multiplied, every symbol (B, L) taken as 1.
std::int64_t per_token_elements(const Type& t);

// The vectors one token sends through an optical op's matrix: its result's per-token elements over
// the matrix's rows. 1 for a Linear on [B, L, in]; Ho x Wo for a Conv2d, one per output position
// through the same programmed matrix (the weights reused, programmed once).
double products_per_token(const OpticalPlan& plan, const Type& result);

// The facts of the target machine the program was compiled for (a copy, so that a program is
// self-describing and can be checked against the hardware it is run or estimated on).
struct Target {
  std::string hardware;       // the machine's name
  std::string hardware_path;  // the file it came from
  std::vector<std::string> overrides;  // --set section.field=value applied to it
  int channels = 0;           // a core is channels x channels weights
  int modules = 1;
  std::vector<std::string> analog_functions;
  bool analog_partial_sums = false;
  bool analog_state_memory = false;
  int slm_bits = 0;  // 0: no converters section (weights, DAC and ADC are ideal)
  int dac_bits = 0, adc_bits = 0;
  double dac_lo = 0, dac_hi = 0, adc_lo = 0, adc_hi = 0;
  // LED channels that give no light on a path (fan-in 0 in the calibration: aoc-48's channel 8): no
  // input is mapped onto them, the tiles' inputs go past them (tile_leds).
  std::vector<int> dark_leds;
};

// The LED channel of each of tile t's inputs, in order: from t.core_col0 on, past the target's dark
// LEDs (contiguous where there are none). The last one + 1 - core_col0 is what the tile spans.
std::vector<int> tile_leds(const Target& target, const Tile& t);
std::int64_t led_span(const Target& target, const Tile& t);

// Reads the compiler's facts from a hardware file (which needs an architecture section).
Target target_of(const Hardware& hw, const std::string& path, const std::vector<std::string>& overrides);

struct Program {
  Graph graph;
  WeightStore weights;  // empty for a shapes-only program (estimates only)
  std::vector<OpticalPlan> optical;
  Target target;
  std::vector<std::string> passes;  // the passes run, in order

  const OpticalPlan* plan(const std::string& op) const;
  OpticalPlan* plan(const std::string& op);
};

// Checks the graph (ir::verify, with the weights when the program has them) and the plans against
// it: every optical op has one plan whose shape matches its weight, tiles cover the matrix exactly
// once within a core, modules exist, codes fit their bits. Throws aoc::Error naming the op:
//   verify program: plan 'l0.in_proj': tile 3 covers rows 96..144, the matrix has 100
void verify_program(const Program& p);

// The program as text, MLIR-style: one line per op with its placement and result types, bodies
// indented, then each optical plan's tiles (the first four of each; all with all_tiles). For
// --print-after-all and `aoc compile --print`.
std::string print_program(const Program& p, bool all_tiles = false);

// The printed form read back (compiler/program_text.cpp): the graph, and the plans when every tile is
// shown (the printer elides tiles past the fourth) and there are no SLM codes; the target only as far
// as the header says (hardware name, channels, modules). Throws aoc::Error "SOURCE:LINE:COL: what".
Program parse_program(const std::string& text, const std::string& source = "<program>");

// The name an op is known by in plans, reports and noise keys.
std::string op_label(const Op& op);

}  // namespace aoc::ir
