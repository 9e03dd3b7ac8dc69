#pragma once
// What /proc says of a process: the scheduler state of its tasks, and where the kernel holds
// it. For the hang checks (uninterruptible sleep) and for reporting a worker SIGKILL did not
// end.

#include <sys/types.h>

#include <string>

namespace ddprun {

/// Some task (thread) of `pid` is in uninterruptible sleep (state D); false when it is gone.
bool AnyTaskUninterruptible(pid_t pid);
/// "D (disk sleep) in do_vfork" / "gone": the state of the process and its kernel wait
/// channel, for messages.
std::string DescribeProcessState(pid_t pid);
/// /proc/<pid>/wchan ("" when unreadable) and /proc/<pid>/stack (root only; "" else).
std::string KernelWaitChannel(pid_t pid);
std::string KernelStack(pid_t pid);

}  // namespace ddprun
