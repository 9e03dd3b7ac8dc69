#pragma once
// ddprun's command line: torchrun's options (both spellings, PET_* defaults) turned into a
// validated AgentConfig, or the text of --help / --version.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/agent_config.h"
#include "launcher/cli_values.h"
#include "launcher/launch_environment.h"

namespace ddprun {

struct CliOutcome {
  enum class Action { kRun, kPrint };
  Action action = Action::kRun;
  std::string text;                  // kPrint: what to print on stdout
  AgentConfig config;                // kRun
  std::vector<std::string> notices;  // one-line notes for the user (ignored options, ...)
};

/// Parses `args` (without the program name) with `env` and checks that the training script
/// can be run; every problem comes back as InvalidArgument/FailedPrecondition with one line
/// that names the option and the fix.
absl::StatusOr<CliOutcome> ParseCommandLine(const std::vector<std::string>& args,
                                            const DeviceCounts& devices,
                                            const LaunchEnvironment& env);
/// The same with this process's environment.
absl::StatusOr<CliOutcome> ParseCommandLine(const std::vector<std::string>& args,
                                            const DeviceCounts& devices);

/// ddprun's version, e.g. "ddprun 0.1.0".
std::string VersionText();

}  // namespace ddprun
