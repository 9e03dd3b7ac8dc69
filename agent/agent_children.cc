#include "agent/agent_children.h"

#include <sys/wait.h>

#include "common/process_status.h"
#include "spdlog/spdlog.h"

namespace ddprun {

void AgentChildren::ReapAll(const OrphanGuard& guard) {
  int status = 0;
  pid_t pid;
  while ((pid = ::waitpid(-1, &status, WNOHANG)) > 0) {
    if (workers && workers->OnProcessExited(pid, status)) continue;
    if (health_checks && health_checks->OnProcessExited(pid, status)) continue;
    if (warm_pool && warm_pool->OnProcessExited(pid, status)) continue;
    if (pid == guard.pid()) {
      spdlog::warn(
          "the orphan guard (pid {}) exited: {}; workers still die with the agent via "
          "PR_SET_PDEATHSIG, but their children would not",
          pid, DescribeWaitStatus(status));
    }
  }
}

}  // namespace ddprun
