#pragma once
// ElasticRecords: the torchelastic records one agent writes (torch calls them events;
// observability/elastic_record_log.h writes them as torch does, docs/events.md lists them), at the
// moments torchrun's agent writes them: RENDEZVOUS and ASSIGN_WORKER_RANKS with their
// durations at every round, START for each worker, and when the agent exits, each worker's
// final state and the agent's own SUCCEEDED (the run ended, whatever its workers did) or
// FAILED. An observer of the agent: it decides nothing.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "agent/agent_config.h"
#include "agent/failure_summary.h"
#include "agent/moments.h"
#include "agent/restart_timeline.h"
#include "agent/run_end.h"
#include "agent/worker_supervisor.h"
#include "observability/elastic_record_fields.h"
#include "observability/elastic_record_log.h"

namespace ddprun {

/// What every record says of the agent, fixed for its life.
struct RecordSource {
  std::string run_id;
  std::string role;
  std::string host;
  std::string rdzv_backend;
  std::string entry_point;  // the worker program's file name

  static RecordSource Of(const AgentConfig& config, const std::string& host);
};

class ElasticRecords : public MomentObserver {
 public:
  ElasticRecords(RecordLog log, RecordSource source, absl::Time started);

  /// Each moment to the call below that records it.
  void See(const AgentMoment& moment) override;

  /// This node asked for a round: RENDEZVOUS counts from here.
  void JoinSent(absl::Time now);
  /// The round came at `received`; its workers are about to start at `now`.
  void RoundAssigned(const Assignment& round, absl::Time received, absl::Time now);
  void WorkersStarted(const std::vector<WorkerSupervisor::Outcome>& workers);
  /// Every worker of an attempt has exited; `failures`: this attempt's, with their error files.
  void AttemptClosed(std::vector<WorkerSupervisor::Outcome> workers,
                     const std::vector<WorkerFailure>& failures);
  /// A restart's split (agent/restart_timeline.h): RESTARTED, its total as duration_ms and
  /// each part as <part>_ms (null where this node did not see it).
  void RestartExplained(const RestartSplit& split);
  /// A master gave this node its place back in `round` after `lost` without one (its workers
  /// went on): RESUMED, with the outage as duration_ms.
  void MasterBack(int64_t round, absl::Duration lost);
  /// The agent exits with `exit_code`. `run_end`: how the rendezvous ended the run, when it
  /// did and no signal stopped this agent first; then each worker's final state and
  /// SUCCEEDED are written, else FAILED.
  void AgentExiting(const std::optional<RunEnd>& run_end, int exit_code, absl::Time now);

 private:
  RecordContext Context() const;
  WorkerFacts FactsOf(const WorkerSupervisor::Outcome& worker) const;

  RecordLog log_;
  const RecordSource source_;
  const absl::Time started_;
  absl::Time join_sent_;
  std::optional<Assignment> round_;  // the round the records speak of
  std::vector<WorkerSupervisor::Outcome> last_workers_;
  std::map<int, std::string> last_raw_errors_;  // rank -> its error file, as JSON
};

}  // namespace ddprun
