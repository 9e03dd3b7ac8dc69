#include "rendezvous/stack_report.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "rendezvous/hang_reports.h"

namespace ddprun {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

// What Python 3.11's faulthandler printed for a worker of tests/compat/hang_job.py.
constexpr char kPythonDump[] = R"(step 41 done
Fatal Python error: Aborted

Thread 0x00007f37201ff6c0 (most recent call first):
  File "/usr/lib/python3.11/threading.py", line 324 in wait
  File "/usr/lib/python3/dist-packages/torch/utils/data/_utils/pin_memory.py", line 51 in _pin_memory_loop

Current thread 0x00007f37249982c0 (most recent call first):
  File "/usr/lib/python3.11/threading.py", line 320 in wait
  File "/usr/lib/python3.11/threading.py", line 622 in wait
  File "/job/train.py", line 12 in hang_in_named_function
  File "/job/train.py", line 34 in <module>

Extension modules: torch._C, numpy.core._multiarray_umath (total: 2)
)";

TEST(StackReportTest, APythonDumpGivesTheMainThreadAndItsFirstFrameOutsidePython) {
  RankStack s = ParsePythonDump(kPythonDump);
  EXPECT_EQ(s.source, "python");
  EXPECT_THAT(s.frames, ElementsAre("wait (/usr/lib/python3.11/threading.py:320)",
                                    "wait (/usr/lib/python3.11/threading.py:622)",
                                    "hang_in_named_function (/job/train.py:12)",
                                    "<module> (/job/train.py:34)"));
  EXPECT_EQ(s.where, "hang_in_named_function (/job/train.py:12)");
  EXPECT_THAT(s.text, HasSubstr("Thread 0x00007f37201ff6c0")) << "every thread is kept";
  EXPECT_THAT(s.text, Not(HasSubstr("step 41 done"))) << "output before the dump is not";
  EXPECT_THAT(s.text, Not(HasSubstr("Extension modules")));
}

TEST(StackReportTest, ASignalTakenOnAThreadWithoutPythonFramesFallsBackToTheMainThread) {
  RankStack s = ParsePythonDump(R"(Fatal Python error: Aborted

Current thread 0x00007fe06d0662c0 (most recent call first):
  <no Python frame>

Thread 0x00007fe06d0aa740 (most recent call first):
  File "/job/train.py", line 51 in <module>
)");
  EXPECT_EQ(s.where, "<module> (/job/train.py:51)");
}

TEST(StackReportTest, NoDumpOnStderrSaysSo) {
  RankStack s = ParsePythonDump("Traceback (most recent call last):\nValueError: x\n");
  EXPECT_EQ(s.source, "none");
  EXPECT_THAT(s.text, HasSubstr("no Python traceback on stderr"));
  EXPECT_TRUE(s.frames.empty());
}

TEST(StackReportTest, ANativeStackIsItsMainThreadsFunctions) {
  RankStack s = ParseNativeStack(R"(PID 40 - process
TID 41:
#0  0x00007f0c2a8b4e5b __futex_abstimed_wait_common
TID 40:
#0  0x00007f0c2a8b4e5b __futex_abstimed_wait_common - /usr/lib/x86_64-linux-gnu/libc.so.6
#1  0x00007f0c2a8b1111 ncclAllReduce - /usr/lib/libnccl.so.2
#2  0x0000555555555111 main - /job/train
)",
                                 40);
  EXPECT_EQ(s.source, "native");
  EXPECT_THAT(s.frames,
              ElementsAre("__futex_abstimed_wait_common - /usr/lib/x86_64-linux-gnu/libc.so.6",
                          "ncclAllReduce - /usr/lib/libnccl.so.2", "main - /job/train"));
  EXPECT_EQ(s.where, "ncclAllReduce - /usr/lib/libnccl.so.2");
}

TEST(StackReportTest, AKernelWaitNamesItsFunction) {
  RankStack s = KernelWait("do_vfork", "[<0>] do_vfork+0x1a/0x40\n[<0>] __x64_sys_vfork+0x5/0x9\n");
  EXPECT_EQ(s.source, "kernel");
  EXPECT_EQ(s.where, "uninterruptible sleep in do_vfork (kernel)");
  EXPECT_THAT(s.frames, ElementsAre("do_vfork", "__x64_sys_vfork"));
  EXPECT_THAT(KernelWait("nfs_wait", "").text, HasSubstr("readable by root only"));
}

RankStack At(int rank, const std::string& host, const std::string& where) {
  RankStack s;
  s.rank = rank;
  s.host = host;
  s.source = "python";
  s.where = where;
  s.frames = {where, "<module>"};
  s.text = "dump of " + where;
  return s;
}

TEST(StackReportTest, TheMajorityIsHealthyTheOthersAreOutliersOnSuspectNodes) {
  HangReport r;
  r.round = 3;
  r.world_size = 4;
  r.cause = "rank 3 sent no heartbeat";
  MergeStacks(r, {At(3, "n2", "hang_here"), At(0, "n1", "allreduce")});
  EXPECT_FALSE(Complete(r));
  MergeStacks(r, {At(1, "n1", "allreduce"), At(2, "n2", "allreduce")});
  ASSERT_TRUE(Complete(r));
  const std::string summary = FormatHangSummary(r);
  EXPECT_THAT(summary, HasSubstr("hang report (round 3): rank 3 sent no heartbeat\n"));
  EXPECT_THAT(summary,
              HasSubstr("ranks 0-2 on n1,n2: in allreduce  (the majority: taken as healthy)"));
  EXPECT_THAT(summary, HasSubstr("rank 3 on n2: in hang_here  (outlier)"));
  EXPECT_THAT(summary, HasSubstr("suspect node: n2\n"));
  const std::string whole = FormatHangReport(r);
  EXPECT_THAT(whole, HasSubstr("dump of allreduce"));
  EXPECT_THAT(whole, HasSubstr("dump of hang_here"));
}

TEST(StackReportTest, ATieNamesNoMajorityAndMissingRanksAreSaid) {
  HangReport r;
  r.world_size = 5;
  MergeStacks(r, {At(0, "n1", "a"), At(1, "n1", "b")});
  MergeStacks(r, {At(1, "n1", "a")});  // a later stack for a rank replaces the first
  MergeStacks(r, {At(2, "n2", "b"), At(3, "n2", "b")});
  const std::string summary = FormatHangSummary(r);
  EXPECT_THAT(summary, HasSubstr("ranks 0-1 on n1: in a\n"));
  EXPECT_THAT(summary, HasSubstr("ranks 2-3 on n2: in b\n"));
  EXPECT_THAT(summary, HasSubstr("rank 4: no stack received"));
  EXPECT_THAT(summary, Not(HasSubstr("suspect"))) << "two equal groups: nobody is the majority";
}

// A real hang of 60,000 ranks, each somewhere else with a full dump, was a report of about
// 2 GiB: past every agent's 4 MiB receive limit, it broke every session. The report the
// master sends is held to its bound, whatever the ranks, and says what it left out.
TEST(StackReportTest, AReportOfSixtyThousandDistinctStacksIsHeldToItsBound) {
  HangReport r;
  r.world_size = 60000;
  r.cause = "rank 7 sent no heartbeat";
  std::vector<RankStack> stacks;
  for (int rank = 0; rank < r.world_size; ++rank) {
    RankStack s = At(rank, absl::StrCat("node", rank / 8), absl::StrCat("f", rank));
    s.text = std::string(kMaxStackText, 'x');
    stacks.push_back(std::move(s));
  }
  MergeStacks(r, std::move(stacks));
  const std::string summary = FormatHangSummary(r);
  const std::string whole = FormatHangReport(r);
  EXPECT_LE(summary.size(), kMaxHangSummaryText + 100);
  EXPECT_LE(whole.size(), kMaxHangReportText + 200);
  EXPECT_THAT(summary, HasSubstr("59968 more groups (59968 ranks): see the report\n"));
  EXPECT_THAT(whole, HasSubstr("rank 0: host node0, local_rank 0"));
  EXPECT_THAT(whole, ::testing::ContainsRegex(
                         "=== [0-9]+ more group\\(s\\) of [0-9]+ rank\\(s\\) in all are not "
                         "shown: a report is held to 2 MiB\n$"));
}

TEST(StackReportTest, RankRangesAreCompact) {
  EXPECT_EQ(RankRanges({0, 1, 2, 5, 7, 8}), "0-2,5,7-8");
  EXPECT_EQ(RankRanges({4}), "4");
}

TEST(HangReportsTest, AReportIsSentOnceWhenCompleteOrWhenItsTimeIsUp) {
  HangReports reports;
  const absl::Time t0 = absl::FromUnixSeconds(100);
  EXPECT_FALSE(reports.Add(0, 2, "rank 1 hung", {At(1, "n2", "x")}, t0));
  EXPECT_EQ(reports.NextDeadline(), t0 + HangTimings().gather);
  std::optional<HangReport> done = reports.Add(0, 2, "", {At(0, "n1", "y")}, t0);
  ASSERT_TRUE(done);
  EXPECT_EQ(done->cause, "rank 1 hung") << "the declaring node's cause, not a later empty one";
  EXPECT_EQ(done->stacks.size(), 2u);
  EXPECT_FALSE(reports.Add(0, 2, "", {At(0, "n1", "y")}, t0)) << "sent already";
  EXPECT_TRUE(reports.TakeDue(t0 + absl::Hours(1)).empty());

  EXPECT_FALSE(reports.Add(1, 4, "rank 3 hung", {At(3, "n2", "x")}, t0));
  EXPECT_TRUE(reports.TakeDue(t0 + HangTimings().gather - absl::Milliseconds(1)).empty());
  std::vector<HangReport> due = reports.TakeDue(t0 + HangTimings().gather);
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0].round, 1);
  EXPECT_FALSE(Complete(due[0]));
  EXPECT_TRUE(reports.TakeDue(t0 + absl::Hours(1)).empty()) << "given once";
  EXPECT_EQ(reports.NextDeadline(), absl::InfiniteFuture());
}

TEST(HangReportsTest, OnlyTheLastFewRoundsAreKept) {
  HangReports reports;
  const absl::Time t0 = absl::FromUnixSeconds(100);
  for (int round = 0; round < 10; ++round) reports.Add(round, 2, "", {At(0, "n", "x")}, t0);
  EXPECT_EQ(reports.TakeDue(t0 + absl::Hours(1)).size(), HangReports::kRoundsKept);
}

}  // namespace
}  // namespace ddprun
