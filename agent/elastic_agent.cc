#include "agent/elastic_agent.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/join_request.h"
#include "agent/logs/log_format.h"
#include "agent/rules_settings.h"
#include "common/clock.h"
#include "common/exit_codes.h"
#include "common/process_status.h"
#include "common/random_id.h"
#include "common/status_macros.h"
#include "common/unique_fd.h"
#include "node/host_info.h"
#include "spdlog/spdlog.h"

namespace ddprun {
namespace {

constexpr spdlog::level::level_enum kSpdlogLevels[] = {  // in LogLevel's order
    spdlog::level::info, spdlog::level::warn, spdlog::level::err};

// The modules a `python script.py` finds beside the script: its folder's x.py files and
// folders (a script run with -m: the working folder's). A bounded look, for a summary line.
std::vector<std::string> ModulesBeside(const std::string& script) {
  std::vector<std::string> modules;
  std::error_code error;
  const std::filesystem::path folder = std::filesystem::path(script).parent_path();
  std::filesystem::directory_iterator it(folder.empty() ? "." : folder, error);
  constexpr int kLooked = 4096;
  for (int n = 0; !error && it != std::filesystem::directory_iterator() && n < kLooked;
       it.increment(error), ++n) {
    const std::filesystem::path& path = it->path();
    // Only a name that can be a module's goes into the summary: the folder may be anyone's.
    std::string name = path.extension() == ".py" ? path.stem().string()
                       : it->is_directory(error) ? path.filename().string()
                                                 : "";
    if (!name.empty() && std::all_of(name.begin(), name.end(),
                                     [](char c) { return absl::ascii_isalnum(c) || c == '_'; })) {
      modules.push_back(std::move(name));
    }
  }
  return modules;
}

}  // namespace

ElasticAgent::ElasticAgent(const AgentConfig& config, EnvMap base_env,
                           RendezvousConnection& rendezvous, OrphanGuard& guard,
                           std::optional<WorkerStore> worker_store)
    : config_(config),
      base_env_(std::move(base_env)),
      rendezvous_(rendezvous),
      guard_(guard),
      // How this node is named in reports and ordered among nodes: --local-addr if given.
      node_{config.local_addr.empty() ? HostName() : config.local_addr, RandomId(),
            std::move(worker_store), std::nullopt, ""},
      rules_(RulesSettings(config, node_.host, rendezvous, store() && store()->server != nullptr),
             MonotonicNow()),
      seen_{std::nullopt, WorkerMetrics(config.run_id), RestartTimeline(&moments_),
            HangReportFiles(log_root_, config.run_id)},
      gloo_(store() && store()->pick_gloo_interface && base_env_.count("GLOO_SOCKET_IFNAME") == 0,
            config.endpoint_host) {}

ElasticAgent::~ElasticAgent() = default;

int ElasticAgent::Run() {
  if (absl::Status s = OpenInputs(); !s.ok()) {
    spdlog::error("cannot start the job: {}", s.message());
    return kExitInternal;
  }
  if (absl::Status s = ApplyChoices(); !s.ok()) {
    spdlog::error("cannot start the job: {}", s.message());
    return kExitUsage;  // the user's choice, not ddprun's fault
  }
  rules_.Start(MonotonicNow());
  RunActions();
  while (!rules_.done()) {
    if (absl::Status s = inputs_.loop->RunOnce(absl::InfiniteDuration()); !s.ok()) {
      spdlog::error("the agent's event loop failed: {}; killing the workers", s.message());
      KillWorkersNow();
      rules_.Fatal(kExitInternal);
      RunActions();
    }
  }
  // A run the rendezvous ended, unless a signal stopped this agent first, is SUCCEEDED.
  AgentMoment exiting = AgentMoment::Of(AgentMoment::Kind::kExiting, MonotonicNow());
  if (rules_.interrupted_by() == 0) exiting.run_end = rules_.run_end();
  exiting.exit_code = rules_.exit_code();
  moments_.Announce(std::move(exiting));
  CleanUpLogRoot(log_root_, config_.run_id);
  return rules_.exit_code();
}

absl::Status ElasticAgent::OpenInputs() {
  DDPRUN_ASSIGN_OR_RETURN(inputs_.loop, EventLoop::Create());
  std::vector<int> watched = config_.signals_to_handle;
  watched.push_back(SIGCHLD);
  if (!ForwardsStackSignal()) watched.push_back(kStackSignal);  // a stack report on request
  DDPRUN_ASSIGN_OR_RETURN(SignalChannel signals, SignalChannel::Open(watched));
  inputs_.signals = std::make_unique<SignalChannel>(std::move(signals));
  DDPRUN_ASSIGN_OR_RETURN(OneShotTimer timer, OneShotTimer::Create());
  inputs_.deadline = std::make_unique<OneShotTimer>(std::move(timer));
  children_.health_checks.emplace(*inputs_.loop, guard_, config_.health_check);
  if (!config_.token.empty() || config_.rendezvous.max_nodes == 1) {
    DDPRUN_ASSIGN_OR_RETURN(StoreTokenFile token, StoreTokenFile::Create(config_.token));
    inputs_.store_token.emplace(std::move(token));
    guard_.RemoveIfAgentDies(inputs_.store_token->path());  // a kill -9 must not leave the secret
    guard_.RemoveIfAgentDies(inputs_.store_token->folder());
  }
  EventLoop& loop = *inputs_.loop;
  DDPRUN_RETURN_IF_ERROR(
      loop.WatchReadable(inputs_.signals->fd(), [this](uint32_t) { OnSignals(); }));
  if (store() && store()->server) {
    DDPRUN_RETURN_IF_ERROR(
        loop.WatchReadable(store()->server->marks_fd(), [this](uint32_t) { OnStoreMarks(); }));
  }
  DDPRUN_RETURN_IF_ERROR(
      loop.WatchReadable(inputs_.deadline->fd(), [this](uint32_t) { OnDeadline(); }));
  return loop.WatchReadable(rendezvous_.event_fd(), [this](uint32_t) {
    for (RendezvousEvent& event : rendezvous_.TakeEvents()) {
      if (event.kind == RendezvousEvent::Kind::kHangReport) {
        OnHangReport(event);  // also while the rules wait for it to exit (kExiting)
      } else if (!rules_.done()) {
        OnRendezvousEvent(event);
      }
    }
  });
}

absl::Status ElasticAgent::ApplyChoices() {
  absl::StatusOr<LogRoot> log_root = OpenLogRoot(config_.log_dir, config_.run_id);
  if (!log_root.ok()) {
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
  DDPRUN_ASSIGN_OR_RETURN(RecordLog records, RecordLog::Open(config_.event_log));
  seen_.records.emplace(std::move(records), RecordSource::Of(config_, node_.host), MonotonicNow());
  seen_.SubscribeTo(moments_);
  moments_.Subscribe(*this);
  absl::StatusOr<HangChecks> hang_checks =
      SetUpHangChecks(config_.python_workers, base_env_, guard_);
  if (!hang_checks.ok()) return hang_checks.status();
  hang_checks_.emplace(std::move(*hang_checks));
  StartWarmPool();  // after the hang checks: its imports run with the workers' environment
  if (WillDefaultOmpThreads(base_env_, config_.nproc_per_node)) {
    spdlog::warn(
        "OMP_NUM_THREADS is not set: setting it to 1 for each worker so that {} workers "
        "do not overload the CPUs; set it yourself to tune performance.",
        config_.nproc_per_node);
  }
  return absl::OkStatus();
}

void ElasticAgent::StartWarmPool() {
  if (config_.preload.empty()) return;
  char cwd[4096];
  WarmPoolSettings settings{config_.preload, config_.worker_argv, NodeWorkerEnv(base_env_, config_),
                            ::getcwd(cwd, sizeof(cwd)) != nullptr ? cwd : ""};
  absl::StatusOr<std::unique_ptr<WarmPool>> pool = WarmPool::Start(std::move(settings), guard_);
  if (!pool.ok()) {
    spdlog::warn("--preload: workers start the usual way: {}", pool.status().message());
    return;
  }
  if (absl::Status s = (*pool)->WatchImports(*inputs_.loop, [this] { OnWarmPoolSettled(); });
      !s.ok()) {
    spdlog::warn("--preload: workers start the usual way: {}", s.message());
    return;
  }
  children_.warm_pool = std::move(*pool);
}

// The warm pool's imports are done, failed or late: workers held for them start now.
void ElasticAgent::OnWarmPoolSettled() {
  if (!children_.workers || !children_.workers->waiting_for_pool() || !rules_.assignment()) return;
  children_.workers->StartPending();
  WorkersStarted(*rules_.assignment());
  RunActions();
}

void ElasticAgent::OnSignals() {
  for (int sig : inputs_.signals->Drain()) {
    if (sig == SIGCHLD) {
      children_.ReapAll(guard_);
    } else if (sig == kStackSignal && !ForwardsStackSignal()) {
      TakeStacksOnRequest();
    } else {
      rules_.Signal(sig, MonotonicNow());
      RunActions();
    }
  }
  // A SIGCHLD coalesced with others is still reflected by waitpid; reap once more.
  children_.ReapAll(guard_);
  ReportWorkers();
}

void ElasticAgent::OnRendezvousEvent(RendezvousEvent& event) {
  const absl::Time now = MonotonicNow();
  switch (event.kind) {
    case RendezvousEvent::Kind::kAssigned:
      rules_.Assigned(event.assignment, now);
      break;
    case RendezvousEvent::Kind::kStop:
      rules_.StopOrdered(event.stop_reason, event.detail, event.collect_stacks, event.next, now);
      break;
    case RendezvousEvent::Kind::kExcluded:
      rules_.Excluded(event.detail, event.cooldown, now);
      break;
    case RendezvousEvent::Kind::kEnd:
      (void)WriteAll(STDERR_FILENO, FormatExclusions(event.excluded));
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
    case RendezvousEvent::Kind::kResumed:
      rules_.Resumed(event.store_round, now);
      break;
    case RendezvousEvent::Kind::kReach:
      rules_.JobReach(event.status.ok(), std::string(event.status.message()), now);
      break;
  }
  RunActions();
  ReportWorkers();
}

void ElasticAgent::OnHangReport(const RendezvousEvent& event) {
  AgentMoment arrived = AgentMoment::Of(AgentMoment::Kind::kHangReportArrived, MonotonicNow());
  arrived.round = event.hang_round;
  arrived.report_text = event.detail;
  arrived.report_summary = event.hang_summary;
  moments_.Announce(std::move(arrived));
  rules_.HangReportArrived(event.hang_round);
  RunActions();
}

void ElasticAgent::OnDeadline() {
  if (!inputs_.deadline->Acknowledge()) return;
  rules_.Tick(MonotonicNow());
  RunActions();
}

void ElasticAgent::ReportWorkers() {
  FeedWorkers();
  RunActions();
  PublishMetrics();
}

void ElasticAgent::FeedWorkers() {
  if (!children_.workers || rules_.done()) return;
  WorkersView view;
  view.any_failed = children_.workers->HasFailures();
  view.all_exited = children_.workers->AllExited();
  rules_.WorkersChanged(view, MonotonicNow());
}

void ElasticAgent::OnStoreMarks() {
  // torch 2.1 and later pass the store barrier only when asked to.
  auto asked = base_env_.find("TORCH_DIST_INIT_BARRIER");
  const bool barrier_asked = asked != base_env_.end() && asked->second == "1";
  for (const TcpStoreServer::TimedMark& timed : store()->server->TakeMarks()) {
    const bool connected = timed.mark.kind == StoreMark::Kind::kEveryRankConnected;
    AgentMoment mark = AgentMoment::Of(
        connected ? AgentMoment::Kind::kEveryRankConnected : AgentMoment::Kind::kBarrierPassed,
        timed.at);
    mark.round = timed.mark.round;
    mark.barrier_expected = connected && (timed.mark.legacy_client || barrier_asked);
    moments_.Announce(std::move(mark));
  }
  PublishMetrics();
}

void ElasticAgent::See(const AgentMoment& moment) {
  if (moment.kind == AgentMoment::Kind::kRestartExplained) {
    // A warning, as the restart's own line: it says where that restart's time went.
    spdlog::warn("{}", FormatRestartSplit(*moment.split));
    rendezvous_.ReportRestart(*moment.split);
  } else if (moment.kind == AgentMoment::Kind::kMasterBack) {
    rendezvous_.ReportOutage(moment.round, moment.lost);
  }
}

void ElasticAgent::RunActions() {
  for (std::vector<AgentAction> actions = rules_.TakeActions(); !actions.empty();
       actions = rules_.TakeActions()) {
    for (const AgentAction& action : actions) RunAction(action);
  }
  const absl::Time next = rules_.NextDeadline();
  if (next == absl::InfiniteFuture()) {
    inputs_.deadline->Disarm();
  } else {
    inputs_.deadline->Arm(next - MonotonicNow());
  }
}

void ElasticAgent::RunAction(const AgentAction& action) {
  using Kind = AgentAction::Kind;
  switch (action.kind) {
    case Kind::kCheckHealth:
      return CheckHealth();
    case Kind::kJoin:
      return Join(action.assignment, action.text, action.resume);
    case Kind::kReconnect:
      return rendezvous_.Reconnect();
    case Kind::kStartWorkers:
      return StartAttempt(*action.assignment);
    case Kind::kOpenStoreRound:
      if (store() && store()->server) {
        store()->server->BeginRound(action.assignment->round, action.assignment->store_clients,
                                    action.assignment->world_size);
      }
      return;
    case Kind::kStopWorkers:
      if (children_.workers) children_.workers->Stop(action.signal);
      return;
    case Kind::kKillWorkers:
      if (children_.workers) children_.workers->KillRemaining(action.text);
      return;
    case Kind::kFreezeWorkers:
      if (children_.workers) children_.workers->Freeze();
      return;
    case Kind::kCollectStacks:
      if (children_.workers) children_.workers->CollectStacks(action.settle);
      return;
    case Kind::kKillHung:
      if (children_.workers) children_.workers->KillHung();
      return;
    case Kind::kAbandonWorkers:
      return AbandonWorkers(action.text);
    case Kind::kLeave:
      return rendezvous_.Leave(action.text);
    case Kind::kReportFailure:
      if (children_.workers) {
        rendezvous_.ReportFailure(action.round,
                                  ReportedFailures(children_.workers->CollectFailures()));
      }
      return;
    case Kind::kReportSuccess:
      return rendezvous_.ReportSuccess(action.round);
    case Kind::kReportStopped:
      return rendezvous_.ReportStopped(action.round);
    case Kind::kHeartbeat:
      return rendezvous_.Heartbeat();
    case Kind::kCheckProgress:
      return rendezvous_.CheckProgress();
    case Kind::kCheckReach:
      return rendezvous_.CheckReach(action.text);
    case Kind::kEndStoreRound:
      if (store() && store()->server) store()->server->EndRound();
      return;
    case Kind::kCloseAttempt:
      return rules_.AttemptClosed(CloseAttempt(), MonotonicNow());
    case Kind::kWriteStopSummary:
      return WriteStopSummary(action.signal);
    case Kind::kWriteFailureSummary:
      return WriteFailureSummary();
    case Kind::kMoment:
      return moments_.Announce(action.moment);
    case Kind::kLog:
      return spdlog::log(kSpdlogLevels[static_cast<int>(action.level)], "{}", action.text);
    case Kind::kExit:
      return;  // the loop ends: rules_.done()
  }
}

void ElasticAgent::CheckHealth() {
  const std::optional<Assignment>& last = rules_.assignment();
  HealthCheckRound round;
  round.round = last ? last->round + 1 : 0;
  round.restart_count = last ? last->restart_count : 0;
  round.run_id = config_.run_id;
  round.local_world_size = config_.nproc_per_node;
  round.host = node_.host;
  children_.health_checks->Run(base_env_, round, [this](const std::string& failure) {
    rules_.HealthChecked(failure, MonotonicNow());
    RunActions();
  });
}

void ElasticAgent::Join(const std::optional<Assignment>& last, const std::string& failed_check,
                        bool resume) {
  JoiningNode joining = node_;
  joining.last = last;
  joining.failed_check = failed_check;
  joining.resume = resume;
  absl::StatusOr<NodeInfo> node = JoinRequest(config_, joining);
  if (!node.ok()) {
    spdlog::error("{}", node.status().message());
    return rules_.Fatal(kExitInternal);
  }
  rendezvous_.Join(*node);
}

void ElasticAgent::StartAttempt(const Assignment& assignment) {
  if (absl::Status s = CheckRoundHere(assignment, config_.nproc_per_node, store().has_value());
      !s.ok()) {
    spdlog::error("{}; this node leaves the job", s.message());
    return rules_.Fatal(kExitRendezvous);
  }
  AttemptPlan plan;
  plan.assignment = assignment;
  plan.log_attempt = log_root_.BeginAttempt(assignment.round);
  plan.agent_store = store().has_value();
  plan.gloo_interface =
      gloo_.For(assignment.master_addr,
                store() && store()->server != nullptr ? store()->server->ArrivalAddress() : "");
  plan.store_addr = rendezvous_.store_addr();
  if (inputs_.store_token) plan.store_token_file = inputs_.store_token->path();
  plan.log_root = log_root_.path;
  plan.log_run_path = log_root_.run_path;
  plan.log_run_dir = log_root_.run_dir;
  plan.timer_fifo = hang_checks_->timer_fifo ? hang_checks_->timer_fifo->fd() : -1;
  plan.python_dumps = hang_checks_->python_dumps;
  plan.stack_dump_bound = rules_.settings().hangs.dump_bound;
  WorkerSupervisor::Hooks hooks;
  hooks.hang_found = [this](const FoundHang& hang) {
    rules_.HangFound(hang, MonotonicNow());
    RunActions();
  };
  hooks.stacks_taken = [this] {
    rules_.StacksTaken();
    RunActions();
  };
  children_.workers =
      std::make_unique<WorkerSupervisor>(config_, base_env_, *inputs_.loop, guard_, node_.host,
                                         std::move(hooks), children_.warm_pool.get());
  if (absl::Status s = children_.workers->Start(plan); !s.ok()) {
    spdlog::error("cannot start the workers: {}", s.message());
    KillWorkersNow();
    return rules_.Fatal(kExitInternal);
  }
  if (children_.workers->waiting_for_pool()) {
    // The loop goes on meanwhile: heartbeats, signals, the master's orders.
    spdlog::info("attempt {}: its workers wait for the warm pool to import {}", assignment.round,
                 absl::StrJoin(config_.preload, ","));
    return;
  }
  WorkersStarted(assignment);
}

void ElasticAgent::WorkersStarted(const Assignment& assignment) {
  AgentMoment started = AgentMoment::Of(AgentMoment::Kind::kWorkersStarted, MonotonicNow());
  started.workers = children_.workers->Outcomes();
  // The workers meet in group rank 0's store: that node sees them reach it.
  started.store_followed = store() && store()->server && assignment.group_rank == 0;
  moments_.Announce(std::move(started));
  PublishMetrics();
  spdlog::info("attempt {}: started {} workers (restart {}, MASTER_ADDR={} MASTER_PORT={})",
               assignment.round, children_.workers->size(), assignment.restart_count,
               assignment.master_addr, assignment.master_port);
  FeedWorkers();  // a worker that could not be started counts as failed at once
}

void ElasticAgent::PublishMetrics() {
  if (!seen_.metrics.publishing()) return;  // after every event: no copy without --metrics-port
  seen_.metrics.Publish(rules_.assignment(), children_.workers
                                                 ? std::optional(children_.workers->Outcomes())
                                                 : std::nullopt);
}

AttemptResult ElasticAgent::CloseAttempt() {
  children_.workers->Close();
  AttemptResult result;
  result.succeeded = children_.workers->AllSucceeded();
  if (children_.workers->HasFailures()) {
    last_failures_ = children_.workers->CollectFailures();
    const WorkerFailure& root = last_failures_[RootCauseIndex(last_failures_)];
    // INFO: the rendezvous's line (a restart, or the end of the job) is the one warning.
    spdlog::info("attempt {} failed: rank {} (local_rank {}, pid {}) ended with {}",
                 rules_.assignment()->round, root.rank, root.local_rank, root.pid,
                 DescribeWaitStatus(root.wait_status));
    result.root_cause =
        AttemptResult::RootCause{root.rank, ShellExitCode(root.wait_status), root.hung};
  }
  result.awaits_hang_report = ReportStacks(children_.workers->TakeStacks());
  AgentMoment closed = AgentMoment::Of(AgentMoment::Kind::kAttemptClosed, MonotonicNow());
  closed.workers = children_.workers->Outcomes();
  if (result.root_cause) closed.failures = last_failures_;
  moments_.Announce(std::move(closed));
  children_.workers.reset();
  return result;
}

// The shell cannot go on: whatever runs dies now, without the rules' grace period.
void ElasticAgent::KillWorkersNow() {
  if (!children_.workers) return;
  children_.workers->Stop(SIGKILL);
  children_.workers->Close();
  children_.workers.reset();
}

bool ElasticAgent::ReportStacks(std::vector<RankStack> stacks) {
  if (stacks.empty() || !rules_.assignment()) return false;
  const Assignment& a = *rules_.assignment();
  const std::string cause = children_.workers->hang_cause();
  AgentMoment taken = AgentMoment::Of(AgentMoment::Kind::kStacksTaken, MonotonicNow());
  taken.hang_report = OwnHangReport(a, cause, stacks);
  const bool awaits_merged = !Complete(*taken.hang_report);
  moments_.Announce(std::move(taken));
  rendezvous_.ReportStacks(a.round, a.world_size, cause, stacks);
  return awaits_merged;
}

void ElasticAgent::AbandonWorkers(const std::string& why) {
  const std::string message = absl::StrCat(
      children_.workers ? children_.workers->DescribeRemaining() : "workers", " ", why);
  spdlog::error(
      "{}; this agent exits without them (the kernel holds them: look at dmesg, and "
      "at the device or filesystem they wait on)",
      message);
  rendezvous_.Leave(message);
}

void ElasticAgent::TakeStacksOnRequest() {
  if (!children_.workers || !rules_.assignment() ||
      rules_.phase() != AgentStateMachine::Phase::kRunning) {
    spdlog::warn("SIGUSR2: no workers are running, so no stacks to take");
    return;
  }
  const Assignment a = *rules_.assignment();
  const bool began = children_.workers->SnapshotStacks([this, a](std::vector<RankStack> stacks) {
    AgentMoment asked = AgentMoment::Of(AgentMoment::Kind::kStacksAsked, MonotonicNow());
    asked.hang_report = RequestedStacksReport(a, std::move(stacks));
    moments_.Announce(std::move(asked));
  });
  if (!began) spdlog::warn("SIGUSR2: the stacks asked for before are still being read");
}

void ElasticAgent::WriteFailureSummary() {
  SummaryContext context;
  if (!config_.interpreter.path.empty()) {
    context.modules_beside_script = ModulesBeside(config_.entrypoint_name);
  }
  context.entrypoint = config_.entrypoint_name;
  context.meeting = MeetingOf(rules_.assignment());
  context.hang_report_path = seen_.hang_files.path();
  context.interpreter = config_.interpreter;
  (void)WriteAll(STDERR_FILENO, FormatFailureSummary(last_failures_, context));
}

void ElasticAgent::WriteStopSummary(int signal) {
  const std::optional<Assignment>& assignment = rules_.assignment();
  const int first = assignment ? assignment->base_rank : 0;
  (void)WriteAll(STDERR_FILENO, FormatStopSummary(config_.entrypoint_name, signal, node_.host,
                                                  first, first + config_.nproc_per_node - 1,
                                                  MeetingOf(rules_.assignment())));
}

}  // namespace ddprun
