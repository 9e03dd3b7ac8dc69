#include "agent/agent_state_machine.h"

#include <signal.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/exit_codes.h"
#include "common/process_status.h"

namespace ddprun {
namespace {

// torchrun's exit-code field (-N for signal N) as the status a shell reports.
int ShellCodeFromTorch(int torch_code) { return torch_code < 0 ? 128 - torch_code : torch_code; }

}  // namespace

AgentStateMachine::AgentStateMachine(AgentSettings settings, absl::Time now)
    : settings_(std::move(settings)) {
  if (settings_.heartbeat_interval != absl::InfiniteDuration()) {
    heartbeat_deadline_ = now + settings_.heartbeat_interval;
  }
}

void AgentStateMachine::Start(absl::Time now) {
  if (phase_ == Phase::kIdle) JoinNextRound(now);
}

void AgentStateMachine::JoinNextRound(absl::Time now) {
  if (interrupted_by_ != 0) return Exit(ExitCodeForSignal(interrupted_by_));
  cooldown_deadline_.reset();
  if (settings_.health_check) {
    phase_ = Phase::kChecking;
    return Emit(AgentAction::Kind::kCheckHealth);
  }
  SendJoin("", now);
}

void AgentStateMachine::HealthChecked(const std::string& failure, absl::Time now) {
  if (phase_ != Phase::kChecking) return;
  if (!failure.empty()) {
    Log(LogLevel::kError,
        absl::StrCat("this node's health check failed, so it does not join this round (the "
                     "rendezvous is told why): ",
                     failure));
  }
  SendJoin(failure, now);
}

void AgentStateMachine::SendJoin(const std::string& failed_check, absl::Time now) {
  phase_ = Phase::kJoining;
  // The master applies join_timeout too, and says who is missing; this deadline catches a
  // master that cannot be reached at all, so it comes a little later.
  join_deadline_.reset();
  progress_deadline_.reset();
  joined_at_ = now;
  if (settings_.join_deadline != absl::InfiniteDuration()) {
    join_deadline_ = now + settings_.join_deadline;
    progress_deadline_ = now + settings_.progress_first;
  }
  AgentAction join;
  join.kind = AgentAction::Kind::kJoin;
  join.assignment = assignment_;
  join.text = failed_check;
  actions_.push_back(std::move(join));
}

void AgentStateMachine::Assigned(const Assignment& assignment) {
  if (phase_ == Phase::kJoining) RunRound(assignment, /*in_place=*/false);
}

void AgentStateMachine::RunRound(const Assignment& assignment, bool in_place) {
  join_deadline_.reset();
  progress_deadline_.reset();
  phase_ = Phase::kRunning;
  assignment_ = assignment;
  stopping_ = false;
  failure_reported_ = false;
  closing_ = false;
  after_stop_ = AfterStop::kNothing;
  next_round_.reset();
  AgentAction start;
  start.kind = AgentAction::Kind::kStartWorkers;
  start.assignment = assignment;
  start.store_waits = in_place;
  actions_.push_back(std::move(start));
}

void AgentStateMachine::StopOrdered(StopReason reason, const std::string& detail,
                                    bool collect_stacks, const std::optional<Assignment>& next,
                                    absl::Time now) {
  if (done()) return;
  CollectStacksIfRunning(collect_stacks);
  Emit(AgentAction::Kind::kEndStoreRound);
  Log(LogLevel::kWarning,
      absl::StrCat(detail, reason == StopReason::kMembershipChanged
                               ? ": restarting all workers (membership change, no restart spent)"
                               : ""));
  // A round sent with an earlier order may itself have ended before this node ran it.
  if (after_stop_ == AfterStop::kRunNext) after_stop_ = AfterStop::kNothing;
  next_round_ = next;
  StopThen(next ? AfterStop::kRunNext : AfterStop::kRejoin, now);
}

void AgentStateMachine::RunEnded(RunOutcome outcome, const std::string& detail,
                                 const std::vector<ReportedFailure>& root_cause,
                                 bool collect_stacks, absl::Time now) {
  if (done()) return;
  CollectStacksIfRunning(collect_stacks);
  end_outcome_ = outcome;
  end_detail_ = detail;
  end_root_cause_ = root_cause;
  StopThen(AfterStop::kEnd, now);
}

void AgentStateMachine::MasterLost(const std::string& detail, absl::Time now) {
  if (done()) return;
  // A node cut off from the master must not go on training in a round that may be over.
  Log(LogLevel::kWarning, absl::StrCat("lost the rendezvous master: ", detail,
                                       "; stopping this node's workers and rejoining"));
  Emit(AgentAction::Kind::kEndStoreRound);
  StopThen(AfterStop::kReconnect, now);
}

void AgentStateMachine::Refused(const std::string& detail, absl::Time now) {
  if (done()) return;
  Log(LogLevel::kError, absl::StrCat("the rendezvous refused this node: ", detail));
  StopThen(AfterStop::kLeave, now);
}

void AgentStateMachine::Progress(const std::string& text, bool master_answered, absl::Time now) {
  if (phase_ != Phase::kJoining || text.empty()) return;
  std::string line = absl::StrCat(
      "waiting for a round for ",
      absl::FormatDuration(absl::Floor(now - joined_at_, absl::Seconds(1))), ": ", text);
  // The master says when the run ends; when it does not answer, this node's own bound is news.
  if (!master_answered && join_deadline_) {
    absl::StrAppend(&line, "; this node gives up in ",
                    absl::FormatDuration(absl::Floor(*join_deadline_ - now, absl::Seconds(1))),
                    " (join_timeout + keep_alive_interval)");
  }
  Log(LogLevel::kWarning, std::move(line));
}

void AgentStateMachine::Excluded(const std::string& detail, absl::Duration cooldown,
                                 absl::Time now) {
  if (done()) return;
  cooldown_ = cooldown;
  Log(LogLevel::kError, absl::StrCat("the rendezvous keeps this node out of the job: ", detail,
                                     phase_ == Phase::kRunning ? "; stopping its workers" : ""));
  StopThen(AfterStop::kExcluded, now);
}

void AgentStateMachine::CoolDown(absl::Time now) {
  if (cooldown_ == absl::InfiniteDuration()) {
    Log(LogLevel::kError, absl::StrCat("this node is excluded for the rest of the job: it "
                                       "leaves the job and exits ",
                                       kExitNodeUnhealthy));
    others_still_run_ = true;  // a master this agent hosts serves the others until they end
    return Exit(kExitNodeUnhealthy);
  }
  phase_ = Phase::kCoolingDown;
  join_deadline_.reset();
  progress_deadline_.reset();
  cooldown_deadline_ = now + cooldown_;
  Log(LogLevel::kWarning,
      absl::StrCat("this node asks to join again in ", absl::FormatDuration(cooldown_),
                   " (--node-cooldown)", settings_.health_check ? ", after its health check" : ""));
}

void AgentStateMachine::Signal(int signal, absl::Time now) {
  if (done()) return;
  const bool running = phase_ == Phase::kRunning;
  if (interrupted_by_ == 0) {
    interrupted_by_ = signal;
    if (!running) {
      Log(LogLevel::kWarning,
          absl::StrCat("received ", SignalName(signal), ": no workers are running; exiting"));
      return Exit(ExitCodeForSignal(signal));
    }
    Log(LogLevel::kWarning, absl::StrCat("received ", SignalName(signal), ": forwarding it to ",
                                         settings_.nproc_per_node, " workers, SIGKILL after ",
                                         absl::ToDoubleSeconds(settings_.shutdown_timeout), "s"));
    BeginStop(signal, now);
  } else if (running) {
    Log(LogLevel::kWarning,
        absl::StrCat("received ", SignalName(signal), " again: killing the workers now"));
    Kill(absl::StrCat("at a second ", SignalName(signal)), now);
  }
}

void AgentStateMachine::WorkersChanged(const WorkersView& view, absl::Time now) {
  if (phase_ != Phase::kRunning || closing_) return;
  if (!view.unhealthy.empty() && unhealthy_.empty()) {
    // Not a failure of the job: this node cannot run it. No restart is spent on it here;
    // the rendezvous hears that the node leaves.
    unhealthy_ = view.unhealthy;
    Log(LogLevel::kError,
        absl::StrCat(unhealthy_, "; stopping this node's workers; this node leaves the job"));
    StopThen(AfterStop::kUnhealthy, now);
  }
  if (!failure_reported_ && view.any_failed && unhealthy_.empty()) {
    // Tell the rendezvous at once, so that other nodes stop too, and stop ours meanwhile;
    // after a hang ours wait, stopped where they are, for the order to record their stacks.
    failure_reported_ = true;
    if (view.hang) {
      grace_deadline_ = now + settings_.shutdown_timeout;  // if no order ever comes
    } else if (!stopping_) {
      BeginStop(SIGTERM, now);
    }
    EmitForRound(AgentAction::Kind::kReportFailure);
  }
  if (view.all_exited) {
    grace_deadline_.reset();
    kill_deadline_.reset();
    closing_ = true;
    Emit(AgentAction::Kind::kCloseAttempt);
  }
}

void AgentStateMachine::AttemptClosed(const AttemptResult& result, absl::Time now) {
  if (phase_ != Phase::kRunning || !closing_) return;
  closing_ = false;
  if (result.root_cause) last_root_cause_ = result.root_cause;
  if (interrupted_by_ != 0) {
    EmitWithSignal(AgentAction::Kind::kWriteStopSummary, interrupted_by_);
    Log(LogLevel::kWarning, absl::StrCat("stopped by ", SignalName(interrupted_by_), ": exiting ",
                                         ExitCodeForSignal(interrupted_by_)));
    return Exit(ExitCodeForSignal(interrupted_by_));
  }
  if (after_stop_ != AfterStop::kNothing) return Carry(after_stop_, now);
  if (result.succeeded) {
    Log(LogLevel::kInfo, absl::StrCat("all ", settings_.nproc_per_node, " workers succeeded"));
    EmitForRound(AgentAction::Kind::kReportSuccess);
  }
  // Failed (already reported) or succeeded: the rendezvous decides what comes next.
  phase_ = Phase::kFinishing;
}

void AgentStateMachine::Fatal(int exit_code) {
  if (!done()) Exit(exit_code);
}

void AgentStateMachine::Tick(absl::Time now) {
  if (grace_deadline_ && now >= *grace_deadline_) {
    grace_deadline_.reset();
    if (phase_ == Phase::kRunning) {
      Kill(absl::StrCat("after the ", absl::FormatDuration(settings_.shutdown_timeout),
                        " grace period (--shutdown-timeout)"),
           now);
    }
  }
  if (kill_deadline_ && now >= *kill_deadline_) {
    kill_deadline_.reset();
    if (phase_ == Phase::kRunning && !closing_) {
      // The kernel holds them (uninterruptible sleep, a hung device or filesystem): waiting
      // longer would wedge this agent too. Say which, tell the rendezvous, and go.
      AgentAction abandon;
      abandon.kind = AgentAction::Kind::kAbandonWorkers;
      abandon.text = absl::StrCat("still running ", absl::FormatDuration(settings_.kill_timeout),
                                  " after SIGKILL (--kill-timeout): the node is unhealthy");
      actions_.push_back(std::move(abandon));
      others_still_run_ = true;
      return Exit(kExitNodeUnhealthy);
    }
  }
  if (join_deadline_ && now >= *join_deadline_) {
    join_deadline_.reset();
    if (phase_ == Phase::kJoining) {
      Log(LogLevel::kError, JoinTimeoutMessage());
      return Exit(kExitRendezvous);
    }
  }
  if (progress_deadline_ && now >= *progress_deadline_) {
    progress_deadline_.reset();
    if (phase_ == Phase::kJoining) {
      Emit(AgentAction::Kind::kCheckProgress);
      progress_deadline_ = now + settings_.progress_every;
    }
  }
  if (cooldown_deadline_ && now >= *cooldown_deadline_) {
    cooldown_deadline_.reset();
    if (phase_ == Phase::kCoolingDown) JoinNextRound(now);
  }
  if (heartbeat_deadline_ && now >= *heartbeat_deadline_) {
    Emit(AgentAction::Kind::kHeartbeat);
    heartbeat_deadline_ = now + settings_.heartbeat_interval;
  }
}

std::vector<AgentAction> AgentStateMachine::TakeActions() {
  std::vector<AgentAction> out;
  out.swap(actions_);
  return out;
}

absl::Time AgentStateMachine::NextDeadline() const {
  absl::Time next = absl::InfiniteFuture();
  for (const auto& deadline : {grace_deadline_, kill_deadline_, join_deadline_, progress_deadline_,
                               heartbeat_deadline_, cooldown_deadline_}) {
    if (deadline) next = std::min(next, *deadline);
  }
  return next;
}

// The one place for "if workers run, remember what to do next and stop them; else do it now".
void AgentStateMachine::StopThen(AfterStop next, absl::Time now) {
  if (phase_ != Phase::kRunning) return Carry(next, now);
  after_stop_ = std::max(after_stop_, next);
  if (!stopping_) BeginStop(SIGTERM, now);
}

void AgentStateMachine::Carry(AfterStop next, absl::Time now) {
  switch (next) {
    case AfterStop::kNothing:
      return;
    case AfterStop::kRejoin:
      return JoinNextRound(now);
    case AfterStop::kRunNext:
      if (interrupted_by_ != 0) return Exit(ExitCodeForSignal(interrupted_by_));
      EmitForRound(AgentAction::Kind::kReportStopped);  // for the round that stopped
      return RunRound(Assignment(*std::exchange(next_round_, std::nullopt)), /*in_place=*/true);
    case AfterStop::kReconnect:
      Emit(AgentAction::Kind::kReconnect);
      return JoinNextRound(now);
    case AfterStop::kExcluded:
      return CoolDown(now);
    case AfterStop::kLeave:
      return Exit(kExitRendezvous);
    case AfterStop::kUnhealthy: {
      AgentAction leave;
      leave.kind = AgentAction::Kind::kLeave;
      leave.text = unhealthy_;
      actions_.push_back(std::move(leave));
      others_still_run_ = true;
      return Exit(kExitNodeUnhealthy);
    }
    case AfterStop::kEnd:
      return ExitAtRunEnd();
  }
}

void AgentStateMachine::BeginStop(int signal, absl::Time now) {
  stopping_ = true;
  EmitWithSignal(AgentAction::Kind::kStopWorkers, signal);
  grace_deadline_ = now + settings_.shutdown_timeout;
}

void AgentStateMachine::ExitAtRunEnd() {
  switch (end_outcome_) {
    case RunOutcome::kSucceeded:
      return Exit(kExitSuccess);
    case RunOutcome::kReleased:
      Log(LogLevel::kWarning,
          absl::StrCat(end_detail_, "; exiting 0 (their outcome is in their own logs)"));
      others_still_run_ = true;
      return Exit(kExitSuccess);
    case RunOutcome::kStopped:
      // "stopped by request from <client>[: <reason>]", as the master says it.
      if (!settings_.has_token) {
        Log(LogLevel::kWarning,
            absl::StrCat(end_detail_, "; exiting ", kExitStoppedWithoutToken,
                         ", not 0: this job has no token, so anyone who reaches its master "
                         "could have sent this stop (docs/security.md)"));
        return Exit(kExitStoppedWithoutToken);
      }
      Log(LogLevel::kWarning, absl::StrCat(end_detail_, "; exiting 0"));
      return Exit(kExitSuccess);
    case RunOutcome::kTimedOut:
      Log(LogLevel::kError, end_detail_);
      return Exit(kExitRendezvous);
    case RunOutcome::kFailed:
      return ExitAfterFailedRun();
  }
}

// The exit status of a failed job is its root cause's: this node's, unless the master knows
// of one elsewhere. When the master's root cause is one of this node's ranks, this node's own
// choice stands: it also saw the ranks that failed while the attempt was being stopped (the
// one that raised, when its peer's "connection closed" reached the master first).
void AgentStateMachine::ExitAfterFailedRun() {
  int code = 1;
  if (last_root_cause_) {
    Emit(AgentAction::Kind::kWriteFailureSummary);
    code = last_root_cause_->shell_exit_code;
  }
  if (!end_root_cause_.empty()) {
    const ReportedFailure& root = end_root_cause_.front();
    // A node that was not in the run's last round (waiting for a place, say) has only an
    // older attempt's ranks: the same numbers may be another agent's now.
    const bool in_last_round = phase_ == Phase::kRunning || phase_ == Phase::kFinishing;
    const bool ours = in_last_round && root.host == settings_.host && last_root_cause_ &&
                      assignment_ && root.rank >= assignment_->base_rank &&
                      root.rank < assignment_->base_rank + settings_.nproc_per_node;
    if (!ours) {
      Log(LogLevel::kError,
          absl::StrCat("root cause across the job: rank ", root.rank, " on ", root.host,
                       " failed with exitcode ", root.exit_code, ": ", root.message));
      code = ShellCodeFromTorch(root.exit_code);
    }
  }
  Log(LogLevel::kError, absl::StrCat("job failed (", end_detail_, "); exiting with status ", code));
  Exit(code);
}

void AgentStateMachine::Exit(int exit_code) {
  phase_ = Phase::kDone;
  grace_deadline_.reset();
  kill_deadline_.reset();
  join_deadline_.reset();
  progress_deadline_.reset();
  heartbeat_deadline_.reset();
  cooldown_deadline_.reset();
  AgentAction exit;
  exit.kind = AgentAction::Kind::kExit;
  exit.exit_code = exit_code;
  actions_.push_back(std::move(exit));
}

void AgentStateMachine::CollectStacksIfRunning(bool collect_stacks) {
  if (collect_stacks && phase_ == Phase::kRunning && !closing_) {
    Emit(AgentAction::Kind::kCollectStacks);
  }
}

void AgentStateMachine::Kill(std::string why, absl::Time now) {
  kill_deadline_ = now + settings_.kill_timeout;
  AgentAction kill;
  kill.kind = AgentAction::Kind::kKillWorkers;
  kill.text = std::move(why);
  actions_.push_back(std::move(kill));
}

void AgentStateMachine::Log(LogLevel level, std::string text) {
  AgentAction log;
  log.kind = AgentAction::Kind::kLog;
  log.level = level;
  log.text = std::move(text);
  actions_.push_back(std::move(log));
}

void AgentStateMachine::Emit(AgentAction::Kind kind) {
  AgentAction action;
  action.kind = kind;
  actions_.push_back(std::move(action));
}

void AgentStateMachine::EmitWithSignal(AgentAction::Kind kind, int signal) {
  AgentAction action;
  action.kind = kind;
  action.signal = signal;
  actions_.push_back(std::move(action));
}

void AgentStateMachine::EmitForRound(AgentAction::Kind kind) {
  AgentAction action;
  action.kind = kind;
  action.round = assignment_ ? assignment_->round : 0;
  actions_.push_back(std::move(action));
}

std::string AgentStateMachine::JoinTimeoutMessage() const {
  return absl::StrCat(
      "this node got no round within join_timeout=", absl::FormatDuration(settings_.join_timeout),
      ": either the rendezvous master at ", settings_.master_endpoint,
      " is not reachable from here (is it up? is the port open? ",
      settings_.tls
          ? "with TLS: is this node's tls_cert signed by the CA the master trusts, and the "
            "master's certificate by this node's tls_ca, for the endpoint's address?"
          : "does the master use TLS? then give this node tls_cert, tls_key and tls_ca",
      "), or the job is at its --nnodes maximum and had no free slot for this node");
}

}  // namespace ddprun
