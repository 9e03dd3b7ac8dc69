#pragma once
// The records torchrun's agent writes (torch's SimpleElasticAgent._construct_event), built
// from what ddprun knows: every key torch writes, in torch's order, then ddprun's own.
// Pure; the agent's ElasticRecords (agent/elastic_records.h) decides when, RecordLog writes them.

#include <optional>
#include <string>

#include "observability/elastic_record_log.h"

namespace ddprun {

/// The job's side of every record.
struct RecordContext {
  std::string run_id;
  std::string role;
  std::string hostname;
  std::string rdzv_backend;
  std::string entry_point;        // basename of the worker's program, as torch's
  std::optional<int> group_rank;  // null before the first round, as in torch
  std::optional<int> group_world_size;
  int restarts_used = 0;         // agent_restarts
  int64_t total_run_time_s = 0;  // whole seconds; 0 until the run has ended
  std::optional<int64_t> round;  // ddprun: the round (DDPRUN_ROUND)
  // ddprun, known once the run has ended: its root cause across the nodes ("rank R on HOST
  // failed (exitcode C): MESSAGE"), and the nodes it kept out, a line each joined by "; ".
  std::optional<std::string> root_cause;
  std::optional<std::string> excluded;
};

/// One worker's side of a worker's record.
struct WorkerFacts {
  int global_rank = 0;
  int local_rank = 0;
  int role_world_size = 0;
  int pid = 0;                    // worker_id is its pid, as torch's local agent
  std::optional<int> exit_code;   // torch's: -N for signal N
  std::optional<int> failed_pid;  // worker_pid: set for a failure only, as torch's
};

/// `torchelastic.worker.status.<state>`, from `source` ("AGENT" or "WORKER").
ElasticRecord StatusRecord(const RecordContext& context, const std::string& state,
                           const std::string& source, const std::optional<WorkerFacts>& worker,
                           const std::optional<std::string>& raw_error,
                           const std::optional<double>& duration_ms);

}  // namespace ddprun
