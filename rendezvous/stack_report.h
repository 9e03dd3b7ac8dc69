#pragma once
// Where every rank was when a hang was declared: one stack per rank (a Python traceback, a
// native stack, or the kernel's wait), grouped by identical main-thread stack into a report.
// Pure: the agents gather the stacks, the master (or a one-node agent) merges them here.
//
// The rule, after ByteDance's ByteRobust: ranks stuck in the same place are most likely
// waiting for someone; the largest group is taken as healthy, the ranks outside it are the
// outliers, and their nodes are the suspects.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ddprun {

/// The most of one rank's dump that is kept and sent (a Python process with many threads).
inline constexpr size_t kMaxStackText = 32 * 1024;
/// The most of a merged report the master sends every node: well under the 4 MiB a gRPC
/// client receives by default, whatever the number of ranks (60,000 distinct stacks would
/// be about 2 GiB). The groups that do not fit are counted, not shown.
inline constexpr size_t kMaxHangReportText = 2 * 1024 * 1024;
/// The groups a summary names, one line each; the rest are counted. A summary is cut at
/// kMaxHangSummaryText (rank lists of many ranges, many suspect nodes).
inline constexpr size_t kMaxSummaryGroups = 32;
inline constexpr size_t kMaxHangSummaryText = 256 * 1024;

struct RankStack {
  std::string host;
  int rank = 0;
  int local_rank = 0;
  int pid = 0;
  // "python" (faulthandler), "native" (eu-stack), "kernel" (/proc: a task the kernel holds),
  // "none" (nothing could be read; `text` says why).
  std::string source;
  std::string where;                // the main thread's innermost telling frame, one line
  std::vector<std::string> frames;  // the main thread, innermost first: the grouping key
  std::string text;                 // the whole dump, every thread
  bool hung = false;                // this is the rank the hang was declared for
};

/// A Python faulthandler dump (what PYTHONFAULTHANDLER prints on SIGABRT), from the text of
/// a worker's stderr that contains it; `source` is "none" when `text` holds no dump.
RankStack ParsePythonDump(const std::string& text);
/// eu-stack's output for one process (`pid`): its main thread's frames.
RankStack ParseNativeStack(const std::string& text, int pid);
/// A task in uninterruptible sleep: /proc/<pid>/wchan and, when readable, /proc/<pid>/stack.
RankStack KernelWait(const std::string& wchan, const std::string& kernel_stack);

struct HangReport {
  std::string title = "hang report";  // "stacks" for one asked for while the job runs
  int64_t round = 0;
  int world_size = 0;
  std::string cause;  // why the hang was declared, naming the rank
  std::vector<RankStack> stacks;
};

/// Adds `more`, replacing any stack already held for the same rank.
void MergeStacks(HangReport& report, std::vector<RankStack> more);
/// Every rank of the world has a stack.
bool Complete(const HangReport& report);

struct StackGroup {
  std::vector<int> ranks;          // ascending
  std::vector<std::string> hosts;  // of those ranks, each once, in rank order
  const RankStack* sample = nullptr;
};
/// Groups by identical main-thread frames, largest group first (ties: lowest rank first).
std::vector<StackGroup> GroupStacks(const HangReport& report);

/// "0-5,7": ranks as ranges.
std::string RankRanges(const std::vector<int>& ranks);

/// A few lines for the console: the cause, each group with its ranks and where they were,
/// the outliers and the suspect nodes.
std::string FormatHangSummary(const HangReport& report);
/// The whole report: the summary, then each group's ranks, hosts and pids, and one whole dump
/// per group.
std::string FormatHangReport(const HangReport& report);

}  // namespace ddprun
