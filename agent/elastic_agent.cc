#include "agent/elastic_agent.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "agent/logs/log_format.h"
#include "agent/logs/log_layout.h"
#include "agent/process/worker_process.h"
#include "common/clock.h"
#include "common/exit_codes.h"
#include "common/ip_address.h"
#include "common/process_status.h"
#include "common/status_macros.h"
#include "common/unique_fd.h"
#include "node/host_info.h"
#include "rendezvous/node_address.h"
#include "spdlog/spdlog.h"

namespace ddprun {
namespace {

std::string RandomIncarnation() {
  std::random_device rd;
  return absl::StrFormat("%08x%08x%08x%08x", rd(), rd(), rd(), rd());
}

AgentSettings SettingsFor(const AgentConfig& config, const std::string& host,
                          const RendezvousConnection& rendezvous, bool serves_store) {
  AgentSettings settings;
  settings.host = host;
  settings.nproc_per_node = config.nproc_per_node;
  settings.shutdown_timeout = config.shutdown_timeout;
  settings.kill_timeout = config.kill_timeout;
  settings.heartbeat_interval = rendezvous.heartbeat_interval();
  // A master over the network: give up a little after its own join_timeout, which names
  // who is missing; this one catches a master that cannot be reached at all.
  if (settings.heartbeat_interval != absl::InfiniteDuration()) {
    settings.join_deadline = config.join_timeout + config.keep_alive_interval;
  }
  settings.join_timeout = config.join_timeout;
  settings.master_endpoint = rendezvous.store_addr();
  settings.tls = config.tls.enabled();
  settings.health_check = config.health_check.any();
  settings.has_token = !config.token.empty();
  settings.serves_store = serves_store;
  return settings;
}

void LogAt(LogLevel level, const std::string& text) {
  switch (level) {
    case LogLevel::kInfo:
      return spdlog::info("{}", text);
    case LogLevel::kWarning:
      return spdlog::warn("{}", text);
    case LogLevel::kError:
      return spdlog::error("{}", text);
  }
}

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
      incarnation_(RandomIncarnation()),
      rules_(SettingsFor(config, host_, rendezvous, store_ && store_->server != nullptr),
             MonotonicNow()),
      metrics_(config.run_id) {}

ElasticAgent::~ElasticAgent() = default;

absl::Status ElasticAgent::SetUp() {
  DDPRUN_ASSIGN_OR_RETURN(std::unique_ptr<EventLoop> loop, EventLoop::Create());
  loop_ = std::move(loop);

  std::vector<int> watched = config_.signals_to_handle;
  watched.push_back(SIGCHLD);
  if (!ForwardsStackSignal()) watched.push_back(kStackSignal);  // a stack report on request
  DDPRUN_ASSIGN_OR_RETURN(SignalChannel signals, SignalChannel::Open(watched));
  signals_ = std::make_unique<SignalChannel>(std::move(signals));

  DDPRUN_ASSIGN_OR_RETURN(OneShotTimer timer, OneShotTimer::Create());
  deadline_timer_ = std::make_unique<OneShotTimer>(std::move(timer));

  absl::StatusOr<LogRoot> log_root = OpenLogRoot(config_.log_dir, config_.run_id);
  if (!log_root.ok()) {
    setup_exit_code_ = kExitUsage;  // the user's choice of folder, not ddprun's fault
    return absl::Status(
        log_root.status().code(),
        absl::StrCat(config_.log_dir.empty() ? "the log folder" : "--log-dir", ": ",
                     log_root.status().message(),
                     config_.log_dir.empty()
                         ? "; set TMPDIR or --log-dir to a folder you can write"
                         : "; choose a folder of your own that you can write, or leave out "
                           "--log-dir"));
  }
  log_root_ = std::move(*log_root);
  absl::StatusOr<EventLog> events = EventLog::Open(config_.event_log);
  if (!events.ok()) {
    setup_exit_code_ = kExitUsage;
    return events.status();
  }
  records_.emplace(std::move(*events), RecordSource::Of(config_, host_), MonotonicNow());
  if (!config_.token.empty() || config_.max_nodes == 1) {
    DDPRUN_ASSIGN_OR_RETURN(StoreTokenFile token, StoreTokenFile::Create(config_.token));
    store_token_.emplace(std::move(token));
    guard_.RemoveIfAgentDies(store_token_->path());  // a kill -9 must not leave the secret
    guard_.RemoveIfAgentDies(store_token_->folder());
  }
  if (absl::Status s = SetUpHangChecks(); !s.ok()) {
    setup_exit_code_ = kExitUsage;
    return s;
  }
  if (WillDefaultOmpThreads(base_env_, config_.nproc_per_node)) {
    spdlog::warn(
        "OMP_NUM_THREADS is not set: setting it to 1 for each worker so that {} workers "
        "do not overload the CPUs; set it yourself to tune performance.",
        config_.nproc_per_node);
  }
  return WatchInputs();
}

absl::Status ElasticAgent::WatchInputs() {
  if (absl::Status s = loop_->WatchReadable(signals_->fd(), [this](uint32_t) { OnSignals(); });
      !s.ok()) {
    return s;
  }
  if (absl::Status s =
          loop_->WatchReadable(deadline_timer_->fd(), [this](uint32_t) { OnDeadline(); });
      !s.ok()) {
    return s;
  }
  return loop_->WatchReadable(rendezvous_.event_fd(), [this](uint32_t) {
    for (RendezvousEvent& event : rendezvous_.TakeEvents()) {
      if (event.kind == RendezvousEvent::Kind::kHangReport) {
        OnHangReport(event);  // also while the rules wait for it to exit (kExiting)
      } else if (!rules_.done()) {
        OnRendezvousEvent(event);
      }
    }
  });
}

int ElasticAgent::Run() {
  if (absl::Status s = SetUp(); !s.ok()) {
    spdlog::error("cannot start the job: {}", s.message());
    return setup_exit_code_;
  }
  rules_.Start(MonotonicNow());
  RunActions();
  while (!rules_.done()) {
    if (absl::Status s = loop_->RunOnce(absl::InfiniteDuration()); !s.ok()) {
      spdlog::error("the agent's event loop failed: {}; killing the workers", s.message());
      KillWorkersNow();
      rules_.Fatal(kExitInternal);
      RunActions();
    }
  }
  // A run the rendezvous ended, unless a signal stopped this agent first, is SUCCEEDED.
  records_->AgentExiting(rules_.interrupted_by() == 0 ? rules_.run_end() : std::nullopt, exit_code_,
                         MonotonicNow());
  CleanUpLogRoot(log_root_, config_.run_id);
  return exit_code_;
}

void ElasticAgent::OnSignals() {
  for (int sig : signals_->Drain()) {
    if (sig == SIGCHLD) {
      ReapChildren();
    } else if (sig == kStackSignal && !ForwardsStackSignal()) {
      TakeStacksOnRequest();
    } else {
      rules_.Signal(sig, MonotonicNow());
      RunActions();
    }
  }
  // A SIGCHLD coalesced with others is still reflected by waitpid; reap once more.
  ReapChildren();
  ReportWorkers();
}

void ElasticAgent::OnRendezvousEvent(RendezvousEvent& event) {
  const absl::Time now = MonotonicNow();
  switch (event.kind) {
    case RendezvousEvent::Kind::kAssigned:
      rules_.Assigned(event.assignment);
      break;
    case RendezvousEvent::Kind::kStop:
      // A restart in place: the next round was decided with the order; RENDEZVOUS counts
      // from it.
      if (event.next) records_->JoinSent(now);
      rules_.StopOrdered(event.stop_reason, event.detail, event.collect_stacks, event.next, now);
      break;
    case RendezvousEvent::Kind::kExcluded:
      rules_.Excluded(event.detail, event.cooldown, now);
      break;
    case RendezvousEvent::Kind::kEnd:
      WriteExclusions(event.excluded);
      rules_.RunEnded(RunEnd{event.outcome, event.detail, event.root_cause, event.excluded},
                      event.collect_stacks, now);
      break;
    case RendezvousEvent::Kind::kStoreOpen:
      rules_.StoreMayOpen(event.store_round);
      break;
    case RendezvousEvent::Kind::kHangReport:
      break;  // handled as it arrives (WatchInputs)
    case RendezvousEvent::Kind::kLost:
      rules_.MasterLost(std::string(event.status.message()), now);
      break;
    case RendezvousEvent::Kind::kRefused:
      rules_.Refused(std::string(event.status.message()), now);
      break;
    case RendezvousEvent::Kind::kProgress:
      rules_.Progress(event.detail, event.status.ok(), now);
      break;
  }
  RunActions();
  ReportWorkers();
}

void ElasticAgent::OnDeadline() {
  if (!deadline_timer_->Acknowledge()) return;
  rules_.Tick(MonotonicNow());
  RunActions();
}

void ElasticAgent::ReportWorkers() {
  FeedWorkers();
  RunActions();
  PublishMetrics();
}

void ElasticAgent::FeedWorkers() {
  if (!workers_ || rules_.done()) return;
  WorkersView view;
  view.any_failed = workers_->HasFailures();
  view.all_exited = workers_->AllExited();
  rules_.WorkersChanged(view, MonotonicNow());
}

void ElasticAgent::ReapChildren() {
  int status = 0;
  pid_t pid;
  while ((pid = ::waitpid(-1, &status, WNOHANG)) > 0) {
    if (workers_ && workers_->OnProcessExited(pid, status)) continue;
    if (health_check_ && health_check_->OnProcessExited(pid, status)) continue;
    if (pid == guard_.pid()) {
      spdlog::warn(
          "the orphan guard (pid {}) exited: {}; workers still die with the agent via "
          "PR_SET_PDEATHSIG, but their children would not",
          pid, DescribeWaitStatus(status));
    }
    // Otherwise: a worker's child re-parented to us (we are a subreaper); reaping it is all.
  }
}

void ElasticAgent::RunActions() {
  for (std::vector<AgentAction> actions = rules_.TakeActions(); !actions.empty();
       actions = rules_.TakeActions()) {
    for (const AgentAction& action : actions) RunAction(action);
  }
  const absl::Time next = rules_.NextDeadline();
  if (next == absl::InfiniteFuture()) {
    deadline_timer_->Disarm();
  } else {
    deadline_timer_->Arm(next - MonotonicNow());
  }
}

void ElasticAgent::RunAction(const AgentAction& action) {
  using Kind = AgentAction::Kind;
  switch (action.kind) {
    case Kind::kCheckHealth:
      return StartHealthCheck();
    case Kind::kJoin:
      return Join(action.assignment, action.text);
    case Kind::kReconnect:
      return rendezvous_.Reconnect();
    case Kind::kStartWorkers:
      return StartAttempt(*action.assignment);
    case Kind::kOpenStoreRound:
      if (store_ && store_->server) {
        store_->server->BeginRound(action.assignment->round, action.assignment->store_clients);
      }
      return;
    case Kind::kStopWorkers:
      if (workers_) workers_->Stop(action.signal);
      return;
    case Kind::kKillWorkers:
      if (workers_) workers_->KillRemaining(action.text);
      return;
    case Kind::kFreezeWorkers:
      if (workers_) workers_->Freeze();
      return;
    case Kind::kCollectStacks:
      if (workers_) workers_->CollectStacks(action.settle);
      return;
    case Kind::kKillHung:
      if (workers_) workers_->KillHung();
      return;
    case Kind::kAbandonWorkers:
      return AbandonWorkers(action.text);
    case Kind::kLeave:
      return rendezvous_.Leave(action.text);
    case Kind::kReportFailure:
      if (workers_) rendezvous_.ReportFailure(action.round, ForMaster(workers_->CollectFailures()));
      return;
    case Kind::kReportSuccess:
      return rendezvous_.ReportSuccess(action.round);
    case Kind::kReportStopped:
      return rendezvous_.ReportStopped(action.round);
    case Kind::kHeartbeat:
      return rendezvous_.Heartbeat();
    case Kind::kCheckProgress:
      return rendezvous_.CheckProgress();
    case Kind::kEndStoreRound:
      return EndStoreRound();
    case Kind::kCloseAttempt:
      return rules_.AttemptClosed(CloseAttempt(), MonotonicNow());
    case Kind::kWriteStopSummary:
      return WriteStopSummary(action.signal);
    case Kind::kWriteFailureSummary:
      return WriteFailureSummary();
    case Kind::kLog:
      return LogAt(action.level, action.text);
    case Kind::kExit:
      exit_code_ = action.exit_code;
      return;
  }
}

void ElasticAgent::Join(const std::optional<Assignment>& last, const std::string& failed_check) {
  NodeInfo node;
  node.host = host_;
  node.failed_check = failed_check;
  records_->JoinSent(MonotonicNow());
  node.pid = static_cast<int>(::getpid());
  node.incarnation = incarnation_;
  node.local_world_size = config_.nproc_per_node;
  node.node_rank_hint = config_.node_rank_given || config_.fixed_node_rank ? config_.node_rank : -1;
  if (store_) {  // where this node's agent serves the workers' TCPStore
    node.addr = store_->offer.addr;
    node.fallback_addr = store_->offer.fallback_addr;
    node.master_port = store_->port;
    node.addresses = OwnIpAddresses();  // where this node's workers connect from
    // The store's port serves every round; a health check must run before each round.
    node.restarts_in_place = !config_.health_check.any();
  } else {  // one node: rank 0's worker hosts the TCPStore on a port free now
    node.addr = config_.master_addr;
    absl::StatusOr<int> port =
        config_.master_port ? absl::StatusOr<int>(*config_.master_port) : FindFreePort();
    if (!port.ok()) {
      spdlog::error("{}", port.status().message());
      return rules_.Fatal(kExitInternal);
    }
    node.master_port = *port;
  }
  if (last) {
    node.last_round = last->round;
    node.restarts_seen = last->restart_count;
  }
  rendezvous_.Join(node);
}

void ElasticAgent::StartAttempt(const Assignment& assignment) {
  const absl::Time received = MonotonicNow();
  // Whatever a master sends, no worker starts with a rank outside its world, an empty or
  // forged MASTER_ADDR or a port that cannot be.
  if (absl::Status s = CheckAssignment(assignment, config_.nproc_per_node); !s.ok()) {
    spdlog::error("{}; this node leaves the job", s.message());
    return rules_.Fatal(kExitRendezvous);
  }
  if (store_) {
    // Workers given a name that does not resolve here wait for each other until their
    // timeout; better to say so now.
    if (absl::Status s = CheckResolves(assignment.master_addr, "MASTER_ADDR"); !s.ok()) {
      spdlog::error(
          "{} (the address of group rank 0's store: the endpoint's host, that node's "
          "--local-addr or its host name; start it with --local-addr=IP); this node "
          "leaves the job",
          s.message());
      return rules_.Fatal(kExitRendezvous);
    }
  }
  AttemptPlan plan;
  plan.assignment = assignment;
  plan.log_attempt = log_root_.BeginAttempt(assignment.round);
  plan.agent_store = store_.has_value();
  plan.gloo_interface = GlooInterface(assignment.master_addr);
  plan.store_addr = rendezvous_.store_addr();
  if (store_token_) plan.store_token_file = store_token_->path();
  plan.log_root = log_root_.path;
  plan.log_run_path = log_root_.run_path;
  plan.log_run_dir = log_root_.run_dir;
  plan.timer_fifo = timer_fifo_ ? timer_fifo_->fd() : -1;
  plan.python_dumps = python_dumps_;
  plan.stack_dump_bound = rules_.settings().hangs.dump_bound;
  records_->RoundAssigned(assignment, received, MonotonicNow());
  WorkerSupervisor::Hooks hooks;
  hooks.hang_found = [this](const FoundHang& hang) {
    rules_.HangFound(hang, MonotonicNow());
    RunActions();
  };
  hooks.stacks_taken = [this] {
    rules_.StacksTaken();
    RunActions();
  };
  workers_ = std::make_unique<WorkerSupervisor>(config_, base_env_, *loop_, guard_, host_,
                                                std::move(hooks));
  if (absl::Status s = workers_->Start(plan); !s.ok()) {
    spdlog::error("cannot start the workers: {}", s.message());
    KillWorkersNow();
    return rules_.Fatal(kExitInternal);
  }
  records_->WorkersStarted(workers_->Outcomes());
  metrics_.WorkersStarted(workers_->size());
  PublishMetrics();
  spdlog::info("attempt {}: started {} workers (restart {}, MASTER_ADDR={} MASTER_PORT={})",
               assignment.round, workers_->size(), assignment.restart_count, assignment.master_addr,
               assignment.master_port);
  FeedWorkers();  // a worker that could not be started counts as failed at once
}

void ElasticAgent::PublishMetrics() {
  metrics_.Publish(rules_.assignment(),
                   workers_ ? std::optional(workers_->Outcomes()) : std::nullopt);
}

AttemptResult ElasticAgent::CloseAttempt() {
  workers_->Close();
  if (const int strays = KillStrayChildren(guard_.pid(), workers_->pids()); strays > 0) {
    spdlog::warn(
        "killed {} process(es) that workers had left running outside their process "
        "groups",
        strays);
  }
  AttemptResult result;
  result.succeeded = workers_->AllSucceeded();
  if (workers_->HasFailures()) {
    last_failures_ = workers_->CollectFailures();
    const WorkerFailure& root = last_failures_[RootCauseIndex(last_failures_)];
    // INFO: the rendezvous's line (a restart, or the end of the job) is the one warning.
    spdlog::info("attempt {} failed: rank {} (local_rank {}, pid {}) ended with {}",
                 rules_.assignment()->round, root.rank, root.local_rank, root.pid,
                 DescribeWaitStatus(root.wait_status));
    result.root_cause = AttemptResult::RootCause{root.rank, ShellExitCode(root.wait_status)};
  }
  result.awaits_hang_report = ReportStacks(workers_->TakeStacks());
  const std::vector<WorkerFailure> failures =
      result.root_cause ? last_failures_ : std::vector<WorkerFailure>();
  records_->AttemptClosed(workers_->Outcomes(), failures);
  metrics_.AttemptClosed(workers_->Outcomes(), failures);
  workers_.reset();
  return result;
}

// The shell cannot go on: whatever runs dies now, without the rules' grace period.
void ElasticAgent::KillWorkersNow() {
  if (!workers_) return;
  workers_->Stop(SIGKILL);
  workers_->Close();
  workers_.reset();
}

void ElasticAgent::EndStoreRound() {
  if (store_ && store_->server) store_->server->EndRound();
}

}  // namespace ddprun
