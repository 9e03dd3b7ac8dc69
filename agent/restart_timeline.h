#pragma once
// RestartTimeline: where the time of each restart went on this node, for the user's own
// job and without any code in it. The agent sees a worker fail, gets the stop order, sees
// the workers end, gets the next round and starts its workers; when it serves the workers'
// TCPStore it also sees every rank connect to it in init_process_group and pass the store
// barrier (StoreMark). The parts between those moments are the restart's split:
//
//   failure seen --detection--> stop order --stop--> workers ended --rendezvous--> round
//   here --spawn--> workers started --connected--> every rank on the store --barrier-->
//   every rank past the store barrier
//
// An observer of the agent (it decides nothing), pure: it sees the agent's moments
// (agent/moments.h), with the agent's monotonic times, and announces each restart's split
// (kRestartExplained) to the same stream once it is whole; or its callers take the splits.

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/time/time.h"
#include "agent/moments.h"
#include "rendezvous/restart_split.h"

namespace ddprun {

/// The moments of a restart under way, as RestartTimeline records them; unset: not reached
/// (or not seen here).
struct RestartMoments {
  std::optional<absl::Time> failed, stop_ordered, stopped, starting, started, connected, barrier;
  int64_t round = -1;
  int restart_count = 0;
  bool awaits_barrier = false;
  bool membership_change = false;  // the stop order was for one
};

class RestartTimeline : public MomentObserver {
 public:
  /// `splits_to`: where each split made whole is announced; null: TakeSplits has them.
  explicit RestartTimeline(Moments* splits_to = nullptr) : splits_to_(splits_to) {}

  /// The moments a split is made of, each to the call below that takes it.
  void See(const AgentMoment& moment) override;

  /// A worker of the running attempt failed (or was found hung) on this node.
  void FailureSeen(absl::Time now);
  /// The rendezvous ordered the workers stopped (a restart follows, in place or by joining);
  /// `membership`: for a membership change, which spends no restart.
  void StopOrdered(absl::Time now, bool membership = false);
  /// Every worker of the attempt has ended.
  void WorkersStopped(absl::Time now);
  /// The round `round` may start here (its assignment came, and its store may open).
  void RoundStarting(int64_t round, int restart_count, absl::Time now);
  /// Every worker of that round has been started. `store_followed`: this node serves the
  /// round's store and reports its marks. The split ends here unless it does and an earlier
  /// round's ranks were all seen on it: workers that never use the store (not torch, or
  /// no init_process_group) must not hold the split open until the next failure.
  void WorkersStarted(bool store_followed, absl::Time now);
  /// The round's store saw every rank connect (kEveryRankConnected; `barrier_expected`: a
  /// store barrier follows) or pass its barrier (kBarrierPassed).
  void EveryRankConnected(int64_t round, bool barrier_expected, absl::Time at);
  void BarrierPassed(int64_t round, absl::Time at);
  /// The run ended: a restart still awaiting store marks ends with what was seen.
  void RunEnded();

  /// The splits made whole since the last call, oldest first.
  std::vector<RestartSplit> TakeSplits() { return std::exchange(done_, {}); }

 private:
  // A new restart begins: the one awaiting store marks ends with what was seen.
  void Begin();
  void Finish();

  Moments* const splits_to_;
  std::optional<RestartMoments> open_;  // a restart under way
  bool store_used_ = false;             // some round's ranks were all seen on the store
  std::vector<RestartSplit> done_;
};

}  // namespace ddprun
