#pragma once
// Words for how a process ended, for log lines and summaries.

#include <string>

namespace ddprun {

/// A human form of a waitpid status: "exit code 3" or "signal 9 (SIGKILL)".
std::string DescribeWaitStatus(int wait_status);

/// "SIGTERM" for 15; "signal 99" for an unknown number.
std::string SignalName(int signal);

}  // namespace ddprun
