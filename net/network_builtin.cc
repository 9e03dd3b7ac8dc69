// LoadNetworkPlugin of a portable build (DDPRUN_PORTABLE): the network half is linked into
// ddprun itself, so a half is found by its entry point's name among the linked ones, and no
// library is looked for beside the binary.
#include "absl/strings/str_cat.h"
#include "net/network_plugin.h"

namespace ddprun {

absl::StatusOr<NetworkPlugin> LoadNetworkPlugin(const std::string& half) {
  using Entry = void (*)(NetworkPlugin*);
  Entry entry = nullptr;
  if (half == kGrpcNetwork) entry = &ddprun_network_grpc_v3;
#ifdef DDPRUN_ETCD  // net/CMakeLists.txt: built with the etcd half
  if (half == kEtcdNetwork) entry = &ddprun_network_etcd_v3;
#endif
  if (entry == nullptr) {
    return absl::NotFoundError(absl::StrCat("this ddprun has no network half '", half,
                                            "' (no ddprun_network_", half, "_v3 linked in)"));
  }
  NetworkPlugin plugin{};
  entry(&plugin);
  return plugin;
}

}  // namespace ddprun
