#include "node/host_info.h"

#include <gtest/gtest.h>

namespace ddprun {
namespace {

TEST(IsThisHostTest, LoopbackAndThisHostsNameAreThisHost) {
  EXPECT_TRUE(IsThisHost("localhost"));
  EXPECT_TRUE(IsThisHost("127.0.0.1"));
  EXPECT_TRUE(IsThisHost(HostName()));
}

// A Kubernetes pod's <hostname>.<subdomain> names it before DNS has a record for it; the
// hosting decision must not depend on that race.
TEST(IsThisHostTest, ALongerNameThatStartsWithThisHostsNameIsThisHost) {
  EXPECT_TRUE(IsThisHost(HostName() + ".ddprun-train.invalid"));
  EXPECT_FALSE(IsThisHost(HostName() + "x.ddprun-train.invalid"));
  EXPECT_FALSE(IsThisHost("other-" + HostName() + ".invalid"));
}

}  // namespace
}  // namespace ddprun

namespace ddprun {
namespace {

TEST(ResolvesBeyondLoopbackTest, LoopbackNamesAreNot) {
  EXPECT_FALSE(ResolvesBeyondLoopback("localhost"));
  EXPECT_FALSE(ResolvesBeyondLoopback("127.0.1.1"));
  EXPECT_FALSE(ResolvesBeyondLoopback("no-such-host.invalid"));
  EXPECT_TRUE(ResolvesBeyondLoopback("192.0.2.7"));  // an address resolves to itself
}

}  // namespace
}  // namespace ddprun

namespace ddprun {
namespace {

TEST(InterfaceTowardTest, LoopbackIsReachedThroughTheLoopbackInterface) {
  const NetworkInterface lo = InterfaceToward("127.0.0.1");
  EXPECT_EQ(lo.name, "lo");
  EXPECT_TRUE(lo.loopback);
  EXPECT_EQ(InterfaceHolding("127.0.0.1").name, "lo");
  EXPECT_EQ(InterfaceToward("no-such-host.invalid").name, "");
  EXPECT_EQ(InterfaceHolding("192.0.2.7").name, "") << "not an address of this host";
}

}  // namespace
}  // namespace ddprun
