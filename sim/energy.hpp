// The energy model of a machine, Accelergy-style: a list of components, each with the energy of
// one of its actions (or its static power) as a min / typical / max band and the source of the
// figure. Component names are fixed (docs/energy.md); an unknown one is an error.
#pragma once
#include <string>
#include <vector>

namespace aoc {

struct Band {
  double min = 0, typ = 0, max = 0;
};

struct EnergyComponent {
  std::string name;    // e.g. "led_drive", "adc"
  std::string action;  // what one unit is: fixed by the name (see energy.cpp)
  std::string unit;    // "pJ" per action, or "W" for static power
  Band value;
  std::string source;  // paper, datasheet figure, survey, or "assumption: why"
};

struct EnergySpec {
  std::vector<EnergyComponent> components;
};

}  // namespace aoc
