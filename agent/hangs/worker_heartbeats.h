#pragma once
// WorkerHeartbeats: the rule of --worker-heartbeat-timeout, pure. A worker that has written
// nothing to its DDPRUN_HEARTBEAT_FD for `timeout` since its last beat is overdue: the
// supervisor takes it for hung and kills it. Until its first beat a worker has `startup`
// (at least `timeout`) from its start instead (--worker-heartbeat-startup-timeout): a
// Python worker's heartbeat thread cannot run while `import torch` holds the GIL, for
// seconds on a busy node and minutes on a shared file system. Time comes in (monotonic);
// no clock of its own.

#include <map>
#include <vector>

#include "absl/time/time.h"

namespace ddprun {

class WorkerHeartbeats {
 public:
  /// `startup` zero: no bound before the first beat.
  WorkerHeartbeats(absl::Duration timeout, absl::Duration startup)
      : timeout_(timeout), startup_(startup) {}

  /// Starts watching `local_rank`, which started at `now`.
  void Watch(int local_rank, absl::Time now);
  /// `local_rank` wrote to its pipe.
  void Beat(int local_rank, absl::Time now);
  /// Stops watching `local_rank` (it exited, or closed its end of the pipe).
  void Forget(int local_rank);

  struct Overdue {
    int local_rank = 0;
    absl::Duration silent;    // since its last beat (or its start)
    bool never_beat = false;  // it has not beaten once: the startup bound passed
  };
  /// The watched workers whose deadline has passed by `now`; each is reported once and no
  /// longer watched.
  std::vector<Overdue> TakeOverdue(absl::Time now);
  /// The earliest deadline of a watched worker (InfiniteFuture: none).
  absl::Time NextDeadline() const;

 private:
  struct Watched {
    absl::Time since;  // its start, then its last beat
    bool beaten = false;
  };
  absl::Time DeadlineOf(const Watched& w) const;

  const absl::Duration timeout_;
  const absl::Duration startup_;
  std::map<int, Watched> watched_;  // by local rank
};

}  // namespace ddprun
