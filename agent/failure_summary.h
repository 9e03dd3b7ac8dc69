#pragma once
// The report printed when a job fails, in torchrun's ChildFailedError layout so that people
// and scripts who know it find every field where they expect it — but never "<N/A>" alone:
// when a worker wrote no error file, the last lines of its stderr stand in for the traceback.

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "rendezvous/protocol_words.h"

namespace ddprun {

struct WorkerFailure {
  absl::Time time;  // from the worker's error file when it wrote one, else when the agent saw it
  std::string host;
  int rank = 0;
  int local_rank = 0;
  int wait_status = 0;  // as from waitpid, once it has ended
  // Taken for hung and not ended yet (its failure is reported at once): the signal that
  // will end it. 0: it has ended, as `wait_status` says.
  int ends_with = 0;
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
  // It had raised (RaisedAnException) when this signal of the agent's stop ended it as it
  // shut down: `wait_status` is then the exit 1 of an uncaught exception, as it would have
  // been had it finished.
  int stopped_by = 0;
};

/// torchrun's exit code field: the code, or -N for signal N.
int TorchExitCode(int wait_status);

/// The status ddprun exits with for this failure: the code, or 128+N for signal N.
int ShellExitCode(int wait_status);

/// `failures` as the rendezvous is told them: a message cut at 16 KiB (the master refuses
/// one over 64 KiB; the whole stays in this node's summary), the stderr tail's last line
/// when no error message was written, and a hung worker not ended yet with the signal
/// that will end it.
std::vector<ReportedFailure> ReportedFailures(const std::vector<WorkerFailure>& failures);

/// The nodes the run kept out, and why (docs/node-health.md), as printed at its end.
std::string FormatExclusions(const std::vector<std::string>& excluded);

/// The worker died because a peer went away (gloo's "Connection closed by peer", a reset
/// connection or broken pipe, NCCL's remote error or aborted communicator), as its error
/// message or stderr tail says: a consequence of another rank's failure, not a cause.
bool FailedForALostPeer(const WorkerFailure& failure);

/// The worker's stderr tail ends in an uncaught Python exception: its last lines are a
/// traceback (`Traceback (most recent call last):`, indented frames) and the exception's
/// line (`ValueError: ...`), not KeyboardInterrupt or SystemExit. A worker the agent's stop
/// signal ended with that tail had raised before the stop reached it: a failure.
bool RaisedAnException(const WorkerFailure& failure);

/// Index of the root cause: the earliest failure of a worker that failed on its own, else
/// the earliest of all (ties: the first given). On a loaded host the rank whose peer raised
/// may be seen to end first.
size_t RootCauseIndex(const std::vector<WorkerFailure>& failures);

/// Where an attempt's workers meet (their MASTER_ADDR and MASTER_PORT): workers that cannot
/// reach it from their node hang in init_process_group.
struct MeetingPoint {
  std::string addr;  // empty: not said (one-node jobs: it is this host, it cannot matter)
  int port = 0;
};

/// Where `round`'s workers met, only where it can matter: a job of several nodes, whose
/// workers must reach it across the network (a one-node job's workers meet on this host).
MeetingPoint MeetingOf(const std::optional<Assignment>& round);

/// The Python that ran the workers, and how it was chosen: a worker that dies of a missing
/// module most often ran another interpreter than its user meant.
struct WorkerInterpreter {
  std::string path;    // resolved; empty: the workers are not Python (--no-python)
  std::string chosen;  // "PYTHON_EXEC", or "python3 first on PATH; ..." with how to choose
};

struct SummaryContext {
  std::string entrypoint;  // "train.py FAILED"
  absl::TimeZone zone = absl::LocalTimeZone();
  MeetingPoint meeting;  // said when the root cause may be about reaching it
  std::string hang_report_path;
  WorkerInterpreter interpreter;
  // The modules beside the script (x.py, folders): a missing module one edit or two from one
  // of them is a misspelling, which no other interpreter would mend.
  std::vector<std::string> modules_beside_script;
};

/// The whole report. `failures` must not be empty.
std::string FormatFailureSummary(const std::vector<WorkerFailure>& failures,
                                 const SummaryContext& context);

/// The report of an attempt stopped by `signal` while ranks `first_rank` to `last_rank` ran
/// on `host`: what they were given to meet at, which to check when they hung.
std::string FormatStopSummary(const std::string& entrypoint, int signal, const std::string& host,
                              int first_rank, int last_rank, const MeetingPoint& meeting);

}  // namespace ddprun
