#include "agent/store_address.h"

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

}  // namespace ddprun
