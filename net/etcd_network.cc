// The etcd half of the network plugin (kEtcdNetwork): the gRPC half's entry points, an
// election through etcd, and `ddprun status`/`stop` that find the run's leader in etcd first.
// Built only with DDPRUN_ETCD.

#include "net/admin_client.h"
#include "net/etcd_client.h"
#include "net/etcd_rendezvous.h"
#include "net/grpc_network.h"

namespace ddprun {
namespace {

// `ddprun status`/`stop` of an etcd-v3 run: to the master of the leader etcd names.
absl::StatusOr<std::string> EtcdAdmin(const AdminCommand& command) {
  absl::StatusOr<std::string> leader =
      FindLeader(static_cast<const EtcdSettings&>(*command.backend), command.run_id);
  if (!leader.ok()) return leader.status();
  AdminCommand to_leader = command;
  to_leader.endpoint = *leader;
  return RunAdminCommand(to_leader);
}

std::unique_ptr<ElectedRendezvous> Elect(const ElectionOptions& options) {
  return std::make_unique<EtcdRendezvous>(options, &HostMaster);
}

}  // namespace
}  // namespace ddprun

extern "C" void ddprun_network_etcd_v3(ddprun::NetworkPlugin* plugin) {
  ddprun::FillElectedHalf(plugin, &ddprun::Elect, &ddprun::EtcdAdmin);
}
