#include "observability/elastic_record_fields.h"

#include "absl/strings/str_cat.h"

namespace ddprun {
namespace {

template <typename T>
RecordValue Optional(const std::optional<T>& value) {
  if (!value) return nullptr;
  return static_cast<int64_t>(*value);
}

// json.dumps of a one-element tuple, as torch stores each worker fact.
std::string OneElementList(const RecordValue& value) {
  return absl::StrCat("[", PythonJsonValue(value), "]");
}

}  // namespace

ElasticRecord StatusRecord(const RecordContext& context, const std::string& state,
                           const std::string& source, const std::optional<WorkerFacts>& worker,
                           const std::optional<std::string>& raw_error,
                           const std::optional<double>& duration_ms) {
  // torch's md, json.dumps'ed into one string: the group's facts, then the worker's.
  std::string md =
      absl::StrCat("{\"group_world_size\": ", PythonJsonValue(Optional(context.group_world_size)),
                   ", \"entry_point\": ", PythonJsonString(context.entry_point));
  if (worker) {
    absl::StrAppend(&md, ", \"local_rank\": ", OneElementList(int64_t{worker->local_rank}),
                    ", \"role_rank\": ", OneElementList(int64_t{worker->global_rank}),
                    ", \"role_world_size\": ", OneElementList(int64_t{worker->role_world_size}),
                    ", \"exit_code\": ", OneElementList(Optional(worker->exit_code)),
                    ", \"worker_pid\": ", OneElementList(Optional(worker->failed_pid)));
  }
  md += "}";
  ElasticRecord event;
  event.name = absl::StrCat("torchelastic.worker.status.", state);
  event.source = source;
  event.metadata = {
      {"run_id", context.run_id},
      {"global_rank", worker ? RecordValue(int64_t{worker->global_rank}) : RecordValue(nullptr)},
      {"group_rank", Optional(context.group_rank)},
      {"worker_id", worker ? RecordValue(std::to_string(worker->pid)) : RecordValue(nullptr)},
      {"role", context.role},
      {"hostname", context.hostname},
      {"state", state},
      {"total_run_time", context.total_run_time_s},
      {"rdzv_backend", context.rdzv_backend},
      {"raw_error", raw_error ? RecordValue(*raw_error) : RecordValue(nullptr)},
      {"metadata", md},
      {"agent_restarts", int64_t{context.restarts_used}},
      {"duration_ms", duration_ms ? RecordValue(*duration_ms) : RecordValue(nullptr)},
      {"round", Optional(context.round)},
      {"root_cause", context.root_cause ? RecordValue(*context.root_cause) : RecordValue(nullptr)},
      {"excluded", context.excluded ? RecordValue(*context.excluded) : RecordValue(nullptr)},
  };
  return event;
}

}  // namespace ddprun
