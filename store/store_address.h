#pragma once
// What a multi-node agent offers the rendezvous as its workers' MASTER_ADDR, should its node
// get group rank 0: where the other nodes reach the TCPStore it serves
// (docs/environment.md#master_addr-and-master_port). Pure; the master applies the rest of
// the rules (rendezvous/node_address.h) to an empty offer.

#include <string>
#include <vector>

namespace ddprun {

struct StoreAddressFacts {
  // The store the workers use is on the rendezvous master's port: this agent hosts the
  // master and serves the store beside it, or (static) node 0 does.
  bool store_on_master_port = false;
  std::string endpoint_host;           // --rdzv-endpoint's host (c10d), --master-addr (static)
  bool endpoint_is_this_host = false;  // IsThisHost(endpoint_host)
  std::string local_addr;              // --local-addr
  std::string host_name;
  bool host_name_beyond_loopback = false;  // it resolves here to an address that is not loopback
};

struct StoreAddressOffer {
  std::string addr;           // empty: the master takes where this agent's connection comes from
  std::string fallback_addr;  // the host name, for when the master cannot see that either
};

/// Where gloo should listen, of the interfaces toward other nodes that this node knows of,
/// best first (toward MASTER_ADDR, toward the rendezvous endpoint, where another host's
/// connection arrived): the first that names an interface and is not loopback; "" when
/// none is. gloo listens where the host's name resolves, and on many clusters that is
/// loopback, out of the other nodes' reach.
struct InterfaceChoice {
  std::string name;  // empty: not known
  bool loopback = false;
};
std::string ChooseGlooInterface(const std::vector<InterfaceChoice>& toward_other_nodes);

/// The endpoint's host when the store is on the master's port or on the endpoint's machine
/// (every node reached the master there, and the store listens on every address); else
/// --local-addr; else nothing, for the master to fill in.
StoreAddressOffer OfferStoreAddress(const StoreAddressFacts& facts);

}  // namespace ddprun
