// The program file (HDF5, docs/program.md):
//   /            attributes format = "aoc-program", version = 2, tool = the aoc version
//   /graph       the lowered graph, as the JSON text of docs/ir.md (a string)
//   /program     the target, the passes and the optical plans with their tiles (a JSON string)
//   /weights/<name>   float64, one dataset per weight (absent in a shapes-only program)
//   /codes/<k>        int32 [rows, cols]: plan k's SLM codes, when quantized with weights
//   /code_step/<k>    float64 [tiles]: the value of one code step of each of plan k's tiles
//   /programmed/<k>   float64 [rows, cols]: plan k's compensated SLM values (compensate)
//   /offset/<k>       float64 [sum of its tiles' rows]: each tile's chain offset, tile after tile
#include "compiler/program_h5.hpp"

#include <H5Cpp.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <limits>
#include <type_traits>

#include "compiler/graph_json.hpp"
#include "sim/error.hpp"
#include "sim/h5file.hpp"
#include "sim/json_reader.hpp"

namespace aoc::ir {

namespace {

using json = nlohmann::ordered_json;
constexpr const char* kFormat = "aoc-program";
constexpr int kVersion = 2;  // 2: compensated plans carry each detector's gain trim (/gain/<k>)

bool exists(const H5::H5File& f, const std::string& name) { return H5Lexists(f.getId(), name.c_str(), H5P_DEFAULT) > 0; }

std::string get_string(const H5::H5File& f, const std::string& path, const std::string& name) {
  if (!exists(f, name)) throw Error(path + ": /" + name + ": missing (not an aoc program?)");
  return h5_string(f.openDataSet(name), path + ": /" + name);
}

// n values of a dataset of rank at most max_rank as T (integers: each an integral value within T's
// range).
template <class T>
std::vector<T> get_numbers(const H5::H5File& f, const std::string& path, const std::string& name, std::uint64_t n, int max_rank) {
  const std::string where = path + ": /" + name;
  if (!exists(f, name)) throw Error(where + ": missing");
  const std::vector<double> v = h5_numbers(f.openDataSet(name), where, max_rank);
  if (v.size() != n) throw Error(where + ": expected " + std::to_string(n) + " values, got " + std::to_string(v.size()));
  std::vector<T> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    if constexpr (std::is_integral_v<T>) {
      if (!(v[i] >= static_cast<double>(std::numeric_limits<T>::min()) && v[i] <= static_cast<double>(std::numeric_limits<T>::max())) ||
          v[i] != std::floor(v[i]))
        throw Error(where + ": value " + std::to_string(v[i]) + " at element " + std::to_string(i) + " is not a " +
                    std::to_string(8 * sizeof(T)) + "-bit integer");
    }
    out[i] = static_cast<T>(v[i]);
  }
  return out;
}

json target_json(const Target& t) {
  return {{"hardware", t.hardware},           {"hardware_path", t.hardware_path}, {"overrides", t.overrides},
          {"channels", t.channels},           {"modules", t.modules},             {"analog_functions", t.analog_functions},
          {"analog_partial_sums", t.analog_partial_sums}, {"analog_state_memory", t.analog_state_memory},
          {"slm_bits", t.slm_bits},           {"dac_bits", t.dac_bits},           {"adc_bits", t.adc_bits},
          {"dac_range", {t.dac_lo, t.dac_hi}}, {"adc_range", {t.adc_lo, t.adc_hi}}, {"dark_leds", t.dark_leds}};
}

Target read_target(const jsonr::Reader& r, const jsonr::json& j) {
  const std::string F = "target";
  r.object(j, F);
  Target t;
  t.hardware = r.text(r.need(j, F, "hardware"), F + ".hardware", false);
  t.hardware_path = r.text(r.need(j, F, "hardware_path"), F + ".hardware_path", false);
  for (const auto& o : r.need(j, F, "overrides")) t.overrides.push_back(r.text(o, F + ".overrides", true));
  t.channels = static_cast<int>(r.integer(r.need(j, F, "channels"), F + ".channels", 1, 1 << 20));
  t.modules = static_cast<int>(r.integer(r.need(j, F, "modules"), F + ".modules", 1, 1'000'000));
  for (const auto& a : r.need(j, F, "analog_functions")) t.analog_functions.push_back(r.text(a, F + ".analog_functions", true));
  t.analog_partial_sums = r.boolean(r.need(j, F, "analog_partial_sums"), F + ".analog_partial_sums");
  t.analog_state_memory = r.boolean(r.need(j, F, "analog_state_memory"), F + ".analog_state_memory");
  t.slm_bits = static_cast<int>(r.integer(r.need(j, F, "slm_bits"), F + ".slm_bits", 0, 24));
  t.dac_bits = static_cast<int>(r.integer(r.need(j, F, "dac_bits"), F + ".dac_bits", 0, 24));
  t.adc_bits = static_cast<int>(r.integer(r.need(j, F, "adc_bits"), F + ".adc_bits", 0, 24));
  const auto dac = r.numbers(r.need(j, F, "dac_range"), F + ".dac_range", 2);
  const auto adc = r.numbers(r.need(j, F, "adc_range"), F + ".adc_range", 2);
  t.dac_lo = dac[0], t.dac_hi = dac[1], t.adc_lo = adc[0], t.adc_hi = adc[1];
  if (!(t.dac_lo < t.dac_hi)) r.fail(F + ".dac_range", "expected [lo, hi] with lo < hi");
  if (!(t.adc_lo < t.adc_hi)) r.fail(F + ".adc_range", "expected [lo, hi] with lo < hi");
  if (const auto* d = r.find(j, "dark_leds")) {  // absent in programs written before it
    if (!d->is_array()) r.fail(F + ".dark_leds", "expected an array of LED channels");
    for (const auto& c : *d) {
      const int ch = static_cast<int>(r.integer(c, F + ".dark_leds", 0, t.channels - 1));
      if (!t.dark_leds.empty() && ch <= t.dark_leds.back()) r.fail(F + ".dark_leds", "expected distinct channels in increasing order");
      t.dark_leds.push_back(ch);
    }
  }
  return t;
}

}  // namespace

void write_program_h5(const std::string& path, const Program& p) {
  json meta{{"format", kFormat}, {"version", kVersion}, {"target", target_json(p.target)}, {"passes", p.passes},
            {"has_weights", !p.weights.empty()}};
  json plans = json::array();
  for (const OpticalPlan& pl : p.optical) {
    json tiles = json::array();
    for (const Tile& t : pl.tiles) tiles.push_back({t.row0, t.col0, t.rows, t.cols, t.module, t.pass, t.core_row0, t.core_col0});
    plans.push_back({{"op", pl.op}, {"weight", pl.weight}, {"aoc_layout", pl.aoc_layout}, {"rows", pl.rows}, {"cols", pl.cols},
                     {"loop", pl.loop}, {"slm_bits", pl.slm_bits}, {"codes", !pl.codes.empty()}, {"tiles", tiles}});
    if (pl.sum_range > 0) plans.back()["sum_range"] = pl.sum_range;
    if (pl.drive_range > 0) plans.back()["drive_range"] = pl.drive_range;
    if (pl.compensated()) {  // per tile: [residual, rms residual, dark weights, program-and-verify reads]
      json c = json::array();
      for (const TileProgramming& t : pl.compensation) c.push_back({t.residual, t.rms_residual, t.dark, t.rounds});
      plans.back()["compensation"] = c;
    }
  }
  meta["plans"] = plans;
  const std::string graph = write_graph(p.graph);
  write_h5_atomic(path, [&](H5::H5File& f) {
    h5_put_text_attr(f, "format", kFormat);
    h5_put_text_attr(f, "version", std::to_string(kVersion));
    h5_put_text_attr(f, "tool", AOC_VERSION);
    h5_put_text(f, "graph", graph);
    h5_put_text(f, "program", meta.dump(1));
    const H5::DSetCreatPropList& dcpl = untimed_dataset();
    create_group(f, "weights");
    for (const auto& [name, t] : p.weights) {
      const std::vector<hsize_t> dims(t.shape.begin(), t.shape.end());
      H5::DataSet d = f.createDataSet("weights/" + name, H5::PredType::IEEE_F64LE,
                                      H5::DataSpace(static_cast<int>(dims.size()), dims.data()), dcpl);
      if (!t.data.empty()) d.write(t.data.data(), H5::PredType::NATIVE_DOUBLE);
    }
    create_group(f, "codes"), create_group(f, "code_step");
    for (std::size_t k = 0; k < p.optical.size(); ++k) {
      const OpticalPlan& pl = p.optical[k];
      if (pl.codes.empty()) continue;
      const hsize_t dims[2] = {static_cast<hsize_t>(pl.rows), static_cast<hsize_t>(pl.cols)};
      f.createDataSet("codes/" + std::to_string(k), H5::PredType::STD_I32LE, H5::DataSpace(2, dims), dcpl)
          .write(pl.codes.data(), H5::PredType::NATIVE_INT32);
      const hsize_t n = pl.code_step.size();
      f.createDataSet("code_step/" + std::to_string(k), H5::PredType::IEEE_F64LE, H5::DataSpace(1, &n), dcpl)
          .write(pl.code_step.data(), H5::PredType::NATIVE_DOUBLE);
    }
    create_group(f, "programmed"), create_group(f, "offset"), create_group(f, "gain");
    for (std::size_t k = 0; k < p.optical.size(); ++k) {
      const OpticalPlan& pl = p.optical[k];
      if (!pl.compensated()) continue;
      const hsize_t dims[2] = {static_cast<hsize_t>(pl.rows), static_cast<hsize_t>(pl.cols)};
      f.createDataSet("programmed/" + std::to_string(k), H5::PredType::IEEE_F64LE, H5::DataSpace(2, dims), dcpl)
          .write(pl.programmed.data(), H5::PredType::NATIVE_DOUBLE);
      std::vector<double> offsets, gains;
      for (const TileProgramming& t : pl.compensation) {
        offsets.insert(offsets.end(), t.offset.begin(), t.offset.end());
        gains.insert(gains.end(), t.gain.begin(), t.gain.end());
      }
      const hsize_t n = offsets.size();
      f.createDataSet("offset/" + std::to_string(k), H5::PredType::IEEE_F64LE, H5::DataSpace(1, &n), dcpl)
          .write(offsets.data(), H5::PredType::NATIVE_DOUBLE);
      f.createDataSet("gain/" + std::to_string(k), H5::PredType::IEEE_F64LE, H5::DataSpace(1, &n), dcpl)
          .write(gains.data(), H5::PredType::NATIVE_DOUBLE);
    }
  });
}

bool is_program_h5(const std::string& path) {
  try {
    H5::Exception::dontPrint();
    if (!H5::H5File::isHdf5(path)) return false;
    const H5::H5File f(path, H5F_ACC_RDONLY);
    if (!f.attrExists("format")) return false;
    return h5_string(f.openAttribute("format"), path + ": attribute format") == kFormat;
  } catch (...) {
    return false;
  }
}

Program read_program_h5(const std::string& path) {
  const H5::H5File f = open_h5_read(path);
  Program p;
  try {
    const jsonr::Reader r(path + ": /program");
    const jsonr::json meta = jsonr::parse_text(get_string(f, path, "program"), path + ": /program");
    r.object(meta, "");
    const auto& fmt = r.need(meta, "", "format");
    if (!fmt.is_string() || fmt.get<std::string>() != kFormat) r.fail("format", "expected \"aoc-program\"");
    if (const auto v = r.integer(r.need(meta, "", "version"), "version", 0, 1 << 30); v != kVersion)
      r.fail("version", "version " + std::to_string(v) + " is not this aoc's (" + std::to_string(kVersion) +
                            (v < kVersion ? "): a program from an older aoc; compile it again" : "): a program from a newer aoc"));
    p.graph = parse_graph(get_string(f, path, "graph"), path + ": /graph");
    p.target = read_target(r, r.need(meta, "", "target"));
    for (const auto& s : r.need(meta, "", "passes")) p.passes.push_back(r.text(s, "passes", true));
    const jsonr::json& plans = r.need(meta, "", "plans");
    if (!plans.is_array()) r.fail("plans", "expected an array");
    for (std::size_t k = 0; k < plans.size(); ++k) {
      const jsonr::json& j = plans[k];
      const std::string F = "plans[" + std::to_string(k) + "]";
      r.object(j, F);
      OpticalPlan pl;
      pl.op = r.text(r.need(j, F, "op"), F + ".op", true);
      pl.weight = r.text(r.need(j, F, "weight"), F + ".weight", true);
      pl.aoc_layout = r.boolean(r.need(j, F, "aoc_layout"), F + ".aoc_layout");
      pl.rows = r.integer(r.need(j, F, "rows"), F + ".rows", 1, std::int64_t{1} << 40);
      pl.cols = r.integer(r.need(j, F, "cols"), F + ".cols", 1, std::int64_t{1} << 40);
      pl.loop = r.text(r.need(j, F, "loop"), F + ".loop", false);
      pl.slm_bits = static_cast<int>(r.integer(r.need(j, F, "slm_bits"), F + ".slm_bits", 0, 24));
      if (const auto* v = r.find(j, "sum_range")) pl.sum_range = r.number(*v, F + ".sum_range", jsonr::kNonNegative);
      if (const auto* v = r.find(j, "drive_range")) pl.drive_range = r.number(*v, F + ".drive_range", jsonr::kNonNegative);
      const jsonr::json& tiles = r.need(j, F, "tiles");
      if (!tiles.is_array()) r.fail(F + ".tiles", "expected an array");
      for (std::size_t i = 0; i < tiles.size(); ++i) {
        const std::string T = F + ".tiles[" + std::to_string(i) + "]";
        if (!tiles[i].is_array() || tiles[i].size() != 8) r.fail(T, "expected [row0, col0, rows, cols, module, pass, core_row0, core_col0]");
        std::int64_t v[8];
        for (int c = 0; c < 8; ++c) v[c] = r.integer(tiles[i][c], T, 0, std::int64_t{1} << 40);
        pl.tiles.push_back({v[0], v[1], v[2], v[3], static_cast<int>(v[4]), static_cast<int>(v[5]), v[6], v[7]});
      }
      if (r.boolean(r.need(j, F, "codes"), F + ".codes")) {
        if (pl.rows > static_cast<std::int64_t>(kMaxH5Elements) / pl.cols)
          r.fail(F + ".rows", "rows x cols = " + std::to_string(pl.rows) + " x " + std::to_string(pl.cols) + " is more than 2^40 codes");
        pl.codes = get_numbers<std::int32_t>(f, path, "codes/" + std::to_string(k), static_cast<std::uint64_t>(pl.rows * pl.cols), 2);
        pl.code_step = get_numbers<double>(f, path, "code_step/" + std::to_string(k), pl.tiles.size(), 1);
      }
      if (const auto* c = r.find(j, "compensation")) {
        if (!c->is_array() || c->size() != pl.tiles.size())
          r.fail(F + ".compensation", "expected one [residual, rms, dark, reads] per tile (" + std::to_string(pl.tiles.size()) + ")");
        std::int64_t outputs = 0;
        for (std::size_t i = 0; i < c->size(); ++i) {
          const std::string C = F + ".compensation[" + std::to_string(i) + "]";
          const jsonr::json& e = (*c)[i];
          if (!e.is_array() || e.size() != 4) r.fail(C, "expected [residual, rms residual, dark weights, program-and-verify reads]");
          TileProgramming t;
          t.residual = r.number(e[0], C, jsonr::kNonNegative);
          t.rms_residual = r.number(e[1], C, jsonr::kNonNegative);
          t.dark = static_cast<int>(r.integer(e[2], C, 0, std::int64_t{1} << 30));
          t.rounds = static_cast<int>(r.integer(e[3], C, 0, std::int64_t{1} << 30));
          pl.compensation.push_back(std::move(t));
          outputs += pl.tiles[i].rows;
        }
        if (pl.rows > static_cast<std::int64_t>(kMaxH5Elements) / pl.cols)
          r.fail(F + ".rows", "rows x cols = " + std::to_string(pl.rows) + " x " + std::to_string(pl.cols) + " is more than 2^40 values");
        pl.programmed = get_numbers<double>(f, path, "programmed/" + std::to_string(k), static_cast<std::uint64_t>(pl.rows * pl.cols), 2);
        const std::vector<double> offsets = get_numbers<double>(f, path, "offset/" + std::to_string(k), static_cast<std::uint64_t>(outputs), 1);
        const std::vector<double> gains = get_numbers<double>(f, path, "gain/" + std::to_string(k), static_cast<std::uint64_t>(outputs), 1);
        std::size_t at = 0;
        for (std::size_t i = 0; i < pl.tiles.size(); ++i) {
          const auto a = static_cast<std::ptrdiff_t>(at), b = static_cast<std::ptrdiff_t>(at + static_cast<std::size_t>(pl.tiles[i].rows));
          pl.compensation[i].offset.assign(offsets.begin() + a, offsets.begin() + b);
          pl.compensation[i].gain.assign(gains.begin() + a, gains.begin() + b);
          at = static_cast<std::size_t>(b);
        }
      }
      p.optical.push_back(std::move(pl));
    }
    if (r.boolean(r.need(meta, "", "has_weights"), "has_weights")) {
      const std::string prefix = "weights/";
      for (auto& [name, t] : read_weights_h5(path, "/weights")) p.weights[name.substr(prefix.size())] = std::move(t);
    }
  } catch (const H5::Exception& e) {
    throw Error(path + ": cannot read the program (" + e.getDetailMsg() + ")");
  }
  verify_program(p);
  return p;
}

}  // namespace aoc::ir
