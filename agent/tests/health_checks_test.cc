// HealthChecks on real processes: what a check is told of the round, and its verdict. The
// "executable" stands in for ddprun's health-check mode: it runs the command it is given.
#include "agent/health/health_checks.h"

#include <sys/stat.h>
#include <sys/wait.h>

#include <fstream>
#include <optional>
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/temp_dir.h"

namespace ddprun {
namespace {

using ::testing::HasSubstr;

class HealthChecksTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<EventLoop>> loop = EventLoop::Create();
    ASSERT_TRUE(loop.ok()) << loop.status();
    loop_ = std::move(*loop);
    absl::StatusOr<OrphanGuard> guard = OrphanGuard::Start();
    ASSERT_TRUE(guard.ok()) << guard.status();
    guard_ = std::make_unique<OrphanGuard>(std::move(*guard));
    std::ofstream(dir_ / "ddprun") << "#!/bin/sh\n# <mode> -- <command>\nexec /bin/sh -c \"$3\"\n";
    ::chmod((dir_ / "ddprun").c_str(), 0755);
  }

  // Runs one check to its verdict, reaping as the agent does.
  std::string RunCheck(HealthChecks& checks, const HealthCheckRound& round) {
    std::optional<std::string> verdict;
    checks.Run({{"PATH", "/usr/bin:/bin"}}, round,
               [&](const std::string& failure) { verdict = failure; });
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (!verdict && absl::Now() < deadline) {
      EXPECT_TRUE(loop_->RunOnce(absl::Milliseconds(20)).ok());
      int status = 0;
      for (pid_t pid; (pid = ::waitpid(-1, &status, WNOHANG)) > 0;) {
        checks.OnProcessExited(pid, status);
      }
    }
    EXPECT_TRUE(verdict.has_value()) << "no verdict within 30s";
    return verdict.value_or("(none)");
  }

  testing::TempDir dir_;
  std::unique_ptr<EventLoop> loop_;
  std::unique_ptr<OrphanGuard> guard_;
};

TEST_F(HealthChecksTest, EachRunIsToldTheRoundAndGivesItsVerdict) {
  HealthCheckSettings settings;
  settings.command =
      "echo $DDPRUN_HEALTH_CHECK_ROUND $TORCHELASTIC_RESTART_COUNT "
      "$TORCHELASTIC_RUN_ID $LOCAL_WORLD_SIZE $DDPRUN_NODE_HOST > " +
      (dir_ / "seen") + "; [ $DDPRUN_HEALTH_CHECK_ROUND = 0 ] || exit 3";
  HealthChecks checks(*loop_, *guard_, settings, dir_ / "ddprun");
  EXPECT_EQ(RunCheck(checks, {0, 0, "job", 8, "node7"}), "") << "healthy";
  std::ifstream seen(dir_ / "seen");
  std::stringstream text;
  text << seen.rdbuf();
  EXPECT_EQ(text.str(), "0 0 job 8 node7\n");
  EXPECT_THAT(RunCheck(checks, {5, 2, "job", 8, "node7"}), HasSubstr("exit code 3"))
      << "a second run, told the next round";
}

}  // namespace
}  // namespace ddprun
