#include "rendezvous/node_health.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace ddprun {
namespace {

using ::testing::HasSubstr;

const absl::Time kStart = absl::FromUnixSeconds(1000000);

NodeHealthSettings Settings(int failures, int flaps, absl::Duration cooldown) {
  NodeHealthSettings s;
  s.max_node_failures = failures;
  s.max_node_flaps = flaps;
  s.node_cooldown = cooldown;
  return s;
}

TEST(NodeHealthTest, LimitsOfZeroNeverExclude) {
  NodeHealth health(Settings(0, 0, absl::Seconds(10)));
  for (int i = 0; i < 100; ++i) {
    EXPECT_FALSE(health.CountFailure("h", kStart));
    EXPECT_FALSE(health.CountFlap("h", kStart));
  }
  EXPECT_FALSE(health.Excluded("h", kStart));
  EXPECT_TRUE(health.Record().empty());
}

TEST(NodeHealthTest, ExcludedUntilTheCooldownEndsThenCountedAfresh) {
  NodeHealth health(Settings(2, 0, absl::Seconds(10)));
  EXPECT_FALSE(health.CountFailure("h", kStart));
  EXPECT_TRUE(health.CountFailure("h", kStart));
  ASSERT_TRUE(health.Excluded("h", kStart + absl::Seconds(9)));
  EXPECT_FALSE(health.Excluded("h", kStart + absl::Seconds(10)));
  EXPECT_FALSE(health.Excluded("other", kStart));
  EXPECT_FALSE(health.CountFailure("h", kStart + absl::Seconds(11)));
  EXPECT_TRUE(health.CountFailure("h", kStart + absl::Seconds(12)));
  EXPECT_EQ(health.Record().front().failures, 4);
  EXPECT_EQ(health.Record().front().times_excluded, 2);
}

TEST(NodeHealthTest, ACooldownOfInfinityIsTheRestOfTheJob) {
  NodeHealth health(Settings(1, 0, absl::InfiniteDuration()));
  EXPECT_TRUE(health.CountFailure("h", kStart));
  const auto excluded = health.Excluded("h", kStart + absl::Hours(1000));
  ASSERT_TRUE(excluded);
  EXPECT_EQ(NodeHealth::CooldownLeft(*excluded, kStart), absl::InfiniteDuration());
  EXPECT_THAT(NodeHealth::Describe(*excluded, kStart),
              HasSubstr("h: excluded for the rest of the job: it was the root cause of 1 failure "
                        "(--max-node-failures=1) [1 failure]"));
}

TEST(NodeHealthTest, ListedHostsMatchTheirShortOrLongNameWhateverTheCase) {
  NodeHealthSettings s;
  s.exclude_hosts = {"gpu-07", "gpu-09.rack2.example"};
  NodeHealth health(s);
  EXPECT_TRUE(health.Excluded("GPU-07", kStart));
  EXPECT_TRUE(health.Excluded("gpu-07.rack1.example", kStart));
  EXPECT_TRUE(health.Excluded("gpu-09", kStart));
  EXPECT_TRUE(health.Excluded("gpu-09.rack2.example", kStart));
  EXPECT_FALSE(health.Excluded("gpu-09.rack3.example", kStart));  // two long names must agree
  EXPECT_FALSE(health.Excluded("gpu-070", kStart));
  EXPECT_TRUE(health.Record().empty());  // only a host that asked is recorded
  ASSERT_TRUE(health.KeepOut("gpu-07", kStart));
  ASSERT_EQ(health.Record().size(), 1u);
  EXPECT_THAT(health.Record().front().reason, HasSubstr("--exclude-hosts"));
}

TEST(NodeHealthTest, DescribeSaysHowLongIsLeftAndEveryCount) {
  NodeHealth health(Settings(0, 0, absl::Seconds(300)));
  health.CountFlap("n2", kStart);
  health.CheckFailed("n2", "it ended with exit code 3", kStart);
  health.CheckFailed("n10", "it did not finish", kStart);
  const std::vector<NodeExclusion> record = health.Record();
  ASSERT_EQ(record.size(), 2u);
  EXPECT_EQ(record[0].host, "n2");  // natural order
  EXPECT_EQ(NodeHealth::Describe(record[0], kStart + absl::Milliseconds(100500)),
            "n2: excluded for another 3m19s (--node-cooldown): its health check failed: it "
            "ended with exit code 3 [1 lost connection, 1 failed health check]");
  EXPECT_THAT(NodeHealth::Describe(record[0], kStart + absl::Seconds(300)),
              HasSubstr("was excluded, admitted again after its cooldown"));
}

// An elected leader's successor takes the ledgers over on a clock of its own: a cooldown
// goes on where it was, counts since admission go on towards the limit.
TEST(NodeHealthTest, AnotherMastersClockTakesTheLedgersOverWithTheCooldownLeft) {
  NodeHealth first(Settings(2, 3, absl::Seconds(60)));
  EXPECT_FALSE(first.CountFailure("h1", kStart));
  EXPECT_TRUE(first.CountFailure("h1", kStart));   // out until kStart + 60 s
  EXPECT_FALSE(first.CountFailure("h2", kStart));  // one of two
  EXPECT_FALSE(first.CountFlap("h2", kStart));
  const int64_t before = first.changes();
  const std::vector<RememberedNode> memory = first.Remember(kStart + absl::Seconds(10));
  EXPECT_EQ(first.changes(), before) << "remembering changes nothing";
  ASSERT_EQ(memory.size(), 2u);
  EXPECT_EQ(memory[0].cooldown_left, absl::Seconds(50));
  EXPECT_EQ(memory[1].cooldown_left, absl::ZeroDuration()) << "never excluded";

  const absl::Time other_clock = absl::FromUnixSeconds(5);
  NodeHealth next(Settings(2, 3, absl::Seconds(60)));
  next.Recall(memory, other_clock);
  EXPECT_GT(next.changes(), 0);
  ASSERT_TRUE(next.Excluded("h1", other_clock + absl::Seconds(49)));
  EXPECT_FALSE(next.Excluded("h1", other_clock + absl::Seconds(50)));
  EXPECT_EQ(next.Counts("h1").failures, 2);
  EXPECT_THAT(next.Excluded("h1", other_clock)->reason, HasSubstr("root cause of 2 failures"));
  // h2's first failure and flap came with it: its second failure is its limit.
  EXPECT_TRUE(next.CountFailure("h2", other_clock));
  EXPECT_EQ(next.Counts("h2").flaps, 1);
}

TEST(NodeHealthTest, ARestOfTheRunExclusionStaysSoForTheNextMaster) {
  NodeHealth first(Settings(1, 0, absl::InfiniteDuration()));
  EXPECT_TRUE(first.CountFailure("h", kStart));
  const std::vector<RememberedNode> memory = first.Remember(kStart + absl::Hours(1));
  ASSERT_EQ(memory.size(), 1u);
  EXPECT_EQ(memory[0].cooldown_left, absl::InfiniteDuration());
  NodeHealth next(Settings(1, 0, absl::InfiniteDuration()));
  next.Recall(memory, kStart);
  EXPECT_TRUE(next.Excluded("h", kStart + absl::Hours(1000)));
}

}  // namespace
}  // namespace ddprun
