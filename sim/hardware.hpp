// The hardware description: one machine, everything the simulator needs to know about it.
// Loaded from the JSON format of docs/hardware.md; every field is validated on load.
#pragma once
#include <array>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sim/area.hpp"
#include "sim/energy.hpp"
#include "sim/physics_spec.hpp"

namespace aoc {

using Quad = std::array<double, 3>;  // q2, q1, q0: q2*w^2 + q1*w + q0

enum class PbsModel { PerChannel, QuadraticLeak };
enum class CrosstalkOrder { PbsThenPd, PdThenPbs };

// The twin's closed-loop correction (48-variable machine): g = (g + rho*(dc + s*lin)) * scaling.
struct ClosedLoop {
  std::vector<double> dc_offset, linear_offset, scaling;  // per channel
  double solution_to_adc_ratio = 0;                       // rho
};

// Piecewise fit of the readout chain, applied to a fixed point before it leaves the machine.
// The 48-variable fit has five pieces, the 16-variable fit two; see sim/readout.hpp.
struct ReadoutSaturation {
  enum class Model { Piecewise48, Piecewise16 } model = Model::Piecewise48;
  double negative_saturation = 0, positive_saturation = 0;
  std::array<double, 2> piece0{}, piece1{}, piece3{}, piece4{};  // [start, stop] of each piece
  double piece0_constant = 0, piece0_cosine_coeff = 0;
  std::vector<double> piece1_poly, piece3_poly;                 // 48: highest power first
  double piece4_first_constant = 0, piece4_second_constant = 0;  // 48
  double piece1_multiplier = 0, piece1_sine_coeff = 0;           // 16
};

// Which non-idealities of one optical iteration are on (the twin's constructor switches).
struct Switches {
  bool weight_distortion = true;
  bool input_efficiencies = true;
  bool output_efficiencies = true;
  bool pd_crosstalk = true;
  bool pbs_crosstalk = false;
  bool slm_darkness = true;
};

// What the twin's factory uses when a caller does not say (AOCCell.from_parameters).
struct TwinDefaults {
  double scale = 18.6;
  double alpha = 0.5;
  bool normalise_matrix = true;
  Switches switches;
};

struct Hardware {
  std::string path;  // the file it came from, for messages
  std::string name, description;
  int channels = 0;  // n: calibration vectors have this length

  // Electronics nonlinearity: u = a*z + b; t = d*u/(1+|u|^c)^(1/c) + f + g*z.
  std::array<double, 6> tanh{};  // a b c d f g (g = 0 when the file gives five)
  // microLED drive of the positive and negative path, cubic in t, highest power first.
  std::array<double, 4> led_pos{}, led_neg{};
  std::vector<double> fan_in_pos, fan_in_neg;  // optical fan-in profile per input channel
  std::vector<Quad> slm_pos, slm_neg;          // per output column SLM distortion [q2,q1,q0]
  std::vector<double> gain_pos, gain_neg;      // output (TIA) gain per output channel
  // Photodetector crosstalk: ratio of channel k's signal leaking into k-1 (earlier) / k+1 (later).
  std::vector<double> pd_earlier_pos, pd_later_pos, pd_earlier_neg, pd_later_neg;

  PbsModel pbs_model = PbsModel::PerChannel;
  std::vector<double> pbs_neg_to_pos, pbs_pos_to_neg;  // PerChannel
  std::vector<Quad> pbs_leak_pos, pbs_leak_neg;        // QuadraticLeak: n-1 rows
  double pbs_leak_norm_pos = 0, pbs_leak_norm_neg = 0;  // QuadraticLeak
  CrosstalkOrder crosstalk_order = CrosstalkOrder::PbsThenPd;

  std::optional<ClosedLoop> closed_loop;
  double clip_lo = 0, clip_hi = 0;  // joint clip of x + b at injection
  ReadoutSaturation readout;
  TwinDefaults defaults;

  // Physical sections (absent in a file that only holds the twin's calibration).
  std::optional<NoiseSpec> noise;
  std::optional<ConverterSpec> converters;
  std::optional<TimingSpec> timing;
  std::optional<EnergySpec> energy;
  std::optional<ArchitectureSpec> architecture;  // for the compiler
  std::optional<AreaSpec> area;

  // Field name -> where its value came from (yaml key, file, paper), as the file states it.
  // Keys: "calibration.<key>", "defaults", and "unused.<key>" for each entry of "unused".
  std::map<std::string, std::string> sources;

  // The file's free-form "provenance" object (key -> value as text), in file order.
  std::vector<std::pair<std::string, std::string>> provenance;
};

// Loads and validates a hardware file. Throws aoc::Error naming the file and field at fault.
// Each override "section.field=value" (e.g. "noise.thermal_sigma=0.002", "converters.slm_bits=6")
// replaces one value before validation: for an entry {"value", "unit", "source"} its value, whose
// source then says it was overridden. Design-space sweeps and what-if runs use these.
Hardware load_hardware(const std::string& path, const std::vector<std::string>& overrides = {});

// A hardware file read once and loaded many times with different overrides (design-space sweeps):
// load(o) is load_hardware(path, o), without reading and parsing the file again, and overrides of
// the physical sections (noise, converters, timing, energy, architecture) read only the sections
// they change again (a large machine's calibration is read once).
class HardwareFile {
 public:
  explicit HardwareFile(const std::string& path);  // throws aoc::Error as load_hardware(path)
  Hardware load(const std::vector<std::string>& overrides) const;
  const Hardware& base() const { return base_; }
  const nlohmann::ordered_json& document() const { return doc_; }

 private:
  std::string path_;
  nlohmann::ordered_json doc_;
  Hardware base_;
};

// The document load_hardware(path, overrides) reads: the file with the overrides applied, validated.
nlohmann::ordered_json hardware_document(const std::string& path, const std::vector<std::string>& overrides = {});

// `aoc hw new`: the document of a machine of `channels` channels named `name`, made from the file at
// `path`: its calibration's per-channel entries replaced by copies of their mean (a stand-in, named
// as one in each entry's source and in the provenance, which records `command`), every other
// section copied, then `overrides` applied; validated. Throws aoc::Error naming the field at fault.
nlohmann::ordered_json resized_hardware(const std::string& path, int channels, const std::string& name, const std::string& command,
                                        const std::vector<std::string>& overrides = {});

// The bundled machine description of that name (aoc-48, aoc-16), or a path as given.
std::string resolve_hardware_path(const std::string& name_or_path);
// The bundled machines' names (scenarios/hardware/*.json), sorted.
std::vector<std::string> bundled_machines();
// A file bundled with aoc, by its path relative to the project's root: under AOC_DATA_DIR when it
// is set; else, for an installed aoc, under PREFIX/share/aoc found from the binary's own place
// (`cmake --install`; the tree may be moved); else in the source tree this aoc was built from.
std::string bundled_path(const std::string& relative);

// Readable summary for `aoc hw show`.
std::string describe(const Hardware& hw);

}  // namespace aoc
