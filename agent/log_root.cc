#include "agent/log_root.h"

#include <errno.h>
#include <stdlib.h>

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "agent/log_layout.h"
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
    return root;
  }
  root.path = log_dir;
  if (log_dir == "/dev/null") return root;
  const std::string run_dir = RunLogDir(log_dir, run_id);
  DDPRUN_RETURN_IF_ERROR(MakeDirs(run_dir));
  root.attempt_offset = FirstFreeAttempt(run_dir);
  if (root.attempt_offset > 0) {
    spdlog::warn(
        "{} holds attempts of an earlier run with the same --rdzv-id; this run's "
        "logs start at attempt_{}",
        run_dir, root.attempt_offset);
  }
  return root;
}

void CleanUpLogRoot(const LogRoot& root, const std::string& run_id) {
  if (!root.temporary) return;
  if (!RemoveEmptyDirs(root.path)) {
    spdlog::warn("worker logs and error files are in {} (use --log-dir to choose the place)",
                 RunLogDir(root.path, run_id));
  }
}

}  // namespace ddprun
