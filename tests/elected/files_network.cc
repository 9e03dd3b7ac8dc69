// The "files" network half of the test plugin (tests/elected/CMakeLists.txt): the gRPC half's
// entry points, an election in a folder (FileElection), and `ddprun status`/`stop` that find
// the run's leader there first.

#include "net/admin_client.h"
#include "net/grpc_network.h"
#include "tests/elected/file_election.h"

namespace ddprun {
namespace {

absl::StatusOr<std::string> FilesAdmin(const AdminCommand& command) {
  const auto& settings = static_cast<const FileSettings&>(*command.backend);
  FileStore store(settings.folder);
  absl::StatusOr<FileStore::Read> read =
      store.Get(absl::StrCat("/ddprun/", command.run_id, "/leader"));
  if (!read.ok()) return read.status();
  if (!read->key) {
    return absl::NotFoundError(
        absl::StrCat("run '", command.run_id, "' has no leader in ", settings.folder));
  }
  AdminCommand to_leader = command;
  to_leader.endpoint = read->key->value;
  return RunAdminCommand(to_leader);
}

std::unique_ptr<ElectedRendezvous> Elect(const ElectionOptions& options) {
  return std::make_unique<FileElection>(options, &HostMaster);
}

}  // namespace
}  // namespace ddprun

extern "C" void ddprun_network_files_v3(ddprun::NetworkPlugin* plugin) {
  ddprun::FillElectedHalf(plugin, &ddprun::Elect, &ddprun::FilesAdmin);
}
