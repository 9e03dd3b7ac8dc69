// A rendezvous backend defined outside backends.cc, registered before the command line is
// parsed, runs a two-agent job: the registry, the declared hosting rule and the shared
// start (with the plugin's network half it names) are all a new backend needs. The agents are this
// test binary again, run with
// --as-agent: it registers the backend, then does what `ddprun` does (RunDdprun).
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/small_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "launcher/backends.h"
#include "launcher/option_values.h"
#include "launcher/rendezvous_start.h"
#include "launcher/run_ddprun.h"
#include "tests/support/child_process.h"
#include "tests/support/ddprun_paths.h"

namespace ddprun {
namespace {

constexpr char kAsAgent[] = "--as-agent";

// "rank0": c10d's command line (an endpoint every node reaches, ranks by arrival), but the
// agent with --node-rank=0 hosts the master, wherever the endpoint's host is.
absl::Status CheckRankZero(const OptionValues& values, AgentConfig& config) {
  if (values["--rdzv-endpoint"].empty()) {
    return absl::InvalidArgumentError("--rdzv-backend=rank0 needs --rdzv-endpoint=HOST:PORT");
  }
  return absl::OkStatus();
}

std::unique_ptr<StartedRendezvous> StartRankZero(const RendezvousBackend& backend,
                                                 const AgentConfig& config, int& exit_code) {
  return StartRendezvous(backend, config, "--rdzv-endpoint host", exit_code);
}

// "elsewhere": c10d's rules, through a network half the plugin does not have.
std::unique_ptr<StartedRendezvous> StartElsewhere(const RendezvousBackend& backend,
                                                  const AgentConfig& config, int& exit_code) {
  return StartRendezvous(backend, config, "--rdzv-endpoint host", exit_code);
}

// "pointed": `ddprun status`/`stop` find the master at the address in the file its
// --rdzv-endpoint names, as an elected backend finds it in its store.
absl::Status FindPointedMaster(const std::string& endpoint, const std::string&, AgentConfig&,
                               AdminCommand& command) {
  absl::StatusOr<std::string> address = ReadSmallFile(endpoint);
  if (!address.ok()) return address.status();
  command.endpoint = *address;
  return absl::OkStatus();
}

// Its own --rdzv-conf key: a word the agents print, so that the test sees it was read.
absl::Status Greeting(const std::string& option, const std::string& value, AgentConfig&) {
  std::fprintf(stderr, "rank0 backend: greeting=%s\n", value.c_str());
  return absl::OkStatus();
}

void RegisterRankZero() {
  absl::Status added =
      RegisterRendezvousBackend({"rank0",
                                 CheckRankZero,
                                 StartRankZero,
                                 HostingRule::kNodeRankZero,
                                 {{"greeting", "none", "a word the agent prints", Greeting}}});
  if (!added.ok()) std::abort();
  RendezvousBackend elsewhere{"elsewhere", CheckRankZero, StartElsewhere};
  elsewhere.network = "nosuch";
  if (!RegisterRendezvousBackend(std::move(elsewhere)).ok()) std::abort();
  // Elected, through the gRPC half, which cannot elect.
  RendezvousBackend elected{"elected", CheckRankZero, StartRankZero, HostingRule::kElected};
  if (!RegisterRendezvousBackend(std::move(elected)).ok()) std::abort();
  RendezvousBackend pointed{"pointed", CheckRankZero, StartRankZero};
  pointed.find_master = FindPointedMaster;
  if (!RegisterRendezvousBackend(std::move(pointed)).ok()) std::abort();
}

}  // namespace

namespace testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string Self() { return std::filesystem::read_symlink("/proc/self/exe"); }

// One agent of the job on 127.0.0.1: both agents are on the endpoint's host, so only the
// backend's rule says which one hosts.
std::vector<std::string> Agent(int port, int node_rank, const TempDir& dir) {
  return {Self(),
          kAsAgent,
          "--nnodes=2",
          "--nproc-per-node=2",
          "--rdzv-backend=rank0",
          absl::StrCat("--rdzv-endpoint=127.0.0.1:", port),
          "--rdzv-id=job",
          absl::StrCat("--node-rank=", node_rank),
          "--rdzv-conf=greeting=hello,join_timeout=60",
          "--no-python",
          kTestWorker,
          "env",
          dir.path()};
}

TEST(BackendRegistryTest, ARegisteredBackendRunsATwoAgentJobWithItsHostingRule) {
  RegisterRankZero();
  EXPECT_FALSE(RegisterRendezvousBackend({"rank0", CheckRankZero, StartRankZero}).ok())
      << "a name is registered once";
  TempDir dir;
  const int port = FreeLoopbackPort();
  // Node rank 1 starts first: under c10d's rule it would take the endpoint's port and host.
  auto second = ChildProcess::Start(Agent(port, 1, dir), {{"LOGLEVEL", "INFO"}});
  auto first = ChildProcess::Start(Agent(port, 0, dir), {{"LOGLEVEL", "INFO"}});
  ProcessResult r1 = second->Wait(absl::Seconds(60));
  ProcessResult r0 = first->Wait(absl::Seconds(60));
  ASSERT_EQ(r0.exit_code, 0) << r0.err;
  ASSERT_EQ(r1.exit_code, 0) << r1.err;
  EXPECT_THAT(r0.err, HasSubstr("hosting the rendezvous master for run 'job'"));
  EXPECT_THAT(r1.err, Not(HasSubstr("hosting the rendezvous master")));
  EXPECT_THAT(r0.err, HasSubstr("rank0 backend: greeting=hello")) << "its own key was read";
  for (int rank = 0; rank < 4; ++rank) {
    SCOPED_TRACE(rank);
    auto env = ParseEnvFile(dir / absl::StrCat("env.", rank, ".0"));
    EXPECT_EQ(env["RANK"], std::to_string(rank));
    EXPECT_EQ(env["WORLD_SIZE"], "4");
    EXPECT_EQ(env["TORCHELASTIC_RUN_ID"], "job");
  }
}

// A backend's network half is looked up by name in the plugin: one it lacks is said, by
// name, before anything starts.
TEST(BackendRegistryTest, ANetworkHalfThePluginLacksIsNamed) {
  TempDir dir;
  std::vector<std::string> agent = Agent(FreeLoopbackPort(), 0, dir);
  agent[4] = "--rdzv-backend=elsewhere";
  agent[8] = "--rdzv-conf=join_timeout=60";
  ProcessResult r = RunProcess(agent, {}, absl::Seconds(60));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("has no network half 'nosuch' (no ddprun_network_nosuch_v3"));
  EXPECT_FALSE(FileExists(dir / "env.0.0")) << "a worker started";
}

// An elected backend's start asks its network half to elect: one that cannot is said, naming
// the half, before anything starts.
TEST(BackendRegistryTest, AnElectedBackendWhoseHalfCannotElectIsSaid) {
  TempDir dir;
  std::vector<std::string> agent = Agent(FreeLoopbackPort(), 0, dir);
  agent[4] = "--rdzv-backend=elected";
  agent[8] = "--rdzv-conf=join_timeout=60";
  ProcessResult r = RunProcess(agent, {}, absl::Seconds(60));
  EXPECT_EQ(r.exit_code, 70) << r.err;
  EXPECT_THAT(r.err, HasSubstr("--rdzv-backend=elected elects the node that hosts the rendezvous "
                               "master, but the network plugin's half 'grpc' cannot elect"));
  EXPECT_FALSE(FileExists(dir / "env.0.0")) << "a worker started";
}

// `ddprun status` asks the backend where the run's master is; an unknown backend is said.
TEST(BackendRegistryTest, StatusFindsTheMasterWhereItsBackendSays) {
  TempDir dir;
  const int port = FreeLoopbackPort();  // nothing listens there
  WriteFile(dir / "master", absl::StrCat("127.0.0.1:", port));
  ProcessResult r = RunProcess({Self(), kAsAgent, "status", "--rdzv-backend=pointed",
                                "--rdzv-endpoint=" + (dir / "master"), "--timeout=2"},
                               {}, absl::Seconds(30));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr(absl::StrCat("127.0.0.1:", port))) << "the file's address";
  ProcessResult unknown = RunProcess(
      {Self(), kAsAgent, "status", "--rdzv-backend=nosuch", "--rdzv-endpoint=127.0.0.1:1"}, {},
      absl::Seconds(30));
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_THAT(unknown.err, HasSubstr("--rdzv-backend='nosuch' is not valid: expected c10d"));
}

TEST(BackendRegistryTest, TheHostingRuleSetsIsHostUnlessTheCommandLineDid) {
  AgentConfig config;
  config.rendezvous.max_nodes = 2;
  RendezvousBackend rule{"any", nullptr, nullptr, HostingRule::kNodeRankZero};
  ApplyHostingRule(rule, config);
  EXPECT_EQ(config.is_host, std::optional<bool>(true));
  config.is_host.reset();
  config.node_rank = 1;
  ApplyHostingRule(rule, config);
  EXPECT_EQ(config.is_host, std::optional<bool>(false));
  config.is_host = true;  // --rdzv-conf is_host=1
  ApplyHostingRule(rule, config);
  EXPECT_EQ(config.is_host, std::optional<bool>(true));
  config.is_host.reset();
  rule.hosting = HostingRule::kEndpointHost;
  ApplyHostingRule(rule, config);
  EXPECT_FALSE(config.is_host.has_value()) << "decided at the start, where the host is known";
}

}  // namespace
}  // namespace testing
}  // namespace ddprun

int main(int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]) == ddprun::kAsAgent) {
    ddprun::RegisterRankZero();
    argv[1] = argv[0];
    return ddprun::RunDdprun(argc - 1, argv + 1);
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
