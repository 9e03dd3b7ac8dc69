#include "agent/restart_timeline.h"

#include <algorithm>
#include <iterator>

namespace ddprun {

void RestartTimeline::See(const AgentMoment& moment) {
  using Kind = AgentMoment::Kind;
  switch (moment.kind) {
    case Kind::kFailureSeen:
      FailureSeen(moment.at);
      break;
    case Kind::kStopOrdered:
      StopOrdered(moment.at, moment.membership_change);
      break;
    case Kind::kWorkersStopped:
      WorkersStopped(moment.at);
      break;
    case Kind::kRoundStarting:
      RoundStarting(moment.assignment->round, moment.assignment->restart_count, moment.at);
      break;
    case Kind::kWorkersStarted:
      WorkersStarted(moment.store_followed, moment.at);
      break;
    case Kind::kEveryRankConnected:
      EveryRankConnected(moment.round, moment.barrier_expected, moment.at);
      break;
    case Kind::kBarrierPassed:
      BarrierPassed(moment.round, moment.at);
      break;
    case Kind::kRunEnded:
      RunEnded();
      break;
    default:
      return;
  }
  if (splits_to_ == nullptr) return;
  for (RestartSplit& split : TakeSplits()) {
    AgentMoment explained;
    explained.kind = Kind::kRestartExplained;
    explained.at = moment.at;
    explained.split = std::move(split);
    splits_to_->Announce(std::move(explained));
  }
}

void RestartTimeline::Begin() {
  if (open_ && open_->started) Finish();
  if (!open_) open_.emplace();
}

void RestartTimeline::FailureSeen(absl::Time now) {
  if (open_ && !open_->started) return;  // the restart under way: its first failure counts
  Begin();
  open_->failed = now;
}

void RestartTimeline::StopOrdered(absl::Time now, bool membership) {
  Begin();
  if (!open_->stop_ordered) {
    open_->stop_ordered = now;
    open_->membership_change = membership;
  }
}

void RestartTimeline::WorkersStopped(absl::Time now) {
  if (open_ && !open_->stopped && !open_->starting) open_->stopped = now;
}

void RestartTimeline::RoundStarting(int64_t round, int restart_count, absl::Time now) {
  if (!open_ || open_->starting) return;  // the first round is not a restart
  open_->starting = now;
  open_->round = round;
  open_->restart_count = restart_count;
}

void RestartTimeline::WorkersStarted(bool store_followed, absl::Time now) {
  if (!open_ || !open_->starting || open_->started) return;
  open_->started = now;
  if (!store_followed || !store_used_) Finish();
}

void RestartTimeline::EveryRankConnected(int64_t round, bool barrier_expected, absl::Time at) {
  store_used_ = true;
  if (!open_ || !open_->started || open_->round != round || open_->connected) return;
  open_->connected = at;
  open_->awaits_barrier = barrier_expected;
  if (!barrier_expected) Finish();
}

void RestartTimeline::BarrierPassed(int64_t round, absl::Time at) {
  if (!open_ || !open_->connected || open_->round != round) return;
  open_->barrier = at;
  Finish();
}

void RestartTimeline::RunEnded() {
  if (open_ && open_->started) return Finish();
  open_.reset();  // the run ended instead of restarting
}

void RestartTimeline::Finish() {
  const RestartMoments& m = *open_;
  // In the order they happen; each part runs from the latest moment seen before its own
  // (workers that all ended before the order came took no time to stop).
  const std::optional<absl::Time> moments[] = {m.failed,  m.stop_ordered, m.stopped, m.starting,
                                               m.started, m.connected,    m.barrier};
  RestartSplit& split = done_.emplace_back();
  std::optional<absl::Duration>* const ending_here[] = {
      nullptr,      &split.detection, &split.stop,   &split.rendezvous,
      &split.spawn, &split.connected, &split.barrier};
  std::optional<absl::Time> first, latest;
  for (size_t i = 0; i < std::size(moments); ++i) {
    if (!moments[i]) continue;
    if (latest && ending_here[i] != nullptr) {
      *ending_here[i] = std::max(absl::ZeroDuration(), *moments[i] - *latest);
    }
    if (!first) first = moments[i];
    latest = latest ? std::max(*latest, *moments[i]) : *moments[i];
  }
  split.round = m.round;
  split.restart_count = m.restart_count;
  split.membership_change = m.membership_change && !m.failed;
  split.total = first ? *latest - *first : absl::ZeroDuration();
  open_.reset();
}

}  // namespace ddprun
