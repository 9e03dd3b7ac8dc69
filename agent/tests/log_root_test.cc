// LogRoot: the attempt folders of one run, and the files the agent writes into them.
#include "agent/logs/log_root.h"

#include <filesystem>

#include "gtest/gtest.h"
#include "tests/support/child_process.h"
#include "tests/support/temp_dir.h"

namespace ddprun {
namespace {

TEST(LogRootTest, AttemptFoldersFollowRoundsAfterEarlierRunsAndAreNeverReused) {
  LogRoot root;
  root.attempt_offset = 3;  // attempt_0..2 are an earlier run's
  EXPECT_EQ(root.BeginAttempt(0), 3);
  EXPECT_EQ(root.BeginAttempt(1), 4);
  EXPECT_EQ(root.BeginAttempt(0), 5) << "a restarted master counting from 0 again";
  EXPECT_EQ(root.BeginAttempt(7), 10);
  EXPECT_EQ(root.AttemptOf(0), 5);
  EXPECT_EQ(root.AttemptOf(1), 4);
  EXPECT_EQ(root.AttemptOf(2), std::nullopt);
  for (int round = 8; round < 16; ++round) root.BeginAttempt(round);
  EXPECT_EQ(root.AttemptOf(0), std::nullopt) << "only the last rounds are kept";
  EXPECT_EQ(root.AttemptOf(15), 18);
}

TEST(LogRootTest, AnAttemptFileIsWrittenIntoItsRoundsFolderAndReplaced) {
  testing::TempDir dir;
  absl::StatusOr<LogRoot> root = OpenLogRoot(dir.path(), "job");
  ASSERT_TRUE(root.ok()) << root.status();
  root->BeginAttempt(2);
  absl::StatusOr<std::string> path = WriteAttemptFile(*root, "job", 2, "hang_report.txt", "one");
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_EQ(*path, dir.path() + "/job/attempt_2/hang_report.txt");
  ASSERT_TRUE(WriteAttemptFile(*root, "job", 2, "hang_report.txt", "two").ok());
  EXPECT_EQ(testing::ReadFile(*path), "two") << "the whole report replaces this node's own";
  EXPECT_EQ(*WriteAttemptFile(*root, "job", 3, "hang_report.txt", "x"), "") << "no such round";
}

TEST(LogRootTest, WithoutLogFilesNothingIsWritten) {
  absl::StatusOr<LogRoot> root = OpenLogRoot("/dev/null", "job");
  ASSERT_TRUE(root.ok()) << root.status();
  root->BeginAttempt(0);
  EXPECT_EQ(*WriteAttemptFile(*root, "job", 0, "hang_report.txt", "x"), "");
}

}  // namespace
}  // namespace ddprun
