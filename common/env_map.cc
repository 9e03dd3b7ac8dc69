#include "common/env_map.h"

#include <unistd.h>

extern char** environ;

namespace ddprun {

EnvMap CurrentEnvironment() {
  EnvMap env;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string kv(*entry);
    const size_t eq = kv.find('=');
    if (eq == std::string::npos) continue;
    env.emplace(kv.substr(0, eq), kv.substr(eq + 1));
  }
  return env;
}

std::vector<std::string> FlattenEnv(const EnvMap& env) {
  std::vector<std::string> out;
  out.reserve(env.size());
  for (const auto& [key, value] : env) out.push_back(key + "=" + value);
  return out;
}

}  // namespace ddprun
