// MasterState's admin side: the status of its runs (`ddprun status`, the status page, the
// metrics), an operator's stop (`ddprun stop`), and the rounds the metrics have seen.

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/exit_codes.h"
#include "common/printable.h"
#include "common/status_macros.h"
#include "master/master_state.h"
#include "observability/run_status.h"
#include "rendezvous/run_access.h"
#include "spdlog/spdlog.h"

namespace ddprun {

v1::StatusReply MasterState::StatusLocked(const std::string& run_id, bool lists) {
  const StatusClock clock{MonotonicNow(), absl::Now()};
  v1::StatusReply reply;
  reply.set_schema_version(v1::STATUS_SCHEMA_1);
  reply.set_time_unix_s(absl::ToDoubleSeconds(clock.wall - absl::UnixEpoch()));
  for (const auto& [id, run] : runs_) {
    if (!run.rounds || (!run_id.empty() && id != run_id)) continue;
    v1::RunStatus* status = reply.add_runs();
    *status = RunStatusOf(id, *run.rounds, clock, lists);
    status->set_sessions(static_cast<int32_t>(run.sessions.size()));
  }
  return reply;
}

absl::StatusOr<v1::StatusReply> MasterState::Status(const std::string& run_id, bool lists) {
  absl::MutexLock lock(&mu_);
  v1::StatusReply reply = StatusLocked(run_id, lists);
  if (!run_id.empty() && reply.runs().empty()) {
    return absl::NotFoundError(absl::StrCat(
        "this master holds no run '", run_id,
        "': check --rdzv-id, or leave it out to list the runs it holds (a run is forgotten ",
        absl::FormatDuration(options_.limits.idle_run_ttl), " after its last agent left)"));
  }
  return reply;
}

namespace {

// What `ddprun status` and `ddprun stop` may ask, whoever asks: the job's token, and a reason
// short enough to go into every agent's log.
constexpr size_t kMaxStopReason = 1024;

absl::Status CheckAdminToken(absl::string_view expected, absl::string_view token) {
  return CheckToken(expected, token, "job token",
                    "give the job's token: DDPRUN_RDZV_TOKEN or --rdzv-conf token_file=PATH");
}

}  // namespace

absl::StatusOr<v1::StatusReply> MasterState::Status(absl::string_view token,
                                                    const std::string& run_id) {
  DDPRUN_RETURN_IF_ERROR(CheckAdminToken(options_.token, token));
  if (!run_id.empty()) DDPRUN_RETURN_IF_ERROR(CheckRunId(run_id, "--rdzv-id"));
  return Status(run_id);
}

absl::StatusOr<std::string> MasterState::StopRun(absl::string_view token, const std::string& run_id,
                                                 const std::string& reason,
                                                 const std::string& peer) {
  DDPRUN_RETURN_IF_ERROR(CheckAdminToken(options_.token, token));
  DDPRUN_RETURN_IF_ERROR(CheckRunId(run_id, "--rdzv-id"));
  if (reason.size() > kMaxStopReason) {
    return absl::InvalidArgumentError(
        absl::StrCat("--reason is ", reason.size(), " bytes; at most ", kMaxStopReason));
  }
  absl::ReleasableMutexLock lock(&mu_);
  auto it = runs_.find(run_id);
  if (it == runs_.end() || !it->second.rounds) {
    ReleaseAndRunPending(lock);
    return absl::NotFoundError(absl::StrCat("this master holds no run '", run_id,
                                            "': `ddprun status` lists the runs it holds"));
  }
  Run& run = it->second;
  if (run.rounds->phase() == RoundStateMachine::Phase::kEnded) {
    const std::string ended = run.rounds->end_detail();
    ReleaseAndRunPending(lock);
    return absl::FailedPreconditionError(
        absl::StrCat("run '", run_id, "' has already ended: ", ended));
  }
  const std::string detail =
      absl::StrCat("stopped by request from ", peer, reason.empty() ? "" : ": ", reason);
  spdlog::warn("run '{}': {}", run.id, Printable(detail));
  const int nodes = static_cast<int>(run.sessions.size());
  run.rounds->Stop(detail, MonotonicNow());
  Dispatch(run);
  WakeTickerBefore(run.rounds->NextDeadline());
  ReleaseAndRunPending(lock);
  return absl::StrCat("run '", run_id, "' stops: its ", nodes,
                      nodes == 1 ? " agent stops its workers" : " agents stop their workers",
                      options_.token.empty()
                          ? absl::StrCat(" and exit ", kExitStoppedWithoutToken,
                                         " (without a token, a stop is never taken for success)")
                          : " and exit 0");
}

void MasterState::ObserveRounds(Run& run) {
  // From the first record not seen ended: at most the last two, on every message.
  const std::deque<RoundRecord>& history = run.rounds->history();
  size_t first = history.size();
  while (first > 0 && history[first - 1].round > run.observed_ended) --first;
  for (size_t i = first; i < history.size(); ++i) {
    const RoundRecord& record = history[i];
    if (record.round > run.observed_began) {
      metrics_.RoundBegan(run.id, record.began - record.gathering_began);
      run.observed_began = record.round;
    }
    if (record.round > run.observed_ended && record.ended != absl::InfiniteFuture()) {
      metrics_.RoundEnded(run.id, record.ended - record.began);
      run.observed_ended = record.round;
    }
  }
}

std::map<std::string, MasterState::Run>::iterator MasterState::EraseRun(
    std::map<std::string, Run>::iterator it, const absl::Status& why) {
  stores_.Forget(it->first, why);
  metrics_.ForgetRun(it->first);
  return runs_.erase(it);
}

}  // namespace ddprun
