// WorkerSupervisor, continued: a worker taken for hung (HangWatch), and the record of where
// every worker was (StackCollection) before any of them is stopped.

#include <signal.h>
#include <sys/wait.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "agent/hangs/proc_state.h"
#include "agent/worker_supervisor.h"
#include "common/process_status.h"
#include "spdlog/spdlog.h"

namespace ddprun {
namespace {

std::string Seconds(absl::Duration d) {
  return absl::FormatDuration(absl::Trunc(d, absl::Milliseconds(1)));
}

std::string WallTime(absl::Time t) {
  return absl::FormatTime("%Y-%m-%d %H:%M:%E3S", t, absl::LocalTimeZone());
}

}  // namespace

std::string WorkerSupervisor::HangCause(const Worker& worker, const Hang& hang) const {
  switch (hang.kind) {
    case Hang::Kind::kHeartbeat:
      if (hang.never_beat) {
        return absl::StrCat("rank ", worker.rank, " sent no first heartbeat in ",
                            Seconds(hang.duration),
                            " since its start (--worker-heartbeat-startup-timeout=",
                            Seconds(config_.worker_heartbeat_startup_timeout), "): taken for hung");
      }
      return absl::StrCat("rank ", worker.rank, " sent no heartbeat for ", Seconds(hang.duration),
                          " (--worker-heartbeat-timeout=",
                          Seconds(config_.worker_heartbeat_timeout), "): taken for hung");
    case Hang::Kind::kTimer:
      return absl::StrCat("rank ", worker.rank, ": FileTimer scope '", hang.scope, "' expired at ",
                          WallTime(hang.deadline), " (pid ", hang.pid,
                          ", torch.distributed.elastic.timer.expires, signal ",
                          SignalName(hang.signal), "): taken for hung");
    case Hang::Kind::kUninterruptible:
      return absl::StrCat(
          "rank ", worker.rank, " has been in uninterruptible sleep for ", Seconds(hang.duration),
          ": the node is unhealthy (", DescribeProcessState(worker.pid),
          "; TORCHELASTIC_UNINTERRUPTIBLE_STATE_TIMEOUT=", Seconds(config_.uninterruptible_timeout),
          ")");
  }
  return "";
}

void WorkerSupervisor::OnHang(const Hang& hang) {
  Worker& worker = *workers_[hang.local_rank];
  if (worker.state != WorkerState::kRunning || stopping()) return;
  TakenForHung taken;
  taken.cause = HangCause(worker, hang);
  taken.node_unhealthy = hang.kind == Hang::Kind::kUninterruptible;
  if (hang.kind == Hang::Kind::kTimer) {
    taken.timer = true;
    taken.signal = hang.signal;
    taken.target = hang.pid;
  }
  worker.hang = taken;
  worker.state = WorkerState::kHung;
  worker.exited = absl::Now();  // a failure from now on (see Failed), though it still runs
  if (hooks_.hang_found) {
    hooks_.hang_found(FoundHang{worker.local_rank, worker.pid, taken.cause, taken.node_unhealthy});
  }
}

void WorkerSupervisor::Freeze() {
  if (!stacks_taken_ || stacks_taken_->frozen()) return;
  stop_signals_ |= uint64_t{1} << SIGABRT;  // a Python worker's traceback ends it: a stop
  hangs_->Quiet();  // stopped workers send no heartbeat: no more hangs to declare
  stacks_taken_->Freeze(StackTargets());
  for (auto& worker : workers_) {
    if (worker->state == WorkerState::kRunning) worker->state = WorkerState::kFrozen;
  }
}

std::vector<StackCollection::Worker> WorkerSupervisor::StackTargets() const {
  std::vector<StackCollection::Worker> targets;
  for (const auto& worker : workers_) {
    if (!Alive(*worker)) continue;
    targets.push_back({worker->local_rank, worker->rank, worker->pid, worker->err.get(),
                       worker->stderr_in_file ? worker->paths.stderr_log : std::string()});
  }
  return targets;
}

bool WorkerSupervisor::SnapshotStacks(std::function<void(std::vector<RankStack>)> done) {
  if (snapshot_ && !snapshot_->done()) return false;
  snapshot_ = std::make_unique<StackCollection>(
      loop_, guard_, StackCollection::Method::kSnapshot, dump_bound_,
      [this, done = std::move(done)] { done(snapshot_->Take(host_)); });
  snapshot_->Freeze(StackTargets());  // kSnapshot: recorded, not stopped
  snapshot_->Begin(absl::ZeroDuration());
  return true;
}

void WorkerSupervisor::CollectStacks(absl::Duration settle) {
  Freeze();
  // Nothing was left to freeze (every worker had exited): nothing to wait for.
  if (!stacks_taken_->frozen()) return OnStacksTaken();
  stacks_taken_->Begin(settle);
}

// Every dump is in, or its time is up: the frozen workers were continued.
void WorkerSupervisor::OnStacksTaken() {
  for (auto& worker : workers_) {
    if (worker->state == WorkerState::kFrozen) worker->state = WorkerState::kRunning;
  }
  if (hooks_.stacks_taken) hooks_.stacks_taken();
}

void WorkerSupervisor::KillHung() {
  for (auto& worker : workers_) {
    if (worker->state != WorkerState::kHung) continue;
    const TakenForHung& hang = *worker->hang;
    if (hang.target > 0 && hang.target != worker->pid) {
      ::kill(hang.target, hang.signal);  // what the FileTimerClient asked for
    } else {
      ::killpg(worker->pid, hang.signal);
    }
  }
}

std::string WorkerSupervisor::hang_cause() const {
  for (const auto& worker : workers_) {
    if (worker->hang) return worker->hang->cause;
  }
  return "";
}

std::string WorkerSupervisor::DescribeRemaining() const {
  std::vector<std::string> out;
  for (const auto& worker : workers_) {
    if (!Alive(*worker)) continue;
    out.push_back(absl::StrCat("rank ", worker->rank, " (local_rank ", worker->local_rank, ", pid ",
                               worker->pid, ", state ", DescribeProcessState(worker->pid), ")"));
  }
  return out.empty() ? "workers" : absl::StrJoin(out, "; ");
}

}  // namespace ddprun
