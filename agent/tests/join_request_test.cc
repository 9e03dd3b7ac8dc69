// JoinRequest: what a node tells the rendezvous when it asks for a round.
#include "agent/join_request.h"

#include <unistd.h>

#include "gtest/gtest.h"

namespace ddprun {
namespace {

TEST(JoinRequestTest, ANodeServingTheStoreOffersItsAddressAndPortAndWhereItsRunWas) {
  AgentConfig config;
  config.nproc_per_node = 4;
  config.node_rank = 3;
  config.node_rank_given = true;
  WorkerStore store;
  store.offer.addr = "10.0.0.7";
  store.offer.fallback_addr = "node7";
  store.port = 29501;
  Assignment last;
  last.round = 5;
  last.restart_count = 2;
  absl::StatusOr<NodeInfo> node =
      JoinRequest(config, {"node7", "abc", store, last, "no GPU found"});
  ASSERT_TRUE(node.ok()) << node.status();
  EXPECT_EQ(node->host, "node7");
  EXPECT_EQ(node->incarnation, "abc");
  EXPECT_EQ(node->pid, static_cast<int>(::getpid()));
  EXPECT_EQ(node->local_world_size, 4);
  EXPECT_EQ(node->node_rank_hint, 3);
  EXPECT_EQ(node->addr, "10.0.0.7");
  EXPECT_EQ(node->fallback_addr, "node7");
  EXPECT_EQ(node->master_port, 29501);
  EXPECT_TRUE(node->restarts_in_place) << "no health check must run before each round";
  EXPECT_EQ(node->last_round, 5);
  EXPECT_EQ(node->restarts_seen, 2);
  EXPECT_EQ(node->failed_check, "no GPU found");
}

TEST(JoinRequestTest, OneNodesRankZeroWorkerHostsTheStoreAtTheGivenOrAFreePort) {
  AgentConfig config;
  config.master_addr = "127.0.0.1";
  config.master_port = 29400;
  absl::StatusOr<NodeInfo> node = JoinRequest(config, {"host", "abc", std::nullopt, {}, ""});
  ASSERT_TRUE(node.ok()) << node.status();
  EXPECT_EQ(node->addr, "127.0.0.1");
  EXPECT_EQ(node->master_port, 29400);
  EXPECT_EQ(node->node_rank_hint, -1);
  EXPECT_EQ(node->last_round, -1) << "no round run yet";
  config.master_port.reset();
  node = JoinRequest(config, {"host", "abc", std::nullopt, {}, ""});
  ASSERT_TRUE(node.ok()) << node.status();
  EXPECT_GT(node->master_port, 0) << "a port free now";
}

TEST(JoinRequestTest, ARoundThatCannotRunHereIsRefusedSayingWhy) {
  Assignment round;
  round.world_size = 4;
  round.base_rank = 2;
  round.group_world_size = 2;
  round.master_addr = "127.0.0.1";
  round.master_port = 29500;
  EXPECT_TRUE(CheckRoundHere(round, 2, /*agent_store=*/true).ok());
  Assignment too_big = round;
  too_big.base_rank = 3;  // ranks 3 and 4 of a world of 4
  EXPECT_FALSE(CheckRoundHere(too_big, 2, true).ok());
  Assignment nowhere = round;
  nowhere.master_addr = "no-such-host.invalid";
  absl::Status s = CheckRoundHere(nowhere, 2, true);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("start it with --local-addr=IP"), absl::string_view::npos)
      << s.message();
  EXPECT_TRUE(CheckRoundHere(nowhere, 2, /*agent_store=*/false).ok())
      << "one node: rank 0's worker hosts the store here";
}

}  // namespace
}  // namespace ddprun
