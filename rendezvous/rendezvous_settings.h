#pragma once
// RendezvousSettings: what every node of a run shares, and the one table that says, for each
// setting, its name (on the wire, in the status, as an --rdzv-conf key), its bounds, how a
// user gives it and whether nodes must agree on it. The wire conversions and checks
// (rpc/run_settings_wire), the comparison of a joiner's settings with the run's, the run's
// status and the --rdzv-conf keys (launcher/rdzv_conf_keys) all walk the table: a new
// setting is a field and a line here, a field of RunSettings in the proto, and its rule.
//
// AgentConfig holds one, filled by the launcher and passed down as it is.

#include <cstdint>
#include <map>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "rendezvous/node_health.h"

namespace ddprun {

struct RendezvousSettings {
  int min_nodes = 1;
  int max_nodes = 1;
  int max_restarts = 0;
  absl::Duration join_timeout = absl::Seconds(600);
  absl::Duration last_call_timeout = absl::Seconds(30);
  absl::Duration keep_alive_interval = absl::Seconds(5);
  int keep_alive_max_attempt = 3;
  absl::Duration exit_barrier_timeout = absl::Seconds(300);
  NodeHealthSettings node_health;  // when nodes are kept out (node_health.h)
};

/// The most nodes a run may have.
inline constexpr int64_t kMaxNodes = int64_t{1} << 20;
/// The longest duration a setting may have on the wire: a year, in milliseconds.
inline constexpr int64_t kMaxSettingMs = int64_t{365} * 24 * 3600 * 1000;

/// Who decides a setting when nodes give different values.
enum class Agreement {
  kJob,        // the job's shape: a joiner that differs from the run is refused
  kEveryNode,  // also refused when it differs from the hosting agent's (a master that
               // expects heartbeats more often than a node sends them would evict it)
  kMaster,     // the run's value is the master's whatever a joiner says, as torchrun lets
               // each node have its own timeouts
};

/// One line of the table.
struct SettingField {
  const char* name;  // RunSettings' field: `name`, or `name`_ms for a duration
  int64_t min, max;  // a joiner's value must be within: a duration's in ms, a list's entries
  Agreement agreement;
  // The option that gives it ("--max-restarts"); null: the --rdzv-conf key `name`
  // (launcher/rdzv_conf_keys), which `rdzv_conf_help` describes.
  const char* option;
  const char* rdzv_conf_help = nullptr;
  bool zero_is_forever = false;  // a duration whose 0 on the wire is InfiniteDuration
};

/// How a user gives `field`: "--max-restarts", "--rdzv-conf keep_alive_interval".
std::string OptionOf(const SettingField& field);

/// Calls visit(field, value) for every setting of `settings`, in the table's order; `value`
/// is an int, an absl::Duration or a std::vector<std::string>, const when `settings` is.
template <typename Settings, typename Visit>
void ForEachSetting(Settings& s, Visit&& visit) {
  static_assert(std::is_same_v<std::remove_const_t<Settings>, RendezvousSettings>);
  using F = SettingField;
  using A = Agreement;
  constexpr int64_t kYearMs = kMaxSettingMs;
  // clang-format off
  visit(F{"min_nodes",    1, kMaxNodes, A::kJob, "--nnodes"},       s.min_nodes);
  visit(F{"max_nodes",    1, kMaxNodes, A::kJob, "--nnodes"},       s.max_nodes);
  visit(F{"max_restarts", 0, 1 << 30,   A::kJob, "--max-restarts"}, s.max_restarts);
  visit(F{"join_timeout", 0, kYearMs, A::kMaster, nullptr,
          "how long the run waits for --nnodes MIN nodes to join before it ends"},
        s.join_timeout);
  visit(F{"last_call_timeout", 0, kYearMs, A::kMaster, nullptr,
          "once MIN nodes have joined, how long the master waits for more"},
        s.last_call_timeout);
  visit(F{"keep_alive_interval", 1, kYearMs, A::kEveryNode, nullptr,
          "how often an agent sends the master a heartbeat"},
        s.keep_alive_interval);
  visit(F{"keep_alive_max_attempt", 1, 1 << 20, A::kEveryNode, nullptr,
          "heartbeats missed in a row before the master drops a node"},
        s.keep_alive_max_attempt);
  visit(F{"exit_barrier_timeout", 0, kYearMs, A::kMaster, "--exit-barrier-timeout"},
        s.exit_barrier_timeout);
  auto& health = s.node_health;
  visit(F{"max_node_failures", 0, 1 << 30, A::kMaster, "--max-node-failures"},
        health.max_node_failures);
  visit(F{"max_node_flaps",    0, 1 << 30, A::kMaster, "--max-node-flaps"},
        health.max_node_flaps);
  visit(F{"node_cooldown",     0, kYearMs, A::kMaster, "--node-cooldown", nullptr,
          /*zero_is_forever=*/true},
        health.node_cooldown);
  visit(F{"exclude_hosts",     0, 4096,    A::kMaster, "--exclude-hosts"},
        health.exclude_hosts);
  // clang-format on
}

/// A setting's value as the status and messages show it: "3", "5s", "inf", "h1,h2".
std::string SettingText(int value);
std::string SettingText(absl::Duration value);
std::string SettingText(const std::vector<std::string>& value);

/// Every setting by name, as text (the run's status).
std::map<std::string, std::string> SettingsAsText(const RendezvousSettings& settings);

/// FailedPrecondition naming the options and both values when `joiner` differs from `run`
/// in the job's shape (Agreement::kJob).
absl::Status SameJobSettings(const RendezvousSettings& run, const RendezvousSettings& joiner);
/// SameJobSettings, and the settings every node must share with the master (kEveryNode):
/// for a master whose hosting agent fixed the run's settings. The others (kMaster) are the
/// run's whatever a joiner says.
absl::Status SameRunSettings(const RendezvousSettings& run, const RendezvousSettings& joiner);

}  // namespace ddprun
