#pragma once
// The token workers show the Store (the master's, or the one rank 0 serves in a one-node
// job), handed to them as a file that only this user can read (DDPRUN_STORE_TOKEN_FILE),
// not in their environment, which crash reports and /proc/PID/environ show.

#include <string>

#include "absl/status/statusor.h"

namespace ddprun {

class StoreTokenFile {
 public:
  /// Writes `token` (empty: a random one) to a new 0600 file in a new 0700 folder under
  /// $TMPDIR (or /tmp).
  static absl::StatusOr<StoreTokenFile> Create(const std::string& token);
  StoreTokenFile(StoreTokenFile&& other) noexcept;
  StoreTokenFile& operator=(StoreTokenFile&&) = delete;
  ~StoreTokenFile();  // removes the file and its folder

  const std::string& path() const { return path_; }
  const std::string& folder() const { return folder_; }

 private:
  StoreTokenFile(std::string folder, std::string path)
      : folder_(std::move(folder)), path_(std::move(path)) {}
  std::string folder_, path_;
};

}  // namespace ddprun
