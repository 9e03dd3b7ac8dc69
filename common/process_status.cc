#include "common/process_status.h"

#include <string.h>
#include <sys/wait.h>

#include "absl/strings/str_cat.h"

namespace ddprun {

std::string SignalName(int signal) {
  const char* abbrev = ::sigabbrev_np(signal);
  if (abbrev == nullptr) return absl::StrCat("signal ", signal);
  return absl::StrCat("SIG", abbrev);
}

std::string DescribeWaitStatus(int wait_status) {
  if (WIFEXITED(wait_status)) return absl::StrCat("exit code ", WEXITSTATUS(wait_status));
  if (WIFSIGNALED(wait_status)) {
    const int sig = WTERMSIG(wait_status);
    return absl::StrCat("signal ", sig, " (", SignalName(sig), ")");
  }
  return absl::StrCat("wait status ", wait_status);
}

}  // namespace ddprun
