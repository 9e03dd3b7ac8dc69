#pragma once
// The etcd-v3 backend (docs/etcd.md): the nodes elect the run's leader in etcd, and the
// leader hosts the rendezvous master. Registered under etcd-v3 and torchrun's names etcd and
// etcd-v2 (with a notice that the v3 API is used).

#include <string>
#include <vector>

#include "launcher/rendezvous_backend.h"

namespace ddprun {

std::vector<RendezvousBackend> EtcdBackends();

/// This backend's settings (config.backend) from `endpoint` (etcd's members) and
/// config.rdzv_conf's etcd keys and files, for `ddprun status`/`stop` of an etcd-v3 run.
absl::Status EtcdSettingsFor(const std::string& endpoint, AgentConfig& config);

/// InvalidArgument when `config` has a token but no TLS to the master: an etcd-v3 agent finds
/// its master at the address etcd names, which anyone who may write the run's keys can set,
/// and would send the token there in clear text.
absl::Status CheckEtcdTokenHasTls(const AgentConfig& config);

}  // namespace ddprun
