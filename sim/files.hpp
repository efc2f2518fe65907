// Writing outputs safely: everything is written to a temporary file next to the target, flushed to
// the disk, and renamed into place only when complete (then the directory is flushed too), so an
// interrupted or failed run never leaves a half-written file, and a finished one survives a crash.
#pragma once
#include <cstddef>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace aoc {

// ".NAME.PID.tmp" in the target's directory. Temporary files of the same target left by runs that
// died (a kill, a crash: their process is gone) are removed first.
std::filesystem::path temp_path_next_to(const std::string& path);

// Why writing `path` failed, from an errno value: "the disk is full", "its directory does not
// exist", "not writable (permissions)", or the system's text.
std::string write_failure(const std::string& path, int err);

// Flushes a finished temporary file to the disk, renames it onto `path` and flushes the directory;
// on failure removes it and throws aoc::Error.
void rename_into_place(const std::filesystem::path& tmp, const std::string& path);

// Flushes a directory's entries (a rename or an unlink in it) to the disk.
void sync_directory(const std::filesystem::path& dir);

void write_file_atomic(const std::string& path, const std::string& content);
void write_bytes_atomic(const std::string& path, const char* data, std::size_t size);

// Several outputs that belong together (tokens and their labels): every one written to its
// temporary file first, then all renamed into place; if any write fails none appears, and the
// files already at those paths are left as they were.
void write_files_atomic(const std::vector<std::pair<std::string, std::vector<char>>>& files);

}  // namespace aoc
