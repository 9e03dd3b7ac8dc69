// WorkerSupervisor, continued: a worker taken for hung (HangWatch), and the record of where
// every worker was (CollectStacks) before any of them is stopped.

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "agent/proc_state.h"
#include "agent/worker_supervisor.h"
#include "common/clock.h"
#include "common/process_status.h"
#include "common/small_file.h"
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
  worker.hang_cause = HangCause(worker, hang);
  if (hang.kind == Hang::Kind::kTimer) {
    worker.hang_signal = hang.signal;
    worker.hang_target = hang.pid;
  }
  if (hang.kind == Hang::Kind::kUninterruptible) unhealthy_ = worker.hang_cause;
  if (hang_cause_.empty()) hang_cause_ = worker.hang_cause;
  spdlog::warn("{}; recording where every worker is, then stopping it (local_rank {}, pid {})",
               worker.hang_cause, worker.local_rank, worker.pid);
  CollectStacks();
  if (!dumping_) KillHung(worker);
}

void WorkerSupervisor::KillHung(Worker& worker) {
  if (worker.state != WorkerState::kRunning) return;
  if (worker.hang_target > 0 && worker.hang_target != worker.pid) {
    ::kill(worker.hang_target, worker.hang_signal);  // what the FileTimerClient asked for
  } else {
    ::killpg(worker.pid, worker.hang_signal);
  }
}

void WorkerSupervisor::CollectStacks() {
  if (dumped_) return;
  dumped_ = true;
  // The attempt is over: the workers this takes down for their stacks are stopped, not failed.
  stopping_ = true;
  for (auto& worker : workers_) {
    if (worker->state == WorkerState::kRunning) DumpStack(*worker);
  }
  if (!dumping_) return;
  absl::StatusOr<OneShotTimer> timer = OneShotTimer::Create();
  if (!timer.ok()) {
    spdlog::warn("cannot bound the stack dump ({}): not waiting for it",
                 std::string(timer.status().message()));
    return FinishDump();
  }
  dump_timer_ = std::make_unique<OneShotTimer>(std::move(*timer));
  if (absl::Status s = loop_.WatchReadable(dump_timer_->fd(),
                                           [this](uint32_t) {
                                             if (dump_timer_->Acknowledge()) FinishDump();
                                           });
      !s.ok()) {
    return FinishDump();
  }
  dump_timer_->Arm(kStackDumpBound);
}

void WorkerSupervisor::DumpStack(Worker& worker) {
  worker.dumping = true;
  if (AnyTaskUninterruptible(worker.pid)) {
    // It cannot run a signal handler until the kernel lets it go: what the kernel holds it
    // in is the stack.
    worker.kernel_stack = KernelWait(KernelWaitChannel(worker.pid), KernelStack(worker.pid));
    return;
  }
  if (!python_dumps_) return;  // a native worker: StackOf says what there is
  if (worker.err) {
    worker.err->CaptureInto(&worker.stderr_capture);
  } else if (worker.stderr_in_file) {
    struct stat st {};
    if (::stat(worker.paths.stderr_log.c_str(), &st) == 0) worker.stderr_offset = st.st_size;
  }
  // The worker process only: its own children (DataLoader workers) would print theirs into
  // the same stream.
  ::kill(worker.pid, SIGABRT);
  dumping_ = true;
}

void WorkerSupervisor::OnDumpProgress() {
  for (const auto& worker : workers_) {
    if (python_dumps_ && worker->dumping && !worker->kernel_stack &&
        worker->state == WorkerState::kRunning) {
      return;
    }
  }
  FinishDump();
}

// The dumps are in (or their time is up): the hung workers get what stops them, and a stop
// that waited goes out.
void WorkerSupervisor::FinishDump() {
  if (!dumping_) return;
  dumping_ = false;
  if (dump_timer_) {
    dump_timer_->Disarm();
    loop_.Unwatch(dump_timer_->fd());
  }
  for (auto& worker : workers_) {
    if (worker->hung) KillHung(*worker);
  }
  if (deferred_stop_ != 0) Stop(std::exchange(deferred_stop_, 0));
}

RankStack WorkerSupervisor::StackOf(const Worker& worker) const {
  RankStack stack;
  if (worker.kernel_stack) {
    stack = *worker.kernel_stack;
  } else if (python_dumps_) {
    std::string text = worker.stderr_capture;
    if (worker.stderr_offset >= 0) {
      absl::StatusOr<std::string> file = ReadSmallFile(worker.paths.stderr_log);
      if (file.ok() && static_cast<size_t>(worker.stderr_offset) <= file->size()) {
        text = file->substr(static_cast<size_t>(worker.stderr_offset));
      }
    }
    stack = ParsePythonDump(text);
  } else {
    stack.source = "none";
    stack.text =
        "a native worker: ddprun records Python workers' tracebacks and the kernel's wait of "
        "a worker in uninterruptible sleep (see docs/hangs.md)";
    stack.where = "not recorded (native worker)";
  }
  if (stack.text.size() > kMaxStackText) {
    stack.text = absl::StrCat(stack.text.substr(0, kMaxStackText), "\n... (cut at 32 KiB)");
  }
  stack.host = host_;
  stack.rank = worker.rank;
  stack.local_rank = worker.local_rank;
  stack.pid = worker.pid;
  stack.hung = worker.hung;
  return stack;
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
