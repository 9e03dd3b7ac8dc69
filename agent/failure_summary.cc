#include "agent/failure_summary.h"

#include <sys/wait.h>

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "common/closest_name.h"
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

// Everything the worker left about why it ended: its error file's text and its stderr tail.
std::vector<absl::string_view> WhatItSaid(const WorkerFailure& f) {
  std::vector<absl::string_view> lines = {f.error_message, f.traceback};
  lines.insert(lines.end(), f.stderr_tail.begin(), f.stderr_tail.end());
  return lines;
}

bool AnySays(const std::vector<absl::string_view>& lines,
             std::initializer_list<absl::string_view> needles) {
  for (absl::string_view line : lines) {
    const std::string lower = absl::AsciiStrToLower(line);
    for (absl::string_view needle : needles) {
      if (absl::StrContains(lower, absl::AsciiStrToLower(needle))) return true;
    }
  }
  return false;
}

bool SaysAny(const WorkerFailure& f, std::initializer_list<absl::string_view> needles) {
  return AnySays(WhatItSaid(f), needles);
}

// What the worker said last, why it ended: its error file's message, and the end of its
// stderr: a Python traceback's final exception (its message may span lines), else the
// last few lines. A warning earlier in the tail (a retried "Connection reset by peer")
// does not count.
std::vector<absl::string_view> LastWords(const WorkerFailure& f) {
  std::vector<absl::string_view> words = {f.error_message};
  const std::vector<std::string>& tail = f.stderr_tail;
  size_t from = tail.size() > 3 ? tail.size() - 3 : 0;
  for (size_t i = tail.size(); i-- > 0;) {
    if (!absl::StartsWith(tail[i], "Traceback (most recent call last):")) continue;
    from = i + 1;
    while (from < tail.size() && (tail[from].empty() || tail[from].front() == ' ')) ++from;
    break;
  }
  words.insert(words.end(), tail.begin() + static_cast<std::ptrdiff_t>(from), tail.end());
  return words;
}

// The module a worker's ModuleNotFoundError names ("torch"), or "".
std::string MissingModule(const WorkerFailure& f) {
  constexpr absl::string_view kMarker = "No module named '";
  for (absl::string_view line : WhatItSaid(f)) {
    const size_t at = line.find(kMarker);
    if (at == absl::string_view::npos) continue;
    absl::string_view name = line.substr(at + kMarker.size());
    return std::string(name.substr(0, name.find('\'')));
  }
  return "";
}

// The meeting point matters when the root cause may be about reaching it: a hang, or a
// worker that says it could not connect or timed out (init_process_group, the store).
bool MeetingMatters(const WorkerFailure& root) {
  return root.hung || SaysAny(root, {"connect", "timed out", "timeout", "TCPStore", "rendezvous",
                                     "DistNetworkError", "DistStoreError", "init_process_group"});
}

void AppendFailure(std::string& out, size_t index, const WorkerFailure& f, absl::TimeZone zone) {
  absl::StrAppend(&out, "[", index, "]:\n");
  absl::StrAppend(&out, "  time      : ", absl::FormatTime("%Y-%m-%d_%H:%M:%S", f.time, zone),
                  "\n");
  absl::StrAppend(&out, "  host      : ", f.host, "\n");
  absl::StrAppend(&out, "  rank      : ", f.rank, " (local_rank: ", f.local_rank, ")\n");
  absl::StrAppend(&out, "  exitcode  : ", TorchExitCode(f.wait_status), " (pid: ", f.pid,
                  f.stopped_by == 0
                      ? ""
                      : absl::StrCat("; it raised, then the stop's ", SignalName(f.stopped_by),
                                     " ended it as it shut down"),
                  ")\n");
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
  if (FailedForALostPeer(f)) {
    absl::StrAppend(&out, "  cause     : a peer went away (a consequence of another failure)\n");
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

// A worker that died of a missing module ran an interpreter without it: say which, and what
// would help: the module beside the script it misspells, or another interpreter. Every
// summary of Python workers names the interpreter.
void AppendInterpreter(std::string& out, const SummaryContext& context, const WorkerFailure& root) {
  const WorkerInterpreter& python = context.interpreter;
  if (python.path.empty()) return;
  absl::StrAppend(&out, std::string(kWidth, '-'), "\nPython: ", python.path, " (", python.chosen,
                  ")\n");
  const std::string module = MissingModule(root);
  if (module.empty()) return;
  const std::string top = module.substr(0, module.find('.'));
  const std::string near = ClosestName(top, context.modules_beside_script, top.size() < 5 ? 1 : 2);
  absl::StrAppend(&out, "  rank ", root.rank, ": no module '", module, "' in ", python.path);
  if (!near.empty()) {
    absl::StrAppend(&out, "; the script's folder has '", near, "': a misspelling?\n");
  } else if (python.chosen == "PYTHON_EXEC") {
    absl::StrAppend(&out,
                    " (PYTHON_EXEC): install it for that Python, or set PYTHON_EXEC to "
                    "one that has it\n");
  } else {
    absl::StrAppend(&out,
                    ": set PYTHON_EXEC to the Python that has it (PYTHON_EXEC=/path/to/"
                    "python ddprun ...), or activate its environment before ddprun\n");
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

bool FailedForALostPeer(const WorkerFailure& failure) {
  // "Connection closed by peer" (gloo), "... by remote peer" (NCCL's sockets).
  return !failure.hung &&
         AnySays(LastWords(failure),
                 {"Connection closed by", "Connection reset by peer", "Broken pipe",
                  "remote process exited or there was a network error", "ncclRemoteError",
                  "NCCL communicator was aborted"});
}

bool RaisedAnException(const WorkerFailure& failure) {
  const std::vector<std::string>& tail = failure.stderr_tail;
  size_t last = tail.size();
  while (last > 0 && tail[last - 1].empty()) --last;
  if (last < 2 || tail[last - 1].front() == ' ') return false;
  const std::string& exception = tail[last - 1];
  // Up from the exception's line, only the traceback's indented frames, then its header:
  // a traceback that was logged and handled is followed by other lines.
  for (size_t i = last - 1; i-- > 0;) {
    if (absl::StartsWith(tail[i], "Traceback (most recent call last):")) {
      return i + 1 < last - 1 && !absl::StartsWith(exception, "KeyboardInterrupt") &&
             !absl::StartsWith(exception, "SystemExit");
    }
    if (!tail[i].empty() && tail[i].front() != ' ') return false;
  }
  return false;
}

size_t RootCauseIndex(const std::vector<WorkerFailure>& failures) {
  std::vector<bool> peer_lost;
  for (const WorkerFailure& f : failures) peer_lost.push_back(FailedForALostPeer(f));
  size_t root = 0;
  for (size_t i = 1; i < failures.size(); ++i) {
    const bool before =
        peer_lost[i] != peer_lost[root] ? !peer_lost[i] : failures[i].time < failures[root].time;
    if (before) root = i;
  }
  return root;
}

std::string FormatFailureSummary(const std::vector<WorkerFailure>& failures,
                                 const SummaryContext& context) {
  const std::string heavy(kWidth, '=');
  const std::string light(kWidth, '-');
  const size_t root = RootCauseIndex(failures);
  std::string out;
  absl::StrAppend(&out, heavy, "\n", context.entrypoint, " FAILED\n", light, "\nFailures:\n");
  size_t listed = 0;
  for (size_t i = 0; i < failures.size(); ++i) {
    if (i == root) continue;
    AppendFailure(out, ++listed, failures[i], context.zone);
  }
  if (listed == 0) absl::StrAppend(&out, "  <NO_OTHER_FAILURES>\n");
  const bool earliest = std::none_of(failures.begin(), failures.end(), [&](const WorkerFailure& f) {
    return f.time < failures[root].time;
  });
  absl::StrAppend(&out, light, "\nRoot Cause (",
                  earliest ? "first observed failure" : "first rank that failed on its own",
                  "):\n");
  AppendFailure(out, 0, failures[root], context.zone);
  AppendInterpreter(out, context, failures[root]);
  if (MeetingMatters(failures[root])) AppendMeetingPoint(out, context.meeting);
  if (!context.hang_report_path.empty()) {
    absl::StrAppend(&out, light, "\nWhere every rank was: ", context.hang_report_path, "\n");
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

std::vector<ReportedFailure> ReportedFailures(const std::vector<WorkerFailure>& failures) {
  constexpr size_t kMaxReported = 16 * 1024;
  std::vector<ReportedFailure> out;
  for (const WorkerFailure& f : failures) {
    ReportedFailure r;
    r.host = f.host;
    r.rank = f.rank;
    r.local_rank = f.local_rank;
    r.exit_code = f.ends_with != 0 ? -f.ends_with : TorchExitCode(f.wait_status);
    r.pid = f.pid;
    r.time = f.time;
    r.message =
        f.error_message.empty() && !f.stderr_tail.empty() ? f.stderr_tail.back() : f.error_message;
    r.hung = f.hung;
    r.timer = f.timer;
    r.peer_lost = FailedForALostPeer(f);
    if (r.message.size() > kMaxReported) {
      r.message = absl::StrCat(r.message.substr(0, kMaxReported), " ... (cut at 16 KiB)");
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::string FormatExclusions(const std::vector<std::string>& excluded) {
  if (excluded.empty()) return "";
  std::string text =
      absl::StrCat("ddprun: the job kept ", excluded.size(),
                   excluded.size() == 1 ? " node" : " nodes", " out (docs/node-health.md):\n");
  for (const std::string& line : excluded) {
    absl::StrAppend(&text, "  ", absl::StrReplaceAll(line, {{"\n", "\n    "}}), "\n");
  }
  return text;
}

MeetingPoint MeetingOf(const std::optional<Assignment>& round) {
  if (!round || round->group_world_size <= 1) return {};
  return MeetingPoint{round->master_addr, round->master_port};
}

}  // namespace ddprun
