#include "agent/hangs/proc_state.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/small_file.h"
#include "common/unique_fd.h"

namespace ddprun {
namespace {

// The state letter of /proc/.../stat: after the command name's closing parenthesis (the
// name itself may hold spaces and parentheses).
char StateOf(const std::string& stat_path) {
  absl::StatusOr<std::string> stat = ReadSmallFile(stat_path);
  if (!stat.ok()) return '\0';
  const size_t close = stat->rfind(')');
  if (close == std::string::npos || close + 2 >= stat->size()) return '\0';
  return (*stat)[close + 2];
}

const char* StateName(char state) {
  switch (state) {
    case 'R':
      return "running";
    case 'S':
      return "sleeping";
    case 'D':
      return "disk sleep";
    case 'T':
      return "stopped";
    case 't':
      return "tracing stop";
    case 'Z':
      return "zombie";
    case 'X':
      return "dead";
    default:
      return "unknown";
  }
}

}  // namespace

bool AnyTaskUninterruptible(pid_t pid) {
  const std::string tasks = absl::StrCat("/proc/", pid, "/task");
  for (const std::string& tid : ListDir(tasks)) {
    if (StateOf(absl::StrCat(tasks, "/", tid, "/stat")) == 'D') return true;
  }
  return false;
}

std::string KernelWaitChannel(pid_t pid) {
  absl::StatusOr<std::string> wchan = ReadSmallFile(absl::StrCat("/proc/", pid, "/wchan"));
  return wchan.ok() ? std::string(absl::StripAsciiWhitespace(*wchan)) : std::string();
}

std::string KernelStack(pid_t pid) {
  absl::StatusOr<std::string> stack = ReadSmallFile(absl::StrCat("/proc/", pid, "/stack"));
  return stack.ok() ? *stack : std::string();
}

std::string DescribeProcessState(pid_t pid) {
  const char state = StateOf(absl::StrCat("/proc/", pid, "/stat"));
  if (state == '\0') return "gone";
  std::string out = absl::StrCat(std::string(1, state), " (", StateName(state), ")");
  if (const std::string wchan = KernelWaitChannel(pid); !wchan.empty() && wchan != "0") {
    absl::StrAppend(&out, " in ", wchan);
  }
  return out;
}

}  // namespace ddprun
