#include "runtime/output.hpp"

#include <cstdint>
#include <cstdio>
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

std::string file_digest(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::vector<char> buf(std::size_t(1) << 20);
  std::uint64_t h = kFnvBasis;
  while (f) {
    f.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    h = fnv1a(h, buf.data(), static_cast<std::size_t>(f.gcount()));
  }
  return hex(h);
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
