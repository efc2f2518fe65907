#include "sim/files.hpp"

#include <unistd.h>

#include <fstream>

#include "sim/error.hpp"

namespace aoc {

namespace fs = std::filesystem;

fs::path temp_path_next_to(const std::string& path) {
  const fs::path target(path);
  std::string name = ".";  // built with += : GCC 12 warns falsely on "." + string
  name += target.filename().string();
  name += '.';
  name += std::to_string(::getpid());
  name += ".tmp";
  return target.parent_path() / name;
}

void rename_into_place(const fs::path& tmp, const std::string& path) {
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw Error(path + ": cannot rename the finished output into place");
  }
}

void write_file_atomic(const std::string& path, const std::string& content) {
  const fs::path tmp = temp_path_next_to(path);
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw Error(path + ": cannot write (directory missing or not writable)");
    out << content;
    out.flush();
    if (!out) {
      std::error_code ec;
      fs::remove(tmp, ec);
      throw Error(path + ": write failed");
    }
  }
  rename_into_place(tmp, path);
}

}  // namespace aoc
