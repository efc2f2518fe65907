// The implicit Mamba2 layer of Schöne et al. (docs/research/implicit_ssm.md 1.1-1.2) and its explicit
// twin, as trainable models on the autodiff tape. The model IS the graph the importer builds from its
// config (compiler/import_config.hpp): the same weights by the same names, the same ops in the same
// order, so a trained model exports as (config.json, weights) and runs on the interpreter, the
// compiler and the backends unchanged. The tape forward is tested against the interpreter.
//
// Sequences are rows b*L + t of [B*L, D] matrices. n_layer blocks (the explicit baselines of several
// depths; an implicit model's body iterates all of them, each with the injection), tied embeddings.
#pragma once
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "models/model.hpp"

namespace aoc::models {

struct Mamba2Spec {
  int vocab = 2;  // tokens and classes (the head is the tied embedding)
  int d_model = 32, d_state = 8, expand = 2, headdim = 16, d_conv = 4, n_layer = 1;
  bool implicit = true;
  std::string transition = "exp";  // the scan's transition: exp(delta A) in (0, 1), or tanh(delta A + A_bias) in (-1, 1)
  // The FixedPoint of the exported graph (evaluation): the reference's sequential rule, per sample.
  double tol = 0.05, damping = 0.8;
  int max_iter = 200;

  int d_inner() const { return expand * d_model; }
  int heads() const { return d_inner() / headdim; }
  int d_in_proj() const { return 2 * d_inner() + 2 * d_state + heads(); }
  // The config.json the importer reads (implicit_mamba2, n_layer blocks, tied embeddings).
  nlohmann::ordered_json config() const;
  // Reads the fields config() writes back (a trained model's config); errors name the file and field.
  static Mamba2Spec from_config(const std::string& path);
};

class Mamba2Model : public SequenceModel {
 public:
  // Seeded weights with the reference's init (the importer's).
  Mamba2Model(const Mamba2Spec& spec, std::uint64_t seed);
  // Trained weights (ir weight names, A stored as A = -exp(A_log)).
  Mamba2Model(const Mamba2Spec& spec, const ir::WeightStore& weights);

  const Mamba2Spec& spec() const { return spec_; }
  std::string kind() const override { return "mamba2"; }
  bool implicit() const override { return spec_.implicit; }
  int vocab() const override { return spec_.vocab; }
  int width() const override { return spec_.d_model; }
  nlohmann::ordered_json config() const override { return spec_.config(); }
  std::vector<ad::Param*> params() override;

  // The graph and its weights (A = -exp(A_log)); `config_path` names the written config in messages.
  ir::Imported export_graph() const override;
  ir::WeightStore weights() const override;

  // On a tape, simultaneous over the rows of B sequences of length L:
  ad::Var embed(ad::Tape& t, const std::vector<int>& tokens) override;
  ad::Var inject(ad::Tape& t, ad::Var e) override;                // u = W_inj RMSNorm(e) + b_inj (implicit only)
  ad::Var body(ad::Tape& t, ad::Var z, ad::Var u, int L) override;  // f(z; u) = RMSNorm_f(z + Mixer(RMSNorm(z); u))
  ad::Var explicit_forward(ad::Tape& t, ad::Var e, int L) override;  // RMSNorm_f(e + Mixer(RMSNorm(e)))
  ad::Var head(ad::Tape& t, ad::Var z) override;                  // logits = z E^T

 private:
  Mamba2Spec spec_;
  std::map<std::string, ad::Param> p_;  // by the graph's weight names; "layer0.A_log" instead of "layer0.A"
  std::map<std::string, std::vector<std::int64_t>> shapes_;  // the graph's shape of each weight
  ad::Mat hp_rep_;  // the constant 0/1 map from per-head to per-(h, p) columns

  void init_from(const ir::WeightStore& w);
  // x W^T as the compiled program computes it (aoc-48's partition): the product on the optics
  // between a DAC of x and an ADC of the result.
  ad::Var optical(ad::Tape& t, ad::Var x, const std::string& weight);
  ad::Var block(ad::Tape& t, int layer, ad::Var z, const ad::Var* u, int L);
  ad::Var w(ad::Tape& t, const std::string& name);  // a parameter on the tape (vectors are rows [1, n])
};

}  // namespace aoc::models
