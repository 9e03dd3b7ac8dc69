#pragma once
// Test support: a fresh folder per test, removed with everything in it.

#include <string>

namespace ddprun::testing {

class TempDir {
 public:
  TempDir();  // under $TMPDIR (or /tmp); aborts the test binary if it cannot be made
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }
  /// Writes `contents` to `name` in the folder with `mode`; returns the file's path.
  std::string Write(const std::string& name, const std::string& contents, int mode = 0644) const;

 private:
  std::string path_;
};

}  // namespace ddprun::testing
