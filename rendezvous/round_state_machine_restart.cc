// How RoundStateMachine begins a round: the assignments every round begins with
// (BeginRound), and the restart in place, which sends them with the stop orders when the next
// round can only be the same and opens group rank 0's store once every member has stopped.
// The rules that decide when a round ends are in round_state_machine.cc.
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "common/listen_socket.h"
#include "rendezvous/round_proof.h"
#include "rendezvous/round_state_machine.h"

namespace ddprun {

bool RoundStateMachine::CanRestartInPlace(absl::Time now) const {
  if (phase_ != Phase::kRunning || collect_stacks_ || nodes_.joined() > 0 || members_.empty()) {
    return false;
  }
  for (SessionId s : members_) {
    const Node& node = nodes_.at(s);
    // An away member (or a place a restarted master holds) cannot hear the round it would run.
    if (!node.info.restarts_in_place || node.away_until || health_.Excluded(node.info.host, now)) {
      return false;
    }
  }
  return true;
}

void RoundStateMachine::RestartInPlace(const std::string& detail, absl::Time now) {
  EndRecord(detail, now);
  gathering_since_ = now;  // the round that follows needs no gathering
  BeginRound(detail, now);
  still_stopping_.insert(members_.begin(), members_.end());
}

void RoundStateMachine::ReportStopped(SessionId session, int64_t round) {
  if (round != round_ - 1 || still_stopping_.erase(session) == 0 || !still_stopping_.empty()) {
    return;
  }
  Outbound out;
  out.session = members_.front();
  out.kind = Outbound::Kind::kOpenStore;
  out.store_round = round_;
  outbound_.push_back(std::move(out));
}

void RoundStateMachine::SendAssignment(SessionId session, Assignment assignment,
                                       const std::optional<std::string>& stop_detail) {
  Outbound out;
  out.session = session;
  if (stop_detail) {
    out.kind = Outbound::Kind::kStop;
    out.stop_reason = StopReason::kWorkerFailed;
    out.detail = *stop_detail;
    out.next = std::move(assignment);
  } else {
    out.kind = Outbound::Kind::kAssign;
    out.assignment = std::move(assignment);
  }
  outbound_.push_back(std::move(out));
}

void RoundStateMachine::BeginRound(const std::optional<std::string>& stop_detail, absl::Time now) {
  departed_.clear();
  still_stopping_.clear();
  failures_.clear();  // the root cause of a failed run is the earliest failure of its last round
  ++round_;
  phase_ = Phase::kRunning;
  last_call_deadline_.reset();
  finishing_deadline_.reset();
  int world_size = 0;
  for (SessionId s : members_) world_size += nodes_.at(s).info.local_world_size;
  const NodeInfo& rank0 = nodes_.at(members_.front()).info;
  std::vector<Assignment> assignments(members_.size());
  std::vector<Assignment*> proved;
  std::vector<absl::string_view> incarnations;
  int base_rank = 0;
  for (size_t i = 0; i < members_.size(); ++i) {
    Node& node = nodes_.at(members_[i]);
    nodes_.SetJoined(node, false);
    nodes_.SetFinished(node, false);
    nodes_.SetMember(node, true);
    Assignment& assignment = assignments[i];
    assignment.round = round_;
    assignment.restart_count = restarts_spent_;
    assignment.group_rank = static_cast<int>(i);
    assignment.group_world_size = static_cast<int>(members_.size());
    assignment.base_rank = base_rank;
    assignment.world_size = world_size;
    assignment.master_addr = rank0.addr;
    assignment.master_port = rank0.master_port;
    assignment.run_incarnation = run_incarnation_;
    if (i == 0) assignment.store_clients = StoreClients();
    if (i == 0 && members_.size() > 1) {
      const NodeInfo& next = nodes_.at(members_[1]).info;
      assignment.neighbour_store = HostPort(next.addr, next.master_port);
    }
    proved.push_back(&assignment);
    incarnations.push_back(node.info.incarnation);
    node.base_rank = base_rank;
    node.round = round_;
    base_rank += node.info.local_world_size;
  }
  ProveRound(proved, incarnations);
  for (size_t i = 0; i < members_.size(); ++i) {
    SendAssignment(members_[i], std::move(assignments[i]), stop_detail);
  }
  RoundRecord record;
  record.round = round_;
  record.restart_count = restarts_spent_;
  record.nodes = static_cast<int>(members_.size());
  record.world_size = world_size;
  record.gathering_began = gathering_since_;
  record.began = now;
  history_.push_back(std::move(record));
  if (history_.size() > kHistoryRounds) history_.pop_front();
}

}  // namespace ddprun
