#pragma once
// HangReports: the master's rule for gathering one run's hang reports (stack_report.h), pure.
// After a hang stop every node sends its workers' stacks; the merged report goes to every
// node once: when every rank has a stack, or HangTimings::gather after the first node's stacks came
// (a node that died or never answers must not keep the others waiting). Sending it once, not
// at every node's stacks, keeps a 10,000-node job from sending 10,000 growing copies to
// each node. Time comes in (monotonic).

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "rendezvous/hang_timings.h"
#include "rendezvous/stack_report.h"

namespace ddprun {

class HangReports {
 public:
  static constexpr size_t kRoundsKept = 4;

  explicit HangReports(absl::Duration gather_for = HangTimings().gather)
      : gather_for_(gather_for) {}

  /// A node's stacks for `round` (already its own ranks only, see ClaimStacks). Returns the
  /// report when it has just become complete; stacks for a report already sent are dropped.
  std::optional<HangReport> Add(int64_t round, int world_size, const std::string& cause,
                                std::vector<RankStack> stacks, absl::Time now);
  /// The reports whose gathering time is up by `now`, incomplete; each is given once.
  std::vector<HangReport> TakeDue(absl::Time now);
  /// When TakeDue has something next (InfiniteFuture: nothing).
  absl::Time NextDeadline() const;

 private:
  struct Gathering {
    HangReport report;
    absl::Time due;
    bool sent = false;
  };
  absl::Duration gather_for_;
  std::map<int64_t, Gathering> rounds_;
};

}  // namespace ddprun
