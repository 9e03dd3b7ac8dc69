#include "rendezvous/node_tracker.h"

namespace ddprun {

TrackedNode& NodeTracker::Admit(SessionId session, const NodeInfo& info, absl::Time now) {
  auto [it, inserted] = nodes_.try_emplace(session);
  TrackedNode& node = it->second;
  if (!inserted) {
    if (node.info.incarnation != info.incarnation) by_incarnation_.erase(node.info.incarnation);
    by_last_seen_.erase({node.last_seen, session});
  }
  node.info = info;
  node.last_seen = now;
  by_last_seen_.insert({now, session});
  by_incarnation_[info.incarnation] = session;
  return node;
}

TrackedNode& NodeTracker::AddPlaceholder(SessionId session, std::string host, absl::Time now) {
  TrackedNode& node = nodes_[session];
  node.info.host = std::move(host);
  node.placeholder = true;
  node.last_seen = now;
  by_last_seen_.insert({now, session});
  ++placeholders_;
  return node;
}

void NodeTracker::Erase(SessionId session) {
  auto it = nodes_.find(session);
  if (it == nodes_.end()) return;
  TrackedNode& node = it->second;
  SetJoined(node, false);
  SetFinished(node, false);
  SetMember(node, false);
  SetPreviousMember(node, false);
  by_last_seen_.erase({node.last_seen, session});
  if (node.away_until) away_.erase({*node.away_until, session});
  if (node.placeholder) {
    --placeholders_;
  } else if (auto mine = by_incarnation_.find(node.info.incarnation);
             mine != by_incarnation_.end() && mine->second == session) {
    by_incarnation_.erase(mine);
  }
  nodes_.erase(it);
}

void NodeTracker::SetJoined(TrackedNode& node, bool joined) {
  if (node.joined == joined) return;
  node.joined = joined;
  const int delta = joined ? 1 : -1;
  joined_ += delta;
  if (node.previous_member) previous_back_ += delta;
}

void NodeTracker::SetFinished(TrackedNode& node, bool finished) {
  if (node.finished == finished) return;
  node.finished = finished;
  if (node.member) finished_members_ += finished ? 1 : -1;
}

void NodeTracker::SetMember(TrackedNode& node, bool member) {
  if (node.member == member) return;
  node.member = member;
  if (node.finished) finished_members_ += member ? 1 : -1;
}

void NodeTracker::SetPreviousMember(TrackedNode& node, bool previous_member) {
  if (node.previous_member == previous_member) return;
  node.previous_member = previous_member;
  const int delta = previous_member ? 1 : -1;
  previous_here_ += delta;
  if (node.joined) previous_back_ += delta;
}

void NodeTracker::Seen(SessionId session, TrackedNode& node, absl::Time now) {
  by_last_seen_.erase({node.last_seen, session});
  node.last_seen = now;
  by_last_seen_.insert({now, session});
}

void NodeTracker::SetAway(SessionId session, TrackedNode& node, std::optional<absl::Time> until) {
  if (node.away_until) away_.erase({*node.away_until, session});
  node.away_until = until;
  if (until) away_.insert({*until, session});
}

SessionId NodeTracker::OfIncarnation(const std::string& incarnation) const {
  auto it = by_incarnation_.find(incarnation);
  return it == by_incarnation_.end() ? 0 : it->second;
}

}  // namespace ddprun
