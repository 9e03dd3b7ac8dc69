#pragma once
// GlooInterfaceChoice: GLOO_SOCKET_IFNAME for a round's workers, when this host's name
// resolves only to loopback here, where gloo would listen out of the other nodes' reach
// (torchrun's workers fail so): an interface toward the other nodes (ChooseGlooInterface),
// said once each time it changes.

#include <string>

namespace ddprun {

class GlooInterfaceChoice {
 public:
  /// `wanted`: this node's name resolves only to loopback (WorkerStore::pick_gloo_interface)
  /// and the agent's environment does not set GLOO_SOCKET_IFNAME. `endpoint_host`: the
  /// rendezvous endpoint's host, one way toward the other nodes.
  GlooInterfaceChoice(bool wanted, std::string endpoint_host)
      : wanted_(wanted), endpoint_host_(std::move(endpoint_host)) {}

  /// The interface for a round whose store is at `master_addr`; `arrival`: the address
  /// this node's store saw the others come to ("": none). "": none to set.
  std::string For(const std::string& master_addr, const std::string& arrival);

 private:
  const bool wanted_;
  const std::string endpoint_host_;
  std::string said_;  // the interface last logged ("?": the warning that none)
};

}  // namespace ddprun
