#include "common/log_limiter.h"

#include "gtest/gtest.h"

namespace ddprun {
namespace {

TEST(LogLimiterTest, TheFirstIsSaidThenOnceAPeriodWithWhatWasHeldBack) {
  LogLimiter limiter(absl::Seconds(1));
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  EXPECT_EQ(limiter.Occurred(t0), 1);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(limiter.Occurred(t0 + absl::Milliseconds(100 * i)), 0);
  EXPECT_EQ(limiter.Occurred(t0 + absl::Seconds(1)), 6) << "five held back, and this one";
  EXPECT_EQ(limiter.Occurred(t0 + absl::Milliseconds(1500)), 0);
  EXPECT_EQ(limiter.Occurred(t0 + absl::Seconds(60)), 2);
}

}  // namespace
}  // namespace ddprun
