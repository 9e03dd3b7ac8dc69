#include "agent/log_layout.h"

#include "gtest/gtest.h"

namespace ddprun {
namespace {

TEST(LogLayoutTest, RunAndAttemptFolders) {
  EXPECT_EQ(RunLogDir("/var/log/ddp", "job1"), "/var/log/ddp/job1");
  EXPECT_EQ(AttemptLogDir("/var/log/ddp", "job1", 0), "/var/log/ddp/job1/attempt_0");
  EXPECT_EQ(AttemptLogDir("/var/log/ddp", "job1", 12), "/var/log/ddp/job1/attempt_12");
}

TEST(LogLayoutTest, WorkerPaths) {
  const WorkerLogPaths paths = WorkerLogPathsFor("/logs", "abc", 2, 3);
  EXPECT_EQ(paths.dir, "/logs/abc/attempt_2/3");
  EXPECT_EQ(paths.stdout_log, "/logs/abc/attempt_2/3/stdout.log");
  EXPECT_EQ(paths.stderr_log, "/logs/abc/attempt_2/3/stderr.log");
  EXPECT_EQ(paths.error_file, "/logs/abc/attempt_2/3/error.json");
}

TEST(LogLayoutTest, AttemptsDoNotShareFolders) {
  EXPECT_NE(WorkerLogPathsFor("/logs", "abc", 0, 0).dir,
            WorkerLogPathsFor("/logs", "abc", 1, 0).dir);
  EXPECT_NE(WorkerLogPathsFor("/logs", "abc", 0, 0).dir,
            WorkerLogPathsFor("/logs", "abc", 0, 1).dir);
}

TEST(LinePrefixTest, DefaultIsRoleAndLocalRank) {
  EXPECT_EQ(LinePrefix("", {"trainer", 9, 3, "h"}), "[trainer3]:");
}

TEST(LinePrefixTest, TemplateFillsEveryField) {
  EXPECT_EQ(LinePrefix("${role_name}-${rank}-${local_rank}| ", {"default", 5, 1, "h"}),
            "default-5-1| ");
  EXPECT_EQ(LinePrefix("plain> ", {"r", 1, 1, "h"}), "plain> ");
}

}  // namespace
}  // namespace ddprun
