#pragma once
// A process environment as a map, name to value: what the agent hands its workers and what
// the command line's rules read.

#include <map>
#include <string>
#include <vector>

namespace ddprun {

using EnvMap = std::map<std::string, std::string>;

/// The environment of this process as a map.
EnvMap CurrentEnvironment();

/// "KEY=VALUE" strings, in the form execve takes.
std::vector<std::string> FlattenEnv(const EnvMap& env);

}  // namespace ddprun
