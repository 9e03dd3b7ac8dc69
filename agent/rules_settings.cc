#include "agent/rules_settings.h"

#include <algorithm>

namespace ddprun {

AgentSettings RulesSettings(const AgentConfig& config, const std::string& host,
                            const RendezvousConnection& rendezvous, bool serves_store) {
  AgentSettings settings;
  settings.host = host;
  settings.nproc_per_node = config.nproc_per_node;
  settings.options = config.rules;
  settings.heartbeat_interval = rendezvous.heartbeat_interval();
  // A master over the network: give up a little after its own join_timeout, which names
  // who is missing; this one catches a master that cannot be reached at all.
  if (settings.heartbeat_interval != absl::InfiniteDuration()) {
    settings.join_deadline = config.rendezvous.join_timeout + config.rendezvous.keep_alive_interval;
    settings.master_outage_timeout = config.master_outage_timeout;
    settings.finished_master_wait =
        std::min(config.master_outage_timeout,
                 config.rendezvous.keep_alive_interval * config.rendezvous.keep_alive_max_attempt);
  }
  settings.join_timeout = config.rendezvous.join_timeout;
  settings.master_endpoint = rendezvous.store_addr();
  settings.tls = config.tls.enabled();
  settings.health_check = config.health_check.any();
  settings.has_token = !config.token.empty();
  settings.serves_store = serves_store;
  return settings;
}

}  // namespace ddprun
