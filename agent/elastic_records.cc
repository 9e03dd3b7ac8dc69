#include "agent/elastic_records.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ddprun {

RecordSource RecordSource::Of(const AgentConfig& config, const std::string& host) {
  RecordSource source;
  source.run_id = config.run_id;
  source.role = config.role;
  source.host = host;
  source.rdzv_backend = config.rdzv_backend;
  if (!config.worker_argv.empty()) {
    source.entry_point = config.worker_argv[0].substr(config.worker_argv[0].rfind('/') + 1);
  }
  return source;
}

ElasticRecords::ElasticRecords(RecordLog log, RecordSource source, absl::Time started)
    : log_(std::move(log)), source_(std::move(source)), started_(started), join_sent_(started) {}

RecordContext ElasticRecords::Context() const {
  RecordContext context;
  context.run_id = source_.run_id;
  context.role = source_.role;
  context.hostname = source_.host;
  context.rdzv_backend = source_.rdzv_backend;
  context.entry_point = source_.entry_point;
  if (round_) {
    context.group_rank = round_->group_rank;
    context.group_world_size = round_->group_world_size;
    context.restarts_used = round_->restart_count;
    context.round = round_->round;
  }
  return context;
}

WorkerFacts ElasticRecords::FactsOf(const WorkerSupervisor::Outcome& worker) const {
  WorkerFacts facts;
  facts.global_rank = worker.rank;
  facts.local_rank = worker.local_rank;
  facts.role_world_size = round_ ? round_->world_size : 0;
  facts.pid = worker.pid;
  return facts;
}

void ElasticRecords::See(const AgentMoment& moment) {
  using Kind = AgentMoment::Kind;
  switch (moment.kind) {
    case Kind::kJoinSent:
      return JoinSent(moment.at);
    case Kind::kRoundStarting:
      return RoundAssigned(*moment.assignment, moment.at, moment.at);
    case Kind::kWorkersStarted:
      return WorkersStarted(moment.workers);
    case Kind::kAttemptClosed:
      return AttemptClosed(moment.workers, moment.failures);
    case Kind::kRestartExplained:
      return RestartExplained(*moment.split);
    case Kind::kMasterBack:
      return MasterBack(moment.round, moment.lost);
    case Kind::kExiting:
      return AgentExiting(moment.run_end, moment.exit_code, moment.at);
    default:
      return;
  }
}

void ElasticRecords::JoinSent(absl::Time now) { join_sent_ = now; }

void ElasticRecords::RoundAssigned(const Assignment& round, absl::Time received, absl::Time now) {
  if (log_.enabled()) {
    // As torch's: made before the round's group rank is known to them (the last round's,
    // or null at the first).
    const RecordContext context = Context();
    log_.Record(StatusRecord(context, "RENDEZVOUS", "AGENT", std::nullopt, std::nullopt,
                             absl::ToDoubleMilliseconds(received - join_sent_)));
    log_.Record(StatusRecord(context, "ASSIGN_WORKER_RANKS", "AGENT", std::nullopt, std::nullopt,
                             absl::ToDoubleMilliseconds(now - received)));
  }
  round_ = round;
}

void ElasticRecords::WorkersStarted(const std::vector<WorkerSupervisor::Outcome>& workers) {
  if (!log_.enabled()) return;
  const RecordContext context = Context();
  for (const WorkerSupervisor::Outcome& worker : workers) {
    log_.Record(
        StatusRecord(context, "START", "WORKER", FactsOf(worker), std::nullopt, std::nullopt));
  }
}

void ElasticRecords::AttemptClosed(std::vector<WorkerSupervisor::Outcome> workers,
                                   const std::vector<WorkerFailure>& failures) {
  last_workers_ = std::move(workers);
  last_raw_errors_.clear();
  for (const WorkerFailure& failure : failures) {
    if (!failure.error_file.empty() && !failure.error_file_unreadable) {
      last_raw_errors_[failure.rank] = PythonJsonObject({{"message", failure.error_message}});
    }
  }
}

void ElasticRecords::RestartExplained(const RestartSplit& split) {
  if (!log_.enabled()) return;
  ElasticRecord record = StatusRecord(Context(), "RESTARTED", "AGENT", std::nullopt, std::nullopt,
                                      absl::ToDoubleMilliseconds(split.total));
  const std::pair<const char*, const std::optional<absl::Duration>*> parts[] = {
      {"detection_ms", &split.detection},   {"stop_ms", &split.stop},
      {"rendezvous_ms", &split.rendezvous}, {"spawn_ms", &split.spawn},
      {"connected_ms", &split.connected},   {"barrier_ms", &split.barrier}};
  for (const auto& [key, part] : parts) {
    record.metadata.emplace_back(key, part->has_value()
                                          ? RecordValue(absl::ToDoubleMilliseconds(**part))
                                          : RecordValue(nullptr));
  }
  log_.Record(record);
}

void ElasticRecords::MasterBack(int64_t round, absl::Duration lost) {
  if (!log_.enabled()) return;
  RecordContext context = Context();
  context.round = round;
  log_.Record(StatusRecord(context, "RESUMED", "AGENT", std::nullopt, std::nullopt,
                           absl::ToDoubleMilliseconds(lost)));
}

void ElasticRecords::AgentExiting(const std::optional<RunEnd>& run_end, int exit_code,
                                  absl::Time now) {
  if (!log_.enabled()) return;
  RecordContext context = Context();
  context.total_run_time_s = absl::ToInt64Seconds(now - started_);
  if (run_end && !run_end->root_cause.empty()) {
    const ReportedFailure& root = run_end->root_cause.front();
    context.root_cause = absl::StrCat("rank ", root.rank, " on ", root.host, " failed (exitcode ",
                                      root.exit_code, "): ", root.message);
  }
  if (run_end && !run_end->excluded.empty()) {
    context.excluded = absl::StrJoin(run_end->excluded, "; ");
  }
  if (!run_end) {
    log_.Record(StatusRecord(
        context, "FAILED", "AGENT", std::nullopt,
        absl::StrCat("the agent exited ", exit_code, " before the run ended (see its log)"),
        std::nullopt));
    return;
  }
  // Each worker of the last attempt, as torch's _record_worker_events: a worker the agent
  // stopped is TERMINATED; raw_error is its error file, or torch's {"message": "<NONE>"}.
  for (const WorkerSupervisor::Outcome& worker : last_workers_) {
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
    log_.Record(StatusRecord(context, state, "WORKER", facts, raw_error, std::nullopt));
  }
  log_.Record(
      StatusRecord(context, "SUCCEEDED", "AGENT", std::nullopt, std::nullopt, std::nullopt));
}

}  // namespace ddprun
