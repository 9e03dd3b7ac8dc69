#pragma once
// A worker as it stands, in words the agent's rules, its observers and its supervisor share.

#include <sys/types.h>

namespace ddprun {

enum class WorkerState { kRunning, kFrozen, kHung, kSucceeded, kFailed, kStopped };

struct WorkerOutcome {
  int local_rank = 0;
  int rank = 0;
  pid_t pid = -1;
  WorkerState state = WorkerState::kRunning;
  int wait_status = 0;  // as from waitpid, once it has ended
};

}  // namespace ddprun
