// The lowering pipeline: passes that each do one job on a Program, with the program verifier
// after every pass (MLIR-style). docs/program.md describes each pass.
//
//   name-ops        every op gets a unique name (plans, reports and noise keys refer to it)
//   gather-linear   Linear ops of one region that read the same input become one Linear with the
//                   weights stacked (a block matrix), followed by a Split: one optical pass instead of k
//   loop-form       each FixedPoint becomes an AOC loop: "native" when every body op runs on the
//                   optics or the analog electronics (the whole iteration stays in the loop),
//                   "assisted" when digital ops sit inside it; optical ops get their block of the
//                   loop's matrix
//   partition       every op is placed optical, analog or digital; a Convert (ADC or DAC) is put
//                   on every crossing; captures used in analog are converted once per fixed point
//   tile            every optical matrix is split into core-sized tiles placed on modules, passes
//                   beyond the module count reload weights
//   quantize        SLM codes per tile at the machine's weight bits
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "compiler/program.hpp"

namespace aoc::ir {

struct PassOptions {
  bool quantize = true;  // run the quantize pass (needs the converters section)
  bool tile = true;      // false: one tile per matrix, whatever its size (the untiled reference)
  bool gather = true;
};

using Pass = std::function<void(Program&, const PassOptions&)>;
struct NamedPass {
  const char* name;
  Pass run;
};

// The passes in pipeline order (those switched off by the options are left out).
std::vector<NamedPass> pipeline(const PassOptions& options);

// Runs the pipeline on p, verifying after each pass; after_pass (if given) sees the program after
// each one (--print-after-all). A verifier failure names the pass that broke the program.
void run_pipeline(Program& p, const PassOptions& options,
                  const std::function<void(const std::string& pass, const Program&)>& after_pass = {});

// The passes, one function each (exposed for tests).
void pass_name_ops(Program& p, const PassOptions&);
void pass_gather_linear(Program& p, const PassOptions&);
void pass_loop_form(Program& p, const PassOptions&);
void pass_partition(Program& p, const PassOptions&);
void pass_tile(Program& p, const PassOptions&);
void pass_quantize(Program& p, const PassOptions&);

}  // namespace aoc::ir
