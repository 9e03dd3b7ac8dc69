#include "rendezvous/rendezvous_settings.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ddprun {
namespace {

TEST(RendezvousSettingsTest, TheStatusShowsEverySettingByName) {
  RendezvousSettings s;
  s.keep_alive_interval = absl::Milliseconds(1500);
  s.node_health.node_cooldown = absl::InfiniteDuration();
  s.node_health.exclude_hosts = {"a", "b"};
  std::map<std::string, std::string> text = SettingsAsText(s);
  size_t fields = 0;
  ForEachSetting(s, [&](const SettingField&, const auto&) { ++fields; });
  EXPECT_EQ(text.size(), fields);
  EXPECT_EQ(text["keep_alive_interval"], "1.5s");
  EXPECT_EQ(text["node_cooldown"], "inf");
  EXPECT_EQ(text["exclude_hosts"], "a,b");
  EXPECT_EQ(text["max_restarts"], "0");
}

// A hostile first joiner may send 4096 host names of 255 bytes (the join's bounds): the
// status every `ddprun status` and page poll gets shows a few, not a megabyte.
TEST(RendezvousSettingsTest, AHugeExcludeListStaysSmallInTheStatus) {
  RendezvousSettings s;
  s.node_health.exclude_hosts.assign(4096, std::string(255, 'h'));
  const std::string shown = SettingsAsText(s)["exclude_hosts"];
  EXPECT_LT(shown.size(), 8u * 256 + 64);
  EXPECT_THAT(shown, ::testing::EndsWith(",... (4096 in all)"));
}

TEST(RendezvousSettingsTest, TheJobsShapeMustBeTheSameOnEveryNode) {
  RendezvousSettings run, joiner;
  run.min_nodes = 2;
  run.max_nodes = 2;
  run.max_restarts = 3;
  joiner = run;
  joiner.join_timeout = absl::Seconds(1);  // the master's to decide
  EXPECT_TRUE(SameJobSettings(run, joiner).ok());
  EXPECT_TRUE(SameRunSettings(run, joiner).ok());
  joiner.max_nodes = 4;
  joiner.max_restarts = 0;
  EXPECT_EQ(SameJobSettings(run, joiner).message(),
            "this node was started with --nnodes=2:4 --max-restarts=0 but the run uses "
            "--nnodes=2:2 --max-restarts=3: start every node with the same values");
  EXPECT_EQ(SameRunSettings(run, joiner), SameJobSettings(run, joiner));
}

TEST(RendezvousSettingsTest, TheKeepAliveMustMatchTheHostingMaster) {
  RendezvousSettings run, joiner;
  joiner.keep_alive_interval = absl::Minutes(1);
  EXPECT_TRUE(SameJobSettings(run, joiner).ok()) << "a standalone master takes the first's";
  EXPECT_EQ(SameRunSettings(run, joiner).message(),
            "this node was started with --rdzv-conf keep_alive_interval=1m but the run's master "
            "uses 5s: start every node with the same values");
  joiner = run;
  joiner.keep_alive_max_attempt = 9;
  EXPECT_THAT(SameRunSettings(run, joiner).message(),
              ::testing::HasSubstr("--rdzv-conf keep_alive_max_attempt=9 but the run's master "
                                   "uses 3"));
}

}  // namespace
}  // namespace ddprun
