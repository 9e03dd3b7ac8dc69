#include "common/unique_fd.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"

namespace ddprun {

void UniqueFd::Reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
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
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
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
