#include "sim/energy.hpp"

#include <map>

#include "sim/hardware_sections.hpp"

namespace aoc {

using namespace jsonr;

namespace {

struct Kind {
  const char* action;
  const char* unit;
};

// Every component a machine can list, with what one unit of it is. Anything else is an error.
const std::map<std::string, Kind>& kinds() {
  static const std::map<std::string, Kind> k = {
      {"led_drive", {"channel_iteration", "pJ"}},
      {"photodetector_receiver", {"channel_iteration", "pJ"}},
      {"analog_electronics", {"channel_iteration", "pJ"}},
      {"slm_static", {"second", "W"}},
      {"slm_reload", {"weight_write", "pJ"}},
      {"dac", {"conversion", "pJ"}},
      {"adc", {"conversion", "pJ"}},
      {"digital", {"mac", "pJ"}},
      {"control", {"fixed_point", "pJ"}},
  };
  return k;
}

}  // namespace

EnergySpec read_energy(const Reader& r, const json& j, Hardware& hw) {
  EnergySpec e;
  r.object(j, "energy");
  std::vector<std::string> names;
  for (const auto& [name, kind] : kinds()) names.push_back(name);
  r.only_keys(j, "energy", names);
  for (const auto& [name, c] : j.items()) {
    const std::string F = sub("energy", name);
    const Kind& kind = kinds().at(name);
    r.object(c, F);
    r.only_keys(c, F, {"min", "typ", "max", "unit", "source"});
    EnergyComponent comp;
    comp.name = name;
    comp.action = kind.action;
    comp.unit = r.text(r.need(c, F, "unit"), F + ".unit", false);
    if (comp.unit != kind.unit) r.fail(F + ".unit", "expected \"" + std::string(kind.unit) + "\" (per " + kind.action + "), got \"" + comp.unit + "\"");
    comp.value.min = r.number(r.need(c, F, "min"), F + ".min", kNonNegative);
    comp.value.typ = r.number(r.need(c, F, "typ"), F + ".typ", kNonNegative);
    comp.value.max = r.number(r.need(c, F, "max"), F + ".max", kNonNegative);
    if (!(comp.value.min <= comp.value.typ && comp.value.typ <= comp.value.max))
      r.fail(F, "expected min <= typ <= max, got " + num(comp.value.min) + ", " + num(comp.value.typ) + ", " + num(comp.value.max));
    comp.source = r.text(r.need(c, F, "source"), F + ".source", true);
    hw.sources[F] = comp.source;
    e.components.push_back(comp);
  }
  return e;
}

}  // namespace aoc
