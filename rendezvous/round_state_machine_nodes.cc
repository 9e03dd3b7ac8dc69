// RoundStateMachine's views of its nodes (their bookkeeping is NodeTracker's): the order of
// the next round, what it says about missing nodes, whose stacks a node may
// send, and whom group rank 0's TCPStore serves. The rules are in round_state_machine.cc.
#include <algorithm>
#include <climits>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "rendezvous/round_state_machine.h"

namespace ddprun {

void RoundStateMachine::Heartbeat(SessionId session, absl::Time now) {
  auto it = nodes_.find(session);
  if (it != nodes_.end()) nodes_.Seen(session, it->second, now);
}

bool RoundStateMachine::IsMember(SessionId session) const {
  auto it = nodes_.find(session);
  return it != nodes_.end() && it->second.member;
}

void RoundStateMachine::EraseNode(SessionId session) {
  if (nodes_.find(session) == nodes_.end()) return;
  ForgetHeldResume(session);
  nodes_.Erase(session);
}

bool RoundStateMachine::IsWaiting(SessionId session) const {
  auto it = nodes_.find(session);
  return it != nodes_.end() && it->second.joined;
}

std::vector<SessionId> RoundStateMachine::waiting() const {
  std::vector<SessionId> out;
  for (const auto& [session, node] : nodes_) {
    if (node.joined) out.push_back(session);
  }
  return out;
}

std::vector<SessionId> RoundStateMachine::OrderForNextRound() const {
  // When every node gave --node-rank, those ranks decide (the static backend, and c10d
  // users who pin their ranks). Otherwise members of the previous round keep their
  // relative order, and newcomers follow by hint, then host name in natural order, then pid.
  std::vector<SessionId> order;
  const bool all_hinted = std::all_of(nodes_.begin(), nodes_.end(), [](const auto& entry) {
    return !entry.second.joined || entry.second.info.node_rank_hint >= 0;
  });
  for (SessionId s : previous_members_) {
    // previous_members_ may name sessions that have left: the flag says who is still here.
    auto it = nodes_.find(s);
    if (!all_hinted && it != nodes_.end() && it->second.joined && it->second.previous_member) {
      order.push_back(s);
    }
  }
  std::vector<SessionId> newcomers;
  for (const auto& [session, node] : nodes_) {
    if (node.joined && (all_hinted || !node.previous_member)) newcomers.push_back(session);
  }
  std::sort(newcomers.begin(), newcomers.end(), [this](SessionId a, SessionId b) {
    const NodeInfo& x = nodes_.at(a).info;
    const NodeInfo& y = nodes_.at(b).info;
    const int hx = x.node_rank_hint < 0 ? INT_MAX : x.node_rank_hint;
    const int hy = y.node_rank_hint < 0 ? INT_MAX : y.node_rank_hint;
    if (hx != hy) return hx < hy;
    if (x.host != y.host) return NaturalLess(x.host, y.host);
    if (x.pid != y.pid) return x.pid < y.pid;
    return x.incarnation < y.incarnation;
  });
  order.insert(order.end(), newcomers.begin(), newcomers.end());
  if (static_cast<int>(order.size()) > settings_.max_nodes) order.resize(settings_.max_nodes);
  // RANK and WORLD_SIZE are 32-bit in every worker: the nodes that would pass kMaxWorldSize
  // wait, as nodes beyond max_nodes do.
  int64_t world_size = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    world_size += nodes_.at(order[i]).info.local_world_size;
    if (world_size > kMaxWorldSize) {
      order.resize(i);
      break;
    }
  }
  return order;
}

std::string RoundStateMachine::DescribeMissing(absl::Time now) const {
  std::vector<std::string> joined;
  for (const auto& [session, node] : nodes_) {
    if (node.joined) joined.push_back(node.info.host);
  }
  std::sort(joined.begin(), joined.end(), NaturalLess);
  std::vector<std::string> missing;
  for (const std::string& host : departed_) {
    if (std::find(joined.begin(), joined.end(), host) == joined.end()) missing.push_back(host);
  }
  std::vector<std::string> kept_out;
  for (const NodeExclusion& exclusion : health_.Record()) {
    if (health_.Excluded(exclusion.host, now)) kept_out.push_back(exclusion.host);
  }
  return absl::StrCat(
      joined.size(), " of the at least ", settings_.min_nodes,
      " nodes needed (--nnodes=", settings_.min_nodes, ":", settings_.max_nodes, ") joined",
      joined.empty() ? "" : ": ", absl::StrJoin(joined, ", "),
      missing.empty() ? "" : "; lost from the last round: ", absl::StrJoin(missing, ", "),
      kept_out.empty() ? "" : "; kept out (excluded): ", absl::StrJoin(kept_out, ", "),
      "; check that every node runs ddprun with the same --rdzv-endpoint and "
      "--rdzv-id and can reach the endpoint");
}

std::optional<int> RoundStateMachine::ClaimStacks(SessionId session, int64_t round,
                                                  std::vector<RankStack>& stacks) const {
  auto it = nodes_.find(session);
  if (round != round_ || round != stacks_round_ || it == nodes_.end() ||
      it->second.round != round || history_.empty() || history_.back().round != round) {
    stacks.clear();
    return std::nullopt;
  }
  const Node& node = it->second;
  const int end = node.base_rank + node.info.local_world_size;
  auto foreign = [&](const RankStack& s) { return s.rank < node.base_rank || s.rank >= end; };
  stacks.erase(std::remove_if(stacks.begin(), stacks.end(), foreign), stacks.end());
  for (RankStack& s : stacks) {
    s.host = node.info.host;
    s.local_rank = s.rank - node.base_rank;
  }
  return history_.back().world_size;
}

std::vector<std::string> RoundStateMachine::StoreClients() const {
  std::set<std::string> clients;
  for (SessionId s : members_) {
    const std::vector<std::string>& addresses = nodes_.at(s).info.addresses;
    clients.insert(addresses.begin(), addresses.end());
  }
  return {clients.begin(), clients.end()};
}

absl::Status RoundStateMachine::CheckFailedCheckIsItsOwn(SessionId session,
                                                         const NodeInfo& node) const {
  const std::string key = NodeHealth::Key(node.host);
  for (const auto& [other, entry] : nodes_) {
    if (other == session || entry.info.incarnation == node.incarnation) continue;
    if (NodeHealth::Key(entry.info.host) != key || entry.info.seen_from == node.seen_from) continue;
    return absl::FailedPreconditionError(
        absl::StrCat("a failed health check for ", node.host, " came from ", node.seen_from,
                     ", but the agent in this run under that name came from ", entry.info.seen_from,
                     ": only a node's own agents can keep it out"));
  }
  return absl::OkStatus();
}

}  // namespace ddprun
