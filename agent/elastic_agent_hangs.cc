// ElasticAgent, continued: the hang checks it sets up for every attempt, and the report of
// where every rank was (stack_report.h) when a rank hung.

#include <unistd.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/elastic_agent.h"
#include "agent/logs/log_layout.h"
#include "common/clock.h"
#include "common/unique_fd.h"
#include "spdlog/spdlog.h"

namespace ddprun {
namespace {

constexpr char kEnableFileTimer[] = "TORCHELASTIC_ENABLE_FILE_TIMER";
constexpr char kTimerFile[] = "TORCHELASTIC_TIMER_FILE";
constexpr char kFaultHandler[] = "PYTHONFAULTHANDLER";

}  // namespace

absl::Status ElasticAgent::SetUpHangChecks() {
  if (config_.python_workers) {
    // faulthandler prints every thread's traceback on SIGABRT (and on a crash), which is how
    // a hung Python worker's place is recorded with no change to its code. Set to empty,
    // the user keeps it off.
    base_env_.emplace(kFaultHandler, "1");
    python_dumps_ = !base_env_[kFaultHandler].empty();
  }
  auto enable = base_env_.find(kEnableFileTimer);
  auto path = base_env_.find(kTimerFile);
  if (enable == base_env_.end() || enable->second != "1") {
    if (path != base_env_.end()) {
      spdlog::info(
          "{} is set but {} is not 1: workers get the path, and whatever serves it "
          "must (as with torchrun); set {}=1 to have ddprun serve it",
          kTimerFile, kEnableFileTimer, kEnableFileTimer);
    }
    return absl::OkStatus();
  }
  absl::StatusOr<TimerFifo> fifo =
      TimerFifo::Create(path != base_env_.end() ? path->second : std::string());
  if (!fifo.ok()) return fifo.status();
  timer_fifo_.emplace(std::move(*fifo));
  guard_.RemoveIfAgentDies(timer_fifo_->path());  // then its folder, once empty
  if (!timer_fifo_->folder().empty()) guard_.RemoveIfAgentDies(timer_fifo_->folder());
  base_env_[kTimerFile] = timer_fifo_->path();
  spdlog::info("serving torch's FileTimer watchdog at {}={}", kTimerFile, timer_fifo_->path());
  return absl::OkStatus();
}

bool ElasticAgent::ReportStacks(std::vector<RankStack> stacks) {
  if (stacks.empty() || !rules_.assignment()) return false;
  const Assignment& a = *rules_.assignment();
  // This node's ranks at once (in rank order, as its workers are), in case the master's
  // report of every node never comes; that one replaces it.
  const std::string& cause = workers_->hang_cause();
  HangReport local;
  local.round = a.round;
  local.world_size = a.world_size;
  local.cause = cause.empty() ? "a rank on another node hung (its node says which)" : cause;
  local.stacks = stacks;
  WriteHangReport(local.round, FormatHangReport(local));
  const bool complete = Complete(local);
  if (complete) {
    spdlog::warn("{}", FormatHangSummary(local));
    summary_said_round_ = local.round;
  }
  rendezvous_.ReportStacks(a.round, a.world_size, cause, stacks);
  return !complete;
}

void ElasticAgent::OnHangReport(const RendezvousEvent& event) {
  // The master sends a round's report once: complete, or what came within its time.
  WriteHangReport(event.hang_round, event.detail);
  if (summary_said_round_ != event.hang_round) {
    summary_said_round_ = event.hang_round;
    spdlog::warn("{}", event.hang_summary);
  }
  rules_.HangReportArrived(event.hang_round);
  RunActions();
}

void ElasticAgent::WriteHangReport(int64_t round, const std::string& text) {
  const std::string path = WriteAttemptFile(round, "hang_report.txt", text);
  if (path.empty()) return;
  if (hang_report_path_ != path) spdlog::info("where every rank was: {}", path);
  hang_report_path_ = path;
}

std::string ElasticAgent::WriteAttemptFile(int64_t round, const std::string& name,
                                           const std::string& text) {
  absl::StatusOr<std::string> path =
      ddprun::WriteAttemptFile(log_root_, config_.run_id, round, name, text);
  if (!path.ok()) {
    spdlog::warn("cannot write the hang report: {}", std::string(path.status().message()));
    return "";
  }
  return *path;
}

bool ElasticAgent::ForwardsStackSignal() const {
  return std::find(config_.signals_to_handle.begin(), config_.signals_to_handle.end(),
                   kStackSignal) != config_.signals_to_handle.end();
}

void ElasticAgent::TakeStacksOnRequest() {
  if (!workers_ || !rules_.assignment() || rules_.phase() != AgentStateMachine::Phase::kRunning) {
    spdlog::warn("SIGUSR2: no workers are running, so no stacks to take");
    return;
  }
  const Assignment a = *rules_.assignment();
  const bool began = workers_->SnapshotStacks([this, a](std::vector<RankStack> stacks) {
    HangReport report;
    report.title = "stacks";
    report.round = a.round;
    report.world_size = a.world_size;
    report.cause = absl::StrCat("asked for with SIGUSR2 (agent pid ", ::getpid(),
                                "); this node's ranks, native stacks, the job runs on");
    report.stacks = std::move(stacks);
    const std::string name = absl::StrCat(
        "stacks-", absl::FormatTime("%Y%m%d-%H%M%E3S", absl::Now(), absl::LocalTimeZone()), ".txt");
    const std::string path = WriteAttemptFile(a.round, name, FormatHangReport(report));
    spdlog::warn("{}{}", FormatHangSummary(report),
                 path.empty() ? "" : absl::StrCat("  whole: ", path));
  });
  if (!began) spdlog::warn("SIGUSR2: the stacks asked for before are still being read");
}

void ElasticAgent::AbandonWorkers(const std::string& why) {
  const std::vector<std::string> remaining =
      workers_ ? workers_->DescribeRemaining() : std::vector<std::string>();
  const std::string message =
      absl::StrCat(remaining.empty() ? "workers" : absl::StrJoin(remaining, "; "), " ", why);
  spdlog::error(
      "{}; this agent exits without them (the kernel holds them: look at dmesg, and "
      "at the device or filesystem they wait on)",
      message);
  rendezvous_.Leave(message);
}

}  // namespace ddprun
