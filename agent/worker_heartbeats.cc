#include "agent/worker_heartbeats.h"

#include <algorithm>

namespace ddprun {

void WorkerHeartbeats::Watch(int local_rank, absl::Time now) { last_beat_[local_rank] = now; }

void WorkerHeartbeats::Beat(int local_rank, absl::Time now) {
  auto it = last_beat_.find(local_rank);
  if (it != last_beat_.end()) it->second = std::max(it->second, now);
}

void WorkerHeartbeats::Forget(int local_rank) { last_beat_.erase(local_rank); }

std::vector<WorkerHeartbeats::Overdue> WorkerHeartbeats::TakeOverdue(absl::Time now) {
  std::vector<Overdue> overdue;
  for (auto it = last_beat_.begin(); it != last_beat_.end();) {
    if (now - it->second < timeout_) {
      ++it;
      continue;
    }
    overdue.push_back(Overdue{it->first, now - it->second});
    it = last_beat_.erase(it);
  }
  return overdue;
}

absl::Time WorkerHeartbeats::NextDeadline() const {
  absl::Time next = absl::InfiniteFuture();
  for (const auto& [local_rank, beat] : last_beat_) next = std::min(next, beat + timeout_);
  return next;
}

}  // namespace ddprun
