#include "runtime/run/loop_settings.hpp"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>

#include "runtime/io/output.hpp"
#include "sim/error.hpp"

namespace aoc {

void check_after_programming(const std::optional<double>& us, bool noise) {
  if (!us) return;
  if (!(*us >= 0 && *us <= 1e15)) throw Error("after_programming_us: expected 0 to 1e15 microseconds, got " + numbers_text({*us}));
  if (!noise) throw Error("after_programming_us: places the noise on the clock after the programming, so it needs the noise on");
}

void check_zero_every(const std::optional<double>& us, const std::optional<double>& after_programming_us, int zero_reads, bool noise) {
  if (!us) return;
  if (!(*us > 0 && *us <= 1e15)) throw Error("zero_every_us: expected above 0 and at most 1e15 microseconds, got " + numbers_text({*us}));
  if (!noise) throw Error("zero_every_us: takes out the slow noise again and again, so it needs the noise on");
  if (!after_programming_us)
    throw Error("zero_every_us: the zeros sit on the clock from the programming's moment, so it needs after_programming_us (0: right after it)");
  if (zero_reads <= 0) throw Error("zero_every_us: each zero is zero_reads reads, so it needs zero_reads above 0");
}

void check_floor_patience(int steps) {
  if (steps < 0) throw Error("floor_patience: must be at least 0 (0: off), got " + std::to_string(steps));
}

void check_choice(const std::string& field, const std::string& v, std::initializer_list<const char*> allowed) {
  std::string list;
  for (const char* a : allowed) {
    if (v == a) return;
    list += (list.empty() ? "" : ", ") + std::string(a);
  }
  throw Error(field + ": expected one of " + list + ", got '" + v + "'");
}

void check_settings(const LoopSettings& s) {
  check_choice("mode", s.mode, {"default", "all-off", "ideal"});
  check_choice("rule", s.rule, {"twin", "relative", "fixed"});
  check_choice("precision", s.precision, {"f32", "f64"});
  if (s.max_iter < 1) throw Error("max_iter: must be at least 1, got " + std::to_string(s.max_iter));
  check_floor_patience(s.floor_patience);
  if (s.threads < 1) throw Error("threads: must be at least 1, got " + std::to_string(s.threads));
  if (s.zero_reads < 0 || s.zero_reads > (1 << 20)) throw Error("zero_reads: expected 0 to 1048576, got " + std::to_string(s.zero_reads));
  check_after_programming(s.after_programming_us, s.noise);
  check_zero_every(s.zero_every_us, s.after_programming_us, s.zero_reads, s.noise);
  if (s.first_sample < 0 || s.first_sample > (1 << 30)) throw Error("first_sample: must be from 0 to 2^30, got " + std::to_string(s.first_sample));
  if (!(s.tol > 0) || !std::isfinite(s.tol)) throw Error("tol: must be a positive finite number, got " + numbers_text({s.tol}));
  if (!(s.damping >= 1e-6 && s.damping <= 1)) throw Error("damping: must be from 1e-6 to 1, got " + numbers_text({s.damping}));
  if (s.alpha && !std::isfinite(*s.alpha)) throw Error("alpha: must be a finite number, got " + numbers_text({*s.alpha}));
}

Hardware load_machine(const LoopSettings& s) { return load_hardware(resolve_hardware_path(s.hw), s.set); }

CoreConfig loop_config(const LoopSettings& s, const Hardware& hw, const LoopCoefficients& given) {
  check_settings(s);
  CoreConfig cfg = s.mode == "default" ? CoreConfig::twin_defaults(hw)
                   : s.mode == "all-off" ? CoreConfig::twin_all_off(hw)
                                         : CoreConfig::ideal(s.alpha.value_or(0.5), 1.0);
  if (!given.alpha.empty()) cfg.alpha = given.alpha;
  if (!given.beta.empty()) cfg.beta = given.beta;
  if (given.gamma) cfg.gamma = given.gamma;
  if (s.alpha) cfg.alpha = {*s.alpha};
  if (!s.anneal.empty()) {
    AlphaSchedule& a = cfg.alpha_schedule;
    char kind[16] = {};
    int used = 0;
    if (std::sscanf(s.anneal.c_str(), "%15[a-z]:%lf:%lf:%d%n", kind, &a.start, &a.end, &a.iterations, &used) != 4 ||
        used != static_cast<int>(s.anneal.size()) || a.iterations < 1 ||
        (std::string(kind) != "linear" && std::string(kind) != "exp"))
      throw Error("anneal: expected linear:START:END:ITERS or exp:START:END:ITERS, got " + s.anneal);
    a.kind = std::string(kind) == "linear" ? AlphaSchedule::Kind::Linear : AlphaSchedule::Kind::Exponential;
  }
  return cfg;
}

LoopRunOptions run_options(const LoopSettings& s) {
  check_settings(s);
  LoopRunOptions r;
  r.f64 = s.precision == "f64";
  if (s.rule == "twin") r.solver = SolverOptions::twin(), r.solver.max_iter = s.max_iter, r.solver.tol = s.tol;
  else if (s.rule == "relative") r.solver = SolverOptions::relative(s.tol, s.max_iter, s.damping);
  else r.solver = SolverOptions::fixed(s.max_iter, s.tol);
  r.solver.trace = s.trace;
  r.solver.first_sample = s.first_sample;
  if (s.noise && s.rule != "fixed") r.solver.floor_patience = s.floor_patience;
  r.quantize = s.quantize;
  r.noise = s.noise;
  r.bandwidth = s.bandwidth;
  r.hardware_readout = s.hardware_readout;
  r.seed = s.seed;
  r.program_seed = s.program_seed;
  r.zero_reads = s.zero_reads;
  r.after_programming_us = s.after_programming_us;
  r.zero_every_us = s.zero_every_us;
  r.threads = s.threads;
  return r;
}

namespace {

template <class M>
void append_doubles(std::string& bytes, const M& m) {
  for (Eigen::Index i = 0; i < m.size(); ++i) {
    const double v = static_cast<double>(m.data()[i]);
    bytes.append(reinterpret_cast<const char*>(&v), sizeof v);
  }
}

}  // namespace

template <class S>
std::string loop_config_hash(const LoopSettings& s, const Hardware& hw, const CoreConfig& cfg, const LoopView<S>& p) {
  std::ifstream hf(hw.path, std::ios::binary);
  const std::string hw_bytes((std::istreambuf_iterator<char>(hf)), std::istreambuf_iterator<char>());
  std::ostringstream t;
  std::string overrides;
  for (const auto& v : s.set) overrides += " " + v;
  t << "aoc run config 1\nhardware " << hw.name << "\nset" << overrides << " " << digest_hex(hw_bytes.data(), hw_bytes.size()) << "\nmode " << s.mode
    << "\nalpha " << numbers_text(cfg.alpha, "none") << "\nbeta " << numbers_text(cfg.beta, "none") << "\nscale " << numbers_text({cfg.scale}, "")
    << "\ngamma " << (cfg.gamma ? numbers_text({*cfg.gamma}, "") : "none") << "\nrule " << s.rule << "\nmax_iter " << s.max_iter
    << "\ntol " << numbers_text({s.tol}, "") << "\ndamping " << numbers_text({s.damping}, "") << "\nprecision " << s.precision
    << "\nquantize " << s.quantize << "\nnoise " << s.noise << "\nbandwidth " << s.bandwidth << "\nseed " << s.seed << "\nfirst_sample " << s.first_sample
    << "\ntrace " << s.trace;
  if (s.noise && s.rule != "fixed") t << "\nfloor_patience " << s.floor_patience;  // noise-free digests as before
  if (s.program_seed) t << "\nprogram_seed " << *s.program_seed;  // digests without one as before
  if (s.noise && s.zero_reads != kZeroReads) t << "\nzero_reads " << s.zero_reads;  // likewise
  if (s.noise && s.after_programming_us) t << "\nafter_programming_us " << numbers_text({*s.after_programming_us}, "");  // likewise
  if (s.noise && s.zero_every_us) t << "\nzero_every_us " << numbers_text({*s.zero_every_us}, "");  // likewise
  t << "\nW " << p.W.rows() << " x " << p.W.cols() << "\nx " << p.x.rows() << " x " << p.x.cols() << "\n";
  std::string bytes = t.str();
  bytes.reserve(bytes.size() + sizeof(double) * static_cast<std::size_t>(p.W.size() + p.bias.size() + p.x.size() + p.z0.size()));
  append_doubles(bytes, p.W);
  append_doubles(bytes, p.bias);
  append_doubles(bytes, p.x);
  append_doubles(bytes, p.z0);
  return digest_hex(bytes.data(), bytes.size());
}

template std::string loop_config_hash<float>(const LoopSettings&, const Hardware&, const CoreConfig&, const LoopView<float>&);
template std::string loop_config_hash<double>(const LoopSettings&, const Hardware&, const CoreConfig&, const LoopView<double>&);

}  // namespace aoc
