#include "runtime/output.hpp"

#include <cstdint>
#include <cstdio>

namespace aoc {

std::string digest_hex(const void* data, std::size_t bytes) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < bytes; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ULL;
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

std::string numbers_text(const std::vector<double>& v, const char* if_empty) {
  if (v.empty()) return if_empty;
  std::string t;
  char b[32];
  for (double x : v) {
    std::snprintf(b, sizeof b, "%.17g", x);
    if (!t.empty()) t += ' ';
    t += b;
  }
  return t;
}

}  // namespace aoc
