// The AOC-native implicit SSM: a recurrence whose loop body is only what the analog optical loop
// computes (Kalinin et al. 2025: z' = alpha z + beta W f(z) + x + b), so that each token's fixed
// point is found entirely inside the loop:
//   u_t  = E[x_t]                                   the injection (one DAC code vector per token)
//   z_t* = fix z:  W tanh(z) + V tanh(z*_{t-1}) + u_t   with the leak alpha = 1 - damping
//   logits_t = H z_t*                               the readout (an optical product, then the ADC)
// The previous token's state tanh(z*_{t-1}) is a Delay: the machine's state memory. Where the
// electronics hold it (architecture.state_memory "analog") the loop is native: two optical
// products, tanh, sums, the held state and the leak; where the host keeps it, the loop is assisted.
// Like the implicit Mamba2 it is a non-linear RNN: z_t* is a non-linear function of z*_{t-1} and x_t
// found by the fixed point, the property that lets it track state (docs/research/implicit_ssm.md 2).
// Implicit only: there is no explicit twin of this layer.
#pragma once
#include <cstdint>
#include <map>
#include <string>

#include "models/model.hpp"

namespace aoc::models {

struct AocSsmSpec {
  int vocab = 2;
  int d_model = 16;  // state variables (the loop's width)
  double tol = 0.01, damping = 0.5;  // the FixedPoint of the exported graph; damping = 1 - the leak alpha
  int max_iter = 200;

  nlohmann::ordered_json config() const;  // model_type "aoc_ssm"
  static AocSsmSpec from_config(const std::string& path);
};

class AocSsmModel : public SequenceModel {
 public:
  AocSsmModel(const AocSsmSpec& spec, std::uint64_t seed);       // seeded weights
  AocSsmModel(const AocSsmSpec& spec, const ir::WeightStore& w);  // trained weights

  const AocSsmSpec& spec() const { return spec_; }
  std::string kind() const override { return "aoc-ssm"; }
  bool implicit() const override { return true; }
  int vocab() const override { return spec_.vocab; }
  int width() const override { return spec_.d_model; }
  nlohmann::ordered_json config() const override { return spec_.config(); }
  std::vector<ad::Param*> params() override;

  ad::Var embed(ad::Tape& t, const std::vector<int>& tokens) override;
  ad::Var inject(ad::Tape& t, ad::Var e) override;
  ad::Var body(ad::Tape& t, ad::Var z, ad::Var u, int L) override;
  ad::Var explicit_forward(ad::Tape& t, ad::Var e, int L) override;
  ad::Var head(ad::Tape& t, ad::Var z) override;

  ir::Imported export_graph() const override;
  ir::WeightStore weights() const override;

 private:
  AocSsmSpec spec_;
  std::map<std::string, ad::Param> p_;  // by the graph's weight names
  ad::Var w(ad::Tape& t, const std::string& name);
};

// The loop's FixedPoint op as graph JSON (docs/ir.md): in `u`, out `z`, weights loop.W and loop.V,
// the relative rule with `like` u, as the machine's loop runs it. The retina's implicit model
// (models/retina_model.hpp) is the same loop.
std::string aoc_loop_op_json(double tol, int max_iter, double damping);

}  // namespace aoc::models
