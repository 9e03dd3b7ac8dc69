#include "agent/hangs/worker_heartbeats.h"

#include <algorithm>

namespace ddprun {

void WorkerHeartbeats::Watch(int local_rank, absl::Time now) { watched_[local_rank] = {now}; }

void WorkerHeartbeats::Beat(int local_rank, absl::Time now) {
  auto it = watched_.find(local_rank);
  if (it == watched_.end()) return;
  it->second.since = std::max(it->second.since, now);
  it->second.beaten = true;
}

void WorkerHeartbeats::Forget(int local_rank) { watched_.erase(local_rank); }

absl::Time WorkerHeartbeats::DeadlineOf(const Watched& w) const {
  if (w.beaten) return w.since + timeout_;
  // Never less than between two beats: a start is not held to a shorter bound.
  return startup_ == absl::ZeroDuration() ? absl::InfiniteFuture()
                                          : w.since + std::max(startup_, timeout_);
}

std::vector<WorkerHeartbeats::Overdue> WorkerHeartbeats::TakeOverdue(absl::Time now) {
  std::vector<Overdue> overdue;
  for (auto it = watched_.begin(); it != watched_.end();) {
    if (now < DeadlineOf(it->second)) {
      ++it;
      continue;
    }
    overdue.push_back(Overdue{it->first, now - it->second.since, !it->second.beaten});
    it = watched_.erase(it);
  }
  return overdue;
}

absl::Time WorkerHeartbeats::NextDeadline() const {
  absl::Time next = absl::InfiniteFuture();
  for (const auto& [local_rank, w] : watched_) next = std::min(next, DeadlineOf(w));
  return next;
}

}  // namespace ddprun
