#include "compiler/safetensors.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/error.hpp"
#include "sim/files.hpp"
#include "sim/json_reader.hpp"

namespace aoc::ir {

namespace {

using json = nlohmann::json;

// The reference implementation refuses headers above 100 MB; so do we, before allocating one.
constexpr std::uint64_t kMaxHeader = 100'000'000;

enum class DT { F64, F32, F16, BF16, I64, I32 };
struct DTypeInfo {
  DT dt;
  const char* name;
  int bytes;
};
constexpr DTypeInfo kDTypes[] = {{DT::F64, "F64", 8}, {DT::F32, "F32", 4}, {DT::F16, "F16", 2},
                                 {DT::BF16, "BF16", 2}, {DT::I64, "I64", 8}, {DT::I32, "I32", 4}};

[[noreturn]] void fail(const std::string& file, const std::string& what) { throw Error(jsonr::one_line(file + ": " + what)); }

std::string quoted(const std::string& name) { return "tensor '" + name + "'"; }

std::string dims_text(const std::vector<std::int64_t>& s) {
  std::string t = "[";
  for (std::size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + "]";
}

// (appended piecewise: "[" + std::to_string(b) trips a GCC 12 -Wrestrict false positive)
std::string offsets_text(std::uint64_t b, std::uint64_t e) {
  std::string t = "[";
  t.append(std::to_string(b)).append(", ").append(std::to_string(e)).append("]");
  return t;
}

// Little-endian bytes to an unsigned integer, whatever the host's byte order.
template <int N>
std::uint64_t le(const unsigned char* p) {
  std::uint64_t v = 0;
  for (int i = N - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// IEEE half to double: every half is exactly a double (subnormals are m * 2^-24).
double from_f16(std::uint16_t h) {
  const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  double v;
  if (e == 0x1f) v = m ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  else if (e == 0) v = std::ldexp(static_cast<double>(m), -24);
  else v = std::ldexp(static_cast<double>(m + 1024), e - 25);
  return (h & 0x8000) ? -v : v;
}

// bfloat16 is the upper half of a float.
double from_bf16(std::uint16_t h) {
  const std::uint32_t bits = static_cast<std::uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

double convert(DT dt, const unsigned char* p, const std::string& file, const std::string& name, std::uint64_t index) {
  switch (dt) {
    case DT::F64: {
      const std::uint64_t b = le<8>(p);
      double d;
      std::memcpy(&d, &b, 8);
      return d;
    }
    case DT::F32: {
      const auto b = static_cast<std::uint32_t>(le<4>(p));
      float f;
      std::memcpy(&f, &b, 4);
      return f;
    }
    case DT::F16: return from_f16(static_cast<std::uint16_t>(le<2>(p)));
    case DT::BF16: return from_bf16(static_cast<std::uint16_t>(le<2>(p)));
    case DT::I32: return static_cast<double>(static_cast<std::int32_t>(static_cast<std::uint32_t>(le<4>(p))));
    case DT::I64: {
      const auto v = static_cast<std::int64_t>(le<8>(p));
      // beyond 2^53 a double would silently round the integer
      if (v > (std::int64_t{1} << 53) || v < -(std::int64_t{1} << 53))
        fail(file, quoted(name) + ": element " + std::to_string(index) + " = " + std::to_string(v) +
                       " is not exactly representable as a double");
      return static_cast<double>(v);
    }
  }
  return 0;
}

struct Entry {
  std::string name;
  DTypeInfo type = kDTypes[0];
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0, end = 0, count = 0;
};

std::uint64_t offset_value(const json& j, const std::string& file, const std::string& name) {
  if (!j.is_number_unsigned() && !(j.is_number_integer() && j.get<std::int64_t>() >= 0))
    fail(file, quoted(name) + ": data_offsets: expected two integers >= 0, got " + jsonr::one_line(j.dump()));
  return j.get<std::uint64_t>();
}

Entry parse_entry(const std::string& name, const json& v, const std::string& file) {
  if (!v.is_object()) fail(file, quoted(name) + ": expected an object {dtype, shape, data_offsets}");
  for (const char* key : {"dtype", "shape", "data_offsets"})
    if (!v.contains(key)) fail(file, quoted(name) + ": " + key + ": missing required field");
  Entry e;
  e.name = name;
  const json& dt = v.at("dtype");
  if (!dt.is_string()) fail(file, quoted(name) + ": dtype: expected a string, got " + jsonr::one_line(dt.dump()));
  const std::string dts = dt.get<std::string>();
  const auto* info = std::find_if(std::begin(kDTypes), std::end(kDTypes), [&](const DTypeInfo& d) { return dts == d.name; });
  if (info == std::end(kDTypes)) fail(file, quoted(name) + ": dtype \"" + dts + "\" is not one of F64, F32, F16, BF16, I64, I32");
  e.type = *info;

  const json& sh = v.at("shape");
  if (!sh.is_array()) fail(file, quoted(name) + ": shape: expected an array of integers >= 0");
  // Sizes capped so that the element count cannot overflow: 2^40 per dim, 2^50 in all.
  std::uint64_t count = 1;
  for (const json& d : sh) {
    if (!(d.is_number_unsigned() || (d.is_number_integer() && d.get<std::int64_t>() >= 0)) || d.get<std::uint64_t>() > (1ULL << 40))
      fail(file, quoted(name) + ": shape: expected integers in [0, 2^40], got " + jsonr::one_line(sh.dump()));
    e.shape.push_back(d.get<std::int64_t>());
    count = count == 0 || e.shape.back() == 0 ? 0 : count * static_cast<std::uint64_t>(e.shape.back());
    if (count > (1ULL << 50)) fail(file, quoted(name) + ": shape " + dims_text(e.shape) + " has more than 2^50 elements");
  }
  e.count = count;

  const json& off = v.at("data_offsets");
  if (!off.is_array() || off.size() != 2)
    fail(file, quoted(name) + ": data_offsets: expected two integers >= 0, got " + jsonr::one_line(off.dump()));
  e.begin = offset_value(off[0], file, name);
  e.end = offset_value(off[1], file, name);
  if (e.end < e.begin) fail(file, quoted(name) + ": data_offsets " + offsets_text(e.begin, e.end) + " end before they begin");
  return e;
}

struct File {
  WeightStore tensors;
  std::map<std::string, std::string> metadata;
};

File read_file(const std::string& path) {
  std::error_code ec;
  const std::uint64_t size = std::filesystem::file_size(path, ec);
  std::ifstream in(path, std::ios::binary);
  if (ec || !in) fail(path, "cannot open the file");
  if (size < 8) fail(path, "truncated: " + std::to_string(size) + " bytes, less than the 8-byte header length");
  unsigned char len_bytes[8];
  in.read(reinterpret_cast<char*>(len_bytes), 8);
  const std::uint64_t n = le<8>(len_bytes);
  if (n > size - 8)
    fail(path, "header length " + std::to_string(n) + " runs past the end of the " + std::to_string(size) + "-byte file (truncated?)");
  if (n > kMaxHeader) fail(path, "header length " + std::to_string(n) + " is more than the format's 100000000 bytes");
  std::string text(n, '\0');
  in.read(text.data(), static_cast<std::streamsize>(n));
  if (!in) fail(path, "cannot read the " + std::to_string(n) + "-byte header");
  const json header = jsonr::parse_text<json>(text, path + ": header");
  if (!header.is_object()) fail(path, "header: expected a JSON object of tensors");

  File out;
  std::vector<Entry> entries;
  for (const auto& [name, v] : header.items()) {
    if (name == "__metadata__") {
      if (!v.is_object()) fail(path, "__metadata__: expected an object of strings");
      for (const auto& [k, s] : v.items()) {
        if (!s.is_string()) fail(path, "__metadata__." + k + ": expected a string, got " + jsonr::one_line(s.dump()));
        out.metadata[k] = s.get<std::string>();
      }
      continue;
    }
    entries.push_back(parse_entry(name, v, path));
  }

  // Every tensor inside the buffer, of exactly its shape's size; the tensors tile the buffer.
  const std::uint64_t buffer = size - 8 - n;
  for (const Entry& e : entries) {
    if (e.end > buffer)
      fail(path, quoted(e.name) + ": data_offsets " + offsets_text(e.begin, e.end) + " end past the " + std::to_string(buffer) +
                     "-byte buffer");
    const std::uint64_t need = e.count * static_cast<std::uint64_t>(e.type.bytes);
    if (e.end - e.begin != need)
      fail(path, quoted(e.name) + ": data_offsets " + offsets_text(e.begin, e.end) + " hold " + std::to_string(e.end - e.begin) +
                     " bytes, shape " + dims_text(e.shape) + " of " + e.type.name + " needs " + std::to_string(need));
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  std::uint64_t pos = 0;
  const Entry* prev = nullptr;
  for (const Entry& e : entries) {
    if (e.begin < pos)
      fail(path, quoted(e.name) + ": data_offsets " + offsets_text(e.begin, e.end) + " overlap those of " + quoted(prev->name) + ", " +
                     offsets_text(prev->begin, prev->end));
    if (e.begin > pos) fail(path, "buffer bytes [" + std::to_string(pos) + ", " + std::to_string(e.begin) + ") belong to no tensor");
    pos = e.end;
    prev = &e;
  }
  if (pos != buffer)
    fail(path, "buffer bytes [" + std::to_string(pos) + ", " + std::to_string(buffer) + ") of " + std::to_string(buffer) +
                   " belong to no tensor");

  // The data, in file order and in chunks (a large tensor is not held twice in bytes).
  std::vector<unsigned char> chunk;
  for (const Entry& e : entries) {
    Tensor& t = out.tensors[e.name];
    t.shape = e.shape;
    t.data.resize(static_cast<std::size_t>(e.count));
    in.seekg(static_cast<std::streamoff>(8 + n + e.begin));
    const std::uint64_t per_chunk = 1 << 20;
    for (std::uint64_t first = 0; first < e.count; first += per_chunk) {
      const std::uint64_t k = std::min(per_chunk, e.count - first);
      chunk.resize(static_cast<std::size_t>(k * static_cast<std::uint64_t>(e.type.bytes)));
      in.read(reinterpret_cast<char*>(chunk.data()), static_cast<std::streamsize>(chunk.size()));
      if (!in) fail(path, quoted(e.name) + ": truncated while reading its data");
      for (std::uint64_t i = 0; i < k; ++i) {
        const double v = convert(e.type.dt, chunk.data() + i * static_cast<std::uint64_t>(e.type.bytes), path, e.name, first + i);
        if (!std::isfinite(v))
          fail(path, quoted(e.name) + ": element " + std::to_string(first + i) + " is " + (std::isnan(v) ? "NaN" : "infinite"));
        t.data[static_cast<std::size_t>(first + i)] = v;
      }
    }
  }
  return out;
}

// A sharded checkpoint: {"metadata": {...}, "weight_map": {tensor: shard file next to the index}}.
Checkpoint read_index(const std::string& path) {
  const json j = jsonr::parse_file<json>(path);
  if (!j.is_object() || !j.contains("weight_map") || !j.at("weight_map").is_object())
    fail(path, "weight_map: missing required field (a sharded checkpoint's index maps each tensor to its shard)");
  Checkpoint c;
  c.path = path;
  if (j.contains("metadata") && j.at("metadata").is_object())
    for (const auto& [k, v] : j.at("metadata").items()) c.metadata[k] = v.is_string() ? v.get<std::string>() : v.dump();

  std::map<std::string, std::vector<std::string>> by_shard;  // shard -> the tensors the index puts there
  for (const auto& [name, shard] : j.at("weight_map").items()) {
    if (!shard.is_string() || shard.get<std::string>().empty())
      fail(path, "weight_map." + name + ": expected a shard file name, got " + jsonr::one_line(shard.dump()));
    by_shard[shard.get<std::string>()].push_back(name);
  }
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  std::map<std::string, std::string> shard_of;
  for (const auto& [shard, names] : by_shard) {
    const std::string shard_path = (dir / shard).string();
    File f = read_file(shard_path);
    for (const std::string& name : names)
      if (!f.tensors.count(name)) fail(path, "weight_map." + name + ": " + quoted(name) + " is not in " + shard_path);
    for (auto& [name, t] : f.tensors) {
      if (const auto it = shard_of.find(name); it != shard_of.end())
        fail(path, quoted(name) + ": in two shards, " + it->second + " and " + shard_path);
      shard_of[name] = shard_path;
      c.tensors[name] = std::move(t);
    }
    for (auto& [k, v] : f.metadata) c.metadata.emplace(k, v);
  }
  return c;
}

}  // namespace

WeightsFormat weights_format(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, "cannot open the file");
  unsigned char b[9] = {};
  in.read(reinterpret_cast<char*>(b), sizeof b);
  const auto got = static_cast<std::size_t>(in.gcount());
  static const unsigned char hdf5[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
  if (got >= 8 && std::memcmp(b, hdf5, 8) == 0) return WeightsFormat::Hdf5;
  // A safetensors header is JSON from byte 8 on, so byte 8 is its '{'; a file too short to tell is
  // left to the safetensors reader, whose errors say what is missing.
  if (got < 9 || b[8] == '{') {
    // JSON text read as the 8-byte header length is far larger than the file: an index
    std::uint64_t header = 0;
    for (int k = 7; k >= 0; --k) header = header << 8 | b[k];
    std::error_code ec;
    const auto size = std::filesystem::file_size(path, ec);
    if (b[0] != '{' || ec || header <= size) return WeightsFormat::Safetensors;
  }
  std::size_t i = 0;
  while (i < got && std::isspace(b[i])) ++i;
  if (i < got && b[i] == '{') return WeightsFormat::SafetensorsIndex;
  fail(path, "not a weights file: neither HDF5 (an aoc weights.h5) nor safetensors (a checkpoint or its index .json)");
}

Checkpoint read_safetensors(const std::string& path) {
  if (weights_format(path) == WeightsFormat::SafetensorsIndex) return read_index(path);
  File f = read_file(path);
  return {path, std::move(f.tensors), std::move(f.metadata)};
}

void write_safetensors(const std::string& path, const WeightStore& store, SafetensorsDType dtype,
                       const std::map<std::string, std::string>& metadata) {
  const bool f64 = dtype == SafetensorsDType::F64;
  const std::uint64_t bytes = f64 ? 8 : 4;
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::uint64_t offset = 0;
  for (const auto& [name, t] : store) {
    if (static_cast<std::int64_t>(t.data.size()) != t.size())
      fail(path, quoted(name) + ": shape " + dims_text(t.shape) + " has " + std::to_string(t.size()) + " elements, the data " +
                     std::to_string(t.data.size()));
    const std::uint64_t end = offset + t.data.size() * bytes;
    header[name] = {{"dtype", f64 ? "F64" : "F32"}, {"shape", t.shape}, {"data_offsets", {offset, end}}};
    offset = end;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the data 8-byte aligned, as the reference writer does

  // Values checked before anything is written, so a bad one leaves no file behind.
  for (const auto& [name, t] : store)
    for (std::size_t i = 0; i < t.data.size(); ++i) {
      const double v = t.data[i];
      if (!std::isfinite(v) || (!f64 && std::fabs(v) > std::numeric_limits<float>::max()))
        fail(path, quoted(name) + ": element " + std::to_string(i) + " = " + jsonr::num(v) + " cannot be stored as " +
                       (f64 ? "F64" : "F32"));
    }
  const auto tmp = temp_path_next_to(path);
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw Error(write_failure(path, errno));
    std::vector<unsigned char> buf;
    auto put = [&](std::uint64_t v, std::uint64_t n) {
      for (std::uint64_t i = 0; i < n; ++i) buf.push_back(static_cast<unsigned char>(v >> (8 * i)));
    };
    auto flush = [&] {
      out.write(reinterpret_cast<const char*>(buf.data()), static_cast<std::streamsize>(buf.size()));
      buf.clear();
    };
    put(text.size(), 8);
    buf.insert(buf.end(), text.begin(), text.end());
    flush();
    for (const auto& [name, t] : store) {
      for (const double v : t.data) {
        if (f64) {
          std::uint64_t b;
          std::memcpy(&b, &v, 8);
          put(b, 8);
        } else {
          const auto f = static_cast<float>(v);
          std::uint32_t b;
          std::memcpy(&b, &f, 4);
          put(b, 4);
        }
      }
      flush();
    }
    out.flush();
    if (!out) {
      const int err = errno;
      out.close();
      std::error_code ec;
      std::filesystem::remove(tmp, ec);
      throw Error(write_failure(path, err ? err : ENOSPC));
    }
  }
  rename_into_place(tmp, path);
}

}  // namespace aoc::ir
