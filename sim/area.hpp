// The area model of a machine, as Accelergy's area table beside its energy table: each component's
// area per unit of it (a channel, a weight, a module) as a min / typical / max band with the
// source of the figure. Component names are fixed (docs/energy.md, "Area"); an unknown one is an
// error. The optics between the chips (lenses, beam splitters, their spacing) have no area here:
// they are a volume, and the report says so.
#pragma once
#include <string>
#include <vector>

#include "sim/energy.hpp"

namespace aoc {

struct Hardware;

// Every area component, in the order of the report.
inline constexpr const char* kAreaComponents[] = {"led_array", "slm", "photodetector_receiver", "analog_electronics",
                                                  "dac",       "adc", "digital",                "control"};

struct AreaComponent {
  std::string name;  // e.g. "slm", "adc"
  std::string per;   // what one unit is, fixed by the name: "channel", "weight" or "module"
  Band mm2;          // per unit
  std::string source;
  // dac, adc: the resolution the figure holds at (0: none given). At other bits the area is
  // 2^(bits - at_bits) times it: a converter's capacitor or current-source array doubles per bit.
  int at_bits = 0;
};

struct AreaSpec {
  std::vector<AreaComponent> components;
};

struct AreaLine {
  std::string name, per;
  double count = 0;   // units per module
  double scale = 1;   // the resolution factor applied (dac, adc)
  Band mm2;           // per module
  std::string source;
};

struct AreaReport {
  std::string machine;
  int channels = 0, modules = 1;
  std::vector<AreaLine> lines;
  Band module_mm2, machine_mm2;
  std::string not_counted;  // what the figures leave out
};

// One module's area by component, and the machine's (modules x one module).
AreaReport area_report(const Hardware& hw);

}  // namespace aoc
