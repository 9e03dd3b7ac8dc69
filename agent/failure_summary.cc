#include "agent/failure_summary.h"

#include <sys/wait.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/process_status.h"

namespace ddprun {
namespace {

constexpr int kWidth = 60;

void AppendIndented(std::string& out, const std::string& label, const std::string& text) {
  // The first line follows the label; the rest line up under it, as torchrun prints tracebacks.
  const std::string indent(label.size(), ' ');
  bool first = true;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (!first && line.empty()) continue;
    absl::StrAppend(&out, first ? label : indent, line, "\n");
    first = false;
  }
}

void AppendFailure(std::string& out, size_t index, const WorkerFailure& f, absl::TimeZone zone) {
  absl::StrAppend(&out, "[", index, "]:\n");
  absl::StrAppend(&out, "  time      : ", absl::FormatTime("%Y-%m-%d_%H:%M:%S", f.time, zone),
                  "\n");
  absl::StrAppend(&out, "  host      : ", f.host, "\n");
  absl::StrAppend(&out, "  rank      : ", f.rank, " (local_rank: ", f.local_rank, ")\n");
  absl::StrAppend(&out, "  exitcode  : ", TorchExitCode(f.wait_status), " (pid: ", f.pid, ")\n");
  absl::StrAppend(&out, "  error_file: ", f.error_file.empty() ? "<N/A>" : f.error_file, "\n");
  if (!f.error_file.empty()) {
    AppendIndented(
        out, "  traceback : ",
        f.traceback.empty() ? f.error_message : absl::StrCat(f.error_message, "\n", f.traceback));
  } else if (WIFSIGNALED(f.wait_status)) {
    const int sig = WTERMSIG(f.wait_status);
    // With no error file, the message is ddprun's own account (a worker it killed as hung).
    absl::StrAppend(&out, "  traceback : Signal ", sig, " (", SignalName(sig), ") received by PID ",
                    f.pid, f.error_message.empty() ? "" : ": ", f.error_message, "\n");
  } else {
    absl::StrAppend(&out, "  traceback : none written (use torch's @record on main for one)\n");
  }
  if (f.error_file.empty() || f.error_file_unreadable) {
    if (f.stderr_tail.empty()) {
      absl::StrAppend(&out, "  stderr    : <empty> (", f.stderr_source, ")\n");
    } else {
      absl::StrAppend(&out, "  stderr    : last ", f.stderr_tail.size(), " lines (",
                      f.stderr_source, "):\n");
      for (const std::string& line : f.stderr_tail) absl::StrAppend(&out, "    ", line, "\n");
    }
  }
}

void AppendMeetingPoint(std::string& out, const MeetingPoint& meeting) {
  if (meeting.addr.empty()) return;
  absl::StrAppend(&out, std::string(kWidth, '-'), "\nWorkers meet at: MASTER_ADDR=", meeting.addr,
                  " MASTER_PORT=", meeting.port,
                  "\n  (a worker that cannot reach it from its node waits in init_process_group "
                  "until its timeout)\n");
}

}  // namespace

int TorchExitCode(int wait_status) {
  if (WIFSIGNALED(wait_status)) return -WTERMSIG(wait_status);
  return WEXITSTATUS(wait_status);
}

int ShellExitCode(int wait_status) {
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return WEXITSTATUS(wait_status);
}

size_t RootCauseIndex(const std::vector<WorkerFailure>& failures) {
  size_t root = 0;
  for (size_t i = 1; i < failures.size(); ++i) {
    if (failures[i].time < failures[root].time) root = i;
  }
  return root;
}

std::string FormatFailureSummary(const std::string& entrypoint,
                                 const std::vector<WorkerFailure>& failures, absl::TimeZone zone,
                                 const MeetingPoint& meeting, const std::string& hang_report_path) {
  const std::string heavy(kWidth, '=');
  const std::string light(kWidth, '-');
  const size_t root = RootCauseIndex(failures);
  std::string out;
  absl::StrAppend(&out, heavy, "\n", entrypoint, " FAILED\n", light, "\nFailures:\n");
  size_t listed = 0;
  for (size_t i = 0; i < failures.size(); ++i) {
    if (i == root) continue;
    AppendFailure(out, ++listed, failures[i], zone);
  }
  if (listed == 0) absl::StrAppend(&out, "  <NO_OTHER_FAILURES>\n");
  absl::StrAppend(&out, light, "\nRoot Cause (first observed failure):\n");
  AppendFailure(out, 0, failures[root], zone);
  AppendMeetingPoint(out, meeting);
  if (!hang_report_path.empty()) {
    absl::StrAppend(&out, light, "\nWhere every rank was: ", hang_report_path, "\n");
  }
  absl::StrAppend(&out, heavy, "\n");
  return out;
}

std::string FormatStopSummary(const std::string& entrypoint, int signal, const std::string& host,
                              int first_rank, int last_rank, const MeetingPoint& meeting) {
  const std::string heavy(kWidth, '=');
  std::string out;
  absl::StrAppend(&out, heavy, "\n", entrypoint, " STOPPED by ", SignalName(signal), "\n",
                  std::string(kWidth, '-'),
                  "\nStopped while running: ", first_rank == last_rank ? "rank " : "ranks ",
                  first_rank, first_rank == last_rank ? "" : absl::StrCat("-", last_rank), " on ",
                  host, "\n");
  AppendMeetingPoint(out, meeting);
  absl::StrAppend(&out, heavy, "\n");
  return out;
}

}  // namespace ddprun
