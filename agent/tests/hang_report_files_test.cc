// HangReportFiles: this node's report, the master's that replaces it, and stacks on request,
// in the attempt's folder.
#include "agent/hang_report_files.h"

#include <filesystem>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/child_process.h"
#include "tests/support/temp_dir.h"

namespace ddprun {
namespace {

using ::testing::HasSubstr;

Assignment Round(int world_size) {
  Assignment round;
  round.round = 1;
  round.world_size = world_size;
  return round;
}

std::vector<RankStack> Stacks(int ranks) {
  std::vector<RankStack> stacks;
  for (int rank = 0; rank < ranks; ++rank) {
    RankStack stack;
    stack.host = "node0";
    stack.rank = rank;
    stack.local_rank = rank;
    stack.source = "python";
    stack.where = "in all_reduce (train.py:10)";
    stack.frames = {"all_reduce"};
    stack.text = "Current thread (most recent call first):\n  File \"train.py\", line 10";
    stacks.push_back(stack);
  }
  return stacks;
}

constexpr char kCause[] = "rank 1 sent no heartbeat for 3s";

class HangReportFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<LogRoot> root = OpenLogRoot(dir_.path(), "job");
    ASSERT_TRUE(root.ok()) << root.status();
    root_ = std::move(*root);
    root_.BeginAttempt(1);
  }
  testing::TempDir dir_;
  LogRoot root_;
};

AgentMoment Moment(AgentMoment::Kind kind) { return AgentMoment::Of(kind, absl::Now()); }

TEST_F(HangReportFilesTest, AnIncompleteOwnReportAwaitsTheMastersWhichReplacesIt) {
  HangReportFiles files(root_, "job");
  Moments moments;
  moments.Subscribe(files);
  AgentMoment taken = Moment(AgentMoment::Kind::kStacksTaken);
  taken.hang_report = OwnHangReport(Round(4), kCause, Stacks(2));
  EXPECT_FALSE(Complete(*taken.hang_report)) << "ranks 2 and 3 are on another node";
  moments.Announce(taken);
  EXPECT_EQ(files.path(), dir_.path() + "/job/attempt_1/hang_report.txt");
  EXPECT_THAT(testing::ReadFile(files.path()), HasSubstr("rank 1 sent no heartbeat"));
  AgentMoment arrived = Moment(AgentMoment::Kind::kHangReportArrived);
  arrived.round = 1;
  arrived.report_text = "the merged report of all 4 ranks\n";
  arrived.report_summary = "summary";
  moments.Announce(arrived);
  EXPECT_EQ(testing::ReadFile(files.path()), "the merged report of all 4 ranks\n");
}

TEST_F(HangReportFilesTest, AnOwnReportOfEveryRankAwaitsNothing) {
  EXPECT_TRUE(Complete(OwnHangReport(Round(2), kCause, Stacks(2))));
  EXPECT_THAT(OwnHangReport(Round(4), "", Stacks(2)).cause, HasSubstr("on another node"));
}

TEST_F(HangReportFilesTest, StacksOnRequestGoToAFileOfTheirOwn) {
  HangReportFiles files(root_, "job");
  Moments moments;
  moments.Subscribe(files);
  AgentMoment asked = Moment(AgentMoment::Kind::kStacksAsked);
  asked.hang_report = RequestedStacksReport(Round(2), Stacks(2));
  moments.Announce(asked);
  bool found = false;
  for (const auto& entry : std::filesystem::directory_iterator(dir_.path() + "/job/attempt_1")) {
    found = found || entry.path().filename().string().rfind("stacks-", 0) == 0;
  }
  EXPECT_TRUE(found);
  EXPECT_EQ(files.path(), "") << "not a hang report";
}

}  // namespace
}  // namespace ddprun
