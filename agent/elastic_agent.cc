#include "agent/elastic_agent.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <random>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "agent/exit_codes.h"
#include "agent/host_info.h"
#include "rendezvous/node_address.h"
#include "agent/log_format.h"
#include "agent/log_layout.h"
#include "agent/worker_process.h"
#include "spdlog/spdlog.h"

namespace ddprun {
namespace {

std::string RandomIncarnation() {
  std::random_device rd;
  return absl::StrFormat("%08x%08x", rd(), rd());
}

// torchrun's exit-code field (-N for signal N) as the status a shell reports.
int ShellCodeFromTorch(int torch_code) { return torch_code < 0 ? 128 - torch_code : torch_code; }

}  // namespace

ElasticAgent::ElasticAgent(const AgentConfig& config, EnvMap base_env,
                           RendezvousConnection& rendezvous, OrphanGuard& guard,
                           std::optional<WorkerStore> store)
    : config_(config),
      base_env_(std::move(base_env)),
      rendezvous_(rendezvous),
      guard_(guard),
      store_(std::move(store)),
      // How this node is named in reports and ordered among nodes: --local-addr if given.
      host_(config.local_addr.empty() ? HostName() : config.local_addr),
      incarnation_(RandomIncarnation()) {}

ElasticAgent::~ElasticAgent() = default;

absl::Status ElasticAgent::SetUp() {
  absl::StatusOr<std::unique_ptr<EventLoop>> loop = EventLoop::Create();
  if (!loop.ok()) return loop.status();
  loop_ = std::move(*loop);

  std::vector<int> watched = config_.signals_to_handle;
  watched.push_back(SIGCHLD);
  absl::StatusOr<SignalChannel> signals = SignalChannel::Open(watched);
  if (!signals.ok()) return signals.status();
  signals_ = std::make_unique<SignalChannel>(std::move(*signals));

  for (auto* timer : {&grace_timer_, &heartbeat_timer_, &join_timer_}) {
    absl::StatusOr<OneShotTimer> created = OneShotTimer::Create();
    if (!created.ok()) return created.status();
    *timer = std::make_unique<OneShotTimer>(std::move(*created));
  }

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
  absl::Status watched = loop_->WatchReadable(signals_->fd(), [this](uint32_t) { OnSignals(); });
  if (watched.ok()) {
    watched = loop_->WatchReadable(grace_timer_->fd(), [this](uint32_t) {
      if (grace_timer_->Acknowledge() && workers_) {
        workers_->KillRemaining(absl::StrCat("after the ",
                                             absl::FormatDuration(config_.shutdown_timeout),
                                             " grace period (--shutdown-timeout)"));
      }
    });
  }
  if (watched.ok()) {
    watched = loop_->WatchReadable(rendezvous_.event_fd(),
                                   [this](uint32_t) { OnRendezvousEvents(); });
  }
  const absl::Duration heartbeat = rendezvous_.heartbeat_interval();
  if (watched.ok()) {
    watched = loop_->WatchReadable(heartbeat_timer_->fd(), [this, heartbeat](uint32_t) {
      if (!heartbeat_timer_->Acknowledge()) return;
      rendezvous_.Heartbeat();
      heartbeat_timer_->Arm(heartbeat);
    });
  }
  if (watched.ok()) {
    watched = loop_->WatchReadable(join_timer_->fd(), [this](uint32_t) {
      if (join_timer_->Acknowledge()) OnJoinTimeout();
    });
  }
  if (heartbeat != absl::InfiniteDuration()) heartbeat_timer_->Arm(heartbeat);
  if (!watched.ok()) {
    spdlog::error("cannot start the job: {}", watched.message());
    return kExitInternal;
  }
  JoinNextRound();
  while (state_ != State::kDone) {
    if (absl::Status s = loop_->RunOnce(absl::InfiniteDuration()); !s.ok()) {
      spdlog::error("the agent's event loop failed: {}; killing the workers", s.message());
      if (workers_) {
        workers_->Stop(SIGKILL);
        workers_->Finish();
      }
      Finish(kExitInternal);
    }
  }
  CleanUpLogRoot();
  return exit_code_;
}

void ElasticAgent::JoinNextRound() {
  if (interrupted_by_ != 0) return Finish(ExitCodeForSignal(interrupted_by_));
  NodeInfo node;
  node.host = host_;
  node.pid = static_cast<int>(::getpid());
  node.incarnation = incarnation_;
  node.local_world_size = config_.nproc_per_node;
  node.node_rank_hint = config_.node_rank_given || config_.rdzv_backend == "static"
                            ? config_.node_rank
                            : -1;
  if (store_) {  // where this node's agent serves the workers' TCPStore
    node.addr = store_->offer.addr;
    node.fallback_addr = store_->offer.fallback_addr;
    node.master_port = store_->port;
  } else {  // one node: rank 0's worker hosts the TCPStore on a port free now
    node.addr = config_.master_addr;
    absl::StatusOr<int> port =
        config_.master_port ? absl::StatusOr<int>(*config_.master_port) : ReserveFreePort();
    if (!port.ok()) {
      spdlog::error("{}", port.status().message());
      return Finish(kExitInternal);
    }
    node.master_port = *port;
  }
  if (assigned_once_) {
    node.last_round = assignment_.round;
    node.restarts_seen = assignment_.restart_count;
  }
  state_ = State::kJoining;
  // The master applies join_timeout too, and says who is missing; this one catches a
  // master that cannot be reached at all, so it fires a little later.
  if (rendezvous_.heartbeat_interval() != absl::InfiniteDuration()) {
    join_timer_->Arm(config_.join_timeout + config_.keep_alive_interval);
  }
  rendezvous_.Join(node);
}

void ElasticAgent::OnJoinTimeout() {
  if (state_ != State::kJoining) return;
  spdlog::error("this node got no round within join_timeout={}: either the rendezvous master "
                "at {} is not reachable from here (is it up? is the port open? {}), or the job "
                "is at its --nnodes maximum and had no free slot for this node",
                absl::FormatDuration(config_.join_timeout), rendezvous_.store_addr(),
                config_.tls.enabled()
                    ? "with TLS: is this node's tls_cert signed by the CA the master trusts, and "
                      "the master's certificate by this node's tls_ca, for the endpoint's address?"
                    : "does the master use TLS? then give this node tls_cert, tls_key and tls_ca");
  Finish(kExitRendezvous);
}

void ElasticAgent::OnMasterLost(const absl::Status& status) {
  // Refusals will not change by trying again; a lost connection may.
  const bool refused = absl::IsPermissionDenied(status) || absl::IsNotFound(status) ||
                       absl::IsFailedPrecondition(status) || absl::IsInvalidArgument(status) ||
                       absl::IsUnimplemented(status);
  if (refused) {
    spdlog::error("the rendezvous refused this node: {}", status.message());
    RendezvousEvent end;
    end.kind = RendezvousEvent::Kind::kEnd;
    end.outcome = RunOutcome::kTimedOut;
    end.detail = std::string(status.message());
    if (workers_) {
      end_after_attempt_ = std::move(end);
      if (!workers_->stopping()) BeginStop(SIGTERM);
    } else {
      Finish(kExitRendezvous);
    }
    return;
  }
  // A node cut off from the master must not go on training in a round that may be over.
  spdlog::warn("lost the rendezvous master: {}; stopping this node's workers and rejoining",
               status.message());
  EndStoreRound();
  if (workers_) {
    reconnect_after_attempt_ = true;
    if (!workers_->stopping()) BeginStop(SIGTERM);
  } else {
    rendezvous_.Reconnect();
    JoinNextRound();
  }
}

void ElasticAgent::StartAttempt(const Assignment& assignment) {
  if (store_) {
    // Workers given a name that does not resolve here wait for each other until their
    // timeout; better to say so now.
    if (absl::Status s = CheckResolves(assignment.master_addr, "MASTER_ADDR"); !s.ok()) {
      spdlog::error("{} (the address of group rank 0's store: the endpoint's host, that node's "
                    "--local-addr or its host name; start it with --local-addr=IP); this node "
                    "leaves the job",
                    s.message());
      return Finish(kExitRendezvous);
    }
    if (store_->server) store_->server->BeginRound(assignment.round);
  }
  assignment_ = assignment;
  assigned_once_ = true;
  AttemptPlan plan;
  plan.round = static_cast<int>(assignment.round);
  // Rounds only go up, also across a restarted master (agents tell it where they were);
  // the folders must never be reused, whatever a master says.
  plan.log_attempt = std::max(attempt_offset_ + plan.round, last_log_attempt_ + 1);
  last_log_attempt_ = plan.log_attempt;
  plan.restart_count = assignment.restart_count;
  plan.group_rank = assignment.group_rank;
  plan.group_world_size = assignment.group_world_size;
  plan.base_rank = assignment.base_rank;
  plan.world_size = assignment.world_size;
  plan.master_addr = assignment.master_addr;
  plan.master_port = assignment.master_port;
  plan.agent_store = store_.has_value();
  plan.gloo_interface = GlooInterface(assignment.master_addr);
  plan.store_addr = rendezvous_.store_addr();
  plan.log_root = log_root_;
  workers_ = std::make_unique<WorkerSupervisor>(config_, base_env_, *loop_, guard_, host_);
  failure_reported_ = false;
  rejoin_after_attempt_ = false;
  reconnect_after_attempt_ = false;
  state_ = State::kRunning;
  if (absl::Status s = workers_->Start(plan); !s.ok()) {
    spdlog::error("cannot start the workers: {}", s.message());
    workers_->Stop(SIGKILL);
    workers_->Finish();
    workers_.reset();
    return Finish(kExitInternal);
  }
  spdlog::info("attempt {}: started {} workers (restart {}, MASTER_ADDR={} MASTER_PORT={})",
               plan.round, workers_->size(), plan.restart_count, plan.master_addr,
               plan.master_port);
  OnWorkersChanged();  // a worker that could not be started counts as failed at once
}

void ElasticAgent::OnSignals() {
  for (int sig : signals_->Drain()) {
    if (sig == SIGCHLD) {
      ReapChildren();
    } else if (interrupted_by_ == 0) {
      interrupted_by_ = sig;
      if (workers_) {
        spdlog::warn("received {}: forwarding it to {} workers, SIGKILL after {}s",
                     SignalName(sig), workers_->size(),
                     absl::ToDoubleSeconds(config_.shutdown_timeout));
        BeginStop(sig);
      } else {
        spdlog::warn("received {}: no workers are running; exiting", SignalName(sig));
        Finish(ExitCodeForSignal(sig));
      }
    } else if (workers_) {
      spdlog::warn("received {} again: killing the workers now", SignalName(sig));
      workers_->KillRemaining(absl::StrCat("at a second ", SignalName(sig)));
    }
  }
  // A SIGCHLD coalesced with others is still reflected by waitpid; reap once more.
  ReapChildren();
  OnWorkersChanged();
}

void ElasticAgent::ReapChildren() {
  int status = 0;
  pid_t pid;
  while ((pid = ::waitpid(-1, &status, WNOHANG)) > 0) {
    if (workers_ && workers_->OnProcessExited(pid, status)) continue;
    if (pid == guard_.pid()) {
      spdlog::warn("the orphan guard (pid {}) exited: {}; workers still die with the agent via "
                   "PR_SET_PDEATHSIG, but their children would not", pid,
                   DescribeWaitStatus(status));
    }
    // Otherwise: a worker's child re-parented to us (we are a subreaper); reaping it is all.
  }
}

void ElasticAgent::OnWorkersChanged() {
  if (!workers_) return;
  if (state_ == State::kRunning && !failure_reported_ && workers_->HasFailures()) {
    // Tell the rendezvous at once, so that other nodes stop too, and stop ours meanwhile.
    failure_reported_ = true;
    if (!workers_->stopping()) BeginStop(SIGTERM);
    rendezvous_.ReportFailure(assignment_.round, ForMaster(workers_->CollectFailures()));
  }
  if (workers_->AllExited()) {
    EndAttempt();
    AfterAttempt();
  }
}

void ElasticAgent::EndAttempt() {
  grace_timer_->Disarm();
  workers_->Finish();
  if (const int strays = KillStrayChildren(guard_.pid(), workers_->pids()); strays > 0) {
    spdlog::warn("killed {} process(es) that workers had left running outside their process "
                 "groups", strays);
  }
  if (workers_->HasFailures()) {
    last_failures_ = workers_->CollectFailures();
    const WorkerFailure& root = last_failures_[RootCauseIndex(last_failures_)];
    spdlog::warn("attempt {} failed: rank {} (local_rank {}, pid {}) ended with {}",
                 assignment_.round, root.rank, root.local_rank, root.pid,
                 DescribeWaitStatus(root.wait_status));
  }
}

void ElasticAgent::AfterAttempt() {
  const bool succeeded = workers_->AllSucceeded();
  workers_.reset();
  if (interrupted_by_ != 0) {
    const int first = assignment_.base_rank;
    (void)WriteAll(STDERR_FILENO,
                   FormatStopSummary(config_.entrypoint_name, interrupted_by_, host_, first,
                                     first + config_.nproc_per_node - 1, Meeting()));
    spdlog::warn("stopped by {}: exiting {}", SignalName(interrupted_by_),
                 ExitCodeForSignal(interrupted_by_));
    return Finish(ExitCodeForSignal(interrupted_by_));
  }
  if (end_after_attempt_) return FinishRun(*end_after_attempt_);
  if (reconnect_after_attempt_) {
    reconnect_after_attempt_ = false;
    rendezvous_.Reconnect();
    return JoinNextRound();
  }
  if (rejoin_after_attempt_) return JoinNextRound();
  if (succeeded) {
    spdlog::info("all {} workers succeeded", config_.nproc_per_node);
    rendezvous_.ReportSuccess(assignment_.round);
  }
  // Failed (already reported) or succeeded: the rendezvous decides what comes next.
  state_ = State::kFinishing;
}

void ElasticAgent::OnRendezvousEvents() {
  for (RendezvousEvent& event : rendezvous_.TakeEvents()) {
    if (state_ == State::kDone) return;
    switch (event.kind) {
      case RendezvousEvent::Kind::kAssigned:
        if (state_ == State::kJoining) {
          join_timer_->Disarm();
          StartAttempt(event.assignment);
        }
        break;
      case RendezvousEvent::Kind::kStop:
        EndStoreRound();
        spdlog::warn("{}{}", event.detail,
                     event.stop_reason == StopReason::kMembershipChanged
                         ? ": restarting all workers (membership change, no restart spent)"
                         : "");
        if (workers_) {
          rejoin_after_attempt_ = true;
          if (!workers_->stopping()) BeginStop(SIGTERM);
        } else {
          JoinNextRound();
        }
        break;
      case RendezvousEvent::Kind::kEnd:
        if (workers_) {
          end_after_attempt_ = std::move(event);
          if (!workers_->stopping()) BeginStop(SIGTERM);
        } else {
          FinishRun(event);
        }
        break;
      case RendezvousEvent::Kind::kLost:
        OnMasterLost(event.status);
        break;
    }
  }
  OnWorkersChanged();
}

std::string ElasticAgent::GlooInterface(const std::string& master_addr) {
  if (!store_ || !store_->pick_gloo_interface || base_env_.count("GLOO_SOCKET_IFNAME") > 0) {
    return "";
  }
  std::vector<InterfaceChoice> choices;
  for (const NetworkInterface& i :
       {InterfaceToward(master_addr), InterfaceToward(config_.endpoint_host),
        InterfaceHolding(store_->server != nullptr ? store_->server->ArrivalAddress() : "")}) {
    choices.push_back({i.name, i.loopback});
  }
  const std::string name = ChooseGlooInterface(choices);
  if (name.empty() && gloo_said_ != "?") {
    // Mostly every node on this machine (a test, a workstation), where loopback is right:
    // INFO, not a warning on every such job.
    spdlog::info("this host's name resolves only to loopback here, where gloo listens, and no "
                 "interface toward the other nodes is known: workers that use gloo may not reach "
                 "each other; set GLOO_SOCKET_IFNAME (e.g. eth0), or give this host's name an "
                 "address the other nodes reach");
    gloo_said_ = "?";
  } else if (!name.empty() && name != gloo_said_) {
    spdlog::info("this host's name resolves only to loopback here: workers get "
                 "GLOO_SOCKET_IFNAME={} (the interface toward the other nodes), so that gloo "
                 "listens where they reach it; set GLOO_SOCKET_IFNAME to choose", name);
    gloo_said_ = name;
  }
  return name;
}

MeetingPoint ElasticAgent::Meeting() const {
  if (!assigned_once_) return {};
  return MeetingPoint{assignment_.master_addr, assignment_.master_port};
}

void ElasticAgent::EndStoreRound() {
  if (store_ && store_->server) store_->server->EndRound();
}

void ElasticAgent::BeginStop(int signal) {
  workers_->Stop(signal);
  grace_timer_->Arm(config_.shutdown_timeout);
}

void ElasticAgent::Finish(int exit_code) {
  exit_code_ = exit_code;
  state_ = State::kDone;
}

void ElasticAgent::FinishRun(const RendezvousEvent& end) {
  switch (end.outcome) {
    case RunOutcome::kSucceeded:
      return Finish(kExitSuccess);
    case RunOutcome::kReleased:
      spdlog::warn("{}; exiting 0 (their outcome is in their own logs)", end.detail);
      others_still_run_ = true;
      return Finish(kExitSuccess);
    case RunOutcome::kTimedOut:
      spdlog::error("{}", end.detail);
      return Finish(kExitRendezvous);
    case RunOutcome::kFailed:
      break;
  }
  int code = 1;
  if (!last_failures_.empty()) {
    (void)WriteAll(STDERR_FILENO, FormatFailureSummary(config_.entrypoint_name, last_failures_,
                                                       absl::LocalTimeZone(), Meeting()));
    code = ShellExitCode(last_failures_[RootCauseIndex(last_failures_)].wait_status);
  }
  if (!end.root_cause.empty()) {
    const ReportedFailure& root = end.root_cause.front();
    const bool here = root.host == host_ && !last_failures_.empty() &&
                      last_failures_[RootCauseIndex(last_failures_)].rank == root.rank;
    if (!here) {
      spdlog::error("root cause across the job: rank {} on {} failed with exitcode {}: {}",
                    root.rank, root.host, root.exit_code, root.message);
    }
    code = ShellCodeFromTorch(root.exit_code);
  }
  spdlog::error("job failed ({}); exiting with status {}", end.detail, code);
  Finish(code);
}

std::vector<ReportedFailure> ElasticAgent::ForMaster(
    const std::vector<WorkerFailure>& failures) const {
  std::vector<ReportedFailure> out;
  for (const WorkerFailure& f : failures) {
    ReportedFailure r;
    r.host = f.host;
    r.rank = f.rank;
    r.local_rank = f.local_rank;
    r.exit_code = TorchExitCode(f.wait_status);
    r.pid = f.pid;
    r.time = f.time;
    r.message = f.error_message.empty() && !f.stderr_tail.empty() ? f.stderr_tail.back()
                                                                  : f.error_message;
    // The master refuses a failure message over 64 KiB (CheckLimits); an error file can
    // hold any amount. The whole message stays in this node's own summary.
    constexpr size_t kMaxReported = 16 * 1024;
    if (r.message.size() > kMaxReported) {
      r.message = absl::StrCat(r.message.substr(0, kMaxReported), " ... (cut at 16 KiB)");
    }
    out.push_back(std::move(r));
  }
  return out;
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
