#include "rendezvous/stack_report.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace ddprun {
namespace {

constexpr char kPythonDumpStart[] = "Fatal Python error: Aborted";
constexpr absl::string_view kPythonSectionEnd = "(most recent call first):";

// `  File "/x/train.py", line 12 in step` as `step (/x/train.py:12)`.
std::string PythonFrame(absl::string_view line) {
  line = absl::StripAsciiWhitespace(line);
  if (!absl::ConsumePrefix(&line, "File \"")) return std::string(line);
  const size_t quote = line.find('"');
  if (quote == absl::string_view::npos) return std::string(line);
  const absl::string_view file = line.substr(0, quote);
  absl::string_view rest = line.substr(quote + 1);
  absl::ConsumePrefix(&rest, ", line ");
  const size_t in = rest.find(" in ");
  if (in == absl::string_view::npos) return absl::StrCat(file, ":", rest);
  return absl::StrCat(rest.substr(in + 4), " (", file, ":", rest.substr(0, in), ")");
}

// Python's own library: a frame there (threading.py's wait) says less than its caller.
bool InPythonLibrary(const std::string& frame) {
  return absl::StrContains(frame, "/lib/python3") && !absl::StrContains(frame, "-packages/");
}

std::string FirstTelling(const std::vector<std::string>& frames,
                         bool (*uninteresting)(const std::string&)) {
  for (const std::string& frame : frames) {
    if (!uninteresting(frame)) return frame;
  }
  return frames.empty() ? std::string() : frames.front();
}

// The C library's and the kernel interface's own frames (futex waits, syscall stubs).
bool InSystemLibrary(const std::string& frame) {
  return absl::StartsWith(frame, "__") || absl::StrContains(frame, "syscall") ||
         absl::StartsWith(frame, "pthread_") || absl::StartsWith(frame, "futex");
}

}  // namespace

RankStack ParsePythonDump(const std::string& text) {
  RankStack stack;
  const size_t start = text.rfind(kPythonDumpStart);
  if (start == std::string::npos) {
    stack.source = "none";
    stack.text = "no Python traceback on stderr (was PYTHONFAULTHANDLER unset by the job?)";
    return stack;
  }
  stack.source = "python";
  std::vector<std::string> kept;
  std::vector<std::vector<std::string>> sections;
  int current = -1;  // the section of the thread that took the signal: the main thread
  for (absl::string_view line : absl::StrSplit(absl::string_view(text).substr(start), '\n')) {
    if (absl::StartsWith(line, "Extension modules:")) break;  // long, and the same everywhere
    kept.emplace_back(line);
    if (absl::EndsWith(line, kPythonSectionEnd)) {
      sections.emplace_back();
      if (absl::StartsWith(line, "Current thread")) current = static_cast<int>(sections.size()) - 1;
    } else if (!sections.empty() && absl::StartsWith(line, "  File ")) {
      sections.back().push_back(PythonFrame(line));
    }
  }
  while (!kept.empty() && kept.back().empty()) kept.pop_back();
  stack.text = absl::StrJoin(kept, "\n");
  // The thread that took the signal (the agent sends it to the main thread), unless it had
  // no Python frame; then the last thread listed, which is the oldest: the main thread.
  if (current >= 0 && !sections[current].empty()) {
    stack.frames = sections[current];
  } else {
    for (auto it = sections.rbegin(); it != sections.rend() && stack.frames.empty(); ++it) {
      stack.frames = *it;
    }
  }
  stack.where = FirstTelling(stack.frames, InPythonLibrary);
  if (stack.where.empty()) stack.where = "no Python frame";
  return stack;
}

RankStack ParseNativeStack(const std::string& text, int pid) {
  RankStack stack;
  stack.source = "native";
  stack.text = text;
  while (!stack.text.empty() && stack.text.back() == '\n') stack.text.pop_back();
  const std::string main_thread = absl::StrCat("TID ", pid, ":");
  bool in_main = false;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::StartsWith(line, "TID ")) {
      in_main = line == main_thread;
      continue;
    }
    if (!in_main || !absl::StartsWith(line, "#")) continue;
    // "#3  0x00007f0c2a8b4e5b foo(int) - /usr/lib/libx.so": keep the function and module.
    std::vector<absl::string_view> words =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    if (words.size() < 3) {
      stack.frames.push_back("??");
      continue;
    }
    std::string frame;
    for (size_t i = 2; i < words.size(); ++i) absl::StrAppend(&frame, i > 2 ? " " : "", words[i]);
    stack.frames.push_back(frame);
  }
  stack.where = FirstTelling(stack.frames, InSystemLibrary);
  if (stack.where.empty()) stack.where = "no frame read";
  return stack;
}

RankStack KernelWait(const std::string& wchan, const std::string& kernel_stack) {
  RankStack stack;
  stack.source = "kernel";
  const std::string w = wchan.empty() || wchan == "0" ? "an unknown kernel function" : wchan;
  stack.where = absl::StrCat("uninterruptible sleep in ", w, " (kernel)");
  for (absl::string_view line : absl::StrSplit(kernel_stack, '\n', absl::SkipEmpty())) {
    // "[<0>] do_vfork+0x1a/0x40": the function.
    absl::string_view f = line;
    if (const size_t close = f.find("] "); close != absl::string_view::npos) {
      f = f.substr(close + 2);
    }
    stack.frames.emplace_back(f.substr(0, f.find('+')));
  }
  if (stack.frames.empty()) stack.frames.push_back(w);
  stack.text = kernel_stack.empty() ? absl::StrCat("kernel wait channel: ", w,
                                                   " (/proc/PID/stack is readable by root only)")
                                    : absl::StrCat("kernel stack:\n", kernel_stack);
  while (!stack.text.empty() && stack.text.back() == '\n') stack.text.pop_back();
  return stack;
}

void MergeStacks(HangReport& report, std::vector<RankStack> more) {
  for (RankStack& s : more) {
    auto same = std::find_if(report.stacks.begin(), report.stacks.end(),
                             [&](const RankStack& held) { return held.rank == s.rank; });
    if (same != report.stacks.end()) {
      *same = std::move(s);
    } else {
      report.stacks.push_back(std::move(s));
    }
  }
  std::sort(report.stacks.begin(), report.stacks.end(),
            [](const RankStack& a, const RankStack& b) { return a.rank < b.rank; });
}

bool Complete(const HangReport& report) {
  std::set<int> ranks;
  for (const RankStack& s : report.stacks) {
    if (s.rank >= 0 && s.rank < report.world_size) ranks.insert(s.rank);
  }
  return static_cast<int>(ranks.size()) == report.world_size;
}

std::vector<StackGroup> GroupStacks(const HangReport& report) {
  std::map<std::pair<std::string, std::vector<std::string>>, size_t> index;
  std::vector<StackGroup> groups;
  std::map<size_t, std::set<std::string>> hosts_seen;  // by group
  for (const RankStack& s : report.stacks) {           // in rank order (MergeStacks sorts)
    // Stacks without frames (nothing read) are alike only in saying the same thing.
    auto key =
        std::make_pair(s.source, s.frames.empty() ? std::vector<std::string>{s.text} : s.frames);
    auto [it, added] = index.emplace(std::move(key), groups.size());
    if (added) groups.push_back(StackGroup{{}, {}, &s});
    StackGroup& g = groups[it->second];
    g.ranks.push_back(s.rank);
    // A node's ranks are consecutive: a host new to the group is seldom the last one seen.
    if (g.hosts.empty() || g.hosts.back() != s.host) {
      if (hosts_seen[it->second].insert(s.host).second) g.hosts.push_back(s.host);
    }
  }
  std::stable_sort(groups.begin(), groups.end(), [](const StackGroup& a, const StackGroup& b) {
    return a.ranks.size() > b.ranks.size();
  });
  return groups;
}

std::string RankRanges(const std::vector<int>& ranks) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    parts.push_back(j == i ? absl::StrCat(ranks[i]) : absl::StrCat(ranks[i], "-", ranks[j]));
    i = j + 1;
  }
  return absl::StrJoin(parts, ",");
}

namespace {

std::string RanksWord(const std::vector<int>& ranks) {
  return absl::StrCat(ranks.size() == 1 ? "rank " : "ranks ", RankRanges(ranks));
}

std::vector<int> MissingRanks(const HangReport& report) {
  std::set<int> have;
  for (const RankStack& s : report.stacks) have.insert(s.rank);
  std::vector<int> missing;
  for (int r = 0; r < report.world_size; ++r) {
    if (have.count(r) == 0) missing.push_back(r);
  }
  return missing;
}

}  // namespace

std::string FormatHangSummary(const HangReport& report) {
  std::string out = absl::StrCat(report.title, " (round ", report.round, "): ", report.cause, "\n");
  const std::vector<StackGroup> groups = GroupStacks(report);
  // The majority is a group strictly larger than every other; with no such group (a tie,
  // or a single rank) nobody is taken as healthy.
  const bool majority = groups.size() > 1 && groups[0].ranks.size() > groups[1].ranks.size();
  std::vector<std::string> suspects;
  std::set<std::string> suspected;
  int ranks_not_listed = 0;
  for (size_t i = 0; i < groups.size(); ++i) {
    const StackGroup& g = groups[i];
    if (majority && i > 0) {
      for (const std::string& h : g.hosts) {
        if (suspected.insert(h).second) suspects.push_back(h);
      }
    }
    if (i >= kMaxSummaryGroups) {
      ranks_not_listed += static_cast<int>(g.ranks.size());
      continue;
    }
    const char* role = groups.size() == 1   ? "  (every rank)"
                       : majority && i == 0 ? "  (the majority: taken as healthy)"
                       : majority           ? "  (outlier)"
                                            : "";
    absl::StrAppend(&out, "  ", RanksWord(g.ranks), " on ", absl::StrJoin(g.hosts, ","), ": in ",
                    g.sample->where, role, "\n");
  }
  if (groups.size() > kMaxSummaryGroups) {
    absl::StrAppend(&out, "  ", groups.size() - kMaxSummaryGroups, " more groups (",
                    ranks_not_listed, " ranks): see the report\n");
  }
  if (const std::vector<int> missing = MissingRanks(report); !missing.empty()) {
    absl::StrAppend(&out, "  ", RanksWord(missing), ": no stack received\n");
  }
  if (!suspects.empty()) {
    absl::StrAppend(&out, "  suspect node", suspects.size() > 1 ? "s" : "", ": ",
                    absl::StrJoin(suspects, ", "), "\n");
  }
  if (out.size() > kMaxHangSummaryText) {
    out.resize(kMaxHangSummaryText);
    out += " ... (a summary is held to 256 KiB: see the report)\n";
  }
  return out;
}

std::string FormatHangReport(const HangReport& report) {
  std::string out = FormatHangSummary(report);
  std::map<int, const RankStack*> by_rank;
  for (const RankStack& s : report.stacks) by_rank.emplace(s.rank, &s);
  size_t groups_left_out = 0;
  int ranks_left_out = 0;
  for (const StackGroup& g : GroupStacks(report)) {
    std::string block = absl::StrCat("\n=== ", RanksWord(g.ranks), " (", g.sample->source, ")\n");
    for (int rank : g.ranks) {
      const RankStack& s = *by_rank.at(rank);
      absl::StrAppend(&block, "rank ", s.rank, ": host ", s.host, ", local_rank ", s.local_rank,
                      ", pid ", s.pid, s.hung ? "  <- declared hung" : "", "\n");
    }
    absl::StrAppend(&block, "--- stack of rank ", g.sample->rank,
                    g.ranks.size() > 1 ? " (the others' main threads are the same)" : "", "\n",
                    g.sample->text, "\n");
    if (out.size() + block.size() > kMaxHangReportText) {
      ++groups_left_out;
      ranks_left_out += static_cast<int>(g.ranks.size());
      continue;
    }
    out += block;
  }
  if (groups_left_out > 0) {
    absl::StrAppend(&out, "\n=== ", groups_left_out, " more group(s) of ", ranks_left_out,
                    " rank(s) in all are not shown: a report is held to ",
                    kMaxHangReportText / (1024 * 1024), " MiB\n");
  }
  return out;
}

}  // namespace ddprun
