#pragma once
// The report printed when a job fails, in torchrun's ChildFailedError layout so that people
// and scripts who know it find every field where they expect it — but never "<N/A>" alone:
// when a worker wrote no error file, the last lines of its stderr stand in for the traceback.

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/time/time.h"

namespace ddprun {

struct WorkerFailure {
  absl::Time time;  // from the worker's error file when it wrote one, else when the agent saw it
  std::string host;
  int rank = 0;
  int local_rank = 0;
  int wait_status = 0;  // as from waitpid
  pid_t pid = 0;
  std::string error_file;              // empty: the worker wrote none
  bool error_file_unreadable = false;  // it wrote one that is not torch's format: the
                                       // summary shows the stderr tail as well
  std::string error_message;
  std::string traceback;
  std::vector<std::string> stderr_tail;
  std::string stderr_source;  // where the tail came from (a log file, or "stderr")
  bool hung = false;          // stopped by the agent as hung (error_message says why)
  bool timer = false;         // hung: a FileTimer expired (else: no heartbeat)
};

/// torchrun's exit code field: the code, or -N for signal N.
int TorchExitCode(int wait_status);

/// The status ddprun exits with for this failure: the code, or 128+N for signal N.
int ShellExitCode(int wait_status);

/// Index of the root cause: the earliest failure (ties: the first given).
size_t RootCauseIndex(const std::vector<WorkerFailure>& failures);

/// Where an attempt's workers meet (their MASTER_ADDR and MASTER_PORT): workers that cannot
/// reach it from their node hang in init_process_group, so every summary says it.
struct MeetingPoint {
  std::string addr;  // empty: not said
  int port = 0;
};

/// The whole report. `failures` must not be empty.
std::string FormatFailureSummary(const std::string& entrypoint,
                                 const std::vector<WorkerFailure>& failures,
                                 absl::TimeZone zone = absl::LocalTimeZone(),
                                 const MeetingPoint& meeting = {},
                                 const std::string& hang_report_path = "");

/// The report of an attempt stopped by `signal` while ranks `first_rank` to `last_rank` ran
/// on `host`: what they were given to meet at, which to check when they hung.
std::string FormatStopSummary(const std::string& entrypoint, int signal, const std::string& host,
                              int first_rank, int last_rank, const MeetingPoint& meeting);

}  // namespace ddprun
