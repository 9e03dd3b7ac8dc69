#include "observability/run_status.h"

#include <algorithm>
#include <map>

#include <google/protobuf/util/json_util.h>

#include "absl/strings/str_cat.h"
#include "common/process_status.h"

namespace ddprun {
namespace {

const char* PhaseName(RoundStateMachine::Phase phase) {
  switch (phase) {
    case RoundStateMachine::Phase::kGathering:
      return "gathering";
    case RoundStateMachine::Phase::kRunning:
      return "running";
    case RoundStateMachine::Phase::kFinishing:
      return "finishing";
    case RoundStateMachine::Phase::kEnded:
      return "ended";
  }
  return "unknown";
}

const char* OutcomeName(RunOutcome outcome) {
  switch (outcome) {
    case RunOutcome::kSucceeded:
    case RunOutcome::kReleased:
      return "succeeded";
    case RunOutcome::kFailed:
      return "failed";
    case RunOutcome::kTimedOut:
      return "timed_out";
    case RunOutcome::kStopped:
      return "stopped";
  }
  return "unknown";
}

const char* NodeStateName(NodeView::State state) {
  switch (state) {
    case NodeView::State::kRunning:
      return "running";
    case NodeView::State::kFinished:
      return "finished";
    case NodeView::State::kWaiting:
      return "waiting";
    case NodeView::State::kIdle:
      return "idle";
  }
  return "unknown";
}

// A worker's exit in words: "exit code 1", "SIGSEGV", "hung", "FileTimer expired".
std::string DescribeExit(int exit_code, bool hung, bool timer) {
  if (hung) return timer ? "FileTimer expired" : "hung";
  if (exit_code < 0) return SignalName(-exit_code);
  return absl::StrCat("exit code ", exit_code);
}

void FillFailure(const RoundRecord& record, v1::FailureStatus& out) {
  const ReportedFailure& f = *record.root_cause;
  out.set_round(static_cast<int32_t>(record.round));
  out.set_host(f.host);
  out.set_rank(f.rank);
  out.set_local_rank(f.local_rank);
  out.set_exit_code(f.exit_code);
  out.set_exit(DescribeExit(f.exit_code, f.hung, f.timer));
  out.set_timer(f.timer);
  out.set_pid(f.pid);
  out.set_time_unix_s(absl::ToDoubleSeconds(f.time - absl::UnixEpoch()));
  out.set_message(f.message);
  out.set_hung(f.hung);
}

// The nodes (their list only with `lists`) and their counts by state.
void FillNodes(const RoundStateMachine& rounds, const StatusClock& clock, bool lists,
               v1::RunStatus& out) {
  const NodeHealth& health = rounds.health();
  auto& states = *out.mutable_node_states();
  for (const char* state : {"running", "finished", "waiting", "idle", "excluded"})
    states[state] = 0;
  for (const NodeView& view : rounds.Nodes()) {
    const bool excluded = health.Excluded(view.info->host, clock.monotonic).has_value();
    const char* state = excluded && view.state != NodeView::State::kRunning
                            ? "excluded"
                            : NodeStateName(view.state);
    ++states[state];
    if (!lists) continue;
    v1::NodeStatus* node = out.add_nodes();
    node->set_host(view.info->host);
    node->set_addr(view.info->addr);
    node->set_pid(view.info->pid);
    // Its first 8 characters only: the whole incarnation is what a rejoin is matched by, and
    // the status is served without a token (a stranger who knew it evicted the node).
    node->set_agent_id(view.info->incarnation.substr(0, 8));
    node->set_state(state);
    node->set_group_rank(view.group_rank);
    node->set_first_rank(view.group_rank >= 0 ? view.base_rank : 0);
    node->set_local_world_size(view.info->local_world_size);
    node->set_last_heartbeat_s_ago(absl::ToDoubleSeconds(clock.monotonic - view.last_seen));
    const NodeExclusion counts = health.Counts(view.info->host);
    node->set_restarts_caused(counts.failures);
    node->set_flaps(counts.flaps);
  }
}

// Every host kept out so far (the list only with `lists`), and how many are out now.
void FillExcluded(const NodeHealth& health, const StatusClock& clock, bool lists,
                  v1::RunStatus& out) {
  for (const NodeExclusion& e : health.Record()) {
    const bool out_now = health.Excluded(e.host, clock.monotonic).has_value();
    out.set_excluded_now(out.excluded_now() + (out_now ? 1 : 0));
    if (!lists) continue;
    v1::ExcludedNode* x = out.add_excluded();
    x->set_host(e.host);
    x->set_reason(e.reason);
    x->set_failures(e.failures);
    x->set_flaps(e.flaps);
    x->set_failed_checks(e.failed_checks);
    x->set_times_excluded(e.times_excluded);
    x->set_out_now(out_now);
    x->set_rest_of_job(e.until == absl::InfiniteFuture());
    if (out_now && !x->rest_of_job()) {
      x->set_cooldown_left_s(absl::ToDoubleSeconds(e.until - clock.monotonic));
    }
  }
}

void FillFailureCounts(const RoundStateMachine& rounds, v1::RunStatus& out) {
  for (const auto& [key, n] : rounds.failure_counts()) {
    const auto& [cause, code] = key;
    v1::FailureCount* count = out.add_worker_failures();
    count->set_cause(cause);
    count->set_code(code == RoundStateMachine::kOtherExitCode ? "other"
                    : code < 0                                ? SignalName(-code)
                                                              : absl::StrCat(code));
    count->set_count(n);
  }
}

// The rounds' record, oldest first.
void FillRounds(const std::deque<RoundRecord>& history, const StatusClock& clock,
                v1::RunStatus& out) {
  for (const RoundRecord& record : history) {
    v1::RoundStatus* round = out.add_rounds();
    round->set_round(static_cast<int32_t>(record.round));
    round->set_restart_count(record.restart_count);
    round->set_nodes(record.nodes);
    round->set_world_size(record.world_size);
    round->set_began_unix_s(clock.WallSeconds(record.began));
    if (record.ended != absl::InfiniteFuture()) {
      round->set_ended_unix_s(clock.WallSeconds(record.ended));
    }
    round->set_rendezvous_s(absl::ToDoubleSeconds(record.began - record.gathering_began));
    round->set_ended_by(record.ended_by);
    round->set_failed(record.root_cause.has_value());
    if (record.restart) {
      auto& restart_ms = *round->mutable_restart_ms();
      for (const auto& [part, took] : record.restart->Parts()) {
        restart_ms[part] = absl::ToDoubleMilliseconds(took);
      }
      restart_ms["total"] = absl::ToDoubleMilliseconds(record.restart->total);
    }
    if (record.master_outage) {
      round->set_master_outage_ms(absl::ToDoubleMilliseconds(*record.master_outage));
    }
    round->set_taken_up(record.taken_up);
  }
}

}  // namespace

std::string StatusJson(const google::protobuf::Message& message, bool indent) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  options.add_whitespace = indent;
  std::string json;
  (void)google::protobuf::util::MessageToJsonString(message, &json, options);
  return json;
}

double StatusClock::WallSeconds(absl::Time monotonic_time) const {
  return absl::ToDoubleSeconds(wall - (monotonic - monotonic_time) - absl::UnixEpoch());
}

v1::RunStatus RunStatusOf(const std::string& run_id, const RoundStateMachine& rounds,
                          const StatusClock& clock, bool lists) {
  v1::RunStatus out;
  out.set_run_id(run_id);
  const RendezvousSettings& settings = rounds.settings();
  out.set_state(PhaseName(rounds.phase()));
  if (rounds.phase() == RoundStateMachine::Phase::kEnded) {
    out.set_outcome(OutcomeName(rounds.outcome()));
    out.set_detail(rounds.end_detail());
  }
  out.set_round(static_cast<int32_t>(rounds.round()));
  out.set_min_nodes(settings.min_nodes);
  out.set_max_nodes(settings.max_nodes);
  out.set_restarts_used(rounds.restarts_spent());
  out.set_max_restarts(settings.max_restarts);
  out.set_restarts_left(std::max(0, settings.max_restarts - rounds.restarts_spent()));
  out.set_keep_alive_misses(rounds.keep_alive_misses());
  out.set_waiting(rounds.WhyWaiting(clock.monotonic));
  for (const auto& [name, text] : SettingsAsText(settings)) (*out.mutable_settings())[name] = text;
  FillNodes(rounds, clock, lists, out);
  FillExcluded(rounds.health(), clock, lists, out);
  FillFailureCounts(rounds, out);
  const std::deque<RoundRecord>& history = rounds.history();
  for (auto it = history.rbegin(); it != history.rend(); ++it) {
    if (it->root_cause) {
      FillFailure(*it, *out.mutable_last_failure());
      break;
    }
  }
  if (lists) FillRounds(history, clock, out);
  const bool runs = rounds.phase() == RoundStateMachine::Phase::kRunning ||
                    rounds.phase() == RoundStateMachine::Phase::kFinishing;
  if (runs && !history.empty()) out.set_world_size(history.back().world_size);
  return out;
}

}  // namespace ddprun
