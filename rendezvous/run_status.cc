#include "rendezvous/run_status.h"

#include <algorithm>
#include <map>

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

void FillFailure(const RoundRecord& record, v1::FailureStatus& out) {
  const ReportedFailure& f = *record.root_cause;
  out.set_round(static_cast<int32_t>(record.round));
  out.set_host(f.host);
  out.set_rank(f.rank);
  out.set_local_rank(f.local_rank);
  out.set_exit_code(f.exit_code);
  out.set_exit(DescribeExit(f.exit_code, f.hung));
  out.set_pid(f.pid);
  out.set_time_unix_s(absl::ToDoubleSeconds(f.time - absl::UnixEpoch()));
  out.set_message(f.message);
  out.set_hung(f.hung);
}

void FillNodes(const RoundStateMachine& rounds, const StatusClock& clock, v1::RunStatus& out) {
  const NodeHealth& health = rounds.health();
  std::map<std::string, NodeExclusion> record;
  for (NodeExclusion& e : health.Record()) record[e.host] = std::move(e);
  for (const NodeView& view : rounds.Nodes()) {
    v1::NodeStatus* node = out.add_nodes();
    node->set_host(view.info->host);
    node->set_addr(view.info->addr);
    node->set_pid(view.info->pid);
    node->set_agent_id(view.info->incarnation);
    const bool excluded = health.Excluded(view.info->host, clock.monotonic).has_value();
    node->set_state(excluded && view.state != NodeView::State::kRunning
                        ? "excluded"
                        : NodeStateName(view.state));
    node->set_group_rank(view.group_rank);
    node->set_first_rank(view.group_rank >= 0 ? view.base_rank : 0);
    node->set_local_world_size(view.info->local_world_size);
    node->set_last_heartbeat_s_ago(absl::ToDoubleSeconds(clock.monotonic - view.last_seen));
    if (auto it = record.find(view.info->host); it != record.end()) {
      node->set_restarts_caused(it->second.failures);
      node->set_flaps(it->second.flaps);
    }
  }
  for (const auto& [host, e] : record) {
    v1::ExcludedNode* x = out.add_excluded();
    x->set_host(host);
    x->set_reason(e.reason);
    x->set_failures(e.failures);
    x->set_flaps(e.flaps);
    x->set_failed_checks(e.failed_checks);
    x->set_times_excluded(e.times_excluded);
    x->set_out_now(health.Excluded(host, clock.monotonic).has_value());
    x->set_rest_of_job(e.until == absl::InfiniteFuture());
    if (x->out_now() && !x->rest_of_job()) {
      x->set_cooldown_left_s(absl::ToDoubleSeconds(e.until - clock.monotonic));
    }
  }
}

}  // namespace

double StatusClock::WallSeconds(absl::Time monotonic_time) const {
  return absl::ToDoubleSeconds(wall - (monotonic - monotonic_time) - absl::UnixEpoch());
}

std::string DescribeExit(int exit_code, bool hung) {
  if (hung) return "hung";
  if (exit_code < 0) return SignalName(-exit_code);
  return absl::StrCat("exit code ", exit_code);
}

v1::RunStatus RunStatusOf(const std::string& run_id, const RoundStateMachine& rounds,
                          const StatusClock& clock) {
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
  FillNodes(rounds, clock, out);
  for (const RoundRecord& record : rounds.history()) {
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
    if (record.root_cause) FillFailure(record, *out.mutable_last_failure());
  }
  const bool runs = rounds.phase() == RoundStateMachine::Phase::kRunning ||
                    rounds.phase() == RoundStateMachine::Phase::kFinishing;
  if (runs && !rounds.history().empty()) out.set_world_size(rounds.history().back().world_size);
  return out;
}

}  // namespace ddprun
