#include "launcher/name_wait.h"

#include <signal.h>

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ddprun {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A resolver that fails until `resolves_at`, a clock that pauses move, the lines said.
struct FakeWorld {
  absl::Time now = absl::UnixEpoch();
  absl::Time resolves_at = absl::InfiniteFuture();
  absl::Time signal_at = absl::InfiniteFuture();
  std::vector<std::string> warnings;
  std::vector<std::string> infos;

  NameWaitWorld World() {
    NameWaitWorld world;
    world.resolve = [this]() -> absl::Status {
      if (now >= resolves_at) return absl::OkStatus();
      return absl::FailedPreconditionError(
          "--master-addr 'job-master-0' does not resolve on this node (Name or service not "
          "known): check the name, or give an IP address");
    };
    world.now = [this] { return now; };
    world.pause = [this](absl::Duration d) {
      now += d;
      return now >= signal_at ? SIGTERM : 0;
    };
    world.warn = [this](const std::string& line) { warnings.push_back(line); };
    world.info = [this](const std::string& line) { infos.push_back(line); };
    return world;
  }
};

NameWait MasterAddr(absl::Duration bound) {
  NameWait wait;
  wait.host = "job-master-0";
  wait.what = "--master-addr";
  wait.bound = bound;
  return wait;
}

TEST(NameWaitTest, ANameThatResolvesIsNotWaitedForNorSaid) {
  FakeWorld fake;
  fake.resolves_at = absl::UnixEpoch();
  EXPECT_TRUE(WaitUntilResolves(MasterAddr(absl::Seconds(600)), fake.World()).ok());
  EXPECT_TRUE(fake.warnings.empty());
  EXPECT_TRUE(fake.infos.empty());
}

TEST(NameWaitTest, ANameThatResolvesLaterIsWaitedForWithProgressLines) {
  FakeWorld fake;
  fake.resolves_at = absl::UnixEpoch() + absl::Seconds(25);
  EXPECT_TRUE(WaitUntilResolves(MasterAddr(absl::Seconds(600)), fake.World()).ok());
  EXPECT_EQ(fake.now, absl::UnixEpoch() + absl::Seconds(25));
  ASSERT_EQ(fake.warnings.size(), 3u);
  EXPECT_THAT(fake.warnings[0], HasSubstr("'job-master-0' does not resolve on this node"));
  EXPECT_THAT(fake.warnings[0], HasSubstr("waiting up to 600s (join_timeout)"));
  EXPECT_EQ(fake.warnings[1],
            "still waiting for --master-addr 'job-master-0' to resolve: 590s left");
  EXPECT_EQ(fake.warnings[2],
            "still waiting for --master-addr 'job-master-0' to resolve: 580s left");
  EXPECT_THAT(fake.infos, ElementsAre("--master-addr 'job-master-0' resolves now, after 25s"));
}

TEST(NameWaitTest, ANameThatNeverResolvesFailsAtTheBoundNamingItAndJoinTimeout) {
  FakeWorld fake;
  const absl::Status s = WaitUntilResolves(MasterAddr(absl::Seconds(12)), fake.World());
  EXPECT_TRUE(absl::IsFailedPrecondition(s));
  EXPECT_THAT(s.message(), HasSubstr("'job-master-0' does not resolve on this node"));
  EXPECT_THAT(s.message(), HasSubstr("it did not resolve within 12s (join_timeout; --rdzv-conf "
                                     "join_timeout=SECONDS waits longer)"));
  EXPECT_EQ(fake.now, absl::UnixEpoch() + absl::Seconds(12));
  EXPECT_EQ(fake.warnings.size(), 2u);  // the first, and one at 10 s
}

TEST(NameWaitTest, AStopSignalEndsTheWaitAtOnce) {
  FakeWorld fake;
  fake.signal_at = absl::UnixEpoch() + absl::Seconds(3);
  const absl::Status s = WaitUntilResolves(MasterAddr(absl::Seconds(600)), fake.World());
  EXPECT_TRUE(absl::IsCancelled(s));
  EXPECT_EQ(s.message(), std::to_string(SIGTERM));
  EXPECT_EQ(fake.now, absl::UnixEpoch() + absl::Seconds(3));
}

}  // namespace
}  // namespace ddprun
