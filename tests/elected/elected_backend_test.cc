// A second elected backend, registered by this test and never by ddprun: "files", whose
// store is a folder (FileStore) and whose executor is FileElection, a half of this folder's
// own libddprun_network.so beside the gRPC half. What every elected backend shares (the
// election's rules, ElectionExecutor, LeaderFollower, the common start) is ddprun's; what
// this one adds is its store's calls, its settings, its registry entry and its plugin entry.
// It runs two agents, as etcd-v3 does. The agents are this test binary again, run with
// --as-agent: it registers the backend, then does what `ddprun` does (RunDdprun).
#include <signal.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "launcher/backends.h"
#include "launcher/option_values.h"
#include "launcher/rendezvous_start.h"
#include "launcher/run_ddprun.h"
#include "tests/elected/file_settings.h"
#include "tests/elected/file_store.h"
#include "tests/support/child_process.h"
#include "tests/support/ddprun_paths.h"

namespace ddprun {
namespace {

constexpr char kAsAgent[] = "--as-agent";

// --rdzv-endpoint is the folder every node shares.
absl::Status CheckFiles(const OptionValues& values, AgentConfig& config) {
  if (config.rendezvous.max_nodes == 1) return absl::OkStatus();
  if (config.rdzv_endpoint.empty()) {
    return absl::InvalidArgumentError("--rdzv-backend=files needs --rdzv-endpoint=FOLDER");
  }
  auto settings = std::make_shared<FileSettings>();
  settings->folder = config.rdzv_endpoint;
  config.backend = settings;
  config.endpoint_host = "127.0.0.1";  // where the store address rules look: this machine
  return absl::OkStatus();
}

std::unique_ptr<StartedRendezvous> StartFiles(const RendezvousBackend& backend,
                                              const AgentConfig& config, int& exit_code) {
  return StartRendezvous(backend, config, "--rdzv-endpoint", exit_code);
}

absl::Status FindFilesMaster(const std::string& endpoint, const std::string&, AgentConfig&,
                             AdminCommand& command) {
  auto settings = std::make_shared<FileSettings>();
  settings->folder = endpoint;
  command.backend = settings;
  return absl::OkStatus();
}

void RegisterFiles() {
  RendezvousBackend files{"files", CheckFiles, StartFiles, HostingRule::kElected};
  files.network = "files";
  files.find_master = FindFilesMaster;
  if (!RegisterRendezvousBackend(std::move(files)).ok()) std::abort();
}

}  // namespace

namespace testing {
namespace {

using ::testing::HasSubstr;

std::string Self() { return std::filesystem::read_symlink("/proc/self/exe"); }

// An agent as users start one: no --local-addr (both are named as this host is).
std::vector<std::string> Agent(const TempDir& store, const TempDir& out,
                               const std::string& nnodes = "2", const std::string& mode = "env") {
  return {Self(),
          kAsAgent,
          "--nnodes=" + nnodes,
          "--nproc-per-node=2",
          "--rdzv-backend=files",
          "--rdzv-endpoint=" + store.path(),
          "--rdzv-id=job",
          "--rdzv-conf=join_timeout=60",
          "--no-python",
          kTestWorker,
          mode,
          out.path()};
}

bool Leads(const ChildProcess& agent) {
  return agent.ErrSoFar().find("this node leads run 'job'") != std::string::npos;
}

TEST(ElectedBackend, ARegisteredElectedBackendOfItsOwnRunsTwoAgents) {
  TempDir store, out;
  auto first = ChildProcess::Start(Agent(store, out), {{"LOGLEVEL", "INFO"}});
  auto second = ChildProcess::Start(Agent(store, out), {{"LOGLEVEL", "INFO"}});
  ProcessResult r1 = first->Wait(absl::Seconds(60));
  ProcessResult r2 = second->Wait(absl::Seconds(60));
  ASSERT_EQ(r1.exit_code, 0) << r1.err;
  ASSERT_EQ(r2.exit_code, 0) << r2.err;
  // One node led: it hosted the master, and the other followed it.
  const int leaders = (r1.err.find("this node leads run 'job'") != std::string::npos) +
                      (r2.err.find("this node leads run 'job'") != std::string::npos);
  EXPECT_EQ(leaders, 1) << r1.err << r2.err;
  for (int rank = 0; rank < 4; ++rank) {
    SCOPED_TRACE(rank);
    auto env = ParseEnvFile(out / absl::StrCat("env.", rank, ".0"));
    EXPECT_EQ(env["RANK"], std::to_string(rank));
    EXPECT_EQ(env["WORLD_SIZE"], "4");
    EXPECT_EQ(env["TORCHELASTIC_RUN_ID"], "job");
  }
  // The leader of an ended run removes its keys, as etcd-v3's does.
  FileStore files(store.path());
  absl::StatusOr<FileStore::Read> leader = files.Get("/ddprun/job/leader");
  ASSERT_TRUE(leader.ok()) << leader.status();
  EXPECT_FALSE(leader->key.has_value()) << "the leader key outlived the run";
}

// The leader's agent killed: its lease runs out, the other node sees its key go, leads,
// and runs the job on alone (--nnodes=1:2) with what the last leader remembered.
TEST(ElectedBackend, WhenTheLeaderIsKilledTheOtherNodeLeads) {
  TempDir store, out;
  auto first = ChildProcess::Start(Agent(store, out, "1:2", "wait-signal"), {{"LOGLEVEL", "INFO"}});
  ASSERT_TRUE(WaitUntil([&] { return Leads(*first); }, absl::Seconds(30))) << first->ErrSoFar();
  auto second =
      ChildProcess::Start(Agent(store, out, "1:2", "wait-signal"), {{"LOGLEVEL", "INFO"}});
  ASSERT_TRUE(WaitUntil(
      [&] {
        for (int rank = 0; rank < 4; ++rank) {
          if (!FileExists(out / absl::StrCat("ready.", rank))) return false;
        }
        return true;
      },
      absl::Seconds(30)))
      << first->ErrSoFar() << second->ErrSoFar();
  for (int rank = 0; rank < 4; ++rank) std::filesystem::remove(out / absl::StrCat("ready.", rank));
  // The leader keeps what its master remembers in the store, within about 100 ms of a change.
  FileStore files(store.path());
  ASSERT_TRUE(WaitUntil(
      [&] {
        absl::StatusOr<FileStore::Read> state = files.Get("/ddprun/job/state");
        return state.ok() && state->key.has_value();
      },
      absl::Seconds(10)));
  ASSERT_EQ(::kill(first->pid(), SIGKILL), 0);
  first->Wait(absl::Seconds(10));
  ASSERT_TRUE(WaitUntil([&] { return Leads(*second); }, absl::Seconds(30))) << second->ErrSoFar();
  EXPECT_THAT(second->ErrSoFar(), HasSubstr("with what the last leader remembered ("));
  ASSERT_TRUE(WaitUntil([&] { return FileExists(out / "ready.0") && FileExists(out / "ready.1"); },
                        absl::Seconds(30)))
      << "its workers run again, as the job's only node: " << second->ErrSoFar();
  ASSERT_EQ(::kill(second->pid(), SIGTERM), 0);
  ProcessResult done = second->Wait(absl::Seconds(60));
  EXPECT_EQ(done.exit_code, 143) << done.err;
}

}  // namespace
}  // namespace testing
}  // namespace ddprun

int main(int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]) == ddprun::kAsAgent) {
    ddprun::RegisterFiles();
    argv[1] = argv[0];
    return ddprun::RunDdprun(argc - 1, argv + 1);
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
