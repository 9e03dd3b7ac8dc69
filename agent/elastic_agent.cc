#include "agent/elastic_agent.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/exit_codes.h"
#include "agent/free_port.h"
#include "agent/log_layout.h"
#include "agent/worker_process.h"
#include "agent/log_format.h"
#include "spdlog/spdlog.h"

namespace ddprun {

ElasticAgent::ElasticAgent(const AgentConfig& config, EnvMap base_env,
                           RendezvousHandler& rendezvous, OrphanGuard& guard)
    : config_(config),
      base_env_(std::move(base_env)),
      rendezvous_(rendezvous),
      guard_(guard),
      host_(HostName()) {}

absl::Status ElasticAgent::SetUp() {
  absl::StatusOr<std::unique_ptr<EventLoop>> loop = EventLoop::Create();
  if (!loop.ok()) return loop.status();
  loop_ = std::move(*loop);

  std::vector<int> watched = config_.signals_to_handle;
  watched.push_back(SIGCHLD);
  absl::StatusOr<SignalChannel> signals = SignalChannel::Open(watched);
  if (!signals.ok()) return signals.status();
  signals_ = std::make_unique<SignalChannel>(std::move(*signals));

  absl::StatusOr<OneShotTimer> timer = OneShotTimer::Create();
  if (!timer.ok()) return timer.status();
  grace_timer_ = std::make_unique<OneShotTimer>(std::move(*timer));

  if (config_.log_dir.empty()) {
    const char* tmp = ::getenv("TMPDIR");
    std::string templ = absl::StrCat(tmp != nullptr && *tmp ? tmp : "/tmp", "/ddprun-XXXXXX");
    if (::mkdtemp(templ.data()) == nullptr) {
      return ErrnoStatus(errno, absl::StrCat("cannot create a log folder like ", templ,
                                             " (set TMPDIR or --log-dir)"));
    }
    log_root_ = templ;
    log_root_is_temporary_ = true;
  } else {
    log_root_ = config_.log_dir;
    if (log_root_ != "/dev/null") {
      if (absl::Status s = MakeDirs(RunLogDir(log_root_, config_.run_id)); !s.ok()) return s;
      attempt_offset_ = FirstFreeAttempt();
      if (attempt_offset_ > 0) {
        spdlog::warn("{} holds attempts of an earlier run with the same --rdzv-id; this run's "
                     "logs start at attempt_{}", RunLogDir(log_root_, config_.run_id),
                     attempt_offset_);
      }
    }
  }
  if (WillDefaultOmpThreads(base_env_, config_.nproc_per_node)) {
    spdlog::warn("OMP_NUM_THREADS is not set: setting it to 1 for each worker so that {} workers "
                 "do not overload the CPUs; set it yourself to tune performance.",
                 config_.nproc_per_node);
  }
  return absl::OkStatus();
}

int ElasticAgent::Run() {
  if (absl::Status s = SetUp(); !s.ok()) {
    spdlog::error("cannot start the job: {}", s.message());
    return kExitInternal;
  }
  RoundReason reason = RoundReason::kFirstJoin;
  std::vector<WorkerFailure> last_failures;
  for (;;) {
    JoinRequest join;
    join.host = host_;
    join.addr = config_.master_addr;
    join.local_world_size = config_.nproc_per_node;
    join.reason = reason;
    if (config_.master_port) {
      join.reserved_master_port = *config_.master_port;
    } else if (absl::StatusOr<int> port = ReserveFreePort(); port.ok()) {
      join.reserved_master_port = *port;
    } else {
      spdlog::error("{}", port.status().message());
      return kExitInternal;
    }
    absl::StatusOr<RoundAssignment> round = rendezvous_.NextRound(join);
    if (!round.ok()) {
      if (absl::IsResourceExhausted(round.status())) return FinishFailed(last_failures);
      spdlog::error("rendezvous failed: {}", round.status().message());
      return kExitInternal;
    }
    absl::StatusOr<AttemptResult> result = RunAttempt(*round);
    if (!result.ok()) {
      spdlog::error("cannot run the workers: {}", result.status().message());
      CleanUpLogRoot();
      return kExitInternal;
    }
    switch (result->kind) {
      case AttemptResult::Kind::kSucceeded:
        spdlog::info("all {} workers succeeded", config_.nproc_per_node);
        CleanUpLogRoot();
        return kExitSuccess;
      case AttemptResult::Kind::kInterrupted:
        spdlog::warn("stopped by {}: exiting {}", SignalName(result->signal),
                     ExitCodeForSignal(result->signal));
        CleanUpLogRoot();
        return ExitCodeForSignal(result->signal);
      case AttemptResult::Kind::kFailed: {
        last_failures = std::move(result->failures);
        const WorkerFailure& root = last_failures[RootCauseIndex(last_failures)];
        spdlog::warn("attempt {} failed: rank {} (local_rank {}, pid {}) ended with {}",
                     round->round, root.rank, root.local_rank, root.pid,
                     DescribeWaitStatus(root.wait_status));
        if (round->restart_count < config_.max_restarts) {
          spdlog::warn("restarting all workers ({} of --max-restarts={} restarts used)",
                       round->restart_count + 1, config_.max_restarts);
        }
        reason = RoundReason::kWorkerFailure;
        break;
      }
    }
  }
}

absl::StatusOr<ElasticAgent::AttemptResult> ElasticAgent::RunAttempt(const RoundAssignment& round) {
  AttemptPlan plan;
  plan.round = round.round;
  plan.log_attempt = attempt_offset_ + round.round;
  plan.restart_count = round.restart_count;
  plan.group_rank = round.group_rank;
  plan.group_world_size = round.group_world_size;
  plan.base_rank = round.base_rank;
  plan.world_size = round.world_size;
  plan.master_addr = round.master_addr;
  plan.master_port = round.master_port;
  plan.store_addr = round.store_addr;
  plan.log_root = log_root_;

  WorkerSupervisor workers(config_, base_env_, *loop_, guard_, host_);
  const int signal_fd = signals_->fd();
  const int timer_fd = grace_timer_->fd();
  if (absl::Status s = loop_->WatchReadable(signal_fd, [&](uint32_t) { OnSignals(workers); });
      !s.ok()) {
    return s;
  }
  if (absl::Status s = loop_->WatchReadable(timer_fd, [&](uint32_t) {
        if (grace_timer_->Acknowledge()) {
          workers.KillRemaining(absl::StrCat(
              "after the ", absl::FormatDuration(config_.shutdown_timeout),
              " grace period (--shutdown-timeout)"));
        }
      });
      !s.ok()) {
    loop_->Unwatch(signal_fd);
    return s;
  }
  absl::Status status = workers.Start(plan);
  spdlog::info("attempt {}: started {} workers (restart {}, MASTER_ADDR={} MASTER_PORT={})",
               round.round, workers.size(), round.restart_count, plan.master_addr,
               plan.master_port);
  if (interrupted_by_ != 0) BeginStop(workers, interrupted_by_);
  while (status.ok() && !workers.AllExited()) {
    if (!workers.stopping() && workers.HasFailures()) BeginStop(workers, SIGTERM);
    if (workers.AllExited()) break;
    status = loop_->RunOnce(absl::InfiniteDuration());
  }
  if (!status.ok()) {  // the loop itself broke: never leave workers behind
    workers.Stop(SIGKILL);
  }
  grace_timer_->Disarm();
  loop_->Unwatch(signal_fd);
  loop_->Unwatch(timer_fd);
  workers.Finish();
  if (const int strays = KillStrayChildren(guard_.pid(), workers.pids()); strays > 0) {
    spdlog::warn("killed {} process(es) that workers had left running outside their process "
                 "groups", strays);
  }
  if (!status.ok()) return status;

  AttemptResult result;
  if (interrupted_by_ != 0) {
    result.kind = AttemptResult::Kind::kInterrupted;
    result.signal = interrupted_by_;
  } else if (workers.AllSucceeded()) {
    result.kind = AttemptResult::Kind::kSucceeded;
  } else {
    result.kind = AttemptResult::Kind::kFailed;
    result.failures = workers.CollectFailures();
  }
  return result;
}

void ElasticAgent::OnSignals(WorkerSupervisor& workers) {
  for (int sig : signals_->Drain()) {
    if (sig == SIGCHLD) {
      ReapChildren(workers);
    } else if (interrupted_by_ == 0) {
      interrupted_by_ = sig;
      spdlog::warn("received {}: forwarding it to {} workers, SIGKILL after {}s", SignalName(sig),
                   workers.size(), absl::ToDoubleSeconds(config_.shutdown_timeout));
      BeginStop(workers, sig);
    } else {
      spdlog::warn("received {} again: killing the workers now", SignalName(sig));
      workers.KillRemaining(absl::StrCat("at a second ", SignalName(sig)));
    }
  }
  // A SIGCHLD coalesced with others is still reflected by waitpid; reap once more.
  ReapChildren(workers);
}

void ElasticAgent::ReapChildren(WorkerSupervisor& workers) {
  int status = 0;
  pid_t pid;
  while ((pid = ::waitpid(-1, &status, WNOHANG)) > 0) {
    if (workers.OnProcessExited(pid, status)) continue;
    if (pid == guard_.pid()) {
      spdlog::warn("the orphan guard (pid {}) exited: {}; workers still die with the agent via "
                   "PR_SET_PDEATHSIG, but their children would not", pid,
                   DescribeWaitStatus(status));
    }
    // Otherwise: a worker's child re-parented to us (we are a subreaper); reaping it is all.
  }
}

void ElasticAgent::BeginStop(WorkerSupervisor& workers, int signal) {
  workers.Stop(signal);
  grace_timer_->Arm(config_.shutdown_timeout);
}

int ElasticAgent::FinishFailed(const std::vector<WorkerFailure>& failures) {
  const WorkerFailure& root = failures[RootCauseIndex(failures)];
  std::string summary = FormatFailureSummary(config_.entrypoint_name, failures);
  (void)WriteAll(STDERR_FILENO, summary);
  CleanUpLogRoot();
  const int code = ShellExitCode(root.wait_status);
  spdlog::error("job failed after {} restarts; exiting with rank {}'s status {}",
                config_.max_restarts, root.rank, code);
  return code;
}

void ElasticAgent::CleanUpLogRoot() {
  if (!log_root_is_temporary_) return;
  // Only what holds something is kept: log files that -r/-t/--local-ranks-filter asked
  // for, and error files workers wrote. A run that left nothing leaves no folder.
  if (!RemoveEmptyDirs(log_root_)) {
    spdlog::warn("worker logs and error files are in {} (use --log-dir to choose the place)",
                 RunLogDir(log_root_, config_.run_id));
  }
}

int ElasticAgent::FirstFreeAttempt() const {
  int next = 0;
  for (const std::string& name : ListDir(RunLogDir(log_root_, config_.run_id))) {
    int n = 0;
    if (absl::StartsWith(name, "attempt_") && absl::SimpleAtoi(name.substr(8), &n)) {
      next = std::max(next, n + 1);
    }
  }
  return next;
}

}  // namespace ddprun
