#pragma once
// The node-health options (docs/node-health.md): one section of the option table
// (options.h), and the rule that fills in their defaults from the rest of the command line.

#include <vector>

#include "absl/status/status.h"
#include "agent/agent_config.h"
#include "launcher/launch_environment.h"
#include "launcher/options.h"

namespace ddprun {

/// Defaults that depend on other options: the built-in check is on for
/// --nproc-per-node=gpu (unless --health-check=none), the failure and flap limits are on for
/// elastic jobs (--nnodes=MIN:MAX with MIN < MAX), and free disk is read in the log dir.
void ApplyNodeHealthRules(const OptionValues& values, const LaunchEnvironment& env,
                          AgentConfig& config);

}  // namespace ddprun
