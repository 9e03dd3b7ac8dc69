#pragma once
// RestartSplit: where one restart's time went, part by part, as a node saw it (the agent's
// RestartTimeline makes them, agent/restart_timeline.h) and as the master keeps them for the
// run's round table: for each part, the longest any node said, since the job waited for the
// slowest. docs/observability.md#every-restart-explained says what each part is.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"

namespace ddprun {

/// A part is absent where the node did not see both of its ends: detection on a node whose
/// workers did not fail, the store's parts on a node that does not serve the store, the
/// barrier where the workers pass none (torch 2.1 and later without TORCH_DIST_INIT_BARRIER=1).
struct RestartSplit {
  int64_t round = 0;  // the round the job restarted into
  int restart_count = 0;
  std::optional<absl::Duration> detection;   // a worker's failure seen -> the stop order
  std::optional<absl::Duration> stop;        // -> every worker of the attempt has ended
  std::optional<absl::Duration> rendezvous;  // -> the next round may start on the node
  std::optional<absl::Duration> spawn;       // -> every worker of it started (or forked)
  std::optional<absl::Duration> connected;   // -> every rank connected to the store
  std::optional<absl::Duration> barrier;     // -> every rank passed the store barrier
  absl::Duration total;                      // from the first part's start to the last's end
  // Not a restart: the members changed (no restart spent). For this node's line only.
  bool membership_change = false;

  /// The parts that were seen, in order: (name, duration). Names as in metrics and events.
  std::vector<std::pair<std::string, absl::Duration>> Parts() const;
  /// Each part and the total become the longer of this one's and `other`'s.
  void KeepLongest(const RestartSplit& other);
};

/// "restart 2 (round 3) took 812 ms on this node: detection 1 ms, stop 40 ms, ..."
std::string FormatRestartSplit(const RestartSplit& split);

}  // namespace ddprun
