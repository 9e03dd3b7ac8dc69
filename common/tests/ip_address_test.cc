#include "common/ip_address.h"

#include <gtest/gtest.h>

namespace ddprun {
namespace {

TEST(CheckResolvesTest, NamesWhatDoesNotResolve) {
  EXPECT_TRUE(CheckResolves("127.0.0.1", "MASTER_ADDR").ok());
  EXPECT_TRUE(CheckResolves("localhost", "MASTER_ADDR").ok());
  absl::Status bad = CheckResolves("no-such-host.invalid", "--rdzv-endpoint host");
  EXPECT_EQ(bad.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(bad.message().find("--rdzv-endpoint host 'no-such-host.invalid' does not resolve on "
                               "this node"),
            absl::string_view::npos)
      << bad;
  EXPECT_NE(bad.message().find("give an IP address"), absl::string_view::npos);
}

TEST(PeerAddress, ReadsGrpcsPeerStrings) {
  EXPECT_EQ(PeerAddress("ipv4:10.78.0.2:41234"), "10.78.0.2");
  EXPECT_EQ(PeerAddress("ipv6:%5Bfd00::2%5D:5555"), "fd00::2");
  EXPECT_EQ(PeerAddress("ipv6:[::1]:5555"), "::1");
  EXPECT_EQ(PeerAddress("ipv6:%5Bfe80::1%25eth0%5D:5555"), "fe80::1%eth0");
  EXPECT_EQ(PeerAddress("fd:7"), "");
  EXPECT_EQ(PeerAddress("unix:/tmp/socket"), "");
  EXPECT_EQ(PeerAddress(""), "");
}

TEST(IsLoopbackOrUnspecified, KnowsWhatNamesNoOtherHost) {
  for (const char* local : {"127.0.0.1", "127.0.1.1", "::1", "0.0.0.0", "::", "::ffff:127.0.0.1"}) {
    EXPECT_TRUE(IsLoopbackOrUnspecified(local)) << local;
  }
  for (const char* remote : {"10.78.0.2", "192.168.1.7", "fd00::2", "fe80::1%eth0", "node7"}) {
    EXPECT_FALSE(IsLoopbackOrUnspecified(remote)) << remote;
  }
}

}  // namespace
}  // namespace ddprun
