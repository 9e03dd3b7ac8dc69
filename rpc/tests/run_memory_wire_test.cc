#include "rpc/run_memory_wire.h"

#include "ddprun/v1/rendezvous.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ddprun {
namespace {

using ::testing::HasSubstr;

RunMemory TwoNodes() {
  RunMemory memory;
  memory.restarts_spent = 2;
  memory.run_incarnation = "0123456789abcdef0123456789abcdef";
  RememberedNode out;
  out.record.host = "node3";
  out.record.reason = "it was the root cause of 2 failures (--max-node-failures=2)";
  out.record.failures = 2;
  out.record.times_excluded = 1;
  out.cooldown_left = absl::Milliseconds(41500);
  RememberedNode forever = out;
  forever.record.host = "node4";
  forever.cooldown_left = absl::InfiniteDuration();
  forever.failures_since_admitted = 1;
  forever.flaps_since_admitted = 3;
  memory.nodes = {out, forever};
  return memory;
}

TEST(RunMemoryWireTest, WhatALeaderWritesItsSuccessorReadsBack) {
  absl::StatusOr<RunMemory> back = RunMemoryFromBytes(RunMemoryToBytes(TwoNodes()));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->restarts_spent, 2);
  EXPECT_EQ(back->run_incarnation, TwoNodes().run_incarnation);
  ASSERT_EQ(back->nodes.size(), 2u);
  EXPECT_EQ(back->nodes[0].record.host, "node3");
  EXPECT_EQ(back->nodes[0].record.reason, TwoNodes().nodes[0].record.reason);
  EXPECT_EQ(back->nodes[0].record.failures, 2);
  EXPECT_EQ(back->nodes[0].record.times_excluded, 1);
  EXPECT_EQ(back->nodes[0].cooldown_left, absl::Milliseconds(41500));
  EXPECT_EQ(back->nodes[1].cooldown_left, absl::InfiniteDuration());
  EXPECT_EQ(back->nodes[1].failures_since_admitted, 1);
  EXPECT_EQ(back->nodes[1].flaps_since_admitted, 3);
}

// What is read from etcd may be anyone's: each bound is named.
TEST(RunMemoryWireTest, WhatIsOutOfBoundsIsRefusedByName) {
  EXPECT_THAT(std::string(RunMemoryFromBytes("\xff\xff\xff").status().message()),
              HasSubstr("not a RunMemory message"));
  const auto refused = [](const std::function<void(v1::RunMemory&)>& spoil) {
    v1::RunMemory wire;
    wire.ParseFromString(RunMemoryToBytes(TwoNodes()));
    spoil(wire);
    absl::StatusOr<RunMemory> read = RunMemoryFromBytes(wire.SerializeAsString());
    return read.ok() ? std::string("read") : std::string(read.status().message());
  };
  EXPECT_THAT(refused([](v1::RunMemory& w) { w.set_restarts_spent(-1); }),
              HasSubstr("restarts_spent is -1"));
  EXPECT_THAT(refused([](v1::RunMemory& w) { w.set_run_incarnation(std::string(65, 'a')); }),
              HasSubstr("run_incarnation is not up to 64 printable characters"));
  EXPECT_THAT(refused([](v1::RunMemory& w) { w.set_run_incarnation("a\nb"); }),
              HasSubstr("run_incarnation is not up to 64 printable characters"));
  EXPECT_THAT(refused([](v1::RunMemory& w) { w.mutable_nodes(0)->set_host(""); }),
              HasSubstr("host has 0 bytes"));
  EXPECT_THAT(
      refused([](v1::RunMemory& w) { w.mutable_nodes(0)->set_host(std::string(300, 'h')); }),
      HasSubstr("host has 300 bytes"));
  EXPECT_THAT(refused([](v1::RunMemory& w) { w.mutable_nodes(1)->set_flaps(-4); }),
              HasSubstr("flaps is -4"));
  EXPECT_THAT(refused([](v1::RunMemory& w) { w.mutable_nodes(0)->set_cooldown_left_ms(-5); }),
              HasSubstr("cooldown_left_ms is -5"));
  EXPECT_THAT(refused([](v1::RunMemory& w) { w.mutable_nodes(0)->set_cooldown_left_ms(1e300); }),
              HasSubstr("cooldown_left_ms"));
  EXPECT_THAT(
      refused([](v1::RunMemory& w) { w.mutable_nodes(0)->set_reason(std::string(70000, 'r')); }),
      HasSubstr("reason has 70000 bytes"));
}

}  // namespace
}  // namespace ddprun
