#pragma once
// WorkerMetrics: what an agent's workers do, as its --metrics-port shows it
// (observability/agent_metrics.h): how many run in each state, how many were started, and
// how each one ended. An observer of the agent: it counts what it is told and publishes a
// snapshot to the board the metrics server reads; it decides nothing.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "agent/failure_summary.h"
#include "agent/moments.h"
#include "agent/restart_timeline.h"
#include "agent/worker_supervisor.h"
#include "observability/agent_metrics.h"
#include "rendezvous/protocol_words.h"

namespace ddprun {

class WorkerMetrics : public MomentObserver {
 public:
  explicit WorkerMetrics(std::string run_id) : run_id_(std::move(run_id)) {}

  /// Each moment to the call below that counts it.
  void See(const AgentMoment& moment) override;

  /// From now on each Publish goes to `board` (null: nowhere).
  void PublishTo(AgentMetricsBoard* board) { board_ = board; }
  /// A board is set: Publish has somewhere to go (callers skip building its input if not).
  bool publishing() const { return board_ != nullptr; }
  void WorkersStarted(size_t count) { starts_ += static_cast<int64_t>(count); }
  /// Every worker of an attempt has exited; `failures`: this attempt's.
  void AttemptClosed(std::vector<WorkerSupervisor::Outcome> workers,
                     const std::vector<WorkerFailure>& failures);
  /// A restart's split, into each part's histogram (and the total's).
  void RestartExplained(const RestartSplit& split);
  /// A master gave this node its place back after `lost` without one.
  void MasterBack(absl::Duration lost) { master_outages_.Observe(absl::ToDoubleSeconds(lost)); }
  /// The snapshot now: `round` as the rules hold it, `workers` of the running attempt (none
  /// between attempts: the last attempt's are shown).
  void Publish(const std::optional<Assignment>& round,
               const std::optional<std::vector<WorkerSupervisor::Outcome>>& workers) const;

 private:
  const std::string run_id_;
  AgentMetricsBoard* board_ = nullptr;
  int64_t starts_ = 0;
  std::map<std::pair<std::string, std::string>, int64_t> exits_;  // see AgentMetricsSnapshot
  std::vector<WorkerSupervisor::Outcome> last_workers_;
  std::map<std::string, DurationHistogram> restart_parts_;
  DurationHistogram master_outages_;
};

}  // namespace ddprun
