#pragma once
// `ddprun status` and `ddprun stop`: ask a running job's rendezvous master how the job is,
// or end it, from anywhere that reaches the master (docs/observability.md).

#include <string>
#include <vector>

#include "launcher/launch_environment.h"
#include "launcher/option_docs.h"

namespace ddprun {

/// `args[0]` is "status" or "stop". Prints the answer and returns the exit status: 0, 1 when
/// the master refused or could not be reached (said on stderr), 2 for a bad command line.
int RunAdminCommandLine(const std::vector<std::string>& args, const LaunchEnvironment& env);

/// The options of `ddprun <command>` ("status" or "stop"), each by its dashed long name, in
/// the order --help shows them: for the shell completions.
std::vector<OptionDoc> DescribeAdminOptions(const std::string& command);

/// Whether `ddprun ARG ...` is one of them: the first argument, exactly.
bool IsAdminCommand(const std::string& first_arg);

}  // namespace ddprun
