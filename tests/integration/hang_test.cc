// Workers the kernel holds: in uninterruptible sleep past TORCHELASTIC_UNINTERRUPTIBLE_STATE_
// TIMEOUT, or still there after SIGKILL. The agent says so, leaves the job and exits 69; it
// never waits on them for good (docs/hangs.md).

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <fstream>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/small_file.h"
#include "common/unique_fd.h"
#include "tests/support/child_process.h"
#include "tests/support/ddprun_paths.h"
#include "tests/support/freezer.h"

namespace ddprun::testing {
namespace {

using ::testing::HasSubstr;

TEST(Hangs, AWorkerInUninterruptibleSleepMakesTheNodeUnhealthyWithoutSpendingRestarts) {
  const absl::Time start = absl::Now();
  ProcessResult r = RunProcess(DdprunWithTestWorker(
      {"--nproc-per-node=2", "--max-restarts=3", "--uninterruptible-state-timeout=0.5"},
      {"vfork-wait"}));
  EXPECT_EQ(r.exit_code, 69) << r.err;
  EXPECT_THAT(r.err, HasSubstr("has been in uninterruptible sleep for "));
  EXPECT_THAT(r.err, HasSubstr(": the node is unhealthy (D (disk sleep)"));
  EXPECT_THAT(r.err, HasSubstr("this node leaves the job"));
  EXPECT_THAT(r.err, HasSubstr("in uninterruptible sleep in "));  // the report's kernel wait
  EXPECT_THAT(r.err, ::testing::Not(HasSubstr("restarting")));
  EXPECT_LT(absl::Now() - start, absl::Seconds(20));
}

// A native worker's stack is read by eu-stack (elfutils) while it is stopped, and the report
// names where each rank was: the hung rank in pause(), the other in its sleep.
TEST(Hangs, ANativeHungWorkersStackIsReadWithEuStack) {
  TempDir logs;
  ProcessResult r = RunProcess(DdprunWithTestWorker(
      {"--nproc-per-node=2", "--worker-heartbeat-timeout=0.5", "--log-dir=" + logs.path()},
      {"heartbeat-hang", logs.path()}));
  EXPECT_EQ(r.exit_code, 124) << r.err;  // hung: not the SIGKILL that ended it
  absl::StatusOr<std::string> report =
      ReadSmallFile(logs.path() + "/none/attempt_0/hang_report.txt");
  ASSERT_TRUE(report.ok()) << report.status() << r.err;
  EXPECT_THAT(*report, HasSubstr("=== rank 1 (native)"));
  EXPECT_THAT(*report, HasSubstr("rank 1 on "));
  EXPECT_THAT(*report, HasSubstr(": in pause"));
  EXPECT_THAT(*report, HasSubstr(" main\n")) << "the worker's own frames, by name";
  EXPECT_THAT(*report, HasSubstr("<- declared hung"));
}

// On request (kill -USR2 <agent>): every worker's stack in the attempt's folder, and the job
// goes on: no worker is signalled or stopped for good.
TEST(Hangs, SigUsr2WritesEveryWorkersStackAndTheJobRunsOn) {
  TempDir dir;
  auto agent = ChildProcess::Start(DdprunWithTestWorker(
      {"--nproc-per-node=2", "--log-dir=" + dir.path()}, {"wait-signal", dir.path()}));
  ASSERT_TRUE(WaitUntil([&] { return FileExists(dir / "ready.0") && FileExists(dir / "ready.1"); },
                        absl::Seconds(20)));
  ::kill(agent->pid(), SIGUSR2);
  const std::string attempt = dir.path() + "/none/attempt_0";
  std::string stacks;
  ASSERT_TRUE(WaitUntil(
      [&] {
        for (const std::string& name : ListDir(attempt)) {
          if (name.rfind("stacks-", 0) != 0) continue;
          absl::StatusOr<std::string> text = ReadSmallFile(attempt + "/" + name);
          if (text.ok() && absl::StrContains(*text, "=== ")) stacks = *text;
        }
        return !stacks.empty();
      },
      absl::Seconds(20)))
      << agent->ErrSoFar();
  EXPECT_THAT(stacks, HasSubstr("stacks (round 0): asked for with SIGUSR2"));
  EXPECT_THAT(stacks, HasSubstr("ranks 0-1 on "));
  EXPECT_THAT(stacks, HasSubstr(": in pause"));
  EXPECT_FALSE(FileExists(dir / "signal.0")) << "SIGUSR2 reached a worker";
  ::kill(agent->pid(), SIGTERM);  // they were running all along: they get it and say so
  ProcessResult r = agent->Wait(absl::Seconds(30));
  EXPECT_EQ(r.exit_code, 128 + SIGTERM) << r.err;
  EXPECT_EQ(ReadSmallFile(dir / "signal.0").value_or(""), "SIGTERM");
  EXPECT_EQ(ReadSmallFile(dir / "signal.1").value_or(""), "SIGTERM");
}

TEST(Hangs, WithSigUsr2InSignalsToHandleItIsForwardedInstead) {
  TempDir dir;
  auto agent = ChildProcess::Start(DdprunWithTestWorker(
      {"--nproc-per-node=1", "--signals-to-handle=SIGUSR2", "--log-dir=" + dir.path()},
      {"wait-signal", dir.path()}));
  ASSERT_TRUE(WaitUntil([&] { return FileExists(dir / "ready.0"); }, absl::Seconds(20)));
  ::kill(agent->pid(), SIGUSR2);
  ProcessResult r = agent->Wait(absl::Seconds(30));
  EXPECT_EQ(r.exit_code, 128 + SIGUSR2) << r.err;
  EXPECT_EQ(ReadSmallFile(dir / "signal.0").value_or(""), "SIGUSR2");
}

// A task in a frozen cgroup-v1 freezer group does not die of SIGKILL until it is thawed: a
// real worker SIGKILL cannot end, as one stuck on a dead NFS server or a wedged device is.
TEST(Hangs, AWorkerSigkillDoesNotEndIsReportedAndTheAgentExitsWithinTheBound) {
  if (!FreezerUsable())
    GTEST_SKIP() << "needs root and the cgroup-v1 freezer (" << kFreezerRoot << ")";
  TempDir dir;
  auto agent = ChildProcess::Start(DdprunWithTestWorker(
      {"--nproc-per-node=2", "--shutdown-timeout=0.2", "--kill-timeout=1"}, {"wedge", dir.path()}));
  ASSERT_TRUE(WaitUntil([&] { return FileExists(dir / "ready.1") && FileExists(dir / "pid.0"); },
                        absl::Seconds(20)));
  const std::string group = Freeze(ReadFile(dir / "pid.0"));
  absl::Cleanup thaw = [&] { ThawAndRemove(group); };  // whatever happens, nothing is left
  ASSERT_FALSE(group.empty()) << "cannot freeze the worker";
  const absl::Time failed = absl::Now();
  std::ofstream(dir / "fail") << "";
  ProcessResult r = agent->Wait(absl::Seconds(30));
  const absl::Duration took = absl::Now() - failed;
  ASSERT_TRUE(ThawAndRemove(group));  // let it die now
  EXPECT_EQ(r.exit_code, 69) << r.err;
  EXPECT_THAT(r.err, HasSubstr("rank 0 (local_rank 0, pid "));
  EXPECT_THAT(r.err, HasSubstr("still running 1s after SIGKILL (--kill-timeout): the node is "
                               "unhealthy; this agent exits without them"));
  // The bound: the grace period, the kill timeout, and the agent's own work.
  EXPECT_LT(took, absl::Seconds(6)) << r.err;
}

// 2 MB of garbage written to the FileTimer FIFO once made 140 MB of log: a line a second.
TEST(Hangs, GarbageOnTheTimerFifoIsLoggedAtMostOnceASecond) {
  const absl::Time start = absl::Now();
  ProcessResult r =
      RunProcess({kDdprun, "--standalone", "--nproc-per-node=1", "--no-python", "/bin/sh", "-c",
                  "yes garbage | head -n 200000 > \"$TORCHELASTIC_TIMER_FILE\""},
                 {{"TORCHELASTIC_ENABLE_FILE_TIMER", "1"}}, absl::Seconds(60));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const int lines =
      CountLinesContaining(r.err, "ignored a request that is not a FileTimerClient's");
  // One line for each second the job ran, and the first: not one per garbage line, however
  // slow a loaded machine makes the job.
  const int64_t seconds = absl::ToInt64Seconds(absl::Now() - start);
  EXPECT_GE(lines, 1);
  EXPECT_LE(lines, 2 + seconds) << r.err.substr(0, 2000);
  EXPECT_LT(r.err.size(), static_cast<size_t>(2 + seconds) * 2048);
}

}  // namespace
}  // namespace ddprun::testing
