#include "rendezvous/single_node_rendezvous.h"

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ddprun {
namespace {

using ::testing::HasSubstr;

JoinRequest Join(RoundReason reason, int local_world_size = 4) {
  JoinRequest join;
  join.host = "node1";
  join.addr = "10.1.2.3";
  join.local_world_size = local_world_size;
  join.reserved_master_port = 29555;
  join.reason = reason;
  return join;
}

TEST(SingleNodeRendezvousTest, FirstRoundIsZeroWithThisNodeAsRankZero) {
  SingleNodeRendezvous rdzv(/*max_restarts=*/0);
  absl::StatusOr<RoundAssignment> round = rdzv.NextRound(Join(RoundReason::kFirstJoin, 4));
  ASSERT_TRUE(round.ok()) << round.status();
  EXPECT_EQ(round->round, 0);
  EXPECT_EQ(round->restart_count, 0);
  EXPECT_EQ(round->group_rank, 0);
  EXPECT_EQ(round->group_world_size, 1);
  EXPECT_EQ(round->base_rank, 0);
  EXPECT_EQ(round->world_size, 4);
  EXPECT_EQ(round->master_addr, "10.1.2.3");
  EXPECT_EQ(round->master_port, 29555);
  EXPECT_EQ(round->store_addr, "");
  EXPECT_EQ(rdzv.restarts_spent(), 0);
}

TEST(SingleNodeRendezvousTest, WorldSizeIsLocalWorldSize) {
  SingleNodeRendezvous rdzv(0);
  absl::StatusOr<RoundAssignment> round = rdzv.NextRound(Join(RoundReason::kFirstJoin, 7));
  ASSERT_TRUE(round.ok()) << round.status();
  EXPECT_EQ(round->world_size, 7);
}

TEST(SingleNodeRendezvousTest, MasterPortAndAddressPassThroughEachRound) {
  SingleNodeRendezvous rdzv(2);
  JoinRequest join = Join(RoundReason::kFirstJoin);
  ASSERT_TRUE(rdzv.NextRound(join).ok());
  join.reason = RoundReason::kWorkerFailure;
  join.addr = "host-b";
  join.reserved_master_port = 40001;
  absl::StatusOr<RoundAssignment> round = rdzv.NextRound(join);
  ASSERT_TRUE(round.ok()) << round.status();
  EXPECT_EQ(round->master_addr, "host-b");
  EXPECT_EQ(round->master_port, 40001);
}

TEST(SingleNodeRendezvousTest, RoundsCountUpAndRestartsGrowOnlyOnFailure) {
  SingleNodeRendezvous rdzv(/*max_restarts=*/3);
  struct Step {
    RoundReason reason;
    int round;
    int restart_count;
  };
  const Step steps[] = {{RoundReason::kFirstJoin, 0, 0},
                        {RoundReason::kFirstJoin, 1, 0},
                        {RoundReason::kWorkerFailure, 2, 1},
                        {RoundReason::kFirstJoin, 3, 1},
                        {RoundReason::kWorkerFailure, 4, 2}};
  for (const Step& step : steps) {
    absl::StatusOr<RoundAssignment> round = rdzv.NextRound(Join(step.reason));
    ASSERT_TRUE(round.ok()) << round.status();
    EXPECT_EQ(round->round, step.round);
    EXPECT_EQ(round->restart_count, step.restart_count);
    EXPECT_EQ(rdzv.restarts_spent(), step.restart_count);
  }
}

TEST(SingleNodeRendezvousTest, ResourceExhaustedWhenTheBudgetIsSpent) {
  SingleNodeRendezvous rdzv(/*max_restarts=*/2);
  ASSERT_TRUE(rdzv.NextRound(Join(RoundReason::kFirstJoin)).ok());
  ASSERT_TRUE(rdzv.NextRound(Join(RoundReason::kWorkerFailure)).ok());
  ASSERT_TRUE(rdzv.NextRound(Join(RoundReason::kWorkerFailure)).ok());
  absl::StatusOr<RoundAssignment> round = rdzv.NextRound(Join(RoundReason::kWorkerFailure));
  ASSERT_FALSE(round.ok());
  EXPECT_EQ(round.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(round.status().message()), HasSubstr("--max-restarts=2"));
  EXPECT_EQ(rdzv.restarts_spent(), 2);
}

TEST(SingleNodeRendezvousTest, NoRestartsAllowed) {
  SingleNodeRendezvous rdzv(/*max_restarts=*/0);
  ASSERT_TRUE(rdzv.NextRound(Join(RoundReason::kFirstJoin)).ok());
  absl::StatusOr<RoundAssignment> round = rdzv.NextRound(Join(RoundReason::kWorkerFailure));
  ASSERT_FALSE(round.ok());
  EXPECT_EQ(round.status().code(), absl::StatusCode::kResourceExhausted);
}

TEST(SingleNodeRendezvousTest, RefusedRoundDoesNotAdvanceTheRoundNumber) {
  SingleNodeRendezvous rdzv(/*max_restarts=*/0);
  ASSERT_TRUE(rdzv.NextRound(Join(RoundReason::kFirstJoin)).ok());
  ASSERT_FALSE(rdzv.NextRound(Join(RoundReason::kWorkerFailure)).ok());
  absl::StatusOr<RoundAssignment> round = rdzv.NextRound(Join(RoundReason::kFirstJoin));
  ASSERT_TRUE(round.ok()) << round.status();
  EXPECT_EQ(round->round, 1);
}

}  // namespace
}  // namespace ddprun
