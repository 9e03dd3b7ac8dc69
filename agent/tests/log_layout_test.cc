#include "agent/logs/log_layout.h"

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

TEST(LinePrefix, TemplatesFillTorchsFourFieldsBracedOrNot) {
  const LineSource source{"trainer", 12, 3, "gpu-node-7"};
  EXPECT_EQ(LinePrefix("[${hostname}:${rank}]: ", source), "[gpu-node-7:12]: ");
  EXPECT_EQ(LinePrefix("$role_name/$local_rank|", source), "trainer/3|");
  EXPECT_EQ(LinePrefix("${rank}${rank} ", source), "1212 ");
}

TEST(SafeSubstitute, BehavesAsPythonsStringTemplate) {
  const std::map<std::string, std::string> values = {{"rank", "5"}};
  EXPECT_EQ(SafeSubstitute("$rank ${rank}", values), "5 5");
  EXPECT_EQ(SafeSubstitute("$$rank costs $5", values), "$rank costs $5");
  EXPECT_EQ(SafeSubstitute("$ranks ${RANK} ${nope} ${rank", values),
            "$ranks ${RANK} ${nope} ${rank");
  EXPECT_EQ(SafeSubstitute("end$", values), "end$");
  EXPECT_EQ(SafeSubstitute("${rank}x$rank.y", values), "5x5.y");
}

}  // namespace
}  // namespace ddprun
