#pragma once
// Words for how a process ended, for log lines and summaries.

#include <string>
#include <vector>

namespace ddprun {

/// A human form of a waitpid status: "exit code 3" or "signal 9 (SIGKILL)".
std::string DescribeWaitStatus(int wait_status);

/// "SIGTERM" for 15; "signal 99" for an unknown number.
std::string SignalName(int signal);

/// "SIGTERM,SIGINT": the names joined by commas, as torchrun writes a list of signals.
std::string SignalNames(const std::vector<int>& signals);

/// "TERM" for 15, as glibc's sigabbrev_np spells it; null for a number that names no
/// standard signal (real-time ones included). Ours, because sigabbrev_np is glibc 2.32's and
/// portable builds run on 2.31 (docs/packaging.md).
const char* SignalAbbreviation(int signal);

}  // namespace ddprun
