// --rdzv-conf: ParseRdzvConf then ApplyRdzvConf on arbitrary text. When both accept it, the
// settings they produce must be usable (positive durations, at least one keep-alive attempt).

#include <cstdint>
#include <string>

#include "agent/agent_config.h"
#include "launcher/cli_values.h"
#include "launcher/rdzv_conf_keys.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  // token_file= and tls_*= read files; see fuzz_cli.
  if (input.find("token_file") != std::string::npos || input.find("tls_") != std::string::npos)
    return 0;
  absl::StatusOr<std::map<std::string, std::string>> conf = ddprun::ParseRdzvConf(input);
  if (!conf.ok()) return 0;
  ddprun::AgentConfig config;
  if (!ddprun::ApplyRdzvConf(*conf, config).ok()) return 0;
  if (config.rendezvous.join_timeout <= absl::ZeroDuration() ||
      config.rendezvous.last_call_timeout <= absl::ZeroDuration() ||
      config.rendezvous.keep_alive_interval <= absl::ZeroDuration() ||
      config.heartbeat_timeout <= absl::ZeroDuration() ||
      config.rendezvous.keep_alive_max_attempt < 1) {
    __builtin_trap();  // accepted a setting the agent cannot use
  }
  return 0;
}
