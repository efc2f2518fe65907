// aoc interpret: runs a graph on one token sequence with the interpreter (compiler/interpret.hpp)
// and prints the per-token argmax of its first output and the fixed-point iterations (per token in
// sequential mode).
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "compiler/graph_json.hpp"
#include "compiler/interpret.hpp"
#include "runtime/cli/commands.hpp"
#include "sim/error.hpp"

namespace aoc::cli {

namespace {

struct Opts {
  std::string graph, weights, tokens, sequence = "simultaneous";
  int threads = 1;
  bool json = false;
};

std::vector<double> parse_tokens(const std::string& s) {
  std::vector<double> v;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      std::size_t used = 0;
      const long long t = std::stoll(item, &used);
      if (used != item.size() || t < 0) throw std::invalid_argument(item);
      v.push_back(static_cast<double>(t));
    } catch (const std::exception&) {
      throw Error("--tokens: \"" + item + "\" is not a token id (expected comma-separated integers >= 0, e.g. 3,1,4)");
    }
  }
  if (v.empty()) throw Error("--tokens: expected at least one token id");
  return v;
}

int run(const Opts& o) {
  const ir::Graph g = ir::read_graph(o.graph);
  const ir::WeightStore w = o.weights.empty() ? ir::WeightStore{} : ir::read_weights_h5(o.weights);
  if (g.inputs.size() != 1) throw Error(o.graph + ": aoc interpret runs graphs of one token input, this one has " +
                                        std::to_string(g.inputs.size()) + " inputs");
  ir::Tensor t;
  t.data = parse_tokens(o.tokens);
  t.shape = {1, static_cast<std::int64_t>(t.data.size())};
  ir::InterpretOptions io;
  io.threads = o.threads;
  const bool sequential = o.sequence == "sequential";
  io.mode = sequential ? ir::Mode::Sequential : ir::Mode::Simultaneous;
  const ir::InterpretResult r = ir::interpret(g, w, {{g.inputs[0].name, t}}, io);
  const ir::Tensor& y = r.values.at(g.outputs[0]);
  const std::vector<std::int64_t> argmax = ir::argmax_last(y);

  if (o.json) {
    nlohmann::ordered_json j{{"tool", "aoc interpret"}, {"graph", o.graph}, {"mode", o.sequence}, {"tokens", t.data},
                             {"output", g.outputs[0]}, {"argmax", argmax}};
    j["fixed_points"] = nlohmann::ordered_json::array();
    for (const auto& fp : r.fixed_points)
      j["fixed_points"].push_back({{"op", fp.op}, {"iterations", fp.iterations}, {"converged", fp.converged}});
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("interpret: %s on %zu token(s), batch 1, %s mode\n", o.graph.c_str(), t.data.size(), o.sequence.c_str());
  std::printf("argmax of %s per token:", g.outputs[0].c_str());
  for (auto a : argmax) std::printf(" %lld", static_cast<long long>(a));
  std::printf("\n");
  const std::size_t L = t.data.size();
  for (const auto& fp : r.fixed_points) {
    if (!sequential) {
      for (std::size_t s = 0; s < fp.iterations.size(); ++s)
        std::printf("FixedPoint '%s' sample %zu: %d iterations, %s\n", fp.op.c_str(), s, fp.iterations[s],
                    fp.converged[s] ? "converged" : "NOT converged");
      continue;
    }
    // one solve per token: the stats are sample-major, entry s*L + t (batch 1: sample 0 only)
    for (std::size_t s = 0; s * L < fp.iterations.size(); ++s) {
      std::string its, missed;
      for (std::size_t i = 0; i < L; ++i) {
        its += " " + std::to_string(fp.iterations[s * L + i]);
        if (!fp.converged[s * L + i]) missed += (missed.empty() ? "" : ",") + std::to_string(i);
      }
      std::printf("FixedPoint '%s' sample %zu iterations per token:%s, %s\n", fp.op.c_str(), s, its.c_str(),
                  missed.empty() ? "all converged" : ("NOT converged at token(s) " + missed).c_str());
    }
  }
  if (r.fixed_points.empty()) std::printf("no FixedPoint ops\n");
  return 0;
}

}  // namespace

void add_interpret(CLI::App& app) {
  static Opts o;
  auto* c = app.add_subcommand("interpret", "Run a graph on one token sequence with the double-precision interpreter");
  c->add_option("graph", o.graph, "the graph JSON (docs/ir.md)")->required()->check(CLI::ExistingFile);
  c->add_option("--weights", o.weights, "the weights HDF5")->check(CLI::ExistingFile);
  c->add_option("--tokens", o.tokens, "the token ids, comma-separated (one sequence, B = 1)")->required();
  c->add_option("--threads", o.threads, "threads for the contractions")->check(positive())->capture_default_str();
  c->add_option("--sequence", o.sequence, "simultaneous (the whole sequence per fixed-point step) or sequential (token by token)")
      ->check(CLI::IsMember({"simultaneous", "sequential"}))
      ->capture_default_str();
  c->add_flag("--json", o.json, "print a JSON record");
  c->footer(
      "Prints the argmax of the graph's first output at each token (the predicted next token of a\n"
      "language model) and, per FixedPoint op, the iterations and whether the stop rule was met\n"
      "(per token with --sequence sequential; docs/ir.md, \"Sequential mode\").\n"
      "Example:\n"
      "  aoc import config.json -o model.json && aoc interpret model.json --weights model.h5 --tokens 3,1,4,1,5");
  c->callback([] { exit_status() = run(o); });
}

}  // namespace aoc::cli
