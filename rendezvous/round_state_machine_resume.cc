// How RoundStateMachine keeps a running round through a master outage (docs/protocol.md,
// "Losing the master"): a member whose stream broke is away, its place held for
// ReconnectGrace(); an agent that comes back on a new session with `resume` takes its place
// back; a restarted master takes the round up from those resumes, the round most of them
// prove (round_state_machine_take_up.cc). Nothing is stopped unless a member does not come
// back. The rules that end rounds are in round_state_machine.cc.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/ip_address.h"
#include "rendezvous/round_proof.h"
#include "rendezvous/round_state_machine.h"

namespace ddprun {

absl::Duration RoundStateMachine::ReconnectGrace() const {
  return std::min(DeadAfter(), std::max(settings_.keep_alive_interval, absl::Seconds(2)));
}

absl::Status RoundStateMachine::Resume(SessionId session, const NodeInfo& node, absl::Time now) {
  if (phase_ == Phase::kEnded) return JoinEndedRun(session);
  // An agent resumes on a new session. One that already said something else on this one
  // takes it back: what it said no longer holds.
  if (auto mine = nodes_.find(session);
      mine != nodes_.end() &&
      (!mine->second.member || mine->second.info.incarnation != node.incarnation)) {
    RemoveNode(session, "it joined again on its session", /*evict=*/false, now);
    if (phase_ == Phase::kEnded) return JoinEndedRun(session);
  }
  if (health_.KeepOut(node.host, now) || !node.failed_check.empty()) {
    // A node the run keeps out has no place to take back: it joins as any node does, and is
    // told it is kept out (its round, if it runs one, ends).
    NodeInfo joining = node;
    joining.resume.reset();
    return Join(session, joining, now);
  }
  if (!ProofHolds(*node.resume, node.incarnation)) {
    return StopStale(session, node, now,
                     absl::StrCat("this node's resume of round ", node.resume->round,
                                  " does not prove its place (its round digest or place proof "
                                  "is not the one its master gave it)"));
  }
  // A master that knows no round of the run (it restarted) takes it up as the nodes prove
  // it.
  if (WouldTakeUp(node)) return HoldForTakeUp(session, node, now);
  const SessionId place = PlaceOf(node);
  if (place == 0) return StopStale(session, node, now);
  TakeOver(place, session, node, now);
  return absl::OkStatus();
}

bool RoundStateMachine::WouldTakeUp(const NodeInfo& node) const {
  // Only a master that knows no round of the run: one that began or took up a round knows
  // where the run is, and a round it does not know is not the run's.
  return node.resume && history_.empty() && phase_ == Phase::kGathering &&
         node.resume->round > round_ && node.resume->group_world_size >= 1 &&
         node.resume->group_world_size <= settings_.max_nodes;
}

SessionId RoundStateMachine::PlaceOf(const NodeInfo& node) const {
  const Assignment& resumed = *node.resume;
  if ((phase_ != Phase::kRunning && phase_ != Phase::kFinishing) || resumed.round != round_) {
    return 0;
  }
  const SessionId same = nodes_.OfIncarnation(node.incarnation);
  return same != 0 && nodes_.at(same).member ? same : 0;
}

void RoundStateMachine::Rebuild(const Assignment& resumed, absl::Time now) {
  for (SessionId s : previous_members_) {
    if (auto it = nodes_.find(s); it != nodes_.end()) nodes_.SetPreviousMember(it->second, false);
  }
  previous_members_.clear();
  departed_.clear();
  still_stopping_.clear();
  failures_.clear();
  phase_ = Phase::kRunning;
  last_call_deadline_.reset();
  finishing_deadline_.reset();
  members_.clear();
  const absl::Time until = now + ReconnectGrace();
  for (int rank = 0; rank < resumed.group_world_size; ++rank) {
    const SessionId id = next_placeholder_++;
    Node& node =
        nodes_.AddPlaceholder(id, absl::StrCat("group rank ", rank, " (not back yet)"), now);
    node.round = round_;
    nodes_.SetMember(node, true);
    members_.push_back(id);
    MarkAway(id, until);
  }
  CarryOver(resumed, now);
}

RoundRecord& RoundStateMachine::CarryOver(const Assignment& numbers, absl::Time began) {
  round_ = numbers.round;  // above round_: WouldTakeUp, and no round closes meanwhile
  AdoptRunIncarnation(numbers.run_incarnation);
  restarts_spent_ =
      std::max(restarts_spent_, std::min(numbers.restart_count, settings_.max_restarts));
  RoundRecord record;
  record.round = numbers.round;
  record.restart_count = numbers.restart_count;
  record.nodes = numbers.group_world_size;
  record.world_size = numbers.world_size;
  record.gathering_began = began;
  record.began = began;
  record.taken_up = true;
  history_.push_back(std::move(record));
  if (history_.size() > kHistoryRounds) history_.pop_front();
  return history_.back();
}

void RoundStateMachine::TakeOver(SessionId old, SessionId session, const NodeInfo& node,
                                 absl::Time now) {
  const Node taken = nodes_.at(old);
  if (old != session) {
    if (!taken.placeholder && !taken.away_until) {
      // Its old stream is still open here: the agent gave it up. Close it.
      Outbound out;
      out.session = old;
      out.kind = Outbound::Kind::kEvict;
      out.detail =
          absl::StrCat("the master dropped ", taken.info.host, ": it reconnected on a new session");
      outbound_.push_back(std::move(out));
    }
    EraseNode(old);  // `session` holds no node: Resume removed what it held before
  }
  Node& entry = nodes_.Admit(session, node, now);
  nodes_.SetAway(session, entry, std::nullopt);
  entry.placeholder = false;
  entry.round = round_;
  entry.base_rank = taken.placeholder ? node.resume->base_rank : taken.base_rank;
  nodes_.SetJoined(entry, false);
  nodes_.SetMember(entry, true);
  nodes_.SetFinished(entry, taken.finished);
  nodes_.SetPreviousMember(entry, taken.previous_member);
  // Its place is its group rank: found without a scan (10,000 resumes after a restart).
  const size_t place = static_cast<size_t>(node.resume->group_rank);
  if (place < members_.size() && members_[place] == old) {
    members_[place] = session;
  } else {
    std::replace(members_.begin(), members_.end(), old, session);
  }
  if (taken.previous_member) {
    std::replace(previous_members_.begin(), previous_members_.end(), old, session);
  }
  if (still_stopping_.erase(old) > 0) still_stopping_.insert(session);
  Outbound out;
  out.session = session;
  out.kind = Outbound::Kind::kResumed;
  out.store_round = round_;
  outbound_.push_back(std::move(out));
  if (!taken.placeholder || nodes_.placeholders() > 0) return;
  // The round is whole again. A node that joined meanwhile joins the job now, when there is
  // room (the round ends for it, as it would have if the master had not restarted).
  if (nodes_.joined() > 0 && static_cast<int>(members_.size()) < settings_.max_nodes) {
    return EndRound(StopReason::kMembershipChanged, "a node joins the job", now);
  }
  // Every member runs it, so none runs the round before, and group rank 0's store may serve
  // it (it may have held it for a restart in place).
  Outbound open;
  open.session = members_.front();
  open.kind = Outbound::Kind::kOpenStore;
  open.store_round = round_;
  outbound_.push_back(std::move(open));
}

absl::Status RoundStateMachine::StopStale(SessionId session, const NodeInfo& node, absl::Time now,
                                          const std::string& why) {
  DropOldSession(session, node, now);
  if (phase_ == Phase::kEnded) return JoinEndedRun(session);
  Node& entry = nodes_.Admit(session, node, now);
  nodes_.SetJoined(entry, false);
  Outbound out;
  out.session = session;
  out.kind = Outbound::Kind::kStop;
  out.stop_reason = StopReason::kMembershipChanged;
  out.detail = !why.empty()
                   ? why
                   : absl::StrCat("round ", node.resume->round,
                                  ", which this node's workers run, ended while it was "
                                  "away from the master (the job is ",
                                  phase_ == Phase::kGathering ? "gathering for the next round"
                                                              : absl::StrCat("at round ", round_),
                                  ")");
  outbound_.push_back(std::move(out));
  return absl::OkStatus();
}

std::optional<std::pair<std::string, int>> RoundStateMachine::AwayAgentStore(
    SessionId session) const {
  auto it = nodes_.find(session);
  if (it == nodes_.end() || !it->second.away_until) return std::nullopt;
  const NodeInfo& info = it->second.info;
  // Only where the other nodes reach its store (the master filled an empty `addr` with the
  // address its session came from): a name is not looked up, and no other address is its.
  const std::string ip = CanonicalIp(info.addr);
  if (ip.empty()) return std::nullopt;
  return std::make_pair(ip, info.master_port);
}

void RoundStateMachine::AgentGone(SessionId session, absl::Time now) {
  auto it = nodes_.find(session);
  if (it == nodes_.end() || !it->second.away_until) return;
  RemoveNode(session,
             it->second.placeholder
                 ? "its agent is gone (nothing listens on its store's port any more)"
                 : "its connection to the master broke and its agent is gone (nothing listens on "
                   "its store's port any more)",
             /*evict=*/false, now);
}

bool RoundStateMachine::AnUnfinishedMemberIsAway() const {
  for (const auto& [until, session] : nodes_.away()) {
    const Node& node = nodes_.at(session);
    if (node.member && !node.finished) return true;
  }
  return false;
}

void RoundStateMachine::MarkAway(SessionId session, absl::Time until) {
  nodes_.SetAway(session, nodes_.at(session), until);
}

void RoundStateMachine::LoseAwayMembers(const std::string& why, absl::Time now) {
  std::vector<SessionId> away;
  for (const auto& [until, session] : nodes_.away()) away.push_back(session);
  for (SessionId session : away) {
    if (phase_ == Phase::kEnded) return;
    RemoveNode(session, why, /*evict=*/false, now);
  }
}

}  // namespace ddprun
