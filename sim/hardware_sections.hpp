// Parsers of the optional sections of a hardware file, each in the file of its subject; called by
// load_hardware. Internal to sim/.
#pragma once
#include "sim/json_reader.hpp"

namespace aoc {

NoiseSpec read_noise(const jsonr::Reader& r, const jsonr::json& j, Hardware& hw);
ConverterSpec read_converters(const jsonr::Reader& r, const jsonr::json& j, Hardware& hw);
TimingSpec read_timing(const jsonr::Reader& r, const jsonr::json& j, Hardware& hw);
EnergySpec read_energy(const jsonr::Reader& r, const jsonr::json& j, Hardware& hw);
ArchitectureSpec read_architecture(const jsonr::Reader& r, const jsonr::json& j, Hardware& hw);
AreaSpec read_area(const jsonr::Reader& r, const jsonr::json& j, Hardware& hw);

// A banded figure {"min", "typ", "max", "unit", "source"} (and "at_bits", "at_rate_mhz" where
// allowed) of the energy and area sections: its unit checked against the one its name fixes (per
// `per`), min <= typ <= max, a source given.
struct BandEntry {
  Band value;
  std::string source;
  int at_bits = 0;
  double at_rate_mhz = 0;
};
BandEntry read_band_entry(const jsonr::Reader& r, const jsonr::json& c, const std::string& field, const std::string& unit,
                          const std::string& per, bool at_bits, bool at_rate = false);

// One operating point: where the noise section derives photons_per_sample ("derived": "energy"),
// set it (and its band and source) from the energy section's LED figure. Called after the sections
// are read, and again after overrides touch them, so that a --set of the LED drive moves the shot
// noise with the energy.
void derive_operating_point(const jsonr::Reader& r, Hardware& hw);

// A table of quantities {"name": {"value": v, "unit": "...", "source": "..."}}: each known name
// with its unit (checked) and range; unknown names are errors; sources go to hw.sources.
struct QuantityField {
  const char* name;
  const char* unit;
  jsonr::Range range;
  double* out;
  bool required = true;
};
void read_quantities(const jsonr::Reader& r, const jsonr::json& j, const std::string& section,
                     const std::vector<QuantityField>& fields, Hardware& hw);

}  // namespace aoc
