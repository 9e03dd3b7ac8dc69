#include "store/store_address.h"

namespace ddprun {

StoreAddressOffer OfferStoreAddress(const StoreAddressFacts& facts) {
  StoreAddressOffer offer;
  if (facts.store_on_master_port || facts.endpoint_is_this_host) {
    offer.addr = facts.endpoint_host;
  } else {
    offer.addr = facts.local_addr;
  }
  if (facts.host_name_beyond_loopback) offer.fallback_addr = facts.host_name;
  return offer;
}

std::string ChooseGlooInterface(const std::vector<InterfaceChoice>& toward_other_nodes) {
  for (const InterfaceChoice& choice : toward_other_nodes) {
    if (!choice.name.empty() && !choice.loopback) return choice.name;
  }
  return "";
}

}  // namespace ddprun
