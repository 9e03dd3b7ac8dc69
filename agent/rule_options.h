#pragma once
// What the command line tells the agent's rules as it is, fixed for the agent's life. The
// launcher parses each field's option into AgentConfig::rules, and RulesSettings hands the
// whole of it to AgentSettings::options: a new setting of this kind is a field here (its
// default with it, which the option's entry shows), its option's entry, the rule that reads
// it, a scenario script (`options NAME=VALUE`) and its line in docs/cli.md.

#include "absl/time/time.h"

namespace ddprun {

struct RuleOptions {
  // --shutdown-timeout: from the stop signal to SIGKILL.
  absl::Duration shutdown_timeout = absl::Seconds(30);
  // --kill-timeout: after SIGKILL, how long workers may take to be gone before the agent
  // reports them unkillable, the node unhealthy, and exits.
  absl::Duration kill_timeout = absl::Seconds(10);
};

/// Calls visit(name, field) for each field of `options` (RuleOptions, const or not), named
/// as the scenario scripts write it.
template <typename Options, typename Visit>
void ForEachRuleOption(Options& options, Visit&& visit) {
  visit("shutdown_timeout", options.shutdown_timeout);
  visit("kill_timeout", options.kill_timeout);
}

}  // namespace ddprun
