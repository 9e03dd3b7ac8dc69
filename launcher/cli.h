#pragma once
// ddprun's command line: torchrun's options (both spellings, PET_* defaults) turned into a
// validated AgentConfig, or the text of --help / --version.

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/agent_config.h"
#include "launcher/cli_values.h"

namespace ddprun {

struct CliOutcome {
  enum class Action { kRun, kPrint };
  Action action = Action::kRun;
  std::string text;                  // kPrint: what to print on stdout
  AgentConfig config;                // kRun
  std::vector<std::string> notices;  // one-line notes for the user (ignored options, ...)
};

/// What the command line's rules read from the process: its variables (PET_*, PYTHON_EXEC,
/// PATH, SLURM_JOB_ID, DDPRUN_RDZV_TOKEN, torchrun's TORCH_ELASTIC_*) and working folder.
struct LaunchEnvironment {
  std::map<std::string, std::string> vars;
  std::string cwd;
  int terminal_columns = 0;  // stdout's terminal width; 0: not a terminal

  /// The variable's value; "" when unset.
  std::string Get(const std::string& name) const {
    auto it = vars.find(name);
    return it == vars.end() ? "" : it->second;
  }
  /// This process's environment and working folder.
  static LaunchEnvironment OfThisProcess();
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

/// One option as --help shows it: what the man page and the shell completion are made of
/// (launcher/docgen.cc), so that the three never disagree.
struct OptionDoc {
  std::vector<std::string> names;  // every spelling: "-r", "--redirects", ...
  std::string env;                 // its PET_* variable; empty for --help and --version
  std::string help;                // the --help text, with its default
  std::string group;               // the --help section
  bool takes_value = false;
  std::vector<std::string> completion;  // words, "<dirs>" or "<files>" (options.h)
};

/// Every option, in --help's order.
std::vector<OptionDoc> DescribeOptions();
/// What --help prints after the options: the positional arguments, environment, exit status.
std::string HelpFooter();

}  // namespace ddprun
