#include "agent/hangs/hang_watch.h"

#include <signal.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ddprun {
namespace {

using ::testing::HasSubstr;

HangSettings Settings() {
  HangSettings s;
  s.heartbeat_timeout = absl::Seconds(30);
  s.heartbeat_startup = absl::Seconds(600);
  s.uninterruptible_timeout = absl::Seconds(60);
  return s;
}

TEST(DescribeHangTest, AMissedHeartbeatNamesTheRankAndTheOptionThatSetTheBound) {
  Hang hang;
  hang.duration = absl::Milliseconds(30012);
  EXPECT_EQ(DescribeHang(hang, 3, Settings(), ""),
            "rank 3 sent no heartbeat for 30.012s (--worker-heartbeat-timeout=30s): taken for "
            "hung");
  hang.never_beat = true;
  EXPECT_EQ(DescribeHang(hang, 3, Settings(), ""),
            "rank 3 sent no first heartbeat in 30.012s since its start "
            "(--worker-heartbeat-startup-timeout=10m): taken for hung");
}

TEST(DescribeHangTest, AnExpiredFileTimerNamesItsScopeProcessAndSignal) {
  Hang hang;
  hang.kind = Hang::Kind::kTimer;
  hang.scope = "train.py#42";
  hang.pid = 4321;
  hang.signal = SIGKILL;
  hang.deadline = absl::FromUnixSeconds(1700000000);
  const std::string cause = DescribeHang(hang, 1, Settings(), "");
  EXPECT_THAT(cause, HasSubstr("rank 1: FileTimer scope 'train.py#42' expired at "));
  EXPECT_THAT(cause, HasSubstr("(pid 4321, torch.distributed.elastic.timer.expires, signal "
                               "SIGKILL): taken for hung"));
}

TEST(DescribeHangTest, UninterruptibleSleepMakesTheNodeUnhealthyWithTheProcessState) {
  Hang hang;
  hang.kind = Hang::Kind::kUninterruptible;
  hang.duration = absl::Seconds(61);
  EXPECT_EQ(DescribeHang(hang, 0, Settings(), "D (disk sleep) in nfs_wait"),
            "rank 0 has been in uninterruptible sleep for 1m1s: the node is unhealthy (D (disk "
            "sleep) in nfs_wait; TORCHELASTIC_UNINTERRUPTIBLE_STATE_TIMEOUT=1m)");
}

}  // namespace
}  // namespace ddprun
