// Writing outputs safely: everything is written to a temporary file next to the target and renamed
// into place only when complete, so an interrupted or failed run never leaves a half-written file.
#pragma once
#include <filesystem>
#include <string>

namespace aoc {

// ".NAME.PID.tmp" in the target's directory.
std::filesystem::path temp_path_next_to(const std::string& path);

// Renames a finished temporary file onto `path`; on failure removes it and throws aoc::Error.
void rename_into_place(const std::filesystem::path& tmp, const std::string& path);

void write_file_atomic(const std::string& path, const std::string& content);

}  // namespace aoc
