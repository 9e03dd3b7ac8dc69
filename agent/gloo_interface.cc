#include "agent/gloo_interface.h"

#include <vector>

#include "node/host_info.h"
#include "spdlog/spdlog.h"
#include "store/store_address.h"

namespace ddprun {

std::string GlooInterfaceChoice::For(const std::string& master_addr, const std::string& arrival) {
  if (!wanted_) return "";
  std::vector<InterfaceChoice> choices;
  for (const NetworkInterface& i :
       {InterfaceToward(master_addr), InterfaceToward(endpoint_host_), InterfaceHolding(arrival)}) {
    choices.push_back({i.name, i.loopback});
  }
  const std::string name = ChooseGlooInterface(choices);
  if (name.empty() && said_ != "?") {
    // Mostly every node on this machine (a test, a workstation), where loopback is right:
    // INFO, not a warning on every such job.
    spdlog::info(
        "this host's name resolves only to loopback here, where gloo listens, and no "
        "interface toward the other nodes is known: workers that use gloo may not reach "
        "each other; set GLOO_SOCKET_IFNAME (e.g. eth0), or give this host's name an "
        "address the other nodes reach");
    said_ = "?";
  } else if (!name.empty() && name != said_) {
    spdlog::info(
        "this host's name resolves only to loopback here: workers get "
        "GLOO_SOCKET_IFNAME={} (the interface toward the other nodes), so that gloo "
        "listens where they reach it; set GLOO_SOCKET_IFNAME to choose",
        name);
    said_ = name;
  }
  return name;
}

}  // namespace ddprun
