#pragma once
// ddprun's command line: torchrun's options (both spellings, PET_* defaults) turned into a
// validated AgentConfig, or the text of --help / --version.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/agent_config.h"
#include "launcher/cli_values.h"

namespace ddprun {

struct CliOutcome {
  enum class Action { kRun, kPrint };
  Action action = Action::kRun;
  std::string text;     // kPrint: what to print on stdout
  AgentConfig config;   // kRun
  std::vector<std::string> notices;  // one-line notes for the user (ignored options, ...)
};

/// Parses `args` (without the program name). Reads PET_* and PYTHON_EXEC from the
/// environment and checks that the training script can be run; every problem comes back as
/// InvalidArgument/FailedPrecondition with one line that names the option and the fix.
absl::StatusOr<CliOutcome> ParseCommandLine(const std::vector<std::string>& args,
                                            const DeviceCounts& devices);

/// ddprun's version, e.g. "ddprun 0.1.0".
std::string VersionText();

/// One option as --help shows it: what the man page and the shell completion are made of
/// (launcher/docgen.cc), so that the three never disagree.
struct OptionDoc {
  std::vector<std::string> names;  // every spelling: "-r", "--redirects", ...
  std::string env;                 // its PET_* variable; empty for --help and --version
  std::string help;                // the --help text, with its default
  std::string group;               // the --help section
  bool takes_value = false;
};

/// Every option, in --help's order.
std::vector<OptionDoc> DescribeOptions();
/// What --help prints after the options: the positional arguments, environment, exit status.
std::string HelpFooter();

}  // namespace ddprun
