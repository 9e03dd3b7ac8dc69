#include "rendezvous/node_address.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace ddprun {
namespace {

using ::testing::HasSubstr;

NodeInfo Node(std::string addr, std::string fallback = "") {
  NodeInfo node;
  node.host = "vm";
  node.addr = std::move(addr);
  node.fallback_addr = std::move(fallback);
  return node;
}

// The rules of docs/environment.md, in order.
TEST(ReachableAddress, AnOfferedAddressComesFirst) {
  EXPECT_EQ(*ReachableAddress(Node("10.0.0.1"), "ipv4:10.78.0.2:5000"), "10.0.0.1");
  EXPECT_EQ(*ReachableAddress(Node("node1"), "ipv4:127.0.0.1:5000"), "node1");
}

TEST(ReachableAddress, ThenWhereTheConnectionComesFrom) {
  EXPECT_EQ(*ReachableAddress(Node("", "vm.cluster"), "ipv4:10.78.0.2:5000"), "10.78.0.2");
  EXPECT_EQ(*ReachableAddress(Node(""), "ipv6:%5Bfd00::2%5D:5000"), "fd00::2");
}

TEST(ReachableAddress, ThenAHostNameThatIsNotLoopbackOnItsNode) {
  EXPECT_EQ(*ReachableAddress(Node("", "vm.cluster"), "ipv4:127.0.0.1:5000"), "vm.cluster");
  EXPECT_EQ(*ReachableAddress(Node("", "vm.cluster"), "fd:9"), "vm.cluster");
}

TEST(ReachableAddress, ElseARefusalThatNamesLocalAddr) {
  absl::StatusOr<std::string> none = ReachableAddress(Node(""), "ipv4:127.0.0.1:5000");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(none.status().message(), HasSubstr("vm: no address that the other nodes can reach"));
  EXPECT_THAT(none.status().message(), HasSubstr("127.0.0.1, a loopback address"));
  EXPECT_THAT(none.status().message(), HasSubstr("--local-addr=ADDRESS"));
  none = ReachableAddress(Node(""), "fd:9");
  EXPECT_THAT(none.status().message(), HasSubstr("'fd:9', which names no address"));
}

}  // namespace
}  // namespace ddprun
