#include "agent/restart_timeline.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace ddprun {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Pair;

const absl::Time kStart = absl::UnixEpoch() + absl::Hours(1);
absl::Time At(int ms) { return kStart + absl::Milliseconds(ms); }

// A failure here, restarted into round 1 by 4 ms, on the node serving the store;
// `store_used`: round 0's ranks had all reached the store.
void RestartUpToTheStore(RestartTimeline& timeline, bool store_used = true) {
  if (store_used) timeline.EveryRankConnected(0, false, At(-100));
  timeline.FailureSeen(At(0));
  timeline.StopOrdered(At(1));
  timeline.WorkersStopped(At(2));
  timeline.RoundStarting(1, 1, At(3));
  timeline.WorkersStarted(/*store_followed=*/true, At(4));
}

// The node whose worker failed, serving the store, with torch 1.13's barrier: every part.
TEST(RestartTimelineTest, TheFailingNodeServingTheStoreSeesEveryPart) {
  RestartTimeline timeline;
  timeline.EveryRankConnected(0, true, At(-100));  // round 0's ranks used the store
  timeline.FailureSeen(At(0));
  timeline.FailureSeen(At(1));  // a second rank: the first counts
  timeline.StopOrdered(At(3));
  timeline.WorkersStopped(At(43));
  timeline.RoundStarting(1, 1, At(45));
  timeline.WorkersStarted(/*store_followed=*/true, At(75));
  EXPECT_THAT(timeline.TakeSplits(), IsEmpty()) << "the store's parts are still to come";
  timeline.EveryRankConnected(1, /*barrier_expected=*/true, At(1075));
  EXPECT_THAT(timeline.TakeSplits(), IsEmpty());
  timeline.BarrierPassed(1, At(1130));
  std::vector<RestartSplit> splits = timeline.TakeSplits();
  ASSERT_EQ(splits.size(), 1u);
  const RestartSplit& s = splits[0];
  EXPECT_EQ(s.round, 1);
  EXPECT_EQ(s.restart_count, 1);
  EXPECT_THAT(
      s.Parts(),
      ElementsAre(Pair("detection", absl::Milliseconds(3)), Pair("stop", absl::Milliseconds(40)),
                  Pair("rendezvous", absl::Milliseconds(2)), Pair("spawn", absl::Milliseconds(30)),
                  Pair("connected", absl::Milliseconds(1000)),
                  Pair("barrier", absl::Milliseconds(55))));
  EXPECT_EQ(s.total, absl::Milliseconds(1130));
  EXPECT_EQ(FormatRestartSplit(s),
            "restart 1 (round 1) took 1130 ms on this node: detection 3 ms, stop 40 ms, "
            "rendezvous 2 ms, spawn 30 ms, every rank connected to the store 1000 ms, store "
            "barrier passed 55 ms");
}

// Another node: its restart begins with the stop order, and ends once its workers started.
TEST(RestartTimelineTest, ANodeThatOnlyGotTheOrderAndServesNoStoreEndsAtSpawn) {
  RestartTimeline timeline;
  timeline.StopOrdered(At(10));
  timeline.WorkersStopped(At(20));
  timeline.RoundStarting(4, 2, At(25));
  timeline.WorkersStarted(/*store_followed=*/false, At(30));
  std::vector<RestartSplit> splits = timeline.TakeSplits();
  ASSERT_EQ(splits.size(), 1u);
  EXPECT_THAT(splits[0].Parts(), ElementsAre(Pair("stop", absl::Milliseconds(10)),
                                             Pair("rendezvous", absl::Milliseconds(5)),
                                             Pair("spawn", absl::Milliseconds(5))));
  EXPECT_EQ(splits[0].total, absl::Milliseconds(20));
  EXPECT_EQ(FormatRestartSplit(splits[0]),
            "restart 2 (round 4) took 20 ms on this node: stop 10 ms, rendezvous 5 ms, spawn 5 ms "
            "(to the workers' start only: their own start-up, imports and init_process_group, "
            "is not seen on a node that serves no store they connect to)");
}

// A stop for a membership change spends no restart: its line says what it was, not
// "restart 2" (the count it kept).
TEST(RestartTimelineTest, AMembershipChangeIsSaidAsOneNotAsARestart) {
  RestartTimeline timeline;
  timeline.StopOrdered(At(10), /*membership=*/true);
  timeline.WorkersStopped(At(20));
  timeline.RoundStarting(4, 2, At(25));
  timeline.WorkersStarted(/*store_followed=*/false, At(30));
  std::vector<RestartSplit> splits = timeline.TakeSplits();
  ASSERT_EQ(splits.size(), 1u);
  EXPECT_TRUE(splits[0].membership_change);
  EXPECT_THAT(FormatRestartSplit(splits[0]),
              ::testing::StartsWith("the membership change into round 4 (restart count 2, none "
                                    "spent) took 20 ms on this node: stop 10 ms"));
}

// torch 2.1 and later pass no store barrier: the split ends once every rank connected.
TEST(RestartTimelineTest, WithoutABarrierTheSplitEndsWhenEveryRankConnected) {
  RestartTimeline timeline;
  RestartUpToTheStore(timeline);
  timeline.EveryRankConnected(0, false, At(5));  // a late mark of round 0: not this one's
  EXPECT_THAT(timeline.TakeSplits(), IsEmpty());
  timeline.EveryRankConnected(1, false, At(500));
  std::vector<RestartSplit> splits = timeline.TakeSplits();
  ASSERT_EQ(splits.size(), 1u);
  EXPECT_EQ(splits[0].connected, absl::Milliseconds(496));
  EXPECT_FALSE(splits[0].barrier.has_value());
}

// The restarted workers fail before they all reach the store: the split ends with what was
// seen, and the new failure begins the next one.
TEST(RestartTimelineTest, AFailureBeforeTheStoreMarksEndsTheSplitAndBeginsTheNext) {
  RestartTimeline timeline;
  RestartUpToTheStore(timeline);
  timeline.FailureSeen(At(100));
  std::vector<RestartSplit> splits = timeline.TakeSplits();
  ASSERT_EQ(splits.size(), 1u);
  EXPECT_FALSE(splits[0].connected.has_value());
  EXPECT_EQ(splits[0].total, absl::Milliseconds(4));
  timeline.StopOrdered(At(110));
  timeline.WorkersStopped(At(120));
  timeline.RoundStarting(2, 2, At(121));
  timeline.WorkersStarted(false, At(130));
  splits = timeline.TakeSplits();
  ASSERT_EQ(splits.size(), 1u);
  EXPECT_EQ(splits[0].round, 2);
  EXPECT_EQ(splits[0].detection, absl::Milliseconds(10));
}

// Workers that never used the store (round 0's ranks were never all on it): the split ends
// at spawn even on the node serving the store, not at the next failure.
TEST(RestartTimelineTest, WorkersThatNeverUsedTheStoreEndTheSplitAtSpawn) {
  RestartTimeline timeline;
  RestartUpToTheStore(timeline, /*store_used=*/false);
  std::vector<RestartSplit> splits = timeline.TakeSplits();
  ASSERT_EQ(splits.size(), 1u);
  EXPECT_EQ(splits[0].spawn, absl::Milliseconds(1));
  EXPECT_FALSE(splits[0].connected.has_value());
}

// Workers that all ended before the order came took no time to stop; the first round is no
// restart; a run that ends instead of restarting leaves no split.
TEST(RestartTimelineTest, OnlyRestartsMakeSplitsAndNoPartIsNegative) {
  RestartTimeline timeline;
  timeline.RoundStarting(0, 0, At(0));
  timeline.WorkersStarted(false, At(5));
  EXPECT_THAT(timeline.TakeSplits(), IsEmpty()) << "the first round";
  timeline.FailureSeen(At(10));
  timeline.WorkersStopped(At(12));
  timeline.StopOrdered(At(20));
  timeline.RoundStarting(1, 1, At(21));
  timeline.WorkersStarted(false, At(22));
  std::vector<RestartSplit> splits = timeline.TakeSplits();
  ASSERT_EQ(splits.size(), 1u);
  EXPECT_EQ(splits[0].detection, absl::Milliseconds(10));
  EXPECT_EQ(splits[0].stop, absl::ZeroDuration());
  EXPECT_EQ(splits[0].rendezvous, absl::Milliseconds(1));
  timeline.FailureSeen(At(30));
  timeline.StopOrdered(At(31));
  timeline.WorkersStopped(At(32));
  timeline.RunEnded();
  EXPECT_THAT(timeline.TakeSplits(), IsEmpty()) << "no restart followed";
}

}  // namespace
}  // namespace ddprun
