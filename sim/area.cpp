#include "sim/area.hpp"

#include <cmath>
#include <map>

#include "sim/error.hpp"
#include "sim/hardware.hpp"
#include "sim/hardware_sections.hpp"

namespace aoc {

using namespace jsonr;

namespace {

// Every component a machine can list, with what one unit of it is. Anything else is an error.
const std::map<std::string, std::string>& per_unit() {
  static const std::map<std::string, std::string> k = {
      {"led_array", "channel"}, {"slm", "weight"},    {"photodetector_receiver", "channel"}, {"analog_electronics", "channel"},
      {"dac", "channel"},       {"adc", "channel"},   {"digital", "module"},                 {"control", "module"},
  };
  return k;
}

}  // namespace

AreaSpec read_area(const Reader& r, const json& j, Hardware& hw) {
  AreaSpec a;
  r.object(j, "area");
  std::vector<std::string> names;
  for (const auto& [name, per] : per_unit()) names.push_back(name);
  r.only_keys(j, "area", names);
  for (const char* name : kAreaComponents) {
    const json* c = r.find(j, name);
    if (!c) continue;
    const std::string F = sub("area", name);
    const std::string& per = per_unit().at(name);
    const bool converter = std::string(name) == "dac" || std::string(name) == "adc";
    const BandEntry b = read_band_entry(r, *c, F, "mm2", per, converter);
    a.components.push_back({name, per, b.value, b.source, b.at_bits});
    hw.sources[F] = b.source;
  }
  return a;
}

AreaReport area_report(const Hardware& hw) {
  if (!hw.area) throw Error(hw.path + ": area: missing (the file gives no area figures; docs/energy.md, \"Area\")");
  AreaReport rep;
  rep.machine = hw.name;
  rep.channels = hw.channels;
  rep.modules = hw.architecture ? hw.architecture->modules : 1;
  const double n = hw.channels;
  for (const AreaComponent& c : hw.area->components) {
    AreaLine l{c.name, c.per, c.per == "channel" ? n : c.per == "weight" ? n * n : 1.0, 1.0, {}, c.source};
    if (c.at_bits > 0) {
      if (!hw.converters) throw Error(hw.path + ": area." + c.name + ".at_bits: the file has no converters section to give the bits");
      const int bits = c.name == "adc" ? hw.converters->adc_bits : hw.converters->dac_bits;
      l.scale = std::ldexp(1.0, bits - c.at_bits);
      if (bits != c.at_bits)
        l.source += " [scaled to " + std::to_string(bits) + " bits from the figure at " + std::to_string(c.at_bits) + ": x 2^" +
                    std::to_string(bits - c.at_bits) + ", the converter's unit array doubling per bit]";
    }
    l.mm2 = {c.mm2.min * l.count * l.scale, c.mm2.typ * l.count * l.scale, c.mm2.max * l.count * l.scale};
    rep.module_mm2.min += l.mm2.min;
    rep.module_mm2.typ += l.mm2.typ;
    rep.module_mm2.max += l.mm2.max;
    rep.lines.push_back(std::move(l));
  }
  const double m = rep.modules;
  rep.machine_mm2 = {rep.module_mm2.min * m, rep.module_mm2.typ * m, rep.module_mm2.max * m};
  rep.not_counted =
      "the free-space optics between the chips (fan-out and fan-in lenses, beam splitters and their spacing: a volume, not a chip "
      "area), packaging, power delivery and the wiring between modules";
  return rep;
}

}  // namespace aoc
