#include "rendezvous/hang_reports.h"

#include <algorithm>
#include <utility>

namespace ddprun {

std::optional<HangReport> HangReports::Add(int64_t round, int world_size, const std::string& cause,
                                           std::vector<RankStack> stacks, absl::Time now) {
  auto [it, added] = rounds_.try_emplace(round);
  Gathering& g = it->second;
  if (added) {
    g.report.round = round;
    g.report.world_size = world_size;
    g.due = now + gather_for_;
    // A job that hangs every round must not grow the master.
    while (rounds_.size() > kRoundsKept) rounds_.erase(rounds_.begin());
  }
  if (g.sent) return std::nullopt;
  if (g.report.cause.empty()) g.report.cause = cause;  // the node that declared the hang
  MergeStacks(g.report, std::move(stacks));
  if (!Complete(g.report)) return std::nullopt;
  g.sent = true;
  return g.report;
}

std::vector<HangReport> HangReports::TakeDue(absl::Time now) {
  std::vector<HangReport> due;
  for (auto& [round, g] : rounds_) {
    if (g.sent || g.due > now) continue;
    g.sent = true;
    due.push_back(g.report);
  }
  return due;
}

absl::Time HangReports::NextDeadline() const {
  absl::Time next = absl::InfiniteFuture();
  for (const auto& [round, g] : rounds_) {
    if (!g.sent) next = std::min(next, g.due);
  }
  return next;
}

}  // namespace ddprun
