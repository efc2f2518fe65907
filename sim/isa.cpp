#include "sim/isa.hpp"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include <atomic>
#include <cstdlib>
#include <fstream>

#include "sim/error.hpp"

namespace aoc::isa {

namespace {

constexpr int kUnset = -1;
std::atomic<int> in_use{kUnset};

Level from_environment() {
  const char* s = std::getenv("AOC_ISA");
  if (!s || !*s) return cpu();
  const auto l = parse(s);
  std::string all;
  for (Level c : compiled()) all += std::string(all.empty() ? "" : ", ") + name(c);
  if (!l) throw Error(std::string("AOC_ISA: unknown instruction set '") + s + "' (this binary has " + all + ")");
  if (!runs(*l)) throw Error(std::string("AOC_ISA: this CPU does not run ") + name(*l) + " (its best is " + name(cpu()) + ")");
  return *l;
}

}  // namespace

std::vector<Level> compiled() {
#if defined(__x86_64__)
  return {Level::X86_64, Level::X86_64_V3, Level::X86_64_V4};
#else
  return {Level::Generic};
#endif
}

bool runs(Level l) {
#if defined(__x86_64__)
  __builtin_cpu_init();
  switch (l) {
    case Level::X86_64: return true;
    case Level::X86_64_V3: return __builtin_cpu_supports("x86-64-v3");
    case Level::X86_64_V4: return __builtin_cpu_supports("x86-64-v4");
    case Level::Generic: return false;
  }
  return false;
#else
  return l == Level::Generic;
#endif
}

Level cpu() {
  const auto all = compiled();
  for (auto it = all.rbegin(); it != all.rend(); ++it)
    if (runs(*it)) return *it;
  return all.front();
}

Level kernels() {
  int l = in_use.load(std::memory_order_relaxed);
  if (l == kUnset) {
    int expected = kUnset;
    in_use.compare_exchange_strong(expected, static_cast<int>(from_environment()));
    l = in_use.load(std::memory_order_relaxed);
  }
  return static_cast<Level>(l);
}

void use(Level l) {
  if (!runs(l)) throw Error(std::string("isa: this CPU does not run ") + name(l));
  in_use.store(static_cast<int>(l), std::memory_order_relaxed);
}

const char* name(Level l) {
  switch (l) {
    case Level::X86_64: return "x86-64";
    case Level::X86_64_V3: return "x86-64-v3";
    case Level::X86_64_V4: return "x86-64-v4";
    case Level::Generic: return "generic";
  }
  return "?";
}

std::optional<Level> parse(std::string_view s) {
  for (Level l : compiled())
    if (s == name(l)) return l;
  return std::nullopt;
}

const char* build_target() {
#if defined(AOC_ARCH)
  return AOC_ARCH;
#else
  return "native";
#endif
}

std::string cpu_model() {
  // Linux's name for it first (what lscpu prints, and what the docs cite), else the CPUID brand.
  if (std::ifstream f("/proc/cpuinfo"); f) {
    for (std::string line; std::getline(f, line);)
      if (line.rfind("model name", 0) == 0) {
        const auto colon = line.find(':'), first = line.find_first_not_of(' ', colon + 1);
        if (colon != std::string::npos && first != std::string::npos) return line.substr(first);
      }
  }
#if defined(__x86_64__)
  unsigned regs[12] = {};
  unsigned top = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(0x80000000u, &top, &b, &c, &d) && top >= 0x80000004u) {
    for (unsigned i = 0; i < 3; ++i) __get_cpuid(0x80000002u + i, &regs[4 * i], &regs[4 * i + 1], &regs[4 * i + 2], &regs[4 * i + 3]);
    std::string s(reinterpret_cast<const char*>(regs), sizeof regs);
    s = s.substr(0, s.find('\0'));
    const auto first = s.find_first_not_of(' '), last = s.find_last_not_of(' ');
    if (first != std::string::npos) return s.substr(first, last - first + 1);
  }
#endif
  return "unknown";
}

std::string describe() {
  std::string all;
  for (Level c : compiled()) all += std::string(all.empty() ? "" : ", ") + name(c);
  return std::string("kernels ") + name(kernels()) + " (of " + all + "), the rest " + build_target();
}

}  // namespace aoc::isa
