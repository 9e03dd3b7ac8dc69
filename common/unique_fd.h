#pragma once
// A file descriptor that closes itself, and the few fd helpers the agent needs.

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ddprun {

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) Reset(std::exchange(other.fd_, -1));
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { Reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int Release() { return std::exchange(fd_, -1); }
  void Reset(int fd = -1);

 private:
  int fd_ = -1;
};

/// Marks every descriptor above standard error close-on-exec: what the agent inherited open
/// (a scheduler's socket, a shell's redirection) reaches no worker, as torchrun's Popen closes
/// them. Called once at start, before any thread.
void CloseInheritedOnExec();

/// Closes every descriptor from `lowest` up: close_range(2) where the kernel has it (5.9 on),
/// else each descriptor /proc lists (RHEL 8's 4.18). Not glibc's close_range(), which is 2.34's
/// and says only ENOSYS on older kernels.
void CloseDescriptorsFrom(int lowest);

struct Pipe {
  UniqueFd read_end;
  UniqueFd write_end;
};

/// A close-on-exec pipe; `nonblocking_read` makes the read end O_NONBLOCK.
absl::StatusOr<Pipe> MakePipe(bool nonblocking_read);

/// Writes all of `data`, retrying on EINTR, short writes, and EAGAIN (by polling).
absl::Status WriteAll(int fd, std::string_view data);

/// Opens `path` for appending, creating it (0644), close-on-exec; a symbolic link is refused.
absl::StatusOr<UniqueFd> OpenForAppend(const std::string& path);

/// mkdir -p with mode 0755.
absl::Status MakeDirs(const std::string& path);

/// The folders of `path`, which lies under `base`, made (0700) or opened one by one below
/// `base_fd` (an open folder `base`), never through a symbolic link: a folder renamed or
/// swapped for a link meanwhile cannot send anything elsewhere. `path` == `base`: nothing.
absl::Status MakeDirsBelow(int base_fd, const std::string& base, const std::string& path);

/// OpenForAppend for a file under `base` (see MakeDirsBelow), its folders already made.
absl::StatusOr<UniqueFd> OpenForAppendBelow(int base_fd, const std::string& base,
                                            const std::string& path);
/// The same for reading an existing file (never through a symbolic link).
absl::StatusOr<UniqueFd> OpenForReadBelow(int base_fd, const std::string& base,
                                          const std::string& path);
/// Removes the file `path` under `base`, reached as above; absent is not an error.
absl::Status UnlinkBelow(int base_fd, const std::string& base, const std::string& path);

/// rm -rf; errors other than "not there" are returned.
absl::Status RemoveTree(const std::string& path);

/// Removes the empty folders under `path` (and `path` itself if it ends up empty); files and
/// the folders holding them stay. Returns true when `path` is gone.
bool RemoveEmptyDirs(const std::string& path);

/// The names in folder `path` (not . and ..); empty if it cannot be read.
std::vector<std::string> ListDir(const std::string& path);

/// An absl::Status for a failed system call: "<what>: <strerror(err)>".
absl::Status ErrnoStatus(int err, absl::string_view what);

}  // namespace ddprun
