// ElasticAgent's torchelastic events (event_log.h, elastic_events.h), at the moments
// torchrun's agent records them: RENDEZVOUS and ASSIGN_WORKER_RANKS with their durations at
// every round, START for each worker, each worker's final state when the run ends, and the
// agent's own SUCCEEDED (the run ended, whatever its workers did) or FAILED.

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/elastic_agent.h"
#include "common/clock.h"
#include "common/process_status.h"

namespace ddprun {

EventContext ElasticAgent::EventFacts() const {
  EventContext context;
  context.run_id = config_.run_id;
  context.role = config_.role;
  context.hostname = host_;
  context.rdzv_backend = config_.rdzv_backend;
  context.entry_point = config_.worker_argv.empty()
                            ? ""
                            : config_.worker_argv[0].substr(config_.worker_argv[0].rfind('/') + 1);
  if (events_round_) {
    context.group_rank = events_round_->group_rank;
    context.group_world_size = events_round_->group_world_size;
    context.restarts_used = events_round_->restart_count;
    context.round = events_round_->round;
  }
  return context;
}

void ElasticAgent::RecordRendezvousEvents(const Assignment& assignment, absl::Time received) {
  if (!event_log_.enabled()) return;
  // As torch's: built before the round's group rank is known to them (the last round's, or
  // null at the first).
  const EventContext context = EventFacts();
  event_log_.Record(StatusEvent(context, "RENDEZVOUS", "AGENT", std::nullopt, std::nullopt,
                                absl::ToDoubleMilliseconds(received - join_sent_at_)));
  event_log_.Record(StatusEvent(context, "ASSIGN_WORKER_RANKS", "AGENT", std::nullopt, std::nullopt,
                                absl::ToDoubleMilliseconds(MonotonicNow() - received)));
  events_round_ = assignment;
}

WorkerFacts ElasticAgent::FactsOf(const WorkerSupervisor::Outcome& worker) const {
  WorkerFacts facts;
  facts.global_rank = worker.rank;
  facts.local_rank = worker.local_rank;
  facts.role_world_size = events_round_ ? events_round_->world_size : 0;
  facts.pid = worker.pid;
  return facts;
}

void ElasticAgent::RecordWorkerStarts() {
  if (!event_log_.enabled() || !workers_) return;
  const EventContext context = EventFacts();
  for (const WorkerSupervisor::Outcome& worker : workers_->Outcomes()) {
    event_log_.Record(
        StatusEvent(context, "START", "WORKER", FactsOf(worker), std::nullopt, std::nullopt));
  }
}

void ElasticAgent::RecordRunEnd(bool run_ended) {
  if (!event_log_.enabled()) return;
  EventContext context = EventFacts();
  context.total_run_time_s = absl::ToInt64Seconds(MonotonicNow() - started_at_);
  if (!run_root_cause_.empty()) {
    const ReportedFailure& root = run_root_cause_.front();
    context.root_cause = absl::StrCat("rank ", root.rank, " on ", root.host, " failed (exitcode ",
                                      root.exit_code, "): ", root.message);
  }
  if (!run_excluded_.empty()) context.excluded = absl::StrJoin(run_excluded_, "; ");
  if (run_ended) {
    // Each worker of the last attempt, as torch's _record_worker_events: a worker the agent
    // stopped is TERMINATED; raw_error is its error file, or torch's {"message": "<NONE>"}.
    for (const WorkerSupervisor::Outcome& worker : last_outcomes_) {
      WorkerFacts facts = FactsOf(worker);
      std::string state = "SUCCEEDED";
      std::optional<std::string> raw_error;
      if (worker.state == WorkerSupervisor::WorkerState::kFailed) {
        state = "FAILED";
        facts.exit_code = TorchExitCode(worker.wait_status);
        facts.failed_pid = worker.pid;
        auto error = last_raw_errors_.find(worker.rank);
        raw_error = error != last_raw_errors_.end() ? error->second
                                                    : std::string("{\"message\": \"<NONE>\"}");
      } else if (worker.state != WorkerSupervisor::WorkerState::kSucceeded) {
        state = "TERMINATED";
      }
      event_log_.Record(StatusEvent(context, state, "WORKER", facts, raw_error, std::nullopt));
    }
    event_log_.Record(
        StatusEvent(context, "SUCCEEDED", "AGENT", std::nullopt, std::nullopt, std::nullopt));
  } else {
    event_log_.Record(StatusEvent(
        context, "FAILED", "AGENT", std::nullopt,
        absl::StrCat("the agent exited ", exit_code_, " before the run ended (see its log)"),
        std::nullopt));
  }
}

void ElasticAgent::KeepOutcomes() {
  last_outcomes_ = workers_->Outcomes();
  last_raw_errors_.clear();
  for (const WorkerFailure& failure : last_failures_) {
    if (!failure.error_file.empty() && !failure.error_file_unreadable) {
      last_raw_errors_[failure.rank] = PythonJsonObject({{"message", failure.error_message}});
    }
  }
}

}  // namespace ddprun
