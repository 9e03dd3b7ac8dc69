#pragma once
// NodeTracker: RoundStateMachine's bookkeeping of its nodes, apart from its rules (as
// raft's tracker.ProgressTracker keeps each peer's progress apart from raft's). Each node by
// session, the indexes the rules find nodes by (the agent's incarnation, when each was last
// seen, until when an away member's place is held) and the counts they ask for at every event
// (joined, members that finished, previous members here and back). Every flag that an index
// or a count follows is set through it, so that none goes stale. Pure; no rule of its own.

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "absl/time/time.h"
#include "rendezvous/protocol_words.h"

namespace ddprun {

/// A master's id for one agent's gRPC session.
using SessionId = uint64_t;

struct TrackedNode {
  NodeInfo info;
  absl::Time last_seen;
  bool joined = false;           // waiting for the next round
  bool finished = false;         // reported success in the current round
  bool member = false;           // in the current round's members
  bool previous_member = false;  // in the round before's members
  int base_rank = 0;             // RANK of its LOCAL_RANK 0 in `round`
  int64_t round = -1;            // the last round it was a member of
  // Its stream broke while it was a member: its place is held until then (SetAway).
  std::optional<absl::Time> away_until;
  // Holds the place of a member a restarted master has not heard from yet.
  bool placeholder = false;
};

class NodeTracker {
 public:
  using Nodes = std::map<SessionId, TrackedNode>;
  using TimeIndex = std::set<std::pair<absl::Time, SessionId>>;

  // The nodes by session, in session order. The flags that an index or a count follows
  // (joined, finished, member, previous_member, last_seen, away_until) are set below.
  Nodes::iterator find(SessionId session) { return nodes_.find(session); }
  Nodes::const_iterator find(SessionId session) const { return nodes_.find(session); }
  Nodes::iterator begin() { return nodes_.begin(); }
  Nodes::iterator end() { return nodes_.end(); }
  Nodes::const_iterator begin() const { return nodes_.begin(); }
  Nodes::const_iterator end() const { return nodes_.end(); }
  TrackedNode& at(SessionId session) { return nodes_.at(session); }
  const TrackedNode& at(SessionId session) const { return nodes_.at(session); }
  size_t size() const { return nodes_.size(); }
  size_t count(SessionId session) const { return nodes_.count(session); }

  /// Records (or updates) `session`'s node as `info` says, seen at `now`.
  TrackedNode& Admit(SessionId session, const NodeInfo& info, absl::Time now);
  /// A place for a member a restarted master has not heard from yet, under `session`.
  TrackedNode& AddPlaceholder(SessionId session, std::string host, absl::Time now);
  /// Forgets `session`'s node, and it in every index and count.
  void Erase(SessionId session);

  void SetJoined(TrackedNode& node, bool joined);
  void SetFinished(TrackedNode& node, bool finished);
  void SetMember(TrackedNode& node, bool member);
  void SetPreviousMember(TrackedNode& node, bool previous_member);
  void Seen(SessionId session, TrackedNode& node, absl::Time now);
  /// `session`'s place is held until `until`; none: it is not away.
  void SetAway(SessionId session, TrackedNode& node, std::optional<absl::Time> until);

  /// The session of the agent whose incarnation this is; 0: none.
  SessionId OfIncarnation(const std::string& incarnation) const;
  /// Every node by when it was last seen, oldest first.
  const TimeIndex& by_last_seen() const { return by_last_seen_; }
  /// The away ones by until when their places are held, soonest first.
  const TimeIndex& away() const { return away_; }
  int joined() const { return joined_; }
  int finished_members() const { return finished_members_; }
  int previous_here() const { return previous_here_; }
  int previous_back() const { return previous_back_; }  // previous members that joined
  int placeholders() const { return placeholders_; }

 private:
  Nodes nodes_;
  std::map<std::string, SessionId> by_incarnation_;
  TimeIndex by_last_seen_;
  TimeIndex away_;
  int joined_ = 0;
  int finished_members_ = 0;
  int previous_here_ = 0;
  int previous_back_ = 0;
  int placeholders_ = 0;
};

}  // namespace ddprun
