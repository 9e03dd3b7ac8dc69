#include "agent/hang_report_files.h"

#include <unistd.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace ddprun {
namespace {

constexpr char kHangReportFile[] = "hang_report.txt";

}  // namespace

HangReport OwnHangReport(const Assignment& round, const std::string& cause,
                         std::vector<RankStack> stacks) {
  HangReport report;
  report.round = round.round;
  report.world_size = round.world_size;
  report.cause = cause.empty() ? "a rank on another node hung (its node says which)" : cause;
  report.stacks = std::move(stacks);
  return report;
}

HangReport RequestedStacksReport(const Assignment& round, std::vector<RankStack> stacks) {
  HangReport report;
  report.title = "stacks";
  report.round = round.round;
  report.world_size = round.world_size;
  report.cause = absl::StrCat("asked for with SIGUSR2 (agent pid ", ::getpid(),
                              "); this node's ranks, native stacks, the job runs on");
  report.stacks = std::move(stacks);
  return report;
}

void HangReportFiles::See(const AgentMoment& moment) {
  switch (moment.kind) {
    case AgentMoment::Kind::kStacksTaken:
      return WriteOwn(*moment.hang_report);
    case AgentMoment::Kind::kHangReportArrived:
      return WriteMerged(moment.round, moment.report_text, moment.report_summary);
    case AgentMoment::Kind::kStacksAsked:
      // Named by the wall clock's time (a moment's is the monotonic clock's).
      return WriteOnRequest(*moment.hang_report, absl::Now());
    default:
      return;
  }
}

void HangReportFiles::WriteOwn(const HangReport& report) {
  Write(report.round, FormatHangReport(report));
  if (Complete(report)) Say(report.round, FormatHangSummary(report));
}

void HangReportFiles::WriteMerged(int64_t round, const std::string& text,
                                  const std::string& summary) {
  Write(round, text);
  Say(round, summary);
}

void HangReportFiles::WriteOnRequest(const HangReport& report, absl::Time now) {
  const std::string name = absl::StrCat(
      "stacks-", absl::FormatTime("%Y%m%d-%H%M%E3S", now, absl::LocalTimeZone()), ".txt");
  absl::StatusOr<std::string> path =
      WriteAttemptFile(root_, run_id_, report.round, name, FormatHangReport(report));
  if (!path.ok()) {
    spdlog::warn("cannot write the stacks: {}", std::string(path.status().message()));
  }
  spdlog::warn("{}{}", FormatHangSummary(report),
               path.ok() && !path->empty() ? absl::StrCat("  whole: ", *path) : "");
}

void HangReportFiles::Write(int64_t round, const std::string& text) {
  absl::StatusOr<std::string> path = WriteAttemptFile(root_, run_id_, round, kHangReportFile, text);
  if (!path.ok()) {
    spdlog::warn("cannot write the hang report: {}", std::string(path.status().message()));
    return;
  }
  if (path->empty()) return;  // no log files
  if (path_ != *path) spdlog::info("where every rank was: {}", *path);
  path_ = *path;
}

void HangReportFiles::Say(int64_t round, const std::string& summary) {
  if (said_round_ == round) return;
  said_round_ = round;
  spdlog::warn("{}", summary);
}

}  // namespace ddprun
