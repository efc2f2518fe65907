// Writing results: to a temporary file next to the target, renamed into place only when complete,
// so an interrupted or failed run never leaves a half-written output.
#pragma once
#include <cstddef>
#include <string>

namespace aoc {

void write_file_atomic(const std::string& path, const std::string& content);

// FNV-1a 64-bit digest of raw bytes, printed as 16 hex digits: a short fingerprint of result
// arrays, so two runs can be compared bit for bit at a glance.
std::string digest_hex(const void* data, std::size_t bytes);

}  // namespace aoc
