// Files for tests: a temporary directory removed afterwards, whole-file reads,
// and whether a process runs (from /proc).
#pragma once

#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>

#include <stdlib.h>
#include <sys/types.h>

namespace cohort::test {

/// A fresh directory under /tmp, removed with everything in it on destruction.
class TempDir {
 public:
  explicit TempDir(const std::string& name = "cohort-test") {
    std::string pattern = "/tmp/" + name + "-XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp " + pattern);
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const noexcept { return path_; }

 private:
  std::filesystem::path path_;
};

/// The whole file, or "" when it cannot be read. A /proc file of a process
/// that exits while it is read fails in read(2) (ESRCH), which libstdc++'s
/// filebuf throws for whatever the stream's exception mask.
inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream file(path);
  try {
    return std::string(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
  } catch (const std::ios_base::failure&) {
    return "";
  }
}

/// Whether process `pid` runs something: a zombie does not, nor one gone
/// (reaped while its stat was read, which read_file gives as "").
inline bool process_runs(pid_t pid) {
  const std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  const std::size_t close = stat.rfind(')');
  return close != std::string::npos && stat.size() > close + 2 && stat[close + 2] != 'Z';
}

}  // namespace cohort::test
