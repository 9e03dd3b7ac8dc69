#include "rendezvous/round_state_machine.h"

#include <algorithm>
#include <climits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/process_status.h"
#include "common/status_macros.h"

namespace ddprun {

RoundStateMachine::RoundStateMachine(RendezvousSettings settings, absl::Time now,
                                     std::string run_incarnation)
    : settings_(std::move(settings)),
      health_(settings_.node_health),
      run_incarnation_(std::move(run_incarnation)),
      gathering_since_(now) {}

void RoundStateMachine::AdoptRunIncarnation(const std::string& run_incarnation) {
  if (run_incarnation.empty() || run_incarnation == run_incarnation_) return;
  run_incarnation_ = run_incarnation;
  ++incarnation_changes_;
}

absl::Duration RoundStateMachine::DeadAfter() const {
  return settings_.keep_alive_interval * settings_.keep_alive_max_attempt;
}

absl::Status RoundStateMachine::Join(SessionId session, const NodeInfo& node, absl::Time now) {
  if (node.resume) return Resume(session, node, now);
  // This join replaces the session's earlier one, if any: a round that closes meanwhile (when
  // an old session of the same agent is dropped, below) must not take it as it was.
  if (auto mine = nodes_.find(session); mine != nodes_.end()) nodes_.SetJoined(mine->second, false);
  ForgetHeldResume(session);  // a resume it sent before is no longer what it asks
  DropOldSession(session, node, now);
  if (phase_ == Phase::kEnded) return JoinEndedRun(session);
  if (!node.failed_check.empty()) {
    DDPRUN_RETURN_IF_ERROR(CheckFailedCheckIsItsOwn(session, node));
  }
  Node& entry = nodes_.Admit(session, node, now);
  const bool member = entry.member;
  if (!node.failed_check.empty()) {
    health_.CheckFailed(node.host, node.failed_check, now);
    KeepOutHost(node.host, /*round_ends_anyway=*/member && phase_ == Phase::kRunning, now);
  }
  if (std::optional<NodeExclusion> excluded = health_.KeepOut(node.host, now)) {
    nodes_.SetJoined(entry, false);
    if (member && phase_ == Phase::kRunning) {
      // EndRound tells it (kExclude) with the others' stop orders.
      EndRound(StopReason::kMembershipChanged,
               absl::StrCat(node.host, " rejoined while its round was running, and is excluded"),
               now);
    } else {
      SendExclusion(session, *excluded, now);
      if (phase_ == Phase::kGathering) MaybeCloseRound(now);
    }
    return absl::OkStatus();
  }
  nodes_.SetJoined(entry, true);
  if (phase_ == Phase::kGathering) {
    MaybeCloseRound(now);
    return absl::OkStatus();
  }
  if (member && phase_ == Phase::kRunning) {
    // A member asking for a new round while its round runs has restarted its side.
    EndRound(StopReason::kMembershipChanged,
             absl::StrCat(node.host, " rejoined while its round was running"), now);
  } else if (member) {
    // Finishing: no new rounds. It waits for the end of the run like everyone else.
  } else if (phase_ == Phase::kRunning && nodes_.placeholders() == 0 &&
             static_cast<int>(members_.size()) < settings_.max_nodes) {
    // (While a restarted master waits for places of the round it took up, a newcomer waits
    // too: it joins the job once the round is whole, TakeOver.)
    EndRound(StopReason::kMembershipChanged,
             absl::StrCat(node.host, " joins the job (", members_.size() + 1, " nodes)"), now);
  }
  // Otherwise it waits: the job is at --nnodes' maximum, or finishing.
  return absl::OkStatus();
}

void RoundStateMachine::DropOldSession(SessionId session, const NodeInfo& node, absl::Time now) {
  // An agent holds one session at a time: one that joins on a new session has given up the
  // old one (it lost the master, e.g. in a partition, and stopped its workers), even if the
  // old one has not timed out here yet.
  if (const SessionId same = nodes_.OfIncarnation(node.incarnation); same != 0 && same != session) {
    RemoveNode(same, "it reconnected on a new session", /*evict=*/true, now);
  }
}

void RoundStateMachine::Disconnect(SessionId session, absl::Time now) {
  auto it = nodes_.find(session);
  if (it == nodes_.end()) return;
  if (it->second.member && (phase_ == Phase::kRunning || phase_ == Phase::kFinishing)) {
    // Its agent may be alive and its workers running (the master restarted, or the path
    // between them broke for a moment): it has ReconnectGrace() to come back (Resume).
    // Its silence counts from the break: the keep-alive rule must not drop it first.
    if (!it->second.away_until) {
      nodes_.Seen(session, it->second, now);
      MarkAway(session, now + ReconnectGrace());
    }
    return;
  }
  RemoveNode(session, "its connection to the master broke", /*evict=*/false, now);
}

void RoundStateMachine::Bye(SessionId session, absl::Time now) {
  if (nodes_.count(session) == 0) return;
  RemoveNode(session, "its agent exited", /*evict=*/false, now);
}

void RoundStateMachine::ReportFailure(SessionId session, int64_t round,
                                      std::vector<ReportedFailure> failures, absl::Time now) {
  if (!failures.empty() && HoldReport(session, round, failures)) return;
  if (round != round_ || failures.empty() || !IsMember(session)) {
    return;  // a report about a round that has already ended
  }
  // A node speaks for its own ranks only, under its own name: a forged report about other
  // nodes' ranks must not spend the job's restarts or name a false root cause.
  const Node& node = nodes_.at(session);
  failures.erase(std::remove_if(failures.begin(), failures.end(),
                                [&](const ReportedFailure& f) {
                                  return f.rank < node.base_rank ||
                                         f.rank >= node.base_rank + node.info.local_world_size;
                                }),
                 failures.end());
  if (failures.empty()) return;
  if (AnUnfinishedMemberIsAway() &&
      std::all_of(failures.begin(), failures.end(),
                  [](const ReportedFailure& f) { return f.peer_lost; })) {
    // Its workers died because peers went away, while a member that runs is away: that
    // member's agent is gone with its workers, not back in a moment. A membership change;
    // nothing is spent (removing it ends the round, or the run while finishing).
    return LoseAwayMembers("its connection to the master broke and its peers lost it", now);
  }
  for (ReportedFailure& f : failures) {
    f.host = node.info.host;
    f.local_rank = f.rank - node.base_rank;
    const bool known = f.exit_code >= -64 && f.exit_code <= 255;
    ++failure_counts_[{FailureCause(f), known ? f.exit_code : kOtherExitCode}];
  }
  Heartbeat(session, now);
  const ReportedFailure first =
      *std::min_element(failures.begin(), failures.end(), RootCauseBefore);
  failures_.insert(failures_.end(), failures.begin(), failures.end());
  // A hung rank: every node records where its workers are before stopping them.
  collect_stacks_ = std::any_of(failures.begin(), failures.end(),
                                [](const ReportedFailure& f) { return f.hung; });
  if (collect_stacks_) stacks_round_ = round_;
  // The summary's words for it: exitcode -N is "Signal N (SIGX)" there, so its name here.
  const std::string what =
      absl::StrCat("rank ", first.rank, " on ", first.host, " failed (exitcode ", first.exit_code,
                   first.exit_code < 0 ? absl::StrCat(": ", SignalName(-first.exit_code)) : "",
                   first.hung ? ", taken for hung" : "", ")");
  if (phase_ == Phase::kFinishing) {
    EndRun(RunOutcome::kFailed,
           absl::StrCat(what, " after another node had finished: no restart is possible"), now);
  } else if (phase_ == Phase::kRunning && restarts_spent_ < settings_.max_restarts) {
    ++restarts_spent_;
    // The node whose failure ended the round is its root cause; the exclusion itself spends
    // no restart: the round that follows is this failure's restart.
    std::string excluded;
    if (health_.CountFailure(first.host, now)) {
      excluded = absl::StrCat("; ", first.host,
                              " is excluded: ", health_.Excluded(first.host, now)->reason);
      KeepOutHost(first.host, /*round_ends_anyway=*/true, now);
    }
    const std::string detail =
        absl::StrCat(what, ": restarting all workers (", restarts_spent_,
                     " of --max-restarts=", settings_.max_restarts, " restarts used)", excluded);
    if (excluded.empty() && CanRestartInPlace(now)) {
      RestartInPlace(detail, now);
    } else {
      EndRound(StopReason::kWorkerFailed, detail, now);
    }
  } else if (phase_ == Phase::kRunning) {
    EndRun(
        RunOutcome::kFailed,
        absl::StrCat(what, "; restart budget spent (--max-restarts=", settings_.max_restarts, ")"),
        now);
  }
  collect_stacks_ = false;
}

void RoundStateMachine::Leave(SessionId session, const std::string& reason, absl::Time now) {
  auto it = nodes_.find(session);
  if (it == nodes_.end()) return;
  const std::string host = it->second.info.host;
  health_.Left(host, reason, now);
  KeepOutHost(host, /*round_ends_anyway=*/it->second.member && phase_ == Phase::kRunning, now);
  RemoveNode(session, absl::StrCat("it left as unhealthy: ", reason), /*evict=*/false, now);
}

void RoundStateMachine::ReportSuccess(SessionId session, int64_t round, absl::Time now) {
  if (HoldReport(session, round, {})) return;
  if (round != round_ || (phase_ != Phase::kRunning && phase_ != Phase::kFinishing) ||
      !IsMember(session)) {
    return;
  }
  Heartbeat(session, now);
  nodes_.SetFinished(nodes_.at(session), true);
  if (phase_ == Phase::kRunning) {
    phase_ = Phase::kFinishing;
    finishing_deadline_ = now + settings_.exit_barrier_timeout;
  }
  if (nodes_.finished_members() == static_cast<int>(members_.size())) {
    EndRun(RunOutcome::kSucceeded, "every node's workers succeeded", now);
  }
}

absl::Status RoundStateMachine::JoinEndedRun(SessionId session) {
  if (outcome_ != RunOutcome::kStopped) {
    return absl::FailedPreconditionError(
        absl::StrCat("this run has already ended (", end_detail_,
                     ") and admits no one: start the job again with a new --rdzv-id "
                     "(another job: a port of its own)"));
  }
  // An operator stopped the job: an agent that comes late (or back) stops too, and exits as they
  // did.
  Outbound out;
  out.session = session;
  out.kind = Outbound::Kind::kEnd;
  out.outcome = outcome_;
  out.detail = end_detail_;
  outbound_.push_back(std::move(out));
  return absl::OkStatus();
}

void RoundStateMachine::Stop(const std::string& detail, absl::Time now) {
  if (phase_ != Phase::kEnded) EndRun(RunOutcome::kStopped, detail, now);
}

void RoundStateMachine::Tick(absl::Time now) {
  if (phase_ == Phase::kEnded) return;
  std::vector<SessionId> silent;
  for (const auto& [last_seen, session] : nodes_.by_last_seen()) {
    if (now - last_seen < DeadAfter()) break;
    silent.push_back(session);
  }
  // None of them is in a round that closes while the others are being dropped.
  for (SessionId session : silent) nodes_.SetJoined(nodes_.at(session), false);
  for (SessionId session : silent) {
    if (phase_ == Phase::kEnded) return;
    ++keep_alive_misses_;
    RemoveNode(session,
               absl::StrCat("no heartbeat for ", absl::FormatDuration(DeadAfter()),
                            " (keep_alive_interval x keep_alive_max_attempt)"),
               /*evict=*/true, now);
  }
  std::vector<SessionId> gone;
  for (const auto& [until, session] : nodes_.away()) {
    if (until > now) break;
    gone.push_back(session);
  }
  for (SessionId session : gone) {
    if (phase_ == Phase::kEnded) return;
    RemoveNode(session,
               absl::StrCat(nodes_.at(session).placeholder
                                ? "it did not come back to the restarted master"
                                : "its connection to the master broke and it did not come back",
                            " within ", absl::FormatDuration(ReconnectGrace())),
               /*evict=*/false, now);
  }
  if (take_up_ && now >= take_up_->decide_at) DecideTakeUp(now);
  if (phase_ == Phase::kGathering && !take_up_) {
    if (last_call_deadline_ && now >= *last_call_deadline_) {
      CloseRound(now);
    } else if (nodes_.joined() < settings_.min_nodes &&
               now - gathering_since_ >= settings_.join_timeout) {
      EndRun(RunOutcome::kTimedOut,
             absl::StrCat("rendezvous timed out after join_timeout=",
                          absl::FormatDuration(settings_.join_timeout), ": ", DescribeMissing(now)),
             now);
    }
  } else if (phase_ == Phase::kFinishing && finishing_deadline_ && now >= *finishing_deadline_) {
    ReleaseFinishedMembers();
  }
}

void RoundStateMachine::ReleaseFinishedMembers() {
  // The exit barrier bounds how long finished nodes wait for the others, nothing more: the
  // nodes still running go on, and the run ends when they end.
  finishing_deadline_.reset();
  std::vector<SessionId> finished;
  std::vector<std::string> running;
  for (SessionId s : members_) {
    if (nodes_.at(s).finished) {
      finished.push_back(s);
    } else {
      running.push_back(nodes_.at(s).info.host);
    }
  }
  const std::string detail = absl::StrCat(
      "this node's workers succeeded; the exit barrier timed out after ",
      absl::FormatDuration(settings_.exit_barrier_timeout),
      " (--exit-barrier-timeout) with nodes still running: ", absl::StrJoin(running, ", "));
  for (SessionId s : finished) {
    Outbound out;
    out.session = s;
    out.kind = Outbound::Kind::kEnd;
    out.outcome = RunOutcome::kReleased;
    out.detail = detail;
    outbound_.push_back(std::move(out));
    EraseNode(s);
  }
  members_.erase(std::remove_if(members_.begin(), members_.end(),
                                [this](SessionId s) { return nodes_.count(s) == 0; }),
                 members_.end());
}

std::vector<Outbound> RoundStateMachine::TakeOutbound() {
  std::vector<Outbound> out;
  out.swap(outbound_);
  return out;
}

absl::Time RoundStateMachine::NextDeadline() const {
  absl::Time next = absl::InfiniteFuture();
  if (phase_ == Phase::kEnded) return next;
  if (!nodes_.by_last_seen().empty()) next = nodes_.by_last_seen().begin()->first + DeadAfter();
  if (!nodes_.away().empty()) next = std::min(next, nodes_.away().begin()->first);
  if (take_up_) next = std::min(next, take_up_->decide_at);
  if (phase_ == Phase::kGathering && !take_up_) {
    if (last_call_deadline_) next = std::min(next, *last_call_deadline_);
    if (nodes_.joined() < settings_.min_nodes) {
      next = std::min(next, gathering_since_ + settings_.join_timeout);
    }
  }
  if (phase_ == Phase::kFinishing && finishing_deadline_)
    next = std::min(next, *finishing_deadline_);
  return next;
}

bool RoundStateMachine::AllPreviousMembersBack() const {
  return nodes_.previous_here() > 0 && nodes_.previous_back() == nodes_.previous_here();
}

void RoundStateMachine::MaybeCloseRound(absl::Time now) {
  if (take_up_) return;  // the round the nodes resume comes first (DecideTakeUp)
  const int joined = nodes_.joined();
  if (joined >= settings_.max_nodes ||
      (joined >= settings_.min_nodes && AllPreviousMembersBack())) {
    CloseRound(now);
  } else if (joined >= settings_.min_nodes) {
    if (!last_call_deadline_) last_call_deadline_ = now + settings_.last_call_timeout;
    if (now >= *last_call_deadline_) CloseRound(now);
  } else {
    last_call_deadline_.reset();
  }
}

void RoundStateMachine::CloseRound(absl::Time now) {
  for (SessionId s : members_) {
    if (auto it = nodes_.find(s); it != nodes_.end()) nodes_.SetMember(it->second, false);
  }
  members_ = OrderForNextRound();
  if (history_.empty()) AdoptJoinClaims();
  BeginRound(std::nullopt, now);
}

void RoundStateMachine::EndRound(StopReason reason, const std::string& detail, absl::Time now) {
  EndRecord(detail, now);
  still_stopping_.clear();          // every member rejoins once its workers have exited
  std::vector<SessionId> excluded;  // told so instead of being stopped; not waited for
  for (SessionId s : members_) {
    if (auto exclusion = health_.Excluded(nodes_.at(s).info.host, now)) {
      SendExclusion(s, *exclusion, now);
      excluded.push_back(s);
      continue;
    }
    Outbound out;
    out.session = s;
    out.kind = Outbound::Kind::kStop;
    out.stop_reason = reason;
    out.detail = detail;
    out.collect_stacks = collect_stacks_;
    outbound_.push_back(std::move(out));
  }
  for (SessionId s : previous_members_) {
    if (auto it = nodes_.find(s); it != nodes_.end()) nodes_.SetPreviousMember(it->second, false);
  }
  for (SessionId s : members_) {
    Node& node = nodes_.at(s);
    nodes_.SetMember(node, false);
    nodes_.SetPreviousMember(node,
                             std::find(excluded.begin(), excluded.end(), s) == excluded.end());
  }
  previous_members_ = std::move(members_);
  members_.clear();
  phase_ = Phase::kGathering;
  gathering_since_ = now;
  last_call_deadline_.reset();
  finishing_deadline_.reset();
  MaybeCloseRound(now);  // nodes waiting to join may already be enough; members must rejoin
}

void RoundStateMachine::EndRun(RunOutcome outcome, const std::string& detail, absl::Time now) {
  if (phase_ == Phase::kRunning || phase_ == Phase::kFinishing) EndRecord(detail, now);
  still_stopping_.clear();
  phase_ = Phase::kEnded;
  outcome_ = outcome;
  end_detail_ = detail;
  // No round runs any more. Cleared here, once, so that the agents leaving afterwards
  // (RemoveNode returns early once the run has ended) cost O(1) each.
  for (SessionId s : members_) {
    if (auto it = nodes_.find(s); it != nodes_.end()) nodes_.SetMember(it->second, false);
  }
  members_.clear();
  std::vector<ReportedFailure> root;
  if (!failures_.empty()) {
    root.push_back(*std::min_element(failures_.begin(), failures_.end(), RootCauseBefore));
  }
  std::vector<std::string> excluded;
  for (const NodeExclusion& e : health_.Record()) excluded.push_back(NodeHealth::Describe(e, now));
  for (const auto& [session, node] : nodes_) {
    Outbound out;
    out.session = session;
    out.kind = Outbound::Kind::kEnd;
    out.outcome = outcome;
    out.detail = detail;
    out.collect_stacks = collect_stacks_;
    out.root_cause = root;
    out.excluded = excluded;
    outbound_.push_back(std::move(out));
  }
}

void RoundStateMachine::RemoveNode(SessionId session, const std::string& why, bool evict,
                                   absl::Time now) {
  auto it = nodes_.find(session);
  if (it == nodes_.end()) return;
  const std::string host = it->second.info.host;
  const bool finished = it->second.finished;
  const bool was_member = it->second.member;
  const bool was_previous_member = it->second.previous_member;
  const bool placeholder = it->second.placeholder;
  EraseNode(session);
  if (evict) {
    Outbound out;
    out.session = session;
    out.kind = Outbound::Kind::kEvict;
    out.detail = absl::StrCat("the master dropped ", host, ": ", why);
    outbound_.push_back(std::move(out));
  }
  if (phase_ == Phase::kEnded) return;  // nothing more to decide
  if (was_member || was_previous_member) departed_.push_back(host);
  std::string excluded;  // a member lost while its round ran is a flap of its node
  if (was_member && !placeholder && phase_ == Phase::kRunning && !health_.Excluded(host, now) &&
      health_.CountFlap(host, now)) {
    excluded = absl::StrCat("; it is excluded: ", health_.Excluded(host, now)->reason);
    KeepOutHost(host, /*round_ends_anyway=*/true, now);
  }
  if (!was_member) {
    if (phase_ == Phase::kGathering) MaybeCloseRound(now);
    return;
  }
  members_.erase(std::find(members_.begin(), members_.end(), session));
  const std::string detail = absl::StrCat(host, " left the job: ", why, excluded);
  if (phase_ == Phase::kRunning) {
    EndRound(StopReason::kMembershipChanged, detail, now);
  } else if (phase_ == Phase::kFinishing && !finished) {
    EndRun(RunOutcome::kFailed, absl::StrCat(detail, ", before its workers finished"), now);
  } else if (phase_ == Phase::kFinishing) {
    if (nodes_.finished_members() == static_cast<int>(members_.size())) {
      EndRun(RunOutcome::kSucceeded, "every node's workers succeeded", now);
    }
  }
}

void RoundStateMachine::KeepOutHost(const std::string& host, bool round_ends_anyway,
                                    absl::Time now) {
  const std::optional<NodeExclusion> exclusion = health_.Excluded(host, now);
  if (!exclusion) return;
  bool runs_there = false;
  const std::string key = NodeHealth::Key(host);
  for (auto& [session, node] : nodes_) {
    if (NodeHealth::Key(node.info.host) != key) continue;
    if (node.member) {
      runs_there = true;
    } else if (node.joined) {
      nodes_.SetJoined(node, false);
      SendExclusion(session, *exclusion, now);
    }
  }
  if (runs_there && !round_ends_anyway && phase_ == Phase::kRunning) {
    // Its workers stop: EndRound tells its members, as it does every excluded member.
    EndRound(StopReason::kMembershipChanged,
             absl::StrCat(host, " is excluded: ", exclusion->reason), now);
  }
}

void RoundStateMachine::SendExclusion(SessionId session, const NodeExclusion& exclusion,
                                      absl::Time now) {
  Outbound out;
  out.session = session;
  out.kind = Outbound::Kind::kExclude;
  out.cooldown = NodeHealth::CooldownLeft(exclusion, now);
  out.detail = NodeHealth::Describe(exclusion, now);
  outbound_.push_back(std::move(out));
}

}  // namespace ddprun
