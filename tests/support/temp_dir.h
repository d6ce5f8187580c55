// A fresh temporary directory for a test (mkdtemp under /tmp), removed with everything in it
// when the object goes. Tests that open real database files put each file in one of these.
#ifndef RECAP_TESTS_SUPPORT_TEMP_DIR_H_
#define RECAP_TESTS_SUPPORT_TEMP_DIR_H_

#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>
#include <stdexcept>
#include <string>
#include <system_error>

namespace recap::testing {

class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "recap-test") {
    std::string tmpl = "/tmp/" + prefix + "-XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) {
      throw std::runtime_error("mkdtemp(" + tmpl + ") failed: " + std::strerror(errno));
    }
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const noexcept { return path_; }
  // The path of `name` inside the directory.
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// The names of the entries in `dir` (not its subfolders' entries): what a test that checks
// "no file left beside the database" compares.
inline std::set<std::string> NamesIn(const std::string& dir) {
  std::set<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    out.insert(e.path().filename().string());
  }
  return out;
}

}  // namespace recap::testing

#endif  // RECAP_TESTS_SUPPORT_TEMP_DIR_H_
