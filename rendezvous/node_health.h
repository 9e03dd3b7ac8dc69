#pragma once
// NodeHealth: which nodes a run keeps out, and why. Pure, like the RoundStateMachine that
// owns one per run: it counts, per host, the restarts a node caused (the root cause of a
// worker failure), the times a member's connection was lost (flaps) and failed health
// checks, and says until when a host is excluded. A host is the name the agent joins under
// (--local-addr, else its host name): an agent that comes back on a new session, or a new
// agent process on the same host, is the same node.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace ddprun {

struct NodeHealthSettings {
  int max_node_failures = 0;  // root-cause failures before a node is excluded; 0: never
  int max_node_flaps = 0;     // lost connections of a member before it is excluded; 0: never
  // How long an excluded node stays out; InfiniteDuration: for the rest of the run.
  absl::Duration node_cooldown = absl::Minutes(5);
  std::vector<std::string> exclude_hosts;  // the operator's list (--exclude-hosts)
};

/// A node the run keeps out, or kept out, and why.
struct NodeExclusion {
  std::string host;
  std::string reason;  // the last reason, in words
  int failures = 0;    // restarts it caused in this run
  int flaps = 0;       // times its connection was lost while it was a member
  int failed_checks = 0;
  int times_excluded = 0;
  absl::Time until = absl::InfiniteFuture();  // InfiniteFuture: for the rest of the run
};

/// What NodeHealth knows of one node, for the master that takes a run over from another (an
/// elected leader's successor, docs/architecture.md, LeaderElection). A cooldown travels as the
/// time left: that master has a clock of its own.
struct RememberedNode {
  NodeExclusion record;                                 // its `until` is not used: cooldown_left
  absl::Duration cooldown_left = absl::ZeroDuration();  // InfiniteDuration: the rest of the run
  int failures_since_admitted = 0;
  int flaps_since_admitted = 0;
};

class NodeHealth {
 public:
  explicit NodeHealth(NodeHealthSettings settings) : settings_(std::move(settings)) {}

  /// `host` caused a restart (its failure ended the round first). True when it is excluded
  /// from now on: the max_node_failures-th since it was last admitted.
  bool CountFailure(const std::string& host, absl::Time now);
  /// A member on `host` was lost (connection broken, silent, or back on a new session).
  /// True when it is excluded from now on.
  bool CountFlap(const std::string& host, absl::Time now);
  /// The node's own health check failed (`why`: the check's reason and output): it stays
  /// out for the cooldown.
  void CheckFailed(const std::string& host, const std::string& why, absl::Time now);
  /// The node left the run as unhealthy (`why`, from its agent): out for the cooldown.
  void Left(const std::string& host, const std::string& why, absl::Time now);

  /// Why `host` is kept out at `now`: the operator's list, or a cooldown not over yet.
  std::optional<NodeExclusion> Excluded(const std::string& host, absl::Time now) const;
  /// Excluded(), for a node that asks to join: a listed one is recorded for the summaries.
  std::optional<NodeExclusion> KeepOut(const std::string& host, absl::Time now);
  /// What `host` did in this run (failures, flaps, failed checks), excluded or not.
  NodeExclusion Counts(const std::string& host) const;
  /// Every node excluded or kept out so far, in natural host order, for the summaries.
  std::vector<NodeExclusion> Record() const;
  /// `until` as a cooldown left at `now` (InfiniteDuration: for the rest of the run).
  static absl::Duration CooldownLeft(const NodeExclusion& exclusion, absl::Time now);
  /// One line for logs and summaries: "h3: excluded for the rest of the job: ... (2 failures)".
  static std::string Describe(const NodeExclusion& exclusion, absl::Time now);

  const NodeHealthSettings& settings() const { return settings_; }

  /// Every node's ledger at `now`, to hand on.
  std::vector<RememberedNode> Remember(absl::Time now) const;
  /// Takes over ledgers an earlier master handed on (Remember), at `now` on this clock.
  void Recall(const std::vector<RememberedNode>& nodes, absl::Time now);
  /// Counts every change to the ledgers: a master hands them on only when it moved.
  int64_t changes() const { return changes_; }
  /// Which node `host` is, for the ledger: "NODE3", "node3." and "node3.cluster.local" are
  /// one (a node excluded under one spelling must not come back under another); an IP
  /// address stays whole, in its canonical form.
  static std::string Key(const std::string& host);

 private:
  struct Ledger {
    NodeExclusion record;
    int failures_since_admitted = 0;
    int flaps_since_admitted = 0;
  };

  Ledger& Of(const std::string& host);
  void Exclude(Ledger& ledger, std::string reason, absl::Time now);
  bool Listed(const std::string& host) const;

  NodeHealthSettings settings_;
  std::map<std::string, Ledger> hosts_;
  int64_t changes_ = 0;
};

}  // namespace ddprun
