// WorkerSupervisor, continued: a worker taken for hung (HangWatch), and the record of where
// every worker was (StackCollection) before any of them is stopped.

#include <signal.h>
#include <sys/wait.h>

#include "absl/strings/str_cat.h"
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
  if (worker.state != WorkerState::kRunning || worker.hung || stopping_) return;
  worker.hung = true;
  worker.timer = hang.kind == Hang::Kind::kTimer;
  worker.hang_cause = HangCause(worker, hang);
  if (hang.kind == Hang::Kind::kTimer) {
    worker.hang_signal = hang.signal;
    worker.hang_target = hang.pid;
  }
  // Reported at once (see Failed), before it ends: as the signal that will end it (a Python
  // worker's own SIGABRT, once it has printed its stack).
  worker.wait_status = __W_EXITCODE(0, python_dumps_ ? SIGABRT : worker.hang_signal);
  worker.exited = absl::Now();
  hang_cause_ = worker.hang_cause;
  spdlog::warn("{}; recording where every worker is, then stopping it (local_rank {}, pid {})",
               worker.hang_cause, worker.local_rank, worker.pid);
  Freeze();
  if (hang.kind == Hang::Kind::kUninterruptible) {
    unhealthy_ = worker.hang_cause;
    CollectStacks();  // no rendezvous order will ask: this node leaves
  }
  // Else the failure goes to the rendezvous, whose stop order asks every node for its stacks.
}

void WorkerSupervisor::Freeze() {
  stopping_ = true;  // the attempt is over: the others' ends are stops, not failures
  stop_signals_ |= uint64_t{1} << SIGABRT;  // a Python worker's traceback ends it
  hangs_->Quiet();  // stopped workers send no heartbeat: no more hangs to declare
  stacks_taken_->Freeze(Running());
}

std::vector<StackCollection::Worker> WorkerSupervisor::Running() const {
  std::vector<StackCollection::Worker> running;
  for (const auto& worker : workers_) {
    if (worker->state != WorkerState::kRunning) continue;
    running.push_back({worker->local_rank, worker->rank, worker->pid, worker->err.get(),
                       worker->stderr_in_file ? worker->paths.stderr_log : std::string()});
  }
  return running;
}

bool WorkerSupervisor::SnapshotStacks(std::function<void(std::vector<RankStack>)> done) {
  if (snapshot_ && !snapshot_->done()) return false;
  snapshot_ = std::make_unique<StackCollection>(
      loop_, guard_, StackCollection::Method::kSnapshot,
      [this, done = std::move(done)] { done(snapshot_->Take(host_)); });
  snapshot_->Freeze(Running());  // kSnapshot: recorded, not stopped
  snapshot_->Begin(absl::ZeroDuration());
  return true;
}

void WorkerSupervisor::CollectStacks() {
  Freeze();
  stacks_taken_->Begin(freeze_settle_);
}

void WorkerSupervisor::OnStacksTaken() {
  for (auto& worker : workers_) {
    if (worker->hung) KillHung(*worker);
  }
  if (deferred_stop_ != 0) Stop(std::exchange(deferred_stop_, 0));
}

void WorkerSupervisor::KillHung(Worker& worker) {
  if (worker.state != WorkerState::kRunning) return;
  if (worker.hang_target > 0 && worker.hang_target != worker.pid) {
    ::kill(worker.hang_target, worker.hang_signal);  // what the FileTimerClient asked for
  } else {
    ::killpg(worker.pid, worker.hang_signal);
  }
}

std::vector<std::string> WorkerSupervisor::DescribeRemaining() const {
  std::vector<std::string> out;
  for (const auto& worker : workers_) {
    if (worker->state != WorkerState::kRunning) continue;
    out.push_back(absl::StrCat("rank ", worker->rank, " (local_rank ", worker->local_rank, ", pid ",
                               worker->pid, ", state ", DescribeProcessState(worker->pid), ")"));
  }
  return out;
}

}  // namespace ddprun
