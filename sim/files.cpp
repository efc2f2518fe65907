#include "sim/files.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "sim/error.hpp"

namespace aoc {

namespace fs = std::filesystem;

namespace {

fs::path directory_of(const std::string& path) {
  const fs::path dir = fs::path(path).parent_path();
  return dir.empty() ? fs::path(".") : dir;
}

// Removes ".NAME.<pid>.tmp" files whose process is gone (not ours, kill(pid, 0) says no such process).
void remove_stale_temps(const fs::path& dir, const std::string& name) {
  const std::string prefix = "." + name + ".";
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string f = it->path().filename().string();
    if (f.size() <= prefix.size() + 4 || f.compare(0, prefix.size(), prefix) != 0 || f.compare(f.size() - 4, 4, ".tmp") != 0) continue;
    const std::string digits = f.substr(prefix.size(), f.size() - prefix.size() - 4);
    if (digits.empty() || digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(digits));
    if (pid == ::getpid() || pid <= 0 || ::kill(pid, 0) == 0 || errno != ESRCH) continue;
    std::error_code rm;
    fs::remove(it->path(), rm);
  }
}

// Flushes an open file or directory descriptor; false on failure (errno set).
bool sync_fd(int fd) { return ::fsync(fd) == 0 || errno == EINVAL; }  // EINVAL: a file system that cannot sync

}  // namespace

fs::path temp_path_next_to(const std::string& path) {
  const fs::path target(path);
  remove_stale_temps(directory_of(path), target.filename().string());
  std::string name = ".";  // built with += : GCC 12 warns falsely on "." + string
  name += target.filename().string();
  name += '.';
  name += std::to_string(::getpid());
  name += ".tmp";
  return target.parent_path() / name;
}

std::string write_failure(const std::string& path, int err) {
  std::error_code ec;
  switch (err) {
    case ENOSPC:
    case EDQUOT: return path + ": the disk is full (or the quota is used up)";
    case ENOENT: return path + ": cannot write: its directory " + directory_of(path).string() + " does not exist";
    case EACCES:
    case EPERM:
    case EROFS: return path + ": cannot write: its directory is not writable (" + std::strerror(err) + ")";
    default: return path + ": write failed (" + std::string(std::strerror(err)) + ")";
  }
}

void sync_directory(const fs::path& dir) {
  const int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;  // nothing to flush where the directory cannot be opened for reading
  const bool ok = sync_fd(fd);
  const int err = errno;
  ::close(fd);
  if (!ok) throw Error(dir.string() + ": cannot flush the directory to the disk (" + std::strerror(err) + ")");
}

namespace {
void place(const fs::path& tmp, const std::string& path);
}  // namespace

void rename_into_place(const fs::path& tmp, const std::string& path) {
  std::error_code ec;
  const int fd = ::open(tmp.c_str(), O_RDONLY | O_CLOEXEC);
  const bool synced = fd >= 0 && sync_fd(fd);
  const int err = errno;
  if (fd >= 0) ::close(fd);
  if (!synced) {
    fs::remove(tmp, ec);
    throw Error(write_failure(path, err));
  }
  place(tmp, path);
}

namespace {

// Renames a flushed temporary file onto `path` and flushes the directory; on failure removes it.
void place(const fs::path& tmp, const std::string& path) {
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    std::error_code rm;
    fs::remove(tmp, rm);
    if (fs::is_directory(path, rm)) throw Error(path + ": is a directory (give the output a file name)");
    throw Error(path + ": cannot put the finished output in place (" + ec.message() + ")");
  }
  sync_directory(directory_of(path));
}

// Writes and flushes `size` bytes to a new temporary file next to `path`; on failure removes it and
// throws aoc::Error saying why (a full disk in so many words).
fs::path write_temp(const std::string& path, const char* data, std::size_t size) {
  const fs::path tmp = temp_path_next_to(path);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Error(write_failure(path, errno));
  const auto fail = [&](int err) {
    ::close(fd);
    std::error_code ec;
    fs::remove(tmp, ec);
    throw Error(write_failure(path, err));
  };
  for (std::size_t done = 0; done < size;) {
    const ssize_t n = ::write(fd, data + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail(n < 0 ? errno : ENOSPC);
    done += static_cast<std::size_t>(n);
  }
  if (!sync_fd(fd)) fail(errno);
  if (::close(fd) != 0) {
    const int err = errno;
    std::error_code ec;
    fs::remove(tmp, ec);
    throw Error(write_failure(path, err));
  }
  return tmp;
}

}  // namespace

void write_bytes_atomic(const std::string& path, const char* data, std::size_t size) { place(write_temp(path, data, size), path); }

void write_file_atomic(const std::string& path, const std::string& content) { write_bytes_atomic(path, content.data(), content.size()); }

void write_files_atomic(const std::vector<std::pair<std::string, std::vector<char>>>& files) {
  std::vector<fs::path> temps;
  try {
    for (const auto& [path, bytes] : files) temps.push_back(write_temp(path, bytes.data(), bytes.size()));
  } catch (...) {
    std::error_code ec;
    for (const fs::path& t : temps) fs::remove(t, ec);
    throw;
  }
  for (std::size_t i = 0; i < files.size(); ++i) place(temps[i], files[i].first);
}

}  // namespace aoc
