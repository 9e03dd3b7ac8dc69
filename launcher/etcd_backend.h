#pragma once
// The etcd-v3 backend (docs/etcd.md): the nodes elect the run's leader in etcd, and the
// leader hosts the rendezvous master. Registered under etcd-v3 and torchrun's names etcd and
// etcd-v2 (with a notice that the v3 API is used).

#include <vector>

#include "launcher/rendezvous_backend.h"

namespace ddprun {

std::vector<RendezvousBackend> EtcdBackends();

}  // namespace ddprun
