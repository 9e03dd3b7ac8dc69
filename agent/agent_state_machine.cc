#include "agent/agent_state_machine.h"

#include <signal.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/exit_codes.h"
#include "common/process_status.h"

namespace ddprun {

AgentStateMachine::AgentStateMachine(AgentSettings settings, absl::Time now)
    : settings_(std::move(settings)) {
  if (settings_.heartbeat_interval != absl::InfiniteDuration()) {
    timers_.Set(Timer::kHeartbeat, now + settings_.heartbeat_interval);
  }
}

void AgentStateMachine::Start(absl::Time now) {
  if (phase_ == Phase::kIdle) JoinNextRound(now);
}

void AgentStateMachine::JoinNextRound(absl::Time now) {
  if (interrupted_by_ != 0) return Exit(ExitCodeForSignal(interrupted_by_));
  timers_.Clear(Timer::kCooldown);
  if (settings_.health_check) {
    phase_ = Phase::kChecking;
    Emit(AgentAction::Kind::kCheckHealth);
    return;
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
  timers_.Clear(Timer::kJoin);
  timers_.Clear(Timer::kProgress);
  joined_at_ = now;
  if (settings_.join_deadline != absl::InfiniteDuration()) {
    timers_.Set(Timer::kJoin, now + settings_.join_deadline);
    timers_.Set(Timer::kProgress, now + settings_.progress_first);
  }
  Announce(AgentMoment::Kind::kJoinSent, now);
  AgentAction join;
  join.kind = AgentAction::Kind::kJoin;
  join.assignment = assignment_;
  join.text = failed_check;
  actions_.push_back(std::move(join));
}

void AgentStateMachine::Assigned(const Assignment& assignment, absl::Time now) {
  OutageOver();
  if (phase_ == Phase::kJoining) RunRound(assignment, /*in_place=*/false, now);
}

void AgentStateMachine::RunRound(const Assignment& assignment, bool in_place, absl::Time now) {
  timers_.Clear(Timer::kJoin);
  timers_.Clear(Timer::kProgress);
  phase_ = Phase::kRunning;
  assignment_ = assignment;
  stopping_ = false;
  failure_reported_ = false;
  failure_seen_ = false;
  succeeded_ = false;
  closing_ = false;
  stacks_ = Stacks::kNone;
  held_stop_ = 0;
  after_stop_ = AfterStop::kNothing;
  next_round_.reset();
  if (settings_.serves_store) {
    // A round run in place may start while the last round's workers still run elsewhere:
    // its store opens once the rendezvous says they are gone (StoreMayOpen).
    store_held_.reset();
    if (in_place && store_may_open_ < assignment.round) {
      store_held_ = assignment;
    } else {
      Emit(AgentAction::Kind::kOpenStoreRound).assignment = assignment;
    }
  }
  Announce(AgentMoment::Kind::kRoundStarting, now).assignment = assignment;
  Emit(AgentAction::Kind::kStartWorkers).assignment = assignment;
}

void AgentStateMachine::StoreMayOpen(int64_t round) {
  store_may_open_ = std::max(store_may_open_, round);
  if (store_held_ && store_held_->round <= store_may_open_) {
    Emit(AgentAction::Kind::kOpenStoreRound).assignment = *std::exchange(store_held_, std::nullopt);
  }
}

void AgentStateMachine::StopOrdered(StopReason reason, const std::string& detail,
                                    bool collect_stacks, const std::optional<Assignment>& next,
                                    absl::Time now) {
  if (over()) return;
  OutageOver();
  if (WorkDone()) {
    // As torchrun: a node whose workers succeeded is done, whatever the others do next.
    Emit(AgentAction::Kind::kEndStoreRound);
    Log(LogLevel::kWarning,
        absl::StrCat(detail, ": this node's workers had all succeeded in round ",
                     assignment_->round, ", so it does not run them again; exiting 0"));
    return Exit(kExitSuccess);
  }
  // A restart in place: its next round came with the order, so RENDEZVOUS counts from it.
  if (next) Announce(AgentMoment::Kind::kJoinSent, now);
  Announce(AgentMoment::Kind::kStopOrdered, now).membership_change =
      reason == StopReason::kMembershipChanged;
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

void AgentStateMachine::RunEnded(const RunEnd& end, bool collect_stacks, absl::Time now) {
  if (over()) return;
  Announce(AgentMoment::Kind::kRunEnded, now);
  OutageOver();
  CollectStacksIfRunning(collect_stacks);
  run_end_ = end;
  StopThen(AfterStop::kEnd, now);
}

void AgentStateMachine::Refused(const std::string& detail, absl::Time now) {
  if (over()) return;
  OutageOver();
  Log(LogLevel::kError, absl::StrCat("the rendezvous refused this node: ", detail));
  StopThen(AfterStop::kLeave, now);
}

void AgentStateMachine::Progress(const std::string& text, bool master_answered, absl::Time now) {
  if (phase_ != Phase::kJoining || text.empty()) return;
  std::string line = absl::StrCat(
      "waiting for a round for ",
      absl::FormatDuration(absl::Floor(now - joined_at_, absl::Seconds(1))), ": ", text);
  // The master says when the run ends; when it does not answer, this node's own bound is news.
  if (!master_answered && timers_.IsSet(Timer::kJoin)) {
    absl::StrAppend(
        &line, "; this node gives up in ",
        absl::FormatDuration(absl::Floor(*timers_.At(Timer::kJoin) - now, absl::Seconds(1))),
        " (join_timeout + keep_alive_interval)");
  }
  Log(LogLevel::kWarning, std::move(line));
}

void AgentStateMachine::Excluded(const std::string& detail, absl::Duration cooldown,
                                 absl::Time now) {
  if (over()) return;
  OutageOver();
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
  timers_.Clear(Timer::kJoin);
  timers_.Clear(Timer::kProgress);
  timers_.Set(Timer::kCooldown, now + cooldown_);
  Log(LogLevel::kWarning,
      absl::StrCat("this node asks to join again in ", absl::FormatDuration(cooldown_),
                   " (--node-cooldown)", settings_.health_check ? ", after its health check" : ""));
}

void AgentStateMachine::Signal(int signal, absl::Time now) {
  if (phase_ == Phase::kExiting) return FinishExit();  // waiting for a hang report: not now
  if (done()) return;
  const bool running = phase_ == Phase::kRunning;
  if (interrupted_by_ == 0) {
    interrupted_by_ = signal;
    if (!running) {
      Log(LogLevel::kWarning,
          absl::StrCat("received ", SignalName(signal), ": no workers are running; exiting"));
      return Exit(ExitCodeForSignal(signal));
    }
    Log(LogLevel::kWarning,
        absl::StrCat("received ", SignalName(signal), ": forwarding it to ",
                     settings_.nproc_per_node, " workers, SIGKILL after ",
                     absl::ToDoubleSeconds(settings_.options.shutdown_timeout), "s"));
    BeginStop(signal, now);
  } else if (running) {
    Log(LogLevel::kWarning,
        absl::StrCat("received ", SignalName(signal), " again: killing the workers now"));
    Kill(absl::StrCat("at a second ", SignalName(signal)), now);
  }
}

void AgentStateMachine::WorkersChanged(const WorkersView& view, absl::Time now) {
  if (phase_ != Phase::kRunning || closing_) return;
  if (view.any_failed && !std::exchange(failure_seen_, true)) {
    Announce(AgentMoment::Kind::kFailureSeen, now);
  }
  if (!failure_reported_ && view.any_failed && unhealthy_.empty()) {
    // Tell the rendezvous at once, so that other nodes stop too, and stop ours meanwhile.
    failure_reported_ = true;
    if (!stopping_) BeginStop(SIGTERM, now);
    EmitForRound(AgentAction::Kind::kReportFailure);
  }
  if (view.all_exited) {
    timers_.Clear(Timer::kGrace);
    timers_.Clear(Timer::kKill);
    closing_ = true;
    Announce(AgentMoment::Kind::kWorkersStopped, now);
    Emit(AgentAction::Kind::kCloseAttempt);
  }
}

void AgentStateMachine::HangFound(const FoundHang& hang, absl::Time now) {
  // The first hang only: once the workers are frozen or told to stop, the attempt is over.
  if (phase_ != Phase::kRunning || closing_ || stopping_ || stacks_ != Stacks::kNone) return;
  Log(LogLevel::kWarning,
      absl::StrCat(hang.cause, "; recording where every worker is, then stopping it (local_rank ",
                   hang.local_rank, ", pid ", hang.pid, ")"));
  Freeze();
  if (hang.node_unhealthy) {
    // Not a failure of the job: this node cannot run it. No restart is spent on it here;
    // the rendezvous hears that the node leaves. No order will ask for the stacks: the
    // stop takes them first (BeginStop).
    unhealthy_ = hang.cause;
    Log(LogLevel::kError,
        absl::StrCat(unhealthy_, "; stopping this node's workers; this node leaves the job"));
    return StopThen(AfterStop::kUnhealthy, now);
  }
  // A failure: the rendezvous hears it at once and orders every node to record its stacks
  // and stop; ours wait, frozen, for that order (or the grace period).
  failure_reported_ = true;
  timers_.Set(Timer::kGrace, now + settings_.options.shutdown_timeout);
  EmitForRound(AgentAction::Kind::kReportFailure);
}

void AgentStateMachine::StacksTaken() {
  if (phase_ != Phase::kRunning || stacks_ != Stacks::kCollecting) return;
  stacks_ = Stacks::kTaken;
  Emit(AgentAction::Kind::kKillHung);
  if (held_stop_ != 0)
    EmitWithSignal(AgentAction::Kind::kStopWorkers, std::exchange(held_stop_, 0));
}

void AgentStateMachine::HangReportArrived(int64_t round) {
  if (round != awaited_report_) return;
  awaited_report_ = -1;
  timers_.Clear(Timer::kReport);
  if (phase_ == Phase::kExiting) FinishExit();
}

void AgentStateMachine::AttemptClosed(const AttemptResult& result, absl::Time now) {
  if (phase_ != Phase::kRunning || !closing_) return;
  closing_ = false;
  if (result.root_cause) last_root_cause_ = result.root_cause;
  if (result.awaits_hang_report && assignment_) {
    awaited_report_ = assignment_->round;
    timers_.Set(Timer::kReport, now + settings_.hangs.report_wait);
  }
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
    succeeded_ = true;
  }
  // Failed (already reported) or succeeded: the rendezvous decides what comes next.
  phase_ = Phase::kFinishing;
}

void AgentStateMachine::Fatal(int exit_code) {
  if (done()) return;
  awaited_report_ = -1;  // the shell cannot go on: nothing more is waited for
  Exit(exit_code);
}

void AgentStateMachine::Tick(absl::Time now) {
  for (Timer timer : TimerTable<Timer>::All()) {
    if (timers_.Fire(timer, now) && !OnTimer(timer, now)) return;
  }
}

bool AgentStateMachine::OnTimer(Timer timer, absl::Time now) {
  switch (timer) {
    case Timer::kGrace:
      if (phase_ == Phase::kRunning) {
        Kill(absl::StrCat("after the ", absl::FormatDuration(settings_.options.shutdown_timeout),
                          " grace period (--shutdown-timeout)"),
             now);
      }
      return true;
    case Timer::kKill:
      if (phase_ == Phase::kRunning && !closing_) {
        // The kernel holds them (uninterruptible sleep, a hung device or filesystem): waiting
        // longer would wedge this agent too. Say which, tell the rendezvous, and go.
        AgentAction abandon;
        abandon.kind = AgentAction::Kind::kAbandonWorkers;
        abandon.text =
            absl::StrCat("still running ", absl::FormatDuration(settings_.options.kill_timeout),
                         " after SIGKILL (--kill-timeout): the node is unhealthy");
        actions_.push_back(std::move(abandon));
        others_still_run_ = true;
        Exit(kExitNodeUnhealthy);
        return false;
      }
      return true;
    case Timer::kJoin:
      if (phase_ == Phase::kJoining) {
        Log(LogLevel::kError, JoinTimeoutMessage());
        Exit(kExitRendezvous);
        return false;
      }
      return true;
    case Timer::kProgress:
      if (phase_ == Phase::kJoining) {
        Emit(AgentAction::Kind::kCheckProgress);
        timers_.Set(Timer::kProgress, now + settings_.progress_every);
      } else if (WorkDone() && master_lost_at_) {
        WaitForMasterWithWorkDone("", now);
      }
      return true;
    case Timer::kCooldown:
      if (phase_ == Phase::kCoolingDown) JoinNextRound(now);
      return true;
    case Timer::kReport:
      awaited_report_ = -1;
      if (phase_ == Phase::kExiting) {
        Log(LogLevel::kWarning,
            absl::StrCat("the master's hang report did not come within ",
                         absl::FormatDuration(settings_.hangs.report_wait),
                         ": this node's hang_report.txt has its own ranks only"));
        FinishExit();
        return false;
      }
      return true;
    case Timer::kOutage:
      if (master_lost_at_) NoMasterInTime(now);
      return true;
    case Timer::kReach:
      CheckReach(now);
      return true;
    case Timer::kResume:
      if (master_lost_at_) Resume(now);
      return true;
    case Timer::kHeartbeat:
      Emit(AgentAction::Kind::kHeartbeat);
      timers_.Set(Timer::kHeartbeat, now + settings_.heartbeat_interval);
      return true;
    case Timer::kCount:
      break;
  }
  return true;
}

std::vector<AgentAction> AgentStateMachine::TakeActions() {
  std::vector<AgentAction> out;
  out.swap(actions_);
  return out;
}

absl::Time AgentStateMachine::NextDeadline() const { return timers_.Next(); }

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
      return RunRound(Assignment(*std::exchange(next_round_, std::nullopt)), /*in_place=*/true,
                      now);
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
  timers_.Set(Timer::kGrace, now + settings_.options.shutdown_timeout);
  // Frozen after a hang: where every worker is comes first, then the stop goes out
  // (StacksTaken). A stop no order asked stacks for (a lost master, a signal) takes them too.
  if (stacks_ == Stacks::kFrozen) CollectStacks();
  if (stacks_ == Stacks::kCollecting) {
    if (held_stop_ == 0) held_stop_ = signal;
    return;
  }
  EmitWithSignal(AgentAction::Kind::kStopWorkers, signal);
}

void AgentStateMachine::ExitAtRunEnd() {
  NodeAtEnd node;
  node.host = settings_.host;
  node.has_token = settings_.has_token;
  node.root_cause = last_root_cause_;
  node.in_last_round = phase_ == Phase::kRunning || phase_ == Phase::kFinishing;
  node.first_rank = assignment_ ? assignment_->base_rank : 0;
  node.ranks = assignment_ ? settings_.nproc_per_node : 0;
  node.ever_placed = assignment_.has_value();
  node.master = settings_.master_endpoint;
  RunExit exit = ExitForRunEnd(*run_end_, node);
  if (exit.failure_summary) Emit(AgentAction::Kind::kWriteFailureSummary);
  for (auto& [level, text] : exit.lines) Log(level, std::move(text));
  if (exit.others_still_run) others_still_run_ = true;
  Exit(exit.exit_code);
}

// Every node's copy of a hang report is kept: one that sent its stacks of an incomplete
// report waits a little for the master's merged one before it exits.
void AgentStateMachine::Exit(int exit_code) {
  phase_ = Phase::kExiting;
  exit_code_ = exit_code;
  timers_.Clear(Timer::kGrace);
  timers_.Clear(Timer::kKill);
  timers_.Clear(Timer::kJoin);
  timers_.Clear(Timer::kProgress);
  timers_.Clear(Timer::kHeartbeat);
  timers_.Clear(Timer::kCooldown);
  OutageOver();
  if (awaited_report_ < 0) FinishExit();
}

void AgentStateMachine::FinishExit() {
  phase_ = Phase::kDone;
  timers_.Clear(Timer::kReport);
  Emit(AgentAction::Kind::kExit).exit_code = exit_code_;
}

void AgentStateMachine::CollectStacksIfRunning(bool collect_stacks) {
  if (collect_stacks && phase_ == Phase::kRunning && !closing_) CollectStacks();
}

void AgentStateMachine::Freeze() {
  stacks_ = Stacks::kFrozen;
  Emit(AgentAction::Kind::kFreezeWorkers);
}

// Once per attempt: the workers are frozen first, and the stacks taken after the settle
// between nodes (none on one node).
void AgentStateMachine::CollectStacks() {
  if (stacks_ == Stacks::kNone) Freeze();
  if (stacks_ != Stacks::kFrozen) return;
  stacks_ = Stacks::kCollecting;
  Emit(AgentAction::Kind::kCollectStacks).settle = assignment_ && assignment_->group_world_size > 1
                                                       ? settings_.hangs.freeze_settle
                                                       : absl::ZeroDuration();
}

void AgentStateMachine::Kill(std::string why, absl::Time now) {
  timers_.Set(Timer::kKill, now + settings_.options.kill_timeout);
  Emit(AgentAction::Kind::kKillWorkers).text = std::move(why);
}

void AgentStateMachine::Log(LogLevel level, std::string text) {
  AgentAction& log = Emit(AgentAction::Kind::kLog);
  log.level = level;
  log.text = std::move(text);
}

AgentMoment& AgentStateMachine::Announce(AgentMoment::Kind kind, absl::Time now) {
  AgentAction& action = Emit(AgentAction::Kind::kMoment);
  action.moment.kind = kind;
  action.moment.at = now;
  return action.moment;
}

AgentAction& AgentStateMachine::Emit(AgentAction::Kind kind) {
  actions_.emplace_back();
  actions_.back().kind = kind;
  return actions_.back();
}

void AgentStateMachine::EmitWithSignal(AgentAction::Kind kind, int signal) {
  Emit(kind).signal = signal;
}

void AgentStateMachine::EmitForRound(AgentAction::Kind kind) {
  Emit(kind).round = assignment_ ? assignment_->round : 0;
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
