#include "store/store_address.h"

#include <gtest/gtest.h>

namespace ddprun {
namespace {

StoreAddressFacts Facts() {
  StoreAddressFacts facts;
  facts.endpoint_host = "head";
  facts.host_name = "node7";
  return facts;
}

TEST(OfferStoreAddressTest, AStoreOnTheMastersPortIsReachedAtTheEndpoint) {
  StoreAddressFacts facts = Facts();
  facts.store_on_master_port = true;
  facts.local_addr = "10.0.0.7";  // the endpoint wins: every node reached it already
  EXPECT_EQ(OfferStoreAddress(facts).addr, "head");
}

TEST(OfferStoreAddressTest, AStoreOnTheEndpointsMachineIsReachedAtTheEndpoint) {
  StoreAddressFacts facts = Facts();
  facts.endpoint_is_this_host = true;  // e.g. ddprun-master runs here
  EXPECT_EQ(OfferStoreAddress(facts).addr, "head");
}

TEST(OfferStoreAddressTest, ElseLocalAddrElseNothingForTheMasterToFillIn) {
  StoreAddressFacts facts = Facts();
  facts.local_addr = "10.0.0.7";
  EXPECT_EQ(OfferStoreAddress(facts).addr, "10.0.0.7");
  facts.local_addr = "";
  EXPECT_EQ(OfferStoreAddress(facts).addr, "");
}

// Debian maps a host's own name to 127.0.1.1: such a name is never offered.
TEST(OfferStoreAddressTest, TheHostNameIsAFallbackOnlyWhenItIsNotLoopback) {
  StoreAddressFacts facts = Facts();
  EXPECT_EQ(OfferStoreAddress(facts).fallback_addr, "");
  facts.host_name_beyond_loopback = true;
  EXPECT_EQ(OfferStoreAddress(facts).fallback_addr, "node7");
}

// On the node whose name MASTER_ADDR is (Debian: 127.0.1.1 there), the interface toward
// MASTER_ADDR is loopback; the next choice wins.
TEST(ChooseGlooInterfaceTest, TheFirstThatIsNotLoopback) {
  EXPECT_EQ(ChooseGlooInterface({{"eth0", false}, {"ib0", false}}), "eth0");
  EXPECT_EQ(ChooseGlooInterface({{"lo", true}, {"", false}, {"eth1", false}}), "eth1");
  EXPECT_EQ(ChooseGlooInterface({{"lo", true}, {"lo", true}, {"", false}}), "");
  EXPECT_EQ(ChooseGlooInterface({}), "");
}

}  // namespace
}  // namespace ddprun
