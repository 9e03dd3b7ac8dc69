// The agent's metrics (--metrics-port): what its workers do, published to the board the
// metrics server reads (observability/agent_metrics.h).

#include <sys/wait.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "agent/elastic_agent.h"
#include "common/process_status.h"

namespace ddprun {
namespace {

const char* StateName(WorkerSupervisor::WorkerState state) {
  switch (state) {
    case WorkerSupervisor::WorkerState::kRunning:
      return "running";
    case WorkerSupervisor::WorkerState::kSucceeded:
      return "succeeded";
    case WorkerSupervisor::WorkerState::kFailed:
      return "failed";
    case WorkerSupervisor::WorkerState::kStopped:
      return "stopped";
  }
  return "unknown";
}

}  // namespace

// `failed`: this attempt had failures (last_failures_ are then its own, not an earlier one's).
void ElasticAgent::CountWorkerExits(bool failed) {
  for (const WorkerSupervisor::Outcome& worker : last_outcomes_) {
    std::pair<std::string, std::string> cause;
    auto hang =
        std::find_if(last_failures_.begin(), last_failures_.end(),
                     [&](const WorkerFailure& f) { return f.hung && f.rank == worker.rank; });
    const bool hung = failed && hang != last_failures_.end();
    if (worker.state == WorkerSupervisor::WorkerState::kRunning) continue;
    if (worker.state == WorkerSupervisor::WorkerState::kSucceeded) {
      cause = {"exit_code", "0"};
    } else if (worker.state == WorkerSupervisor::WorkerState::kStopped) {
      cause = {"stopped", ""};
    } else if (hung) {
      cause = {hang->timer ? "timer" : "hang", ""};
    } else if (WIFSIGNALED(worker.wait_status)) {
      cause = {"signal", SignalName(WTERMSIG(worker.wait_status))};
    } else {
      cause = {"exit_code", absl::StrCat(WEXITSTATUS(worker.wait_status))};
    }
    ++worker_exits_[cause];
  }
}

void ElasticAgent::PublishMetrics() {
  if (metrics_board_ == nullptr) return;
  AgentMetricsSnapshot snapshot;
  snapshot.run_id = config_.run_id;
  if (const std::optional<Assignment>& round = rules_.assignment()) {
    snapshot.round = round->round;
    snapshot.restart_count = round->restart_count;
  }
  snapshot.workers = {{"running", 0}, {"succeeded", 0}, {"failed", 0}, {"stopped", 0}};
  for (const WorkerSupervisor::Outcome& worker : workers_ ? workers_->Outcomes() : last_outcomes_) {
    ++snapshot.workers[StateName(worker.state)];
  }
  snapshot.worker_starts = worker_starts_;
  snapshot.worker_exits = worker_exits_;
  metrics_board_->Publish(std::move(snapshot));
}

}  // namespace ddprun
