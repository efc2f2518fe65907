#include "runtime/run/program_settings.hpp"

#include "runtime/run/loop_settings.hpp"
#include "sim/error.hpp"

namespace aoc {

const char* const kRunTimeSet = "noise.*, timing.*, converters.dac_bits, converters.adc_bits";

void check_settings(const ProgramSettings& s) {
  check_choice("sequence", s.sequence, {"simultaneous", "sequential"});
  check_choice("precision", s.precision, {"f32", "f64"});
  check_choice("light_map", s.light_map, {"auto", "f32", "f16"});
  if (s.threads < 1) throw Error("threads: must be at least 1, got " + std::to_string(s.threads));
  if (!(s.write_verify >= 0 && s.write_verify <= 1)) throw Error("write_verify: expected a fraction from 0 to 1");
  if (s.write_verify > 0 && !s.noise) throw Error("write_verify: needs the machine's noise (the SLM's fixed pattern it verifies is a noise source)");
  if (s.verify_rounds < 1 || s.verify_rounds > 64) throw Error("verify_rounds: expected 1 to 64, got " + std::to_string(s.verify_rounds));
  if (s.zero_reads < 0 || s.zero_reads > (1 << 20)) throw Error("zero_reads: expected 0 to 1048576, got " + std::to_string(s.zero_reads));
  check_after_programming(s.after_programming_us, s.noise);
  check_zero_every(s.zero_every_us, s.after_programming_us, s.zero_reads, s.noise);
  check_floor_patience(s.floor_patience);
}

BackendOptions backend_options(const ProgramSettings& f) {
  check_settings(f);
  BackendOptions o;
  o.threads = f.threads;
  o.seed = f.seed;
  o.program_seed = f.program_seed;
  o.verify_tolerance = f.write_verify, o.verify_rounds = f.verify_rounds, o.zero_reads = f.zero_reads;
  o.after_programming_us = f.after_programming_us;
  o.zero_every_us = f.zero_every_us;
  o.floor_patience = f.floor_patience;
  o.noise = f.noise;
  o.quantize = f.quantize;
  o.optics = !f.ideal_optics;
  o.f64 = f.precision == "f64";
  o.light_map = f.light_map == "f16" ? LightMap::F16 : f.light_map == "f32" ? LightMap::F32 : LightMap::Auto;
  o.trace = f.trace;
  o.mode = f.sequence == "sequential" ? ir::Mode::Sequential : ir::Mode::Simultaneous;
  return o;
}

namespace {

bool under(const std::string& path, const std::string& prefix) {
  return path == prefix || path.rfind(prefix + ".", 0) == 0;
}

// Why `path` (section.field) cannot change at run time, and what to do instead; "" when it can.
std::string not_at_run_time(const std::string& path, const std::string& o) {
  if (under(path, "noise") || under(path, "timing") || under(path, "converters.dac_bits") || under(path, "converters.adc_bits")) return "";
  const std::string recompile = "; recompile with aoc compile ... --set " + o;
  if (under(path, "converters.slm_bits")) return "compiled into the program (its SLM codes)" + recompile;
  if (under(path, "converters"))
    return "compiled into the program (the ranges of its DAC and ADC conversions, which aoc compile --calibrate sets)" + recompile;
  if (under(path, "architecture")) return "compiled into the program (where each op runs, its tiles on the modules)" + recompile;
  if (under(path, "channels")) return "compiled into the program (its tiles)" + recompile;
  if (under(path, "energy")) return "not used by a run (the energy model: aoc estimate PROG --set " + o + ")";
  if (under(path, "calibration") || under(path, "defaults") || under(path, "unused"))
    return "the machine's measured calibration, fixed for the machine the program was compiled for (aoc compile --hw FILE)";
  return std::string("not a run-time setting (at run time: ") + kRunTimeSet + "; the rest: aoc compile --set)";
}

}  // namespace

Hardware program_hardware(const ir::Program& p, const std::vector<std::string>& run_set, const std::string& cmd) {
  for (const auto& o : run_set) {
    const std::string why = not_at_run_time(o.substr(0, o.find('=')), o);
    if (!why.empty()) throw Error(cmd + ": --set " + o + ": " + why);
  }
  std::vector<std::string> all = p.target.overrides;  // later overrides win
  all.insert(all.end(), run_set.begin(), run_set.end());
  return load_hardware(resolve_hardware_path(p.target.hardware_path), all);
}

}  // namespace aoc
