// WorkerSupervisor with real processes (/bin/sh workers), without an agent around it: the
// test reaps the children and hands each exit to the supervisor, as the agent's SIGCHLD
// handler does.
#include "agent/worker_supervisor.h"

#include <signal.h>
#include <sys/wait.h>

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
    auto workers = std::make_unique<WorkerSupervisor>(config_, env_, *loop_, *guard_, "node0");
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

  AgentConfig config_;
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

}  // namespace
}  // namespace ddprun
