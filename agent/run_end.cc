#include "agent/run_end.h"

#include "absl/strings/str_cat.h"
#include "common/exit_codes.h"

namespace ddprun {
namespace {

// torchrun's exit-code field (-N for signal N) as the status a shell reports.
int ShellCodeFromTorch(int torch_code) { return torch_code < 0 ? 128 - torch_code : torch_code; }

// The exit status of a failed job is its root cause's: this node's, unless the master knows
// of one elsewhere. When the master's root cause is one of this node's ranks, this node's own
// choice stands: it also saw the ranks that failed while the attempt was being stopped (the
// one that raised, when its peer's "connection closed" reached the master first).
RunExit ExitAfterFailedRun(const RunEnd& end, const NodeAtEnd& node) {
  RunExit out;
  out.exit_code = 1;
  if (node.root_cause) {
    out.failure_summary = true;
    out.exit_code = node.root_cause->hung ? kExitHung : node.root_cause->shell_exit_code;
  }
  if (!end.root_cause.empty()) {
    const ReportedFailure& root = end.root_cause.front();
    // A node that was not in the run's last round (waiting for a place, say) has only an
    // older attempt's ranks: the same numbers may be another agent's now.
    const bool ours = node.in_last_round && root.host == node.host && node.root_cause &&
                      root.rank >= node.first_rank && root.rank < node.first_rank + node.ranks;
    if (!ours) {
      out.lines.emplace_back(
          LogLevel::kError,
          absl::StrCat("root cause across the job: rank ", root.rank, " on ", root.host,
                       " failed with exitcode ", root.exit_code, ": ", root.message));
      out.exit_code = root.hung ? kExitHung : ShellCodeFromTorch(root.exit_code);
    }
  }
  out.lines.emplace_back(
      LogLevel::kError,
      absl::StrCat("job failed (", end.detail, "); exiting with status ", out.exit_code,
                   out.exit_code == kExitHung ? " (a rank hung)" : ""));
  return out;
}

}  // namespace

RunExit ExitForRunEnd(const RunEnd& end, const NodeAtEnd& node) {
  RunExit out;
  switch (end.outcome) {
    case RunOutcome::kSucceeded:
      out.exit_code = kExitSuccess;
      if (!node.ever_placed) {
        // A spare of a job at its --nnodes maximum, or a second job's agent on the first
        // one's port with the same run id: the same to the master, so the line names both.
        out.lines.emplace_back(
            LogLevel::kWarning,
            absl::StrCat("the run this node joined at ", node.master, " ended (", end.detail,
                         ") before it had a place: this node ran nothing and exits 0, as "
                         "torchrun's spare nodes do. If it is of another job, that job joined "
                         "the run of the job already there: give it a --rdzv-endpoint port and "
                         "a --rdzv-id of its own"));
      }
      break;
    case RunOutcome::kReleased:
      out.lines.emplace_back(
          LogLevel::kWarning,
          absl::StrCat(end.detail, "; exiting 0 (their outcome is in their own logs)"));
      out.others_still_run = true;
      out.exit_code = kExitSuccess;
      break;
    case RunOutcome::kStopped:
      // "stopped by request from <client>[: <reason>]", as the master says it.
      if (!node.has_token) {
        out.lines.emplace_back(
            LogLevel::kWarning,
            absl::StrCat(end.detail, "; exiting ", kExitStoppedWithoutToken,
                         ", not 0: this job has no token, so anyone who reaches its master "
                         "could have sent this stop (docs/security.md)"));
        out.exit_code = kExitStoppedWithoutToken;
      } else {
        out.lines.emplace_back(LogLevel::kWarning, absl::StrCat(end.detail, "; exiting 0"));
        out.exit_code = kExitSuccess;
      }
      break;
    case RunOutcome::kTimedOut:
      out.lines.emplace_back(LogLevel::kError, end.detail);
      out.exit_code = kExitRendezvous;
      break;
    case RunOutcome::kFailed:
      return ExitAfterFailedRun(end, node);
  }
  return out;
}

}  // namespace ddprun
