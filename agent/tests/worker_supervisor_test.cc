// WorkerSupervisor with real processes (/bin/sh workers), without an agent around it: the
// test reaps the children and hands each exit to the supervisor, as the agent's SIGCHLD
// handler does.
#include "agent/worker_supervisor.h"

#include <signal.h>
#include <sys/wait.h>

#include <fstream>
#include <functional>
#include <memory>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/temp_dir.h"

namespace ddprun {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class WorkerSupervisorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<EventLoop>> loop = EventLoop::Create();
    ASSERT_TRUE(loop.ok()) << loop.status();
    loop_ = std::move(*loop);
    absl::StatusOr<OrphanGuard> guard = OrphanGuard::Start();
    ASSERT_TRUE(guard.ok()) << guard.status();
    guard_ = std::make_unique<OrphanGuard>(std::move(*guard));
    config_.nproc_per_node = 2;
    config_.run_id = "job";
  }

  // Starts `script` (sh -c) as every local rank's worker; ${local_rank} is substituted.
  std::unique_ptr<WorkerSupervisor> Start(const std::string& script) {
    config_.worker_argv = {"/bin/sh", "-c", script};
    WorkerSupervisor::Hooks hooks;
    hooks.hang_found = [this](const FoundHang& hang) { hangs_.push_back(hang); };
    hooks.stacks_taken = [this] { ++stacks_taken_; };
    auto workers = std::make_unique<WorkerSupervisor>(config_, env_, *loop_, *guard_, "node0",
                                                      std::move(hooks));
    AttemptPlan plan;
    plan.assignment.base_rank = 4;
    plan.assignment.world_size = 8;
    plan.log_root = logs_.path();
    EXPECT_TRUE(workers->Start(plan).ok());
    return workers;
  }

  // Reaps children until every worker has exited, as the agent does on SIGCHLD.
  void ReapAll(WorkerSupervisor& workers) {
    while (!workers.AllExited()) {
      int status = 0;
      const pid_t pid = ::waitpid(-1, &status, 0);
      ASSERT_GT(pid, 0) << "no child left, yet not every worker exited";
      workers.OnProcessExited(pid, status);
    }
    workers.Close();
  }

  // Runs the event loop, reaping children as the agent does, until `done` or a deadline far
  // beyond what any step here takes.
  void RunUntil(WorkerSupervisor& workers, const std::function<bool()>& done) {
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (!done() && absl::Now() < deadline) {
      ASSERT_TRUE(loop_->RunOnce(absl::Milliseconds(20)).ok());
      int status = 0;
      for (pid_t pid; (pid = ::waitpid(-1, &status, WNOHANG)) > 0;) {
        workers.OnProcessExited(pid, status);
      }
    }
    ASSERT_TRUE(done()) << "not within 30s";
  }

  // The state letter /proc gives `pid` (R, S, T for stopped, ...).
  static char ProcState(pid_t pid) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    const size_t paren = text.rfind(')');
    return paren == std::string::npos || paren + 2 >= text.size() ? '?' : text[paren + 2];
  }

  // `pid` runs sleep(1) and waits in it.
  static bool Asleep(pid_t pid) {
    std::ifstream comm("/proc/" + std::to_string(pid) + "/comm");
    std::string name;
    std::getline(comm, name);
    return name == "sleep" && ProcState(pid) == 'S';
  }

  AgentConfig config_;
  std::vector<FoundHang> hangs_;
  int stacks_taken_ = 0;
  EnvMap env_ = {{"PATH", "/usr/bin:/bin"}};
  testing::TempDir logs_;
  std::unique_ptr<EventLoop> loop_;
  std::unique_ptr<OrphanGuard> guard_;
};

TEST_F(WorkerSupervisorTest, WorkersThatExitZeroSucceed) {
  std::unique_ptr<WorkerSupervisor> workers = Start("exit 0");
  EXPECT_EQ(workers->size(), 2u);
  ReapAll(*workers);
  EXPECT_TRUE(workers->AllSucceeded());
  EXPECT_FALSE(workers->HasFailures());
}

TEST_F(WorkerSupervisorTest, AFailureIsRecordedWithItsRankStatusAndStderr) {
  std::unique_ptr<WorkerSupervisor> workers =
      Start("if [ ${local_rank} = 1 ]; then echo 'it broke' >&2; exit 3; fi; exit 0");
  ReapAll(*workers);
  EXPECT_FALSE(workers->AllSucceeded());
  ASSERT_TRUE(workers->HasFailures());
  std::vector<WorkerFailure> failures = workers->CollectFailures();
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_EQ(failures[0].rank, 5) << "base rank 4 + local rank 1";
  EXPECT_EQ(failures[0].local_rank, 1);
  EXPECT_EQ(failures[0].host, "node0");
  EXPECT_TRUE(WIFEXITED(failures[0].wait_status));
  EXPECT_EQ(WEXITSTATUS(failures[0].wait_status), 3);
  EXPECT_THAT(failures[0].stderr_tail, ElementsAre("it broke"));
}

TEST_F(WorkerSupervisorTest, WorkersEndedByAStopAreStoppedNotFailed) {
  std::unique_ptr<WorkerSupervisor> workers = Start("exec sleep 60");
  workers->Stop(SIGTERM);
  EXPECT_TRUE(workers->stopping());
  ReapAll(*workers);
  EXPECT_FALSE(workers->HasFailures()) << "the agent stopped them: not their failure";
  EXPECT_FALSE(workers->AllSucceeded());
}

TEST_F(WorkerSupervisorTest, KillRemainingEndsWorkersThatIgnoreTheStopSignal) {
  std::unique_ptr<WorkerSupervisor> workers = Start("trap '' TERM; sleep 60 & wait");
  workers->Stop(SIGTERM);
  workers->KillRemaining("after the grace period");
  ReapAll(*workers);
  EXPECT_FALSE(workers->HasFailures());
}

TEST_F(WorkerSupervisorTest, AWorkerThatCannotStartFailsWithTheReason) {
  config_.worker_argv = {"/nonexistent/program"};
  auto workers = std::make_unique<WorkerSupervisor>(config_, env_, *loop_, *guard_, "node0");
  AttemptPlan plan;
  plan.log_root = logs_.path();
  ASSERT_TRUE(workers->Start(plan).ok());
  EXPECT_TRUE(workers->AllExited()) << "nothing runs";
  ASSERT_TRUE(workers->HasFailures());
  std::vector<WorkerFailure> failures = workers->CollectFailures();
  ASSERT_EQ(failures.size(), 2u);
  EXPECT_EQ(WEXITSTATUS(failures[0].wait_status), 127);
  EXPECT_THAT(failures[0].stderr_tail.front(), HasSubstr("/nonexistent/program"));
  workers->Close();
}

// Freeze stops every worker where it is; the stacks are taken (eu-stack, the workers being
// native) and the workers continued; the stop that follows ends them as stopped, not failed.
TEST_F(WorkerSupervisorTest, FrozenWorkersGiveTheirStacksAndAreContinued) {
  std::unique_ptr<WorkerSupervisor> workers = Start("exec sleep 60");
  const std::vector<pid_t> pids = workers->pids();
  RunUntil(*workers, [&] { return Asleep(pids[0]) && Asleep(pids[1]); });  // past the exec
  workers->Freeze();
  RunUntil(*workers, [&] { return ProcState(pids[0]) == 'T' && ProcState(pids[1]) == 'T'; });
  workers->CollectStacks(absl::Milliseconds(10));
  RunUntil(*workers, [&] { return stacks_taken_ == 1; });
  EXPECT_NE(ProcState(pids[0]), 'T') << "continued once the stacks are in";
  workers->Stop(SIGTERM);
  ReapAll(*workers);
  EXPECT_FALSE(workers->HasFailures());
  std::vector<RankStack> stacks = workers->TakeStacks();
  ASSERT_EQ(stacks.size(), 2u);
  EXPECT_EQ(stacks[0].rank, 4);
  EXPECT_EQ(stacks[0].source, "native") << stacks[0].text;
  EXPECT_FALSE(stacks[0].hung);
}

// A worker that never beats is taken for hung: the agent hears it (Hooks::hang_found), and
// its failure counts at once, with the signal that will end it rather than an exit status.
// KillHung ends it and only it; the others end by the stop, as stopped.
TEST_F(WorkerSupervisorTest, AHungWorkerIsReportedFrozenAndKilledAlone) {
  config_.worker_heartbeat_timeout = absl::Milliseconds(200);
  config_.worker_heartbeat_startup_timeout = absl::Milliseconds(300);
  std::unique_ptr<WorkerSupervisor> workers = Start(
      "if [ ${local_rank} = 0 ]; then while :; do echo >/proc/self/fd/$DDPRUN_HEARTBEAT_FD; "
      "sleep 0.05; done; fi; exec sleep 60");
  RunUntil(*workers, [&] { return !hangs_.empty(); });
  ASSERT_EQ(hangs_.size(), 1u);
  EXPECT_EQ(hangs_[0].local_rank, 1);
  EXPECT_FALSE(hangs_[0].node_unhealthy);
  EXPECT_THAT(hangs_[0].cause, HasSubstr("rank 5 sent no first heartbeat"));
  ASSERT_TRUE(workers->HasFailures()) << "a failure from the moment it is taken for hung";
  std::vector<WorkerFailure> reported = workers->CollectFailures();
  ASSERT_EQ(reported.size(), 1u);
  EXPECT_TRUE(reported[0].hung);
  EXPECT_EQ(reported[0].ends_with, SIGKILL);
  EXPECT_EQ(reported[0].wait_status, 0) << "it has not ended: no status is made up";

  workers->Freeze();
  workers->CollectStacks(absl::ZeroDuration());
  RunUntil(*workers, [&] { return stacks_taken_ == 1; });
  workers->KillHung();
  workers->Stop(SIGTERM);
  ReapAll(*workers);
  std::vector<WorkerFailure> failures = workers->CollectFailures();
  ASSERT_EQ(failures.size(), 1u) << "the stop's SIGTERM ended rank 4: not a failure";
  EXPECT_EQ(failures[0].rank, 5);
  EXPECT_EQ(failures[0].ends_with, 0);
  EXPECT_TRUE(WIFSIGNALED(failures[0].wait_status));
  EXPECT_EQ(WTERMSIG(failures[0].wait_status), SIGKILL);
  EXPECT_THAT(failures[0].error_message, HasSubstr("taken for hung"));
  EXPECT_EQ(workers->hang_cause(), hangs_[0].cause);
  std::vector<RankStack> stacks = workers->TakeStacks();
  ASSERT_EQ(stacks.size(), 2u);
  EXPECT_FALSE(stacks[0].hung);
  EXPECT_TRUE(stacks[1].hung);
}

// With nothing left to freeze, a stack collection has nothing to wait for.
TEST_F(WorkerSupervisorTest, CollectingWhenEveryWorkerHasExitedAnswersAtOnce) {
  std::unique_ptr<WorkerSupervisor> workers = Start("exit 0");
  while (!workers->AllExited()) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, 0);
    ASSERT_GT(pid, 0);
    workers->OnProcessExited(pid, status);
  }
  workers->CollectStacks(absl::ZeroDuration());
  EXPECT_EQ(stacks_taken_, 1);
  workers->Close();
}

}  // namespace
}  // namespace ddprun
