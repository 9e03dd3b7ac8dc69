#pragma once
// The --rdzv-conf keys, declared like options: each key's name, default, help and how its
// value goes into the AgentConfig. The keys that are rendezvous settings come from their
// table (rendezvous/rendezvous_settings.h: name, bounds, help); this agent's own keys follow.
// The parser, the error for an unknown key, --rdzv-conf's --help, the shell completion and
// the key table of docs/cli.md (checked by a test) are all made from this list.

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "agent/agent_config.h"

namespace ddprun {

struct RdzvConfKey {
  std::string name;
  std::string default_value;  // as the docs show it: "600", "inferred", "none"
  std::string help;
  // The value into the config (`option` is "--rdzv-conf NAME", for errors). Null: the key
  // names a file, read by ReadRdzvConfFiles (cli_rules.h), or is torchrun's and ignored.
  std::function<absl::Status(const std::string& option, const std::string& value,
                             AgentConfig& config)>
      apply;
  bool torchrun_only = false;  // accepted so that torchrun's command lines work; not listed
};

/// Every backend's keys, the rendezvous settings first. A backend may read keys of its own
/// besides (RendezvousBackend::rdzv_conf_keys).
const std::vector<RdzvConfKey>& RdzvConfKeys();

/// "join_timeout, last_call_timeout, ... or tls_ca": the keys ddprun reads, with
/// `backend_keys` (the chosen backend's own) last.
std::string RdzvConfKeyList(const std::string& conjunction,
                            const std::vector<RdzvConfKey>& backend_keys = {});

/// Applies the --rdzv-conf keys to `config`: every backend's, and `backend_keys`. A bad value
/// is an error that lists what is accepted. An unknown key is ignored, as torchrun ignores
/// keys it does not read (a key of another backend, a stray quote): one line for it, with
/// the nearest known key, goes to `ignored` when given.
absl::Status ApplyRdzvConf(const std::map<std::string, std::string>& conf, AgentConfig& config,
                           const std::vector<RdzvConfKey>& backend_keys = {},
                           std::vector<std::string>* ignored = nullptr);

}  // namespace ddprun
