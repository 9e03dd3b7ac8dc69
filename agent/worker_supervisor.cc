#include "agent/worker_supervisor.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "agent/hangs/proc_state.h"
#include "agent/logs/error_file.h"
#include "agent/logs/log_format.h"
#include "agent/process/worker_process.h"
#include "common/process_status.h"
#include "common/status_macros.h"
#include "node/host_info.h"
#include "spdlog/spdlog.h"

namespace ddprun {
namespace {

constexpr size_t kStderrTailLines = 20;

HangSettings HangSettingsOf(const AgentConfig& config) {
  HangSettings settings;
  settings.heartbeat_timeout = config.worker_heartbeat_timeout;
  settings.heartbeat_startup = config.worker_heartbeat_startup_timeout;
  settings.uninterruptible_timeout = config.uninterruptible_timeout;
  return settings;
}

bool FilesEnabled(const std::string& log_root) {
  return !log_root.empty() && log_root != "/dev/null";
}

}  // namespace

WorkerSupervisor::WorkerSupervisor(const AgentConfig& config, const EnvMap& base_env,
                                   EventLoop& loop, OrphanGuard& guard, std::string host,
                                   Hooks hooks, WarmPool* warm_pool)
    : config_(config),
      base_env_(base_env),
      loop_(loop),
      guard_(guard),
      warm_pool_(warm_pool),
      host_(std::move(host)),
      hooks_(std::move(hooks)),
      hostname_(HostName()) {
  for (const WorkerBinding& binding : config_.worker_bindings) {
    bindings_.push_back(MakeProcessBinding(binding.cpus, binding.preferred_node));
  }
}

// A container without CAP_SYS_NICE may refuse set_mempolicy (Docker's default seccomp
// profile does): the CPUs are bound, and memory follows the kernel's default, which is the
// node of the CPU that first touches it.
void WorkerSupervisor::ReportMempolicyRefused(int error) {
  static bool said = false;  // once per agent
  if (said) return;
  said = true;
  const char* why =
      error == EPERM    ? "a container needs CAP_SYS_NICE, or a seccomp profile that allows "
                          "set_mempolicy"
      : error == EINVAL ? "the node is outside the memory this job may use (cpuset.mems) or "
                          "has none"
      : error == ENOSYS ? "this kernel has no NUMA support"
                        : "see set_mempolicy(2)";
  spdlog::warn(
      "--numa-binding: the kernel refused set_mempolicy ({}): workers run on their bound "
      "CPUs, but their memory is not steered to the accelerator's NUMA node; {}",
      ::strerror(error), why);
}

WorkerSupervisor::~WorkerSupervisor() {
  for (auto& worker : workers_) {
    CloseStream(worker->out);
    CloseStream(worker->err);
  }
  hangs_.reset();
}

void WorkerSupervisor::GatherInCgroup(int attempt) {
  static bool said = false;  // once per agent: the machine does not change between attempts
  absl::StatusOr<AttemptCgroup> cgroup =
      AttemptCgroup::Create(absl::StrCat("ddprun-", ::getpid(), "-attempt", attempt));
  if (!cgroup.ok()) {
    if (!said) {
      spdlog::warn(
          "workers are not gathered in a cgroup ({}): a process a worker starts in a session "
          "of its own (setsid, a daemon) may outlive this agent if the agent is killed with "
          "SIGKILL; run ddprun as root or in a delegated cgroup v2 subtree for that guarantee",
          cgroup.status().message());
      said = true;
    }
    return;
  }
  guard_.WatchCgroup(cgroup->path());
  cgroup_ = std::make_unique<AttemptCgroup>(std::move(*cgroup));
}

absl::Status WorkerSupervisor::Start(const AttemptPlan& plan) {
  files_enabled_ = FilesEnabled(plan.log_root) && plan.log_run_dir != nullptr;
  log_run_path_ = plan.log_run_path;
  log_run_dir_ = plan.log_run_dir;
  GatherInCgroup(plan.log_attempt);
  python_dumps_ = plan.python_dumps;
  dump_bound_ = plan.stack_dump_bound;
  stacks_taken_ = std::make_unique<StackCollection>(
      loop_, guard_,
      plan.python_dumps ? StackCollection::Method::kPython : StackCollection::Method::kNative,
      dump_bound_, [this] { OnStacksTaken(); });
  HangSettings hang_settings = HangSettingsOf(config_);
  hang_settings.timer_fifo = plan.timer_fifo;
  hangs_ =
      std::make_unique<HangWatch>(hang_settings, loop_, [this](const Hang& hang) { OnHang(hang); });
  DDPRUN_RETURN_IF_ERROR(hangs_->Start());
  for (int local_rank = 0; local_rank < config_.nproc_per_node; ++local_rank) {
    auto worker = std::make_unique<Worker>();
    worker->local_rank = local_rank;
    worker->rank = plan.assignment.base_rank + local_rank;
    worker->stderr_tail = LineTail(kStderrTailLines);
    if (files_enabled_) {
      worker->paths =
          WorkerLogPathsFor(plan.log_root, config_.run_id, plan.log_attempt, local_rank);
      DDPRUN_RETURN_IF_ERROR(MakeDirsBelow(log_run_dir_->get(), log_run_path_, worker->paths.dir));
      // A stale file would blame this attempt. Below the held run folder: a folder swapped
      // for a link must not make the agent remove a file elsewhere.
      (void)UnlinkBelow(log_run_dir_->get(), log_run_path_, worker->paths.error_file);
      worker->error_file_enabled = true;
    } else {
      worker->paths.stdout_log = worker->paths.stderr_log = "/dev/null";
    }
    workers_.push_back(std::move(worker));
  }
  DDPRUN_RETURN_IF_ERROR(OpenFilteredLogs(plan));  // in the folders just made
  if (warm_pool_ != nullptr) warm_pool_->BeginAttempt();
  if (warm_pool_ != nullptr && warm_pool_->importing()) {
    pending_plan_ = plan;
    return absl::OkStatus();
  }
  StartAll(plan);
  return absl::OkStatus();
}

void WorkerSupervisor::StartPending() {
  if (!pending_plan_) return;
  const AttemptPlan plan = *std::move(pending_plan_);
  pending_plan_.reset();
  StartAll(plan);
}

void WorkerSupervisor::AbandonPending(int signal) {
  if (!pending_plan_) return;
  pending_plan_.reset();
  for (auto& worker : workers_) {
    worker->state = WorkerState::kStopped;
    worker->wait_status = signal;  // as if the signal had ended it: EndedByStop holds
    worker->exited = absl::Now();
  }
}

void WorkerSupervisor::StartAll(const AttemptPlan& plan) {
  for (auto& worker : workers_) {
    if (absl::Status s = StartWorker(*worker, plan); !s.ok()) {
      // The reason is kept for the summary; the agent stops the rest as for any failure.
      worker->state = WorkerState::kFailed;
      worker->wait_status = 127 << 8;  // what a shell reports for "command not found"
      worker->exited = absl::Now();
      worker->start_error = std::string(s.message());
      hangs_->WorkerEnded(worker->local_rank);
      spdlog::error("local_rank {} (rank {}) could not be started: {}", worker->local_rank,
                    worker->rank, s.message());
      CloseStream(worker->out);
      CloseStream(worker->err);
    }
  }
}

// --duplicate-*-filters: the attempt's filtered_stdout.log and filtered_stderr.log.
absl::Status WorkerSupervisor::OpenFilteredLogs(const AttemptPlan& plan) {
  filtered_out_.reset();
  filtered_err_.reset();
  for (auto [filters, name, sink] :
       {std::tuple{&config_.duplicate_stdout_filters, "filtered_stdout.log", &filtered_out_},
        std::tuple{&config_.duplicate_stderr_filters, "filtered_stderr.log", &filtered_err_}}) {
    if (filters->empty() || !files_enabled_) continue;
    absl::StatusOr<UniqueFd> file = OpenLogFile(
        absl::StrCat(AttemptLogDir(plan.log_root, config_.run_id, plan.log_attempt), "/", name));
    if (!file.ok()) return file.status();
    *sink = std::make_unique<DuplicateFilter>(*filters, std::move(*file));
  }
  return absl::OkStatus();
}

absl::Status WorkerSupervisor::StartWorker(Worker& worker, const AttemptPlan& plan) {
  WorkerSeat seat{worker.local_rank, worker.rank,
                  worker.error_file_enabled ? worker.paths.error_file : ""};
  SpawnSpec spec;
  for (const std::string& arg : config_.worker_argv) {
    spec.argv.push_back(SubstituteLocalRank(arg, worker.local_rank));
  }
  std::vector<UniqueFd> child_ends;  // closed in the agent once the child has them
  DDPRUN_RETURN_IF_ERROR(SetUpStreams(worker, spec.stdout_fd, spec.stderr_fd, child_ends));
  if (config_.worker_heartbeat_timeout > absl::ZeroDuration()) {
    DDPRUN_RETURN_IF_ERROR(hangs_->SetUpHeartbeat(worker.local_rank, spec.inherit_fd, child_ends));
    seat.heartbeat_fd = spec.inherit_fd;
  }
  spec.env = FlattenEnv(BuildWorkerEnv(base_env_, config_, plan, seat));
  spec.guard_fd = guard_.registration_fd();
  if (cgroup_) spec.cgroup_procs_fd = cgroup_->procs_fd();
  int mempolicy_errno = 0;
  if (!bindings_.empty()) {
    spec.binding = &bindings_.at(worker.local_rank);
    spec.mempolicy_errno = &mempolicy_errno;
  }
  const absl::Time began = absl::Now();
  absl::StatusOr<pid_t> pid =
      warm_pool_ != nullptr ? warm_pool_->StartWorker(spec) : SpawnWorkerProcess(spec);
  if (!pid.ok()) return pid.status();
  if (mempolicy_errno != 0) ReportMempolicyRefused(mempolicy_errno);
  worker.pid = *pid;
  hangs_->WorkerStarted(worker.local_rank, worker.pid);
  // The time it took is what bench/torch_restart.py subtracts to see when the start began.
  spdlog::debug("started local_rank={} rank={} pid={} in {:.3f} ms", worker.local_rank, worker.rank,
                worker.pid, absl::ToDoubleMilliseconds(absl::Now() - began));
  return absl::OkStatus();
}

absl::Status WorkerSupervisor::SetUpStreams(Worker& worker, int& child_stdout, int& child_stderr,
                                            std::vector<UniqueFd>& child_ends) {
  DDPRUN_RETURN_IF_ERROR(
      SetUpStream(worker, kStdOut, worker.paths.stdout_log, child_stdout, child_ends));
  return SetUpStream(worker, kStdErr, worker.paths.stderr_log, child_stderr, child_ends);
}

absl::StatusOr<UniqueFd> WorkerSupervisor::OpenLogFile(const std::string& path) const {
  if (!files_enabled_) return OpenForAppend(path);  // /dev/null
  return OpenForAppendBelow(log_run_dir_->get(), log_run_path_, path);
}

absl::Status WorkerSupervisor::SetUpStream(Worker& worker, int which, const std::string& file_path,
                                           int& child_fd, std::vector<UniqueFd>& child_ends) {
  const int lr = worker.local_rank;
  const bool teed = (config_.tee.ForRank(lr) & which) != 0;
  const bool redirected = (config_.redirects.ForRank(lr) & which) != 0;
  const bool shown = !config_.local_ranks_filter || config_.local_ranks_filter->count(lr) > 0;
  const int console_fd = which == kStdOut ? STDOUT_FILENO : STDERR_FILENO;
  const bool is_stderr = which == kStdErr;

  if (!teed && (redirected || !shown)) {
    // Straight to the file: the agent does not touch the bytes. A rank hidden by
    // --local-ranks-filter still keeps its output there, where torchrun drops it.
    absl::StatusOr<UniqueFd> file = OpenLogFile(file_path);
    if (!file.ok()) return file.status();
    child_fd = file->get();
    child_ends.push_back(std::move(*file));
    if (is_stderr) worker.stderr_in_file = files_enabled_;
    return absl::OkStatus();
  }
  // Through the agent: tee'd streams with a prefix; the others unchanged but cut at line
  // ends, so that two workers' lines never mix mid-line (torchrun hands workers its own
  // terminal, where they do), and stderr's last lines are kept for the failure summary.
  absl::StatusOr<Pipe> pipe = MakePipe(/*nonblocking_read=*/true);
  if (!pipe.ok()) return pipe.status();
  UniqueFd file;
  if (teed) {
    absl::StatusOr<UniqueFd> opened = OpenLogFile(file_path);
    if (!opened.ok()) return opened.status();
    file = std::move(*opened);
  }
  const std::string prefix = teed ? LinePrefix(config_.log_line_prefix_template,
                                               {config_.role, worker.rank, lr, hostname_})
                                  : std::string();
  auto stream = std::make_unique<PipedStream>(
      std::move(pipe->read_end), std::move(file), shown ? console_fd : -1, prefix,
      is_stderr ? &worker.stderr_tail : nullptr, (is_stderr ? filtered_err_ : filtered_out_).get());
  PipedStream* raw = stream.get();
  if (absl::Status s = loop_.WatchReadable(raw->fd(), [raw](uint32_t) { raw->Pump(); }); !s.ok()) {
    return s;
  }
  (is_stderr ? worker.err : worker.out) = std::move(stream);
  child_fd = pipe->write_end.get();
  child_ends.push_back(std::move(pipe->write_end));
  return absl::OkStatus();
}

bool WorkerSupervisor::OnProcessExited(pid_t pid, int wait_status) {
  // An eu-stack of ours; else a worker, whose end a stack collection waits for too.
  if (snapshot_ && snapshot_->OnProcessExited(pid)) return true;
  if (stacks_taken_ && stacks_taken_->OnProcessExited(pid)) return true;
  for (auto& worker : workers_) {
    if (worker->pid != pid || !Alive(*worker)) continue;
    worker->wait_status = wait_status;
    worker->exited = absl::Now();  // a date, for the summary
    hangs_->WorkerEnded(worker->local_rank);
    const bool success = WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0;
    if (success) {
      worker->state = WorkerState::kSucceeded;
    } else if (worker->hang && !worker->hang->node_unhealthy) {
      worker->state = WorkerState::kFailed;  // killed by the agent, but as hung: a failure
    } else if (stopping() && EndedByStop(wait_status)) {
      worker->state = WorkerState::kStopped;  // ended by the agent's stop: not a failure
    } else {
      worker->state = WorkerState::kFailed;
      worker->failed_in_stop = stopping();
    }
    spdlog::debug("local_rank {} pid {} ended: {}", worker->local_rank, pid,
                  DescribeWaitStatus(wait_status));
    return true;
  }
  return false;
}

// A worker that dies of a signal the stop sent (or of SIGKILL after the grace period), or
// exits with the shell's code for one, was stopped; any other end during a stop is its own.
bool WorkerSupervisor::EndedByStop(int wait_status) const {
  const int signal =
      WIFSIGNALED(wait_status) ? WTERMSIG(wait_status) : WEXITSTATUS(wait_status) - 128;
  return signal == SIGKILL || (signal > 0 && signal < 64 && ((stop_signals_ >> signal) & 1));
}

void WorkerSupervisor::Stop(int signal) {
  stop_signals_ |= uint64_t{1} << signal;
  AbandonPending(signal);
  if (hangs_) hangs_->Quiet();
  for (auto& worker : workers_) {
    if (Alive(*worker)) ::killpg(worker->pid, signal);
  }
}

void WorkerSupervisor::KillRemaining(const std::string& why) {
  stop_signals_ |= uint64_t{1} << SIGKILL;
  AbandonPending(SIGKILL);
  if (hangs_) hangs_->Quiet();
  for (auto& worker : workers_) {
    if (!Alive(*worker)) continue;
    spdlog::warn("local_rank {} (pid {}) still running {}: SIGKILL", worker->local_rank,
                 worker->pid, why);
    ::killpg(worker->pid, SIGKILL);
  }
}

bool WorkerSupervisor::AllExited() const {
  for (const auto& worker : workers_) {
    if (Alive(*worker)) return false;
  }
  return true;
}

bool WorkerSupervisor::AllSucceeded() const {
  for (const auto& worker : workers_) {
    if (worker->state != WorkerState::kSucceeded) return false;
  }
  return true;
}

bool WorkerSupervisor::Failed(const Worker& worker) const {
  // A hung worker is a failure from the moment it is declared (it waits, stopped, for every
  // node's stacks to be taken before it ends); on an unhealthy node it is not.
  return worker.state == WorkerState::kFailed ||
         (worker.state == WorkerState::kHung && !worker.hang->node_unhealthy);
}

bool WorkerSupervisor::HasFailures() const {
  for (const auto& worker : workers_) {
    if (Failed(*worker) && !worker->failed_in_stop) return true;
  }
  return false;
}

void WorkerSupervisor::CloseStream(std::unique_ptr<PipedStream>& stream) {
  if (!stream) return;
  if (stream->open()) {
    loop_.Unwatch(stream->fd());
    stream->DrainAndClose();
  }
}

void WorkerSupervisor::Close() {
  for (auto& worker : workers_) {
    if (worker->pid <= 0) continue;
    // Whatever a worker forked and left running in its group dies with the attempt: the
    // next attempt must not share the machine with stragglers of this one. With a cgroup,
    // cgroup.kill below does it without naming a group whose leader is reaped (its id
    // could be another process's by now).
    if (!cgroup_) ::killpg(worker->pid, SIGKILL);
    guard_.Forget(worker->pid);
  }
  // And whatever left its group (setsid, a daemon): it is still in the attempt's cgroup.
  if (cgroup_) {
    const std::string path = cgroup_->path();
    cgroup_->KillAndRemove();
    guard_.ForgetCgroup(path);
    cgroup_.reset();
  }
  std::vector<pid_t> keep = {guard_.pid()};
  if (warm_pool_ != nullptr) keep.push_back(warm_pool_->pid());
  if (const int strays = KillStrayChildren(keep, pids()); strays > 0) {
    spdlog::warn("killed {} process(es) that workers had left running outside their process groups",
                 strays);
  }
  // Everything the workers wrote before exiting is in the pipes now: read it all.
  for (auto& worker : workers_) {
    CloseStream(worker->out);
    CloseStream(worker->err);
  }
  if (hangs_) hangs_->Close();
  if (stacks_taken_) {  // what CollectStacks recorded, now that the output is all in
    stacks_ = stacks_taken_->Take(host_);
    for (RankStack& s : stacks_) s.hung = workers_[s.local_rank]->hang.has_value();
  }
}

WorkerFailure WorkerSupervisor::DescribeFailure(const Worker& worker) const {
  WorkerFailure failure;
  failure.time = worker.exited;
  failure.host = host_;
  failure.rank = worker.rank;
  failure.local_rank = worker.local_rank;
  failure.wait_status = worker.wait_status;
  failure.pid = worker.pid;
  if (worker.error_file_enabled) {
    absl::StatusOr<WorkerError> report =
        ReadWorkerErrorFileBelow(log_run_dir_->get(), log_run_path_, worker.paths.error_file);
    if (report.ok()) {
      failure.error_file = worker.paths.error_file;
      failure.error_message = report->message;
      failure.traceback = report->traceback;
      if (report->timestamp) failure.time = *report->timestamp;
    } else if (!absl::IsNotFound(report.status())) {
      failure.error_file = worker.paths.error_file;
      failure.error_file_unreadable = true;
      failure.error_message =
          absl::StrCat("(the error file is unreadable: ", report.status().message(), ")");
    }
  }
  if (worker.hang) {
    if (failure.error_message.empty()) failure.error_message = worker.hang->cause;
    failure.hung = true;
    failure.timer = worker.hang->timer;
    // Reported at once, before it ends: with the signal that will end it (a Python
    // worker's own SIGABRT, once it has printed its stack).
    if (worker.state == WorkerState::kHung) {
      failure.ends_with = python_dumps_ ? SIGABRT : worker.hang->signal;
    }
  }
  if (!worker.start_error.empty()) {
    failure.stderr_tail = {worker.start_error};
    failure.stderr_source = "ddprun";
  } else if (worker.stderr_in_file) {
    failure.stderr_tail = LastLinesOfFile(worker.paths.stderr_log, kStderrTailLines);
    failure.stderr_source = worker.paths.stderr_log;
  } else {
    failure.stderr_tail.assign(worker.stderr_tail.lines().begin(),
                               worker.stderr_tail.lines().end());
    failure.stderr_source = "stderr";
  }
  return failure;
}

std::vector<WorkerFailure> WorkerSupervisor::CollectFailures() const {
  std::vector<WorkerFailure> failures;
  for (const auto& worker : workers_) {
    if (Failed(*worker)) {
      failures.push_back(DescribeFailure(*worker));
    } else if (worker->state == WorkerState::kStopped) {
      // It raised, and the stop only finished it: a Python worker still shutting down when
      // its peer's "connection closed" came first.
      WorkerFailure failure = DescribeFailure(*worker);
      if (!RaisedAnException(failure)) continue;
      failure.stopped_by = WIFSIGNALED(failure.wait_status)
                               ? WTERMSIG(failure.wait_status)
                               : WEXITSTATUS(failure.wait_status) - 128;
      failure.wait_status = __W_EXITCODE(1, 0);  // as an uncaught exception ends Python
      failures.push_back(std::move(failure));
    }
  }
  return failures;
}

std::vector<WorkerSupervisor::Outcome> WorkerSupervisor::Outcomes() const {
  std::vector<Outcome> out;
  for (const auto& w : workers_) out.push_back(*w);  // its Outcome part
  return out;
}

std::vector<pid_t> WorkerSupervisor::pids() const {
  std::vector<pid_t> out;
  for (const auto& worker : workers_) out.push_back(worker->pid);
  return out;
}

// ---- Hangs: a worker taken for hung (HangWatch), and the record of where every worker was
// (StackCollection) before any of them is stopped.

void WorkerSupervisor::OnHang(const Hang& hang) {
  Worker& worker = *workers_[hang.local_rank];
  if (worker.state != WorkerState::kRunning || stopping()) return;
  TakenForHung taken;
  taken.node_unhealthy = hang.kind == Hang::Kind::kUninterruptible;
  taken.cause = DescribeHang(hang, worker.rank, HangSettingsOf(config_),
                             taken.node_unhealthy ? DescribeProcessState(worker.pid) : "");
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
  AbandonPending(SIGABRT);                  // no stack to take of a worker that never started
  hangs_->Quiet();  // stopped workers send no heartbeat: no more hangs to declare
  stacks_taken_->Freeze(StackTargets());
  for (auto& worker : workers_) {
    if (worker->state == WorkerState::kRunning) worker->state = WorkerState::kFrozen;
  }
}

std::vector<StackCollection::Worker> WorkerSupervisor::StackTargets() const {
  std::vector<StackCollection::Worker> targets;
  for (const auto& worker : workers_) {
    if (!Alive(*worker) || worker->pid <= 0) continue;  // ended, or waiting for the pool
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
