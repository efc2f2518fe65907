// aoc import: a published implicit model's config.json -> a graph (JSON) and its weights (HDF5):
// seeded random ones, or the trained ones of a safetensors checkpoint (--weights). docs/ir.md,
// "Importing implicit Mamba2 and Llama3 configs".
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "compiler/graph_json.hpp"
#include "compiler/import_config.hpp"
#include "compiler/verify.hpp"
#include "models/model.hpp"
#include "runtime/cli/commands.hpp"
#include "runtime/io/output.hpp"
#include "sim/error.hpp"
#include "sim/files.hpp"
#include "sim/json_reader.hpp"

namespace aoc::cli {

namespace {

struct Opts {
  std::string config, output, weights_in, weights_out;
  std::uint64_t seed = 1;
  std::optional<double> tol;
  bool shapes_only = false, json = false;
  const CLI::Option* seed_option = nullptr;
};

// Trained weights next to the config that --weights did not name: an aoc model folder's
// weights.h5 (aoc train), or a Hugging Face folder's checkpoint. Empty when there are none.
std::string weights_beside(const std::string& config) {
  const std::filesystem::path dir = std::filesystem::path(config).parent_path();
  for (const char* name : {"weights.h5", "model.safetensors", "model.safetensors.index.json"}) {
    const std::filesystem::path p = dir / name;
    if (std::filesystem::is_regular_file(p)) return p.string();
  }
  return "";
}

int run(Opts o) {
  // A folder's own trained weights are used unless the command asks for others (--weights),
  // random ones (--seed) or none (--shapes-only): an import never silently drops a model's weights.
  std::string picked;
  if (o.weights_in.empty() && !o.shapes_only && o.seed_option->count() == 0) picked = o.weights_in = weights_beside(o.config);
  const bool trained = !o.weights_in.empty();
  if (trained && o.shapes_only) throw Error("--weights: a checkpoint and --shapes-only exclude each other");
  if (trained && o.seed_option->count() > 0) throw Error("--seed: only for random weights, not with --weights");
  ir::ImportOptions io;
  io.seed = o.seed;
  io.weights = !o.shapes_only;
  io.weights_path = o.weights_in;
  io.tol = o.tol;
  std::string wpath = o.weights_out;
  if (wpath.empty() && !o.shapes_only) {
    wpath = o.output;
    if (wpath.size() >= 5 && wpath.compare(wpath.size() - 5, 5, ".json") == 0) wpath.resize(wpath.size() - 5);
    wpath += ".h5";
  }
  check_outputs({{"-o", o.output}, {"--weights-out", wpath}}, {{"the config", o.config}, {"--weights", o.weights_in}});
  if (!o.shapes_only) {
    // The weights file is built in memory before it is written (sim/h5file.hpp): its size is
    // known from the shapes, and a machine that cannot hold it is told so before any is drawn.
    ir::ImportOptions shapes = io;
    shapes.weights = false, shapes.weights_path.clear();
    const double gib = static_cast<double>(models::import_model_config(o.config, shapes).parameter_count) * 8 / (1024.0 * 1024 * 1024);
    const double limit = memory_limit_gib();
    if (limit > 0 && 2 * gib > limit)
      throw Error(o.config + ": its weights take " + jsonr::num(std::round(gib * 10) / 10) + " GiB as float64, and the file is built in memory " +
                  "and copied once (" + jsonr::num(std::round(gib * 20) / 10) + " GiB) before it is written: more than aoc --max-memory " +
                  jsonr::num(std::round(limit * 10) / 10) + " GiB; raise it (aoc --max-memory GIB import ...) or import --shapes-only");
  }
  ir::Imported m;
  std::vector<char> weights;
  if (trained || o.shapes_only) {
    m = models::import_model_config(o.config, io);
    ir::verify(m.graph, o.shapes_only ? nullptr : &m.weights);
    if (!o.shapes_only) weights = ir::weights_h5_image(wpath, m.weights);
  } else {
    // Seeded weights go into the file's image as they are drawn: one tensor at a time besides it.
    weights = ir::weights_h5_image(wpath, [&](const ir::AddWeight& add) {
      io.weight_sink = [&](const std::string& name, ir::Tensor&& t) { add(name, t); };
      m = models::import_model_config(o.config, io);
      for (const auto& [name, t] : m.weights) add(name, t);  // models that make their weights whole (aoc_ssm)
      ir::verify(m.graph, nullptr);
    });
  }
  if (!m.unused_tensors.empty()) {
    // Not an error (a checkpoint may hold tensors the graph has no use for), but never silent.
    std::string list;
    for (std::size_t i = 0; i < m.unused_tensors.size() && i < 8; ++i) list += (i ? ", " : "") + m.unused_tensors[i];
    if (m.unused_tensors.size() > 8) list += ", ...";
    std::fprintf(stderr, "import: warning: %s: %zu tensor(s) not used by the graph: %s\n", o.weights_in.c_str(),
                 m.unused_tensors.size(), list.c_str());
  }
  // the graph and its weights both or neither (a graph beside another import's weights would run)
  const std::string graph = ir::write_graph(m.graph);
  std::vector<std::pair<std::string, std::vector<char>>> files;
  if (!o.shapes_only) files.emplace_back(wpath, std::move(weights));
  files.emplace_back(o.output, std::vector<char>(graph.begin(), graph.end()));
  write_files_atomic(files);

  int layers = 0;
  std::string d_model = "?";
  for (const auto& w : m.graph.weights) {
    // one pre-norm gain "layer<i>.norm" per block (Mamba2 and Llama)
    if (w.name.rfind("layer", 0) == 0 && w.name.size() > 5 && w.name.compare(w.name.size() - 5, 5, ".norm") == 0) ++layers;
    if (w.name == "norm_f" || w.name == "loop.W") d_model = std::to_string(w.type.shape[0].size);
  }
  if (o.json) {
    nlohmann::ordered_json j{{"tool", "aoc import"}, {"version", AOC_VERSION}, {"config", o.config}, {"graph", o.output},
                             {"name", m.graph.name}, {"layers", layers}, {"d_model", d_model}, {"parameters", m.parameter_count}};
    j["weights"] = o.shapes_only ? nlohmann::ordered_json() : nlohmann::ordered_json(wpath);
    j["weights_from"] = trained ? "checkpoint " + o.weights_in : o.shapes_only ? std::string("none (shapes only)") : "seeded random";
    if (!trained && !o.shapes_only) j["seed"] = o.seed;
    if (trained) j["tensors"] = m.weights.size(), j["folded_weight_norms"] = m.folded, j["unused_tensors"] = m.unused_tensors;
    j["fixed_points"] = nlohmann::ordered_json::array();
    for (const auto& op : m.graph.ops)
      if (op.kind == ir::OpKind::FixedPoint)
        j["fixed_points"].push_back({{"name", op.name}, {"tol", ir::attr_number(op, "tol")}, {"max_iter", ir::attr_int(op, "max_iter")},
                                     {"damping", ir::attr_number(op, "damping")}, {"rule", ir::attr_string(op, "rule")}});
    emit_json(j.dump(1), "");
    return 0;
  }
  std::printf("import: %s: %s, %d layer(s), d_model %s, %lld parameters\n", o.config.c_str(), m.graph.name.c_str(),
              layers, d_model.c_str(), static_cast<long long>(m.parameter_count));
  bool fixed_point = false;
  for (const auto& op : m.graph.ops)
    if (op.kind == ir::OpKind::FixedPoint) {
      fixed_point = true;
      std::printf("        FixedPoint '%s': tol %s%s, max_iter %lld, damping %s, rule %s\n", op.name.c_str(),
                  jsonr::num(ir::attr_number(op, "tol")).c_str(),
                  m.config_tol ? (" (--tol; the config's " + jsonr::num(*m.config_tol) + ")").c_str() : "", static_cast<long long>(ir::attr_int(op, "max_iter")),
                  jsonr::num(ir::attr_number(op, "damping")).c_str(), ir::attr_string(op, "rule").c_str());
    }
  if (!fixed_point) std::printf("        explicit backbone: no FixedPoint\n");
  std::printf("        wrote %s (verified)", o.output.c_str());
  if (trained)
    std::printf(" and %s (trained weights from %s%s, %zu tensors, %d weight norm(s) folded)", wpath.c_str(), o.weights_in.c_str(),
                picked.empty() ? "" : ", found next to the config", m.weights.size(), m.folded);
  else if (!o.shapes_only)
    std::printf(" and %s (seeded random weights, seed %llu)", wpath.c_str(), static_cast<unsigned long long>(o.seed));
  else std::printf(" (shapes only, no weights)");
  std::printf("\n");
  return 0;
}

}  // namespace

void add_import(CLI::App& app) {
  static Opts o;
  auto* c = app.add_subcommand("import", "Build the graph of a published implicit model from its config.json");
  c->add_option("config", o.config, "config.json of an implicit Mamba2 or Llama3 model (microsoft/implicit_languagemodels), or of a trained aoc model folder")
      ->required()->check(CLI::ExistingFile);
  c->add_option("-o,--output", o.output, "the graph JSON to write")->required();
  c->add_option("--weights", o.weights_in,
                "trained weights: an aoc weights HDF5, a .safetensors file, or a sharded checkpoint's "
                "model.safetensors.index.json (told by content; default: weights.h5 or model.safetensors "
                "next to the config, when there)");
  c->add_option("--weights-out", o.weights_out, "the weights HDF5 to write (default: the graph's path with .h5)");
  o.seed_option = c->add_option("--seed", o.seed,
                                "seed of random weights (not with --weights; given, it draws random weights even "
                                "where the config's folder holds trained ones)")
                      ->capture_default_str();
  c->add_option("--tol", o.tol,
                "the fixed points' tolerance instead of the config's deq_params.solver.f_tol: the residual at which each "
                "solve stops, for the reference and the machine alike (e.g. the tolerance the model was trained to "
                "solve at, train.solve_tol)")
      ->check(positive());
  c->add_flag("--shapes-only", o.shapes_only, "write the graph without weight data (any size; for estimates)");
  c->add_flag("--json", o.json, "print what was written as a JSON record (model, parameters, fixed points, files, where the weights came from)");
  c->footer(
      "The graph is the model of docs/research/implicit_ssm.md 1.1-1.2: embedding, input injection, a\n"
      "FixedPoint over the Mamba2 (or Llama: CausalAttention + SwiGLU, 1.3) blocks and the final norm (tol, max_iter, damping from deq_params),\n"
      "tied output head. Weights are seeded random with the reference's init, or read from a trained\n"
      "checkpoint with --weights: its PyTorch names mapped onto the graph's, weight norm folded (docs/ir.md).\n"
      "Example:\n"
      "  aoc import tests/data/implicit-lm/mamba2-state-tracking-implicit/config.json -o st.json   (st.json + st.h5)\n"
      "  aoc import CONFIG --weights model.safetensors -o m.json --weights-out m.h5\n"
      "  aoc import models/trained/parity-implicit/config.json -o p.json   (its weights.h5, picked up)\n"
      "  aoc import models/trained/s5-implicit-aoc48-1800/config.json --tol 0.02 -o s5.json   (solved to its training tolerance)\n"
      "  aoc import tests/data/implicit-lm/mamba2-130m-implicit/config.json -o m130.json --shapes-only");
  c->callback([] { exit_status() = run(o); });
}

}  // namespace aoc::cli
