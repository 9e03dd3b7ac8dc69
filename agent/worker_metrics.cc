#include "agent/worker_metrics.h"

#include <sys/wait.h>

#include <algorithm>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "common/process_status.h"

namespace ddprun {
namespace {

const char* StateName(WorkerSupervisor::WorkerState state) {
  using State = WorkerSupervisor::WorkerState;
  static constexpr const char* kNames[] = {"running",   "frozen", "hung",
                                           "succeeded", "failed", "stopped"};  // in State's order
  static_assert(static_cast<int>(State::kStopped) + 1 == std::size(kNames));
  return kNames[static_cast<int>(state)];
}

// How a worker that has ended ended: its cause and code, as ddprun_agent_worker_exits_total
// labels them.
std::pair<std::string, std::string> ExitCause(const WorkerSupervisor::Outcome& worker,
                                              const std::vector<WorkerFailure>& failures) {
  using State = WorkerSupervisor::WorkerState;
  auto hang = std::find_if(failures.begin(), failures.end(),
                           [&](const WorkerFailure& f) { return f.hung && f.rank == worker.rank; });
  if (worker.state == State::kSucceeded) return {"exit_code", "0"};
  if (worker.state == State::kStopped) return {"stopped", ""};
  if (hang != failures.end()) return {hang->timer ? "timer" : "hang", ""};
  if (WIFSIGNALED(worker.wait_status)) return {"signal", SignalName(WTERMSIG(worker.wait_status))};
  return {"exit_code", absl::StrCat(WEXITSTATUS(worker.wait_status))};
}

}  // namespace

void WorkerMetrics::See(const AgentMoment& moment) {
  using Kind = AgentMoment::Kind;
  switch (moment.kind) {
    case Kind::kWorkersStarted:
      return WorkersStarted(moment.workers.size());
    case Kind::kAttemptClosed:
      return AttemptClosed(moment.workers, moment.failures);
    case Kind::kRestartExplained:
      return RestartExplained(*moment.split);
    case Kind::kMasterBack:
      return MasterBack(moment.lost);
    default:
      return;
  }
}

void WorkerMetrics::AttemptClosed(std::vector<WorkerSupervisor::Outcome> workers,
                                  const std::vector<WorkerFailure>& failures) {
  last_workers_ = std::move(workers);
  for (const WorkerSupervisor::Outcome& worker : last_workers_) {
    if (WorkerSupervisor::Ended(worker.state)) ++exits_[ExitCause(worker, failures)];
  }
}

void WorkerMetrics::RestartExplained(const RestartSplit& split) {
  for (const auto& [part, took] : split.Parts()) {
    restart_parts_[part].Observe(absl::ToDoubleSeconds(took));
  }
  restart_parts_["total"].Observe(absl::ToDoubleSeconds(split.total));
}

void WorkerMetrics::Publish(
    const std::optional<Assignment>& round,
    const std::optional<std::vector<WorkerSupervisor::Outcome>>& workers) const {
  if (board_ == nullptr) return;
  AgentMetricsSnapshot snapshot;
  snapshot.run_id = run_id_;
  if (round) {
    snapshot.round = round->round;
    snapshot.restart_count = round->restart_count;
  }
  snapshot.workers = {{"running", 0}, {"succeeded", 0}, {"failed", 0}, {"stopped", 0}};
  for (const WorkerSupervisor::Outcome& worker : workers ? *workers : last_workers_) {
    ++snapshot.workers[StateName(worker.state)];
  }
  snapshot.worker_starts = starts_;
  snapshot.worker_exits = exits_;
  snapshot.restart_parts = restart_parts_;
  snapshot.master_outages = master_outages_;
  board_->Publish(std::move(snapshot));
}

}  // namespace ddprun
