// Outputs of the commands: atomic writes (sim/files.hpp) and digests of result arrays.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "sim/files.hpp"

namespace aoc {

// FNV-1a 64-bit digest of raw bytes, printed as 16 hex digits: a short fingerprint of result
// arrays, so two runs can be compared bit for bit at a glance.
std::string digest_hex(const void* data, std::size_t bytes);
// A 64-bit digest of a file's bytes, 16 hex digits, at the speed the file is read (program files run
// to gigabytes): FNV-1a's step on 64-bit words in four interleaved lanes, folded (runtime/io/output.cpp).
// What program runs, checks and bench cells record as the config hash of the files they read.
std::string file_digest(const std::string& path);

// Numbers as text, space-separated, every digit kept (%.17g); `if_empty` when there are none.
std::string numbers_text(const std::vector<double>& v, const char* if_empty = "");

// "1.23 us", "306 ns", "0 J": three significant digits with an SI prefix (u for micro).
std::string si(double v, const char* unit);

// A file a command reads or writes, by the flag that names it ("-o", "the graph").
struct NamedPath {
  std::string flag, path;
};
// Refuses, before anything runs, a command whose outputs would replace one of its inputs or each
// other (the same file by any name: a link, ./x, an absolute path). Empty paths are not given.
//   "-o: m.h5 is also the program read (PROGRAM); write the output elsewhere"
void check_outputs(const std::vector<NamedPath>& outputs, const std::vector<NamedPath>& inputs);

}  // namespace aoc
