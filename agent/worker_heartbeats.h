#pragma once
// WorkerHeartbeats: the rule of --worker-heartbeat-timeout, pure. A worker that has written
// nothing to its DDPRUN_HEARTBEAT_FD for `timeout` (counted from its start) is overdue: the
// supervisor takes it for hung and kills it. Time comes in (monotonic); no clock of its own.

#include <map>
#include <vector>

#include "absl/time/time.h"

namespace ddprun {

class WorkerHeartbeats {
 public:
  explicit WorkerHeartbeats(absl::Duration timeout) : timeout_(timeout) {}

  /// Starts watching `local_rank`: the clock starts at its start.
  void Watch(int local_rank, absl::Time now);
  /// `local_rank` wrote to its pipe.
  void Beat(int local_rank, absl::Time now);
  /// Stops watching `local_rank` (it exited, or closed its end of the pipe).
  void Forget(int local_rank);

  struct Overdue {
    int local_rank = 0;
    absl::Duration silent;  // since its last beat (or its start)
  };
  /// The watched workers whose deadline has passed by `now`; each is reported once and no
  /// longer watched.
  std::vector<Overdue> TakeOverdue(absl::Time now);
  /// The earliest deadline of a watched worker (InfiniteFuture: none).
  absl::Time NextDeadline() const;

 private:
  const absl::Duration timeout_;
  std::map<int, absl::Time> last_beat_;  // by local rank
};

}  // namespace ddprun
