#include "common/clock.h"

#include <time.h>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace ddprun {
namespace {

TEST(MonotonicNowTest, IsTheMonotonicClockNotTheWallClock) {
  timespec before;
  ::clock_gettime(CLOCK_MONOTONIC, &before);
  const absl::Time now = MonotonicNow();
  timespec after;
  ::clock_gettime(CLOCK_MONOTONIC, &after);
  EXPECT_GE(now, absl::TimeFromTimespec(before));
  EXPECT_LE(now, absl::TimeFromTimespec(after));
  // Seconds since boot, far from today's date: never mixed up with absl::Now().
  EXPECT_GT(absl::Now() - now, absl::Hours(24 * 365));
}

}  // namespace
}  // namespace ddprun
