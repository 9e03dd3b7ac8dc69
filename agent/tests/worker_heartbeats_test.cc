#include "agent/hangs/worker_heartbeats.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace ddprun {
namespace {

using ::testing::IsEmpty;

std::vector<int> Ranks(const std::vector<WorkerHeartbeats::Overdue>& overdue) {
  std::vector<int> out;
  for (const auto& o : overdue) out.push_back(o.local_rank);
  return out;
}

const absl::Time kStart = absl::FromUnixSeconds(100);

TEST(WorkerHeartbeatsTest, TheStartupBoundUntilTheFirstBeatThenTheTimeoutAfterEachBeat) {
  WorkerHeartbeats beats(absl::Seconds(10), absl::Seconds(60));
  beats.Watch(0, kStart);
  beats.Watch(1, kStart);
  EXPECT_EQ(beats.NextDeadline(), kStart + absl::Seconds(60));
  beats.Beat(0, kStart + absl::Seconds(30));  // after a 30 s `import torch`
  EXPECT_EQ(beats.NextDeadline(), kStart + absl::Seconds(40));
  EXPECT_THAT(beats.TakeOverdue(kStart + absl::Seconds(39)), IsEmpty());
  std::vector<WorkerHeartbeats::Overdue> overdue = beats.TakeOverdue(kStart + absl::Seconds(40));
  EXPECT_EQ(Ranks(overdue), std::vector<int>{0});
  EXPECT_EQ(overdue[0].silent, absl::Seconds(10));
  EXPECT_FALSE(overdue[0].never_beat);
  overdue = beats.TakeOverdue(kStart + absl::Seconds(60));
  EXPECT_EQ(Ranks(overdue), std::vector<int>{1}) << "it never beat: the startup bound";
  EXPECT_EQ(overdue[0].silent, absl::Seconds(60));
  EXPECT_TRUE(overdue[0].never_beat);
  EXPECT_EQ(beats.NextDeadline(), absl::InfiniteFuture()) << "each is reported once";
}

TEST(WorkerHeartbeatsTest, TheStartupBoundIsNeverShorterThanTheTimeout) {
  WorkerHeartbeats beats(absl::Minutes(30), absl::Minutes(10));
  beats.Watch(0, kStart);
  EXPECT_EQ(beats.NextDeadline(), kStart + absl::Minutes(30));
}

TEST(WorkerHeartbeatsTest, WithoutAStartupBoundOnlyAWorkerThatBeatIsWatched) {
  WorkerHeartbeats beats(absl::Seconds(10), absl::ZeroDuration());
  beats.Watch(0, kStart);
  EXPECT_EQ(beats.NextDeadline(), absl::InfiniteFuture());
  EXPECT_THAT(beats.TakeOverdue(kStart + absl::Hours(5)), IsEmpty());
  beats.Beat(0, kStart + absl::Hours(5));
  EXPECT_EQ(beats.NextDeadline(), kStart + absl::Hours(5) + absl::Seconds(10));
}

TEST(WorkerHeartbeatsTest, AForgottenWorkerIsNeverOverdue) {
  WorkerHeartbeats beats(absl::Seconds(1), absl::Seconds(1));
  beats.Watch(0, kStart);
  beats.Forget(0);  // it exited, or closed its pipe
  EXPECT_THAT(beats.TakeOverdue(kStart + absl::Hours(1)), IsEmpty());
  beats.Beat(0, kStart + absl::Hours(1));  // a late beat does not bring it back
  EXPECT_EQ(beats.NextDeadline(), absl::InfiniteFuture());
}

TEST(WorkerHeartbeatsTest, AnOlderBeatNeverMovesTheDeadlineBack) {
  WorkerHeartbeats beats(absl::Seconds(10), absl::Seconds(60));
  beats.Watch(0, kStart + absl::Seconds(5));
  beats.Beat(0, kStart);
  EXPECT_EQ(beats.NextDeadline(), kStart + absl::Seconds(15));
}

}  // namespace
}  // namespace ddprun
