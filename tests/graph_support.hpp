// Shared by the tests that build graphs and models: tensors, declarations, differences, and the
// published configs shrunk to a few thousand parameters.
#pragma once
#include <catch2/catch.hpp>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "compiler/ir.hpp"
#include "sim/error.hpp"

namespace aoc::test {

using ir::DType;
using ir::Dim;
using ir::Tensor;
using ir::Value;

inline const std::string kData = AOC_TEST_DATA "/implicit-lm/";
inline const std::string kStateTracking = kData + "mamba2-state-tracking-implicit/config.json";
inline const std::string kLlama = kData + "llama3-130m-implicit/config.json";

inline Tensor tensor(std::vector<std::int64_t> shape, std::vector<double> data) {
  Tensor t;
  t.shape = std::move(shape);
  t.data = std::move(data);
  return t;
}

// A tensor of smooth deterministic values scale * sin(seed + 0.7 i).
inline Tensor wave(std::vector<std::int64_t> shape, double seed, double scale = 1.0) {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  std::vector<double> v(static_cast<size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) v[i] = scale * std::sin(seed + 0.7 * static_cast<double>(i));
  return tensor(std::move(shape), std::move(v));
}

// A declaration: "B" and "L" name the dims so given, the others are fixed.
inline Value decl(const std::string& name, const std::vector<std::int64_t>& shape, std::vector<std::string> syms = {}, DType dt = DType::F64) {
  Value v{name, {dt, {}}};
  for (size_t i = 0; i < shape.size(); ++i)
    v.type.shape.push_back(i < syms.size() && !syms[i].empty() ? Dim::symbol(syms[i]) : Dim::fixed(shape[i]));
  return v;
}

inline double max_diff(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape == b.shape);
  double m = 0;
  for (size_t i = 0; i < a.data.size(); ++i) m = std::max(m, std::abs(a.data[i] - b.data[i]));
  return m;
}

inline std::filesystem::path temp_dir() {
  auto d = std::filesystem::temp_directory_path() / ("aoc-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(d);
  return d;
}

// A scenario file in the test folder, from its JSON; relative paths in it are relative to there.
inline std::string scenario_file(const std::string& name, const nlohmann::ordered_json& j) {
  const auto p = temp_dir() / name;
  std::ofstream(p) << j.dump(1);
  return p.string();
}

// The message of the aoc::Error that f throws ("" where it throws none).
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// A training scenario of a tiny implicit parity model that trains in a second: 3 steps.
inline const char* kTinyTrainScenario = R"({"format": "aoc-train", "version": 1, "name": "tiny", "task": "parity",
    "model": {"implicit": true, "d_model": 8, "d_state": 2, "expand": 2, "headdim": 8},
    "train": {"length": 8, "batch": 4, "steps": 3}, "eval": {"lengths": [8], "batch": 4}})";

// A published config shrunk to d_model 16, one layer, vocab 12, with a tight FixedPoint (relative
// tol 1e-12, up to 4000 steps) so that both modes converge to the fixed point itself.
inline std::string tight_config(const std::string& published, const nlohmann::json& block_cfg, const std::string& name,
                         std::int64_t d_inner = 0) {
  std::ifstream in(kData + published + "/config.json");
  nlohmann::json j = nlohmann::json::parse(in);
  j["backbone_config"]["d_model"] = 16;
  j["backbone_config"]["n_layer"] = 1;
  j["backbone_config"]["block_cfg"] = block_cfg;
  if (d_inner) j["backbone_config"]["d_inner"] = d_inner;
  j["d_embed"] = 16;
  j["vocab_size"] = 12;
  j["n_tokens"] = 12;
  j["pad_vocab"] = false;
  j["deq_params"]["solver"]["f_tol"] = 1e-12;
  j["deq_params"]["solver"]["eval_f_max_iter"] = 4000;
  const auto p = temp_dir() / name;
  std::ofstream(p) << j.dump(2);
  return p.string();
}

// d_state 4, expand 2, headdim 8 (2 heads)
inline std::string tiny_mamba2() { return tight_config("mamba2-state-tracking-implicit", {{"d_state", 4}, {"expand", 2}, {"headdim", 8}}, "mamba2.json"); }
// 2 heads of 8, SwiGLU hidden 32
inline std::string tiny_llama() { return tight_config("llama3-130m-implicit", {{"n_head", 2}}, "llama.json", 48); }

}  // namespace aoc::test
