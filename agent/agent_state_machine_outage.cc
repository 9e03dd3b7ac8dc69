// AgentStateMachine without its master (docs/protocol.md, "Losing the master"): workers that
// are training need no master, so a node in a round the master has not ended keeps them
// running, reconnects and asks for its place back (a resume). It stops them only when it is
// cut off from the job too (group rank 0's store does not answer), when no master answers
// within master_outage_timeout, or when the master that answers says the round is over.
#include "absl/strings/str_cat.h"
#include "agent/agent_state_machine.h"
#include "common/exit_codes.h"
#include "common/listen_socket.h"

namespace ddprun {

void AgentStateMachine::MasterLost(const std::string& detail, absl::Time now) {
  if (over()) return;
  const bool in_round = (phase_ == Phase::kRunning || phase_ == Phase::kFinishing) && assignment_ &&
                        after_stop_ == AfterStop::kNothing &&
                        settings_.master_outage_timeout != absl::InfiniteDuration();
  if (!in_round) {
    // Joining, stopping for an order, or cooling down: nothing runs that a master ended.
    Log(LogLevel::kWarning,
        absl::StrCat("lost the rendezvous master: ", detail,
                     phase_ == Phase::kRunning ? "; stopping this node's workers and rejoining"
                                               : "; reconnecting and rejoining"));
    return StopForRejoin(now);
  }
  if (master_lost_at_) {
    // Lost again while away: a master answered and ended the new stream (it cannot take the
    // place back yet, or went away again). Ask again in a moment, not at once.
    if (!timers_.IsSet(Timer::kResume)) timers_.Set(Timer::kResume, now + kResumeRetry);
    return;
  }
  if (WorkDone()) {
    master_lost_at_ = now;
    WaitForMasterWithWorkDone(detail, now);
    return Resume(now);
  }
  {
    master_lost_at_ = now;
    timers_.Set(Timer::kOutage, now + settings_.master_outage_timeout);
    Log(LogLevel::kWarning,
        absl::StrCat("lost the rendezvous master: ", detail,
                     phase_ == Phase::kRunning && !stopping_
                         ? absl::StrCat("; this node's workers go on (round ", assignment_->round,
                                        ") while it reconnects and asks for its place back; "
                                        "they stop if no master answers within ")
                         : absl::StrCat("; what this node reports of round ", assignment_->round,
                                        " waits for a master; it reconnects and asks for its "
                                        "place back, and leaves the round if none answers within "),
                     absl::FormatDuration(settings_.master_outage_timeout),
                     " (--rdzv-conf master_outage_timeout)"));
  }
  Resume(now);
  CheckReach(now);
}

// torchrun's exit barrier gives up at once when its store is gone; this node first asks for
// its place back (a restarted master, an elected leader's successor, takes the round up with
// this node's success in it) for the keep-alive window, then exits 0 (Tick).
void AgentStateMachine::WaitForMasterWithWorkDone(const std::string& detail, absl::Time now) {
  const absl::Time gives_up = *master_lost_at_ + settings_.finished_master_wait;
  if (!detail.empty()) {
    timers_.Set(Timer::kOutage, gives_up);
    Log(LogLevel::kWarning, absl::StrCat("lost the rendezvous master: ", detail,
                                         "; this node's workers all "
                                         "succeeded (round ",
                                         assignment_->round,
                                         "): it asks a master to take that "
                                         "for up to ",
                                         absl::FormatDuration(settings_.finished_master_wait),
                                         ", then exits 0 without the exit barrier"));
  } else {
    Log(LogLevel::kInfo,
        absl::StrCat("no rendezvous master yet (lost ",
                     absl::FormatDuration(absl::Floor(now - *master_lost_at_, absl::Seconds(1))),
                     " ago); this node's workers all succeeded: it exits 0 in ",
                     absl::FormatDuration(absl::Ceil(gives_up - now, absl::Seconds(1))),
                     " unless one answers"));
  }
  if (gives_up - now > settings_.progress_first)
    timers_.Set(Timer::kProgress, now + settings_.progress_first);
}

void AgentStateMachine::NoMasterInTime(absl::Time now) {
  if (WorkDone()) {
    Log(LogLevel::kWarning,
        absl::StrCat("no rendezvous master answered within ",
                     absl::FormatDuration(settings_.finished_master_wait),
                     " of its loss: this node's workers all succeeded, so it exits 0 without "
                     "the exit barrier (each other node's agent reports its own outcome)"));
    return Exit(kExitSuccess);
  }
  Log(LogLevel::kError,
      absl::StrCat("no rendezvous master answered for ",
                   absl::FormatDuration(settings_.master_outage_timeout),
                   " (--rdzv-conf master_outage_timeout): stopping this node's workers; it "
                   "joins again when a master answers"));
  StopForRejoin(now);
}

void AgentStateMachine::Resume(absl::Time /*now*/) {
  Emit(AgentAction::Kind::kReconnect);
  AgentAction join;
  join.kind = AgentAction::Kind::kJoin;
  join.assignment = assignment_;
  join.resume = true;
  actions_.push_back(std::move(join));
}

void AgentStateMachine::Resumed(int64_t round, absl::Time now) {
  if (!master_lost_at_ || !assignment_ || round != assignment_->round) return;
  Log(LogLevel::kWarning,
      absl::StrCat("the rendezvous master answers again after ",
                   absl::FormatDuration(absl::Floor(now - *master_lost_at_, absl::Milliseconds(1))),
                   ": this node has its place back in round ", round,
                   phase_ == Phase::kRunning ? "; its workers never stopped" : ""));
  AgentMoment& back = Announce(AgentMoment::Kind::kMasterBack, now);
  back.round = round;
  back.lost = now - *master_lost_at_;
  OutageOver();
}

std::string AgentStateMachine::ReachTarget() const {
  // Group rank 0's store is group rank 0's own: it looks at group rank 1's host instead.
  if (assignment_->group_rank != 0) {
    return HostPort(assignment_->master_addr, assignment_->master_port);
  }
  return assignment_->neighbour_store;
}

void AgentStateMachine::CheckReach(absl::Time now) {
  if (!master_lost_at_ || phase_ != Phase::kRunning || stopping_ || !assignment_ ||
      ReachTarget().empty()) {
    return;  // a round of one node is cut off from nobody
  }
  Emit(AgentAction::Kind::kCheckReach).text = ReachTarget();
  timers_.Set(Timer::kReach, now + settings_.heartbeat_interval);
}

void AgentStateMachine::JobReach(bool reachable, const std::string& detail, absl::Time now) {
  if (reachable || !master_lost_at_ || phase_ != Phase::kRunning || stopping_ || !assignment_) {
    return;
  }
  // Neither the master nor the job: this node is cut off, and the master (if it lives) gives
  // its place away after the keep-alive window. Its workers must not train on meanwhile.
  Log(LogLevel::kWarning,
      absl::StrCat(
          assignment_->group_rank == 0 ? "group rank 1's host at " : "group rank 0's store at ",
          ReachTarget(), " does not answer either (", detail,
          "): this node is cut off from the job; stopping its workers (the others go "
          "on without it) and rejoining"));
  StopForRejoin(now);
}

void AgentStateMachine::StopForRejoin(absl::Time now) {
  OutageOver();
  Emit(AgentAction::Kind::kEndStoreRound);
  StopThen(AfterStop::kReconnect, now);
}

void AgentStateMachine::OutageOver() {
  master_lost_at_.reset();
  timers_.Clear(Timer::kOutage);
  timers_.Clear(Timer::kReach);
  timers_.Clear(Timer::kResume);
}

}  // namespace ddprun
