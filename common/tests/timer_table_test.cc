#include "common/timer_table.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ddprun {
namespace {

enum class Timer { kFirst, kSecond, kThird, kCount };

TEST(TimerTable, NextIsTheEarliestSetTimer) {
  TimerTable<Timer> timers;
  const absl::Time t0 = absl::FromUnixSeconds(100);
  EXPECT_EQ(timers.Next(), absl::InfiniteFuture());
  timers.Set(Timer::kThird, t0 + absl::Seconds(3));
  timers.Set(Timer::kSecond, t0 + absl::Seconds(2));
  EXPECT_EQ(timers.Next(), t0 + absl::Seconds(2));
  timers.Clear(Timer::kSecond);
  EXPECT_FALSE(timers.IsSet(Timer::kSecond));
  EXPECT_EQ(timers.Next(), t0 + absl::Seconds(3));
  EXPECT_EQ(timers.At(Timer::kThird), t0 + absl::Seconds(3));
}

TEST(TimerTable, FireClearsATimerThatPassedAndOnlyThatOne) {
  TimerTable<Timer> timers;
  const absl::Time t0 = absl::FromUnixSeconds(100);
  timers.Set(Timer::kFirst, t0);
  timers.Set(Timer::kSecond, t0 + absl::Seconds(1));
  EXPECT_FALSE(timers.Fire(Timer::kThird, t0)) << "not set";
  EXPECT_FALSE(timers.Fire(Timer::kSecond, t0)) << "not yet";
  EXPECT_TRUE(timers.IsSet(Timer::kSecond));
  EXPECT_TRUE(timers.Fire(Timer::kFirst, t0)) << "due at the very time";
  EXPECT_FALSE(timers.IsSet(Timer::kFirst));
  EXPECT_FALSE(timers.Fire(Timer::kFirst, t0 + absl::Seconds(5))) << "fires once";
  EXPECT_EQ(timers.Next(), t0 + absl::Seconds(1));
}

TEST(TimerTable, AllListsEveryTimerInTheEnumsOrder) {
  EXPECT_THAT(TimerTable<Timer>::All(),
              ::testing::ElementsAre(Timer::kFirst, Timer::kSecond, Timer::kThird));
}

}  // namespace
}  // namespace ddprun
