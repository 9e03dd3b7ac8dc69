// RulesSettings: what the agent's rules take from the command line and the rendezvous.
#include "agent/rules_settings.h"

#include "gtest/gtest.h"

namespace ddprun {
namespace {

// A rendezvous as a master over the network looks to the agent.
class NetworkedRendezvous : public LocalRendezvous {
 public:
  NetworkedRendezvous() : LocalRendezvous(3) {}
  std::string store_addr() const override { return "master:29400"; }
  absl::Duration heartbeat_interval() const override { return absl::Seconds(5); }
};

AgentConfig Config() {
  AgentConfig config;
  config.nproc_per_node = 4;
  config.rules.shutdown_timeout = absl::Seconds(7);
  config.rules.kill_timeout = absl::Seconds(3);
  config.rendezvous.join_timeout = absl::Seconds(600);
  config.rendezvous.keep_alive_interval = absl::Seconds(5);
  config.token = "secret";
  return config;
}

TEST(RulesSettingsTest, WithAMasterOverTheNetworkTheJoinHasABoundBeyondTheMasters) {
  NetworkedRendezvous rendezvous;
  AgentSettings s = RulesSettings(Config(), "node3", rendezvous, /*serves_store=*/true);
  EXPECT_EQ(s.host, "node3");
  EXPECT_EQ(s.nproc_per_node, 4);
  EXPECT_EQ(s.options.shutdown_timeout, absl::Seconds(7));
  EXPECT_EQ(s.options.kill_timeout, absl::Seconds(3));
  EXPECT_EQ(s.heartbeat_interval, absl::Seconds(5));
  EXPECT_EQ(s.join_deadline, absl::Seconds(605)) << "join_timeout + keep_alive_interval";
  EXPECT_EQ(s.master_endpoint, "master:29400");
  EXPECT_TRUE(s.has_token);
  EXPECT_TRUE(s.serves_store);
  EXPECT_FALSE(s.health_check);
}

TEST(RulesSettingsTest, OneNodeHasNoMasterToTellAndNoJoinBound) {
  LocalRendezvous rendezvous(3);
  AgentSettings s = RulesSettings(Config(), "node0", rendezvous, /*serves_store=*/false);
  EXPECT_EQ(s.heartbeat_interval, absl::InfiniteDuration());
  EXPECT_EQ(s.join_deadline, absl::InfiniteDuration());
  EXPECT_FALSE(s.serves_store);
}

}  // namespace
}  // namespace ddprun
