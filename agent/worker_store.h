#pragma once
// WorkerStore: a multi-node agent's part in its workers' TCPStore, as the launcher sets it up
// and hands it to the agent.

#include <string>

#include "store/store_address.h"
#include "store/tcp_store_server.h"

namespace ddprun {

/// A multi-node agent's part in its workers' TCPStore (TORCHELASTIC_USE_AGENT_STORE=True):
/// the store it serves, and what it offers for MASTER_ADDR and MASTER_PORT should its node
/// get group rank 0.
struct WorkerStore {
  TcpStoreServer* server = nullptr;  // null: it serves none (static, --node-rank above 0)
  StoreAddressOffer offer;
  int port = 0;
  // This host's name resolves only to loopback here, where gloo would listen, out of the
  // other nodes' reach (torchrun's workers fail so): workers get GLOO_SOCKET_IFNAME, an
  // interface toward the other nodes (ChooseGlooInterface), unless the agent's environment
  // sets it.
  bool pick_gloo_interface = false;
};

}  // namespace ddprun
