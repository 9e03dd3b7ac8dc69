#include <set>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rpc/wire.h"

namespace ddprun {
namespace {

using ::testing::HasSubstr;

// Every value differs from its default, so a setting the table forgets stays at its
// default on the way back and the comparison fails.
RendezvousSettings Unusual() {
  RendezvousSettings s;
  s.min_nodes = 2;
  s.max_nodes = 7;
  s.max_restarts = 9;
  s.join_timeout = absl::Milliseconds(12345);
  s.last_call_timeout = absl::Milliseconds(2500);
  s.keep_alive_interval = absl::Milliseconds(750);
  s.keep_alive_max_attempt = 11;
  s.exit_barrier_timeout = absl::Seconds(42);
  s.node_health.max_node_failures = 4;
  s.node_health.max_node_flaps = 6;
  s.node_health.node_cooldown = absl::Seconds(90);
  s.node_health.exclude_hosts = {"h1", "h2.example"};
  return s;
}

TEST(RunSettingsWireTest, EverySettingMakesTheRoundTrip) {
  const RendezvousSettings sent = Unusual();
  EXPECT_EQ(SettingsAsText(FromWire(ToWire(sent))), SettingsAsText(sent));
  EXPECT_EQ(ToWire(sent).join_timeout_ms(), 12345);
  EXPECT_EQ(ToWire(sent).exclude_hosts_size(), 2);
}

TEST(RunSettingsWireTest, TheTableAndTheMessageNameTheSameFields) {
  std::set<std::string> from_table;
  const RendezvousSettings defaults;
  ForEachSetting(defaults, [&](const SettingField& field, const auto& value) {
    using Value = std::decay_t<decltype(value)>;
    from_table.insert(std::is_same_v<Value, absl::Duration> ? std::string(field.name) + "_ms"
                                                            : std::string(field.name));
  });
  std::set<std::string> in_proto;
  const auto* descriptor = v1::RunSettings::descriptor();
  for (int i = 0; i < descriptor->field_count(); ++i) in_proto.insert(descriptor->field(i)->name());
  EXPECT_EQ(from_table, in_proto);
}

TEST(RunSettingsWireTest, ACooldownOfZeroOnTheWireIsForeverAndAShortOneStaysShort) {
  RendezvousSettings s;
  s.node_health.node_cooldown = absl::InfiniteDuration();
  EXPECT_EQ(ToWire(s).node_cooldown_ms(), 0);
  EXPECT_EQ(FromWire(ToWire(s)).node_health.node_cooldown, absl::InfiniteDuration());
  s.node_health.node_cooldown = absl::Microseconds(10);
  EXPECT_EQ(ToWire(s).node_cooldown_ms(), 1) << "a short cooldown must not become forever";
  s.join_timeout = absl::ZeroDuration();
  EXPECT_EQ(FromWire(ToWire(s)).join_timeout, absl::ZeroDuration())
      << "only the cooldown's 0 means forever";
}

TEST(RunSettingsWireTest, EachBoundOfTheTableIsChecked) {
  EXPECT_TRUE(CheckSettingsLimits(ToWire(Unusual())).ok());
  v1::RunSettings m = ToWire(Unusual());
  m.set_keep_alive_interval_ms(0);
  EXPECT_THAT(CheckSettingsLimits(m).message(),
              HasSubstr("join.settings.keep_alive_interval_ms is 0; it must be in [1, "));
  m = ToWire(Unusual());
  m.set_max_restarts(-1);
  EXPECT_THAT(CheckSettingsLimits(m).message(), HasSubstr("join.settings.max_restarts is -1"));
  m = ToWire(Unusual());
  m.add_exclude_hosts(std::string(300, 'h'));
  EXPECT_THAT(CheckSettingsLimits(m).message(),
              HasSubstr("join.settings.exclude_hosts has 300 bytes; the limit is 255"));
  m = ToWire(Unusual());
  for (int i = 0; i < 4097; ++i) m.add_exclude_hosts("h");
  EXPECT_THAT(CheckSettingsLimits(m).message(),
              HasSubstr("join.settings.exclude_hosts (count) is 4099"));
}

}  // namespace
}  // namespace ddprun
