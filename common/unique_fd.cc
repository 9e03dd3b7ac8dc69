#include "common/unique_fd.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace ddprun {

void UniqueFd::Reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

namespace {

constexpr long kCloseRange = 436;  // the same number on x86_64 and aarch64

// Calls `act` with each open descriptor from `lowest` up, as /proc lists them.
template <typename Act>
void ForEachDescriptorFrom(int lowest, Act act) {
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return;
  while (const dirent* entry = ::readdir(dir)) {
    const int fd = atoi(entry->d_name);
    if (fd >= lowest && fd != ::dirfd(dir)) act(fd);
  }
  ::closedir(dir);
}

}  // namespace

void CloseInheritedOnExec() {
  // close_range(2) with CLOSE_RANGE_CLOEXEC, Linux 5.11 on; on older kernels (RHEL 8's 4.18)
  // each descriptor /proc lists.
  constexpr unsigned kCloseRangeCloexec = 1U << 2;
  if (::syscall(kCloseRange, 3U, ~0U, kCloseRangeCloexec) == 0) return;
  ForEachDescriptorFrom(3, [](int fd) { ::fcntl(fd, F_SETFD, FD_CLOEXEC); });
}

void CloseDescriptorsFrom(int lowest) {
  if (::syscall(kCloseRange, static_cast<unsigned>(lowest), ~0U, 0U) == 0) return;
  ForEachDescriptorFrom(lowest, [](int fd) { ::close(fd); });
}

absl::Status ErrnoStatus(int err, absl::string_view what) {
  const std::string message = absl::StrCat(what, ": ", strerror(err));
  switch (err) {
    case ENOENT:
      return absl::NotFoundError(message);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(message);
    case EEXIST:
      return absl::AlreadyExistsError(message);
    default:
      return absl::InternalError(message);
  }
}

absl::StatusOr<Pipe> MakePipe(bool nonblocking_read) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return ErrnoStatus(errno, "pipe2");
  Pipe pipe{UniqueFd(fds[0]), UniqueFd(fds[1])};
  if (nonblocking_read) {
    const int flags = ::fcntl(fds[0], F_GETFL);
    if (::fcntl(fds[0], F_SETFL, flags | O_NONBLOCK) != 0) return ErrnoStatus(errno, "fcntl");
  }
  return pipe;
}

absl::Status WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n >= 0) {
      data.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN) {  // someone made a shared terminal non-blocking: wait, lose nothing
      pollfd pfd{fd, POLLOUT, 0};
      ::poll(&pfd, 1, -1);
      continue;
    }
    return ErrnoStatus(errno, "write");
  }
  return absl::OkStatus();
}

absl::StatusOr<UniqueFd> OpenForAppend(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0 && errno == ELOOP) {
    return absl::InvalidArgumentError(
        absl::StrCat(path,
                     " is a symbolic link: give the file itself (whoever could plant "
                     "the link would choose where this writes)"));
  }
  if (fd < 0) return ErrnoStatus(errno, absl::StrCat("cannot open ", path));
  return UniqueFd(fd);
}

absl::Status MakeDirs(const std::string& path) {
  for (size_t pos = 1; pos <= path.size(); ++pos) {
    if (pos != path.size() && path[pos] != '/') continue;
    const std::string prefix = path.substr(0, pos);
    if (::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) {
      return ErrnoStatus(errno, absl::StrCat("cannot create directory ", prefix));
    }
  }
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(path, " exists and is not a directory"));
  }
  return absl::OkStatus();
}

namespace {

// The components of `path` after `base` ("a/b/c" of base + "/a/b/c"), or an error.
absl::StatusOr<std::vector<std::string>> ComponentsBelow(const std::string& base,
                                                         const std::string& path) {
  if (path == base) return std::vector<std::string>{};
  if (path.size() <= base.size() + 1 || path.compare(0, base.size(), base) != 0 ||
      path[base.size()] != '/') {
    return absl::InvalidArgumentError(absl::StrCat(path, " is not under ", base));
  }
  std::vector<std::string> parts =
      absl::StrSplit(path.substr(base.size() + 1), '/', absl::SkipEmpty());
  for (const std::string& part : parts) {
    if (part == "." || part == "..") {
      return absl::InvalidArgumentError(absl::StrCat(path, " leaves ", base));
    }
  }
  return parts;
}

// Opens folder `name` in `dir`, making it (0700) when `make` and it is absent; never
// through a symbolic link.
absl::StatusOr<UniqueFd> OpenDirBelow(int dir, const std::string& name, bool make,
                                      const std::string& shown) {
  if (make && ::mkdirat(dir, name.c_str(), 0700) != 0 && errno != EEXIST) {
    return ErrnoStatus(errno, absl::StrCat("cannot create directory ", shown));
  }
  UniqueFd fd(::openat(dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid()) {
    return ErrnoStatus(errno, absl::StrCat("cannot open directory ", shown,
                                           errno == ELOOP || errno == ENOTDIR
                                               ? " (it is a symbolic link or not a folder)"
                                               : ""));
  }
  return fd;
}

// The folder that holds `path` (under `base`), opened below `base_fd` never through a
// symbolic link, and the file's name in it.
struct ParentBelow {
  UniqueFd fd;  // invalid: `base_fd` itself
  std::string name;
  int dir(int base_fd) const { return fd.valid() ? fd.get() : base_fd; }
};

absl::StatusOr<ParentBelow> OpenParentBelow(int base_fd, const std::string& base,
                                            const std::string& path) {
  absl::StatusOr<std::vector<std::string>> parts = ComponentsBelow(base, path);
  if (!parts.ok()) return parts.status();
  if (parts->empty()) return absl::InvalidArgumentError(absl::StrCat(path, " is a folder"));
  ParentBelow parent;
  std::string shown = base;
  for (size_t i = 0; i + 1 < parts->size(); ++i) {
    shown += "/" + (*parts)[i];
    absl::StatusOr<UniqueFd> next =
        OpenDirBelow(parent.dir(base_fd), (*parts)[i], /*make=*/false, shown);
    if (!next.ok()) return next.status();
    parent.fd = std::move(*next);
  }
  parent.name = parts->back();
  return parent;
}

absl::StatusOr<UniqueFd> OpenFileBelow(int base_fd, const std::string& base,
                                       const std::string& path, int flags) {
  absl::StatusOr<ParentBelow> parent = OpenParentBelow(base_fd, base, path);
  if (!parent.ok()) return parent.status();
  const int fd =
      ::openat(parent->dir(base_fd), parent->name.c_str(), flags | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoStatus(errno, absl::StrCat("cannot open ", path));
  return UniqueFd(fd);
}

}  // namespace

absl::Status MakeDirsBelow(int base_fd, const std::string& base, const std::string& path) {
  absl::StatusOr<std::vector<std::string>> parts = ComponentsBelow(base, path);
  if (!parts.ok()) return parts.status();
  UniqueFd current;
  std::string shown = base;
  for (const std::string& part : *parts) {
    shown += "/" + part;
    absl::StatusOr<UniqueFd> next =
        OpenDirBelow(current.valid() ? current.get() : base_fd, part, /*make=*/true, shown);
    if (!next.ok()) return next.status();
    current = std::move(*next);
  }
  return absl::OkStatus();
}

absl::StatusOr<UniqueFd> OpenForAppendBelow(int base_fd, const std::string& base,
                                            const std::string& path) {
  return OpenFileBelow(base_fd, base, path, O_WRONLY | O_CREAT | O_APPEND);
}

absl::StatusOr<UniqueFd> OpenForReadBelow(int base_fd, const std::string& base,
                                          const std::string& path) {
  return OpenFileBelow(base_fd, base, path, O_RDONLY);
}

absl::Status UnlinkBelow(int base_fd, const std::string& base, const std::string& path) {
  absl::StatusOr<ParentBelow> parent = OpenParentBelow(base_fd, base, path);
  if (!parent.ok()) return parent.status();
  if (::unlinkat(parent->dir(base_fd), parent->name.c_str(), 0) != 0 && errno != ENOENT) {
    return ErrnoStatus(errno, absl::StrCat("cannot remove ", path));
  }
  return absl::OkStatus();
}

absl::Status RemoveTree(const std::string& path) {
  auto remove_one = [](const char* p, const struct stat*, int, struct FTW*) {
    return ::remove(p) == 0 || errno == ENOENT ? 0 : -1;
  };
  if (::nftw(path.c_str(), remove_one, 16, FTW_DEPTH | FTW_PHYS) != 0 && errno != ENOENT) {
    return ErrnoStatus(errno, absl::StrCat("cannot remove ", path));
  }
  return absl::OkStatus();
}

std::vector<std::string> ListDir(const std::string& path) {
  std::vector<std::string> names;
  DIR* dir = ::opendir(path.c_str());
  if (dir == nullptr) return names;
  while (dirent* entry = ::readdir(dir)) {
    const std::string name = entry->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  ::closedir(dir);
  return names;
}

bool RemoveEmptyDirs(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return true;
  if (!S_ISDIR(st.st_mode)) return false;
  bool empty = true;
  for (const std::string& name : ListDir(path)) {
    empty = RemoveEmptyDirs(path + "/" + name) && empty;
  }
  return empty && ::rmdir(path.c_str()) == 0;
}

}  // namespace ddprun
