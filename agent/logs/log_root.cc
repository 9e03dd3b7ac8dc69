#include "agent/logs/log_root.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "agent/logs/log_layout.h"
#include "common/status_macros.h"
#include "common/unique_fd.h"
#include "spdlog/spdlog.h"

namespace ddprun {
namespace {

int FirstFreeAttempt(const std::string& run_dir) {
  int next = 0;
  for (const std::string& name : ListDir(run_dir)) {
    int n = 0;
    if (absl::StartsWith(name, "attempt_") && absl::SimpleAtoi(name.substr(8), &n)) {
      next = std::max(next, n + 1);
    }
  }
  return next;
}

// Refuses `dir` when it or a folder above it may be written by anyone without the sticky
// bit: anyone could then swap the run's folder before ddprun makes it.
absl::Status CheckNoStrangerCanSwap(const std::string& dir) {
  char resolved[PATH_MAX];
  if (::realpath(dir.c_str(), resolved) == nullptr) {
    return ErrnoStatus(errno, absl::StrCat("cannot resolve ", dir));
  }
  std::string path = resolved;
  while (true) {
    struct stat st;
    if (::stat(path.c_str(), &st) == 0 && (st.st_mode & S_IWOTH) != 0 &&
        (st.st_mode & S_ISVTX) == 0) {
      return absl::PermissionDeniedError(absl::StrCat(
          path,
          " may be written by anyone and has no sticky bit: another user could redirect "
          "this run's log files"));
    }
    if (path == "/") return absl::OkStatus();
    const size_t slash = path.rfind('/');
    path = slash == 0 ? "/" : path.substr(0, slash);
  }
}

// Makes (0700) or opens the run's folder in `log_dir`; refuses a link or another user's.
absl::Status OpenRunDir(const std::string& log_dir, const std::string& run_id, LogRoot& root) {
  UniqueFd parent(::open(log_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!parent.valid()) return ErrnoStatus(errno, absl::StrCat("cannot open ", log_dir));
  root.run_path = RunLogDir(log_dir, run_id);
  if (::mkdirat(parent.get(), run_id.c_str(), 0700) != 0 && errno != EEXIST) {
    return ErrnoStatus(errno, absl::StrCat("cannot create directory ", root.run_path));
  }
  UniqueFd run(
      ::openat(parent.get(), run_id.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!run.valid()) {
    return ErrnoStatus(errno, absl::StrCat("cannot open ", root.run_path,
                                           errno == ELOOP || errno == ENOTDIR
                                               ? " (it is a symbolic link or not a folder)"
                                               : ""));
  }
  struct stat st;
  if (::fstat(run.get(), &st) != 0 || st.st_uid != ::geteuid()) {
    return absl::PermissionDeniedError(
        absl::StrCat(root.run_path, " belongs to another user (uid ", st.st_uid, ")"));
  }
  ::fchmod(run.get(), 0700);  // whatever the umask, or an earlier ddprun, made it
  root.run_dir = std::make_shared<const UniqueFd>(std::move(run));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<LogRoot> OpenLogRoot(const std::string& log_dir, const std::string& run_id) {
  LogRoot root;
  if (log_dir.empty()) {
    const char* tmp = ::getenv("TMPDIR");
    std::string templ = absl::StrCat(tmp != nullptr && *tmp ? tmp : "/tmp", "/ddprun-XXXXXX");
    if (::mkdtemp(templ.data()) == nullptr) {
      return ErrnoStatus(errno, absl::StrCat("cannot create a log folder like ", templ,
                                             " (set TMPDIR or --log-dir)"));
    }
    root.path = templ;
    root.temporary = true;
    DDPRUN_RETURN_IF_ERROR(OpenRunDir(root.path, run_id, root));
    return root;
  }
  root.path = log_dir;
  if (log_dir == "/dev/null") return root;
  DDPRUN_RETURN_IF_ERROR(MakeDirs(log_dir));
  DDPRUN_RETURN_IF_ERROR(CheckNoStrangerCanSwap(log_dir));
  DDPRUN_RETURN_IF_ERROR(OpenRunDir(log_dir, run_id, root));
  const std::string run_dir = root.run_path;
  root.attempt_offset = FirstFreeAttempt(run_dir);
  if (root.attempt_offset > 0) {
    spdlog::warn(
        "{} holds attempts of an earlier run with the same --rdzv-id; this run's "
        "logs start at attempt_{}",
        run_dir, root.attempt_offset);
  }
  return root;
}

int LogRoot::BeginAttempt(int64_t round) {
  last_attempt_ = std::max(attempt_offset + static_cast<int>(round), last_attempt_ + 1);
  attempt_of_round_[round] = last_attempt_;
  while (attempt_of_round_.size() > kRoundsKept) {
    attempt_of_round_.erase(attempt_of_round_.begin());
  }
  return last_attempt_;
}

std::optional<int> LogRoot::AttemptOf(int64_t round) const {
  auto attempt = attempt_of_round_.find(round);
  if (attempt == attempt_of_round_.end()) return std::nullopt;
  return attempt->second;
}

absl::StatusOr<std::string> WriteAttemptFile(const LogRoot& root, const std::string& run_id,
                                             int64_t round, const std::string& name,
                                             const std::string& text) {
  const std::optional<int> attempt = root.AttemptOf(round);
  if (!attempt || root.run_dir == nullptr) return std::string();
  const std::string dir = AttemptLogDir(root.path, run_id, *attempt);
  const std::string path = absl::StrCat(dir, "/", name);
  DDPRUN_RETURN_IF_ERROR(MakeDirsBelow(root.run_dir->get(), root.run_path, dir));
  DDPRUN_ASSIGN_OR_RETURN(UniqueFd file,
                          OpenForAppendBelow(root.run_dir->get(), root.run_path, path));
  if (::ftruncate(file.get(), 0) != 0) return ErrnoStatus(errno, path);
  DDPRUN_RETURN_IF_ERROR(WriteAll(file.get(), text));
  return path;
}

void CleanUpLogRoot(const LogRoot& root, const std::string& run_id) {
  if (!root.temporary) return;
  if (!RemoveEmptyDirs(root.path)) {
    spdlog::warn("worker logs and error files are in {} (use --log-dir to choose the place)",
                 RunLogDir(root.path, run_id));
  }
}

}  // namespace ddprun
