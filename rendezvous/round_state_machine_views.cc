// What the RoundStateMachine shows of itself: its rounds' record and its nodes, for the
// status (`ddprun status`, the status page) and the master's metrics.

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/natural_less.h"
#include "rendezvous/round_state_machine.h"

namespace ddprun {

void RoundStateMachine::EndRecord(const std::string& why, absl::Time now) {
  if (history_.empty() || history_.back().round != round_ ||
      history_.back().ended != absl::InfiniteFuture()) {
    return;
  }
  RoundRecord& record = history_.back();
  record.ended = now;
  record.ended_by = why;
  if (!failures_.empty()) {
    record.root_cause = *std::min_element(failures_.begin(), failures_.end(), RootCauseBefore);
  }
}

void RoundStateMachine::RestartExplained(SessionId session, const RestartSplit& split) {
  // Only a member of the running round speaks of the restart into it: a node that left, or
  // a stray session, cannot touch the table.
  auto node = nodes_.find(session);
  if (node == nodes_.end() || !node->second.member || history_.empty() ||
      history_.back().round != split.round || split.round != round_) {
    return;
  }
  std::optional<RestartSplit>& restart = history_.back().restart;
  if (restart) {
    restart->KeepLongest(split);
  } else {
    restart = split;
  }
}

void RoundStateMachine::OutageExplained(SessionId session, int64_t round, absl::Duration lost) {
  auto node = nodes_.find(session);
  if (node == nodes_.end() || !node->second.member || history_.empty() ||
      history_.back().round != round || round != round_) {
    return;
  }
  std::optional<absl::Duration>& outage = history_.back().master_outage;
  outage = std::max(outage.value_or(absl::ZeroDuration()), lost);
}

std::vector<NodeView> RoundStateMachine::Nodes() const {
  std::vector<NodeView> views;
  views.reserve(nodes_.size());
  auto view_of = [](SessionId session, const Node& node) {
    NodeView view;
    view.session = session;
    view.info = &node.info;
    view.base_rank = node.base_rank;
    view.last_seen = node.last_seen;
    view.state = node.member
                     ? (node.finished ? NodeView::State::kFinished : NodeView::State::kRunning)
                 : node.joined ? NodeView::State::kWaiting
                               : NodeView::State::kIdle;
    return view;
  };
  for (size_t i = 0; i < members_.size(); ++i) {
    views.push_back(view_of(members_[i], nodes_.at(members_[i])));
    views.back().group_rank = static_cast<int>(i);
  }
  for (const auto& [session, node] : nodes_) {
    if (!node.member) views.push_back(view_of(session, node));
  }
  return views;
}

std::string RoundStateMachine::WhyWaiting(absl::Time now) const {
  if (nodes_.joined() == 0 || phase_ == Phase::kEnded) return "";
  const std::string nnodes =
      absl::StrCat("--nnodes=", settings_.min_nodes, ":", settings_.max_nodes);
  switch (phase_) {
    case Phase::kGathering:
      if (nodes_.joined() < settings_.min_nodes) {
        return absl::StrCat("a round needs ", settings_.min_nodes, " nodes (", nnodes, "); ",
                            nodes_.joined(), " joined");
      }
      return absl::StrCat(
          "the round starts when the last call ends",
          last_call_deadline_
              ? absl::StrCat(" in ", absl::FormatDuration(absl::Floor(
                                         std::max(absl::ZeroDuration(), *last_call_deadline_ - now),
                                         absl::Milliseconds(1))))
              : "",
          " (last_call_timeout), when ", settings_.max_nodes,
          " nodes have joined, or when every node of the last round is back");
    case Phase::kRunning:
      return absl::StrCat("the job runs at its ", nnodes,
                          " maximum: a node that joins waits for one to leave");
    case Phase::kFinishing:
      return "the job is finishing: a node's workers have succeeded, so no round starts";
    case Phase::kEnded:
      break;
  }
  return "";
}

namespace {

// "a, b, c and 9,997 more": a line stays short at 10,000 nodes.
std::string FewOf(std::vector<std::string> names, size_t shown = 8) {
  const size_t more = names.size() > shown ? names.size() - shown : 0;
  names.resize(names.size() - more);
  return absl::StrCat(absl::StrJoin(names, ", "),
                      more > 0 ? absl::StrCat(" and ", more, " more") : "");
}

std::string Left(absl::Duration left) {
  return absl::FormatDuration(absl::Floor(std::max(absl::ZeroDuration(), left), absl::Seconds(1)));
}

}  // namespace

std::string RoundStateMachine::GatheringProgress(absl::Time now) const {
  const std::string why = WhyWaiting(now);
  if (why.empty() || phase_ != Phase::kGathering) return why;
  std::vector<std::string> came;
  std::map<int, std::vector<std::string>> ranks_given;  // --node-rank: the hosts that gave it
  bool every_node_gave_a_rank = true;
  for (const auto& [session, node] : nodes_) {
    if (!node.joined) continue;
    came.push_back(node.info.host);
    every_node_gave_a_rank = every_node_gave_a_rank && node.info.node_rank_hint >= 0;
    ranks_given[node.info.node_rank_hint].push_back(node.info.host);
  }
  std::sort(came.begin(), came.end(), NaturalLess);
  std::string out = absl::StrCat(why, ": ", FewOf(came));
  // Static jobs (every node gives its --node-rank): the ranks still missing.
  std::vector<std::string> missing_ranks;
  for (int rank = 0; every_node_gave_a_rank && rank < settings_.max_nodes; ++rank) {
    if (ranks_given.count(rank) == 0) missing_ranks.push_back(absl::StrCat(rank));
  }
  if (!missing_ranks.empty()) {
    absl::StrAppend(&out, "; waiting for --node-rank ", FewOf(missing_ranks));
  }
  // Static jobs: two nodes with one --node-rank leave another rank missing for good.
  for (auto& [rank, hosts] : ranks_given) {
    if (!every_node_gave_a_rank || hosts.size() < 2) continue;
    std::sort(hosts.begin(), hosts.end(), NaturalLess);
    absl::StrAppend(&out, "; --node-rank ", rank, " was given by ", hosts.size(), " nodes (",
                    FewOf(hosts), "): each node needs its own, 0 to ", settings_.max_nodes - 1);
  }
  const std::set<std::string> came_set(came.begin(), came.end());
  std::vector<std::string> lost;
  for (const std::string& host : departed_) {
    if (came_set.count(host) == 0) lost.push_back(host);
  }
  if (!lost.empty()) absl::StrAppend(&out, "; lost from the last round: ", FewOf(lost));
  if (nodes_.joined() < settings_.min_nodes) {
    absl::StrAppend(&out, "; the run ends in ",
                    Left(gathering_since_ + settings_.join_timeout - now),
                    " (join_timeout) unless ", settings_.min_nodes - nodes_.joined(),
                    settings_.min_nodes - nodes_.joined() == 1 ? " more joins" : " more join");
  }
  return out;
}

RunMemory RoundStateMachine::Memory(absl::Time now) const {
  RunMemory memory;
  memory.restarts_spent = restarts_spent_;
  memory.nodes = health_.Remember(now);
  memory.run_incarnation = run_incarnation_;
  return memory;
}

void RoundStateMachine::Recall(const RunMemory& memory, absl::Time now) {
  // Never more than the budget, whatever the memory says (it came from an elected backend's store).
  restarts_spent_ =
      std::max(restarts_spent_, std::clamp(memory.restarts_spent, 0, settings_.max_restarts));
  health_.Recall(memory.nodes, now);
  AdoptRunIncarnation(memory.run_incarnation);
}

}  // namespace ddprun
