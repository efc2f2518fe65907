// Which instruction set the hot kernels run on. The kernels (the optical tile's products,
// sim/kernels.hpp; the reference's dot products, compiler/products.cpp) are compiled once per x86-64
// level in every build, each copy in a namespace of its own, and chosen when the process starts:
// the best level the CPU runs, or the one AOC_ISA names (a lower one: to compare, or to match
// another machine). Every level gives the same bits (docs/architecture.md, "Instruction sets"); the
// rest of the code is compiled for the build's target (AOC_ARCH: native, or x86-64-v3 portable).
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace aoc::isa {

enum class Level { X86_64 = 1, X86_64_V3 = 3, X86_64_V4 = 4, Generic = 0 };  // Generic: not x86-64, one copy

std::vector<Level> compiled();  // the kernels' copies in this binary, lowest first
Level cpu();                    // the best of them this CPU runs
Level kernels();                // the one in use: AOC_ISA's, else cpu(); fixed at the first call
const char* name(Level);        // "x86-64", "x86-64-v3", "x86-64-v4", "generic"
std::optional<Level> parse(std::string_view s);
bool runs(Level l);             // this CPU runs level l's copy
// Switches the kernels to level l (tests compare the copies); an error where the CPU cannot run it.
void use(Level l);
const char* build_target();     // what the rest of the binary was compiled for (AOC_ARCH): "native", "x86-64-v3", ...
std::string describe();         // one line: the kernels' level, the copies, the build's target
// The CPU's model name (Linux's /proc/cpuinfo, as lscpu prints it; else the CPUID brand string;
// "unknown" where neither gives one): figures from two machines are never compared as one.
std::string cpu_model();

}  // namespace aoc::isa

// Calls NS::CALL in the kernels' namespace for the level in use (x86_64, x86_64_v3, x86_64_v4).
#if defined(__x86_64__)
#define AOC_ISA_DISPATCH(CALL)                                    \
  switch (::aoc::isa::kernels()) {                                \
    case ::aoc::isa::Level::X86_64_V4: return x86_64_v4::CALL;    \
    case ::aoc::isa::Level::X86_64_V3: return x86_64_v3::CALL;    \
    default: return x86_64::CALL;                                 \
  }
#define AOC_ISA_FOR_EACH(M) M(x86_64) M(x86_64_v3) M(x86_64_v4)
#else
#define AOC_ISA_DISPATCH(CALL) return generic::CALL;
#define AOC_ISA_FOR_EACH(M) M(generic)
#endif
