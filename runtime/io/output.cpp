#include "runtime/io/output.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "sim/error.hpp"

namespace aoc {

namespace {

// Whether two names are one file: the same inode where both exist, else the same normalized path.
bool same_file(const std::string& a, const std::string& b) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(a, ec) && fs::exists(b, ec)) return fs::equivalent(a, b, ec);
  return fs::weakly_canonical(a, ec) == fs::weakly_canonical(b, ec);
}

}  // namespace

void check_outputs(const std::vector<NamedPath>& outputs, const std::vector<NamedPath>& inputs) {
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const NamedPath& o = outputs[i];
    if (o.path.empty()) continue;
    for (const NamedPath& in : inputs)
      if (!in.path.empty() && same_file(o.path, in.path))
        throw Error(o.flag + ": " + o.path + " is also " + in.flag + " (" + in.path + "), which this command reads; write the output elsewhere");
    for (std::size_t k = 0; k < i; ++k)
      if (!outputs[k].path.empty() && same_file(o.path, outputs[k].path))
        throw Error(o.flag + ": " + o.path + " is also " + outputs[k].flag + "; give the two outputs different files");
  }
}

namespace {

constexpr std::uint64_t kFnvBasis = 0xcbf29ce484222325ULL;

std::uint64_t fnv1a(std::uint64_t h, const void* data, std::size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < bytes; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ULL;
  }
  return h;
}

std::string hex(std::uint64_t h) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

}  // namespace

std::string digest_hex(const void* data, std::size_t bytes) { return hex(fnv1a(kFnvBasis, data, bytes)); }

// A file's bytes as little-endian 64-bit words, word i into lane i mod 4 by h = (h ^ w) * p, then
// h ^= h >> 29 (so that a word's high bits reach the low ones); a last partial word zero-padded; the
// lanes and the byte count then folded by FNV-1a. Four independent chains of word steps: programs of
// GBs are digested at the speed they are read (FNV-1a on bytes is one dependent multiply a byte).
std::string file_digest(const std::string& path) {
  constexpr std::uint64_t kPrime = 0x100000001b3ULL;
  std::ifstream f(path, std::ios::binary);
  std::vector<char> buf(std::size_t(1) << 20);  // a multiple of 32 bytes: whole rounds of the 4 lanes
  std::uint64_t lane[4] = {kFnvBasis, kFnvBasis ^ 1, kFnvBasis ^ 2, kFnvBasis ^ 3};
  std::uint64_t total = 0;
  const auto step = [](std::uint64_t h, std::uint64_t w) {
    h = (h ^ w) * kPrime;
    return h ^ (h >> 29);
  };
  while (f) {
    f.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    const std::size_t n = static_cast<std::size_t>(f.gcount());
    total += n;
    std::size_t i = 0;
    for (; i + 32 <= n; i += 32) {
      std::uint64_t w[4];
      std::memcpy(w, buf.data() + i, 32);
      for (int l = 0; l < 4; ++l) lane[l] = step(lane[l], w[l]);
    }
    for (int l = 0; i < n; ++l, i += 8) {  // the file's last, partial round
      std::uint64_t w = 0;
      std::memcpy(&w, buf.data() + i, std::min<std::size_t>(8, n - i));
      lane[l] = step(lane[l], w);
    }
  }
  std::uint64_t h = fnv1a(kFnvBasis, lane, sizeof lane);
  return hex(fnv1a(h, &total, sizeof total));
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

std::string si(double v, const char* unit) {
  static const char* const prefix[] = {"a", "f", "p", "n", "u", "m", "", "k", "M", "G", "T", "P"};
  char buf[64];
  if (v == 0 || !std::isfinite(v)) {
    std::snprintf(buf, sizeof buf, "%g %s", v, unit);
    return buf;
  }
  int e = static_cast<int>(std::floor(std::log10(std::fabs(v)) / 3));
  e = std::clamp(e, -6, 5);
  std::snprintf(buf, sizeof buf, "%.3g %s%s", v / std::pow(10.0, 3 * e), prefix[e + 6], unit);
  return buf;
}

}  // namespace aoc
