// The benchmark tools themselves: the load generator, the bare master and the Store
// benchmark run against real masters at a small scale and report sane figures, and the
// Python drivers run end to end, so that neither rots between benchmark runs.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/support/child_process.h"
#include "tests/support/temp_dir.h"

namespace ddprun::testing {
namespace {

using ::testing::HasSubstr;

const std::string kBuild = BUILD_DIR;
const std::string kSource = SOURCE_DIR;
const std::string kMaster = MASTER_BIN;
const std::string kBare = kBuild + "/bench/ddprun-bare-master";
const std::string kLoadgen = kBuild + "/bench/ddprun-loadgen";
const std::string kStoreLoad = kBuild + "/bench/ddprun-storeload";

// A master of either kind on a free loopback port, stopped at the end.
class Server {
 public:
  explicit Server(const std::string& binary) : port_(FreeLoopbackPort()) {
    EXPECT_TRUE(FileExists(binary)) << binary << " is not built: the load generator would wait "
                                    << "for a master that never listens";
    std::vector<std::string> argv = {binary, absl::StrCat("--port=", port_)};
    if (binary == kMaster) argv.push_back("--host=127.0.0.1");
    process_ = ChildProcess::Start(argv);
  }
  ~Server() {
    kill(process_->pid(), SIGTERM);
    process_->Wait(absl::Seconds(20));
  }
  std::string endpoint() const { return absl::StrCat("127.0.0.1:", port_); }
  int pid() const { return process_->pid(); }

 private:
  int port_;
  std::unique_ptr<ChildProcess> process_;
};

ProcessResult Loadgen(const Server& server, int agents, int connections,
                      const std::string& restart_path = "in-place") {
  return RunProcess({kLoadgen, "--endpoint=" + server.endpoint(), absl::StrCat("--agents=", agents),
                     absl::StrCat("--connections=", connections), "--restarts=2",
                     absl::StrCat("--master-pid=", server.pid()), "--timeout=60",
                     "--restart-path=" + restart_path},
                    {}, absl::Seconds(120));
}

// 150 sessions per connection: past a per-connection stream limit of 128, which once left
// 10,000 agents over 64 connections waiting for streams until the master dropped them.
TEST(BenchTools, LoadgenRunsRoundsAndRestartsAgainstTheMaster) {
  Server master(kMaster);
  ProcessResult shared = Loadgen(master, 300, 2);
  ASSERT_EQ(shared.exit_code, 0) << shared.err;
  EXPECT_THAT(shared.out, HasSubstr("\"agents\": 300, \"connections\": 2"));
  EXPECT_THAT(shared.out, ::testing::ContainsRegex("\"restart_ms\": \\[[0-9.]+, [0-9.]+\\]"));
  EXPECT_THAT(shared.out, ::testing::ContainsRegex("\"master_peak_rss_mib\": [1-9]"));
  EXPECT_THAT(shared.out, HasSubstr("\"restart_path\": \"in-place\""));
}

// The same master with agents that rejoin after every stop order: the three-message path
// every restart took before restarts in place, and still the one that follows a lost node.
TEST(BenchTools, LoadgenAgentsThatRejoinAfterEveryStop) {
  Server master(kMaster);
  ProcessResult join = Loadgen(master, 100, 4, "join");
  ASSERT_EQ(join.exit_code, 0) << join.err;
  EXPECT_THAT(join.out, HasSubstr("\"restart_path\": \"join\""));
  EXPECT_THAT(join.out, ::testing::ContainsRegex("\"restart_ms\": \\[[0-9.]+, [0-9.]+\\]"));
}

// The number after `"name": {` ... `"field": ` in the load generator's JSON; -1 if absent.
double JsonNumber(const std::string& json, const std::string& name, const std::string& field) {
  std::smatch found;
  const std::regex pattern("\"" + name + "\": \\{[^}]*\"" + field + "\": ([0-9.]+)");
  return std::regex_search(json, found, pattern) ? std::stod(found[1]) : -1;
}

// Failure news: every agent's stop order timed from the crash report, in every restart; and
// a silent agent (no heartbeat, its connection open) told to every other agent, which cannot
// happen before the keep-alive bound (0.2 s x 3) has passed since its last heartbeat, and
// must within seconds of it (a margin for a loaded machine).
TEST(BenchTools, LoadgenTimesFailureNewsAndASilentNode) {
  Server master(kMaster);
  ProcessResult r =
      RunProcess({kLoadgen, "--endpoint=" + master.endpoint(), "--agents=50", "--connections=2",
                  "--restarts=2", "--silent-node", "--keep-alive=0.2", "--timeout=60"},
                 {}, absl::Seconds(120));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(JsonNumber(r.out, "stop_news_ms", "n"), 100) << r.out;  // 50 agents x 2 restarts
  EXPECT_GT(JsonNumber(r.out, "stop_news_ms", "p50"), 0) << r.out;
  EXPECT_EQ(JsonNumber(r.out, "silent_news_ms", "n"), 49) << r.out;
  EXPECT_THAT(r.out, HasSubstr("\"silent_bound_ms\": 600"));
  EXPECT_GE(JsonNumber(r.out, "silent_news_ms", "p50"), 600) << r.out;
  EXPECT_LT(JsonNumber(r.out, "silent_news_ms", "max"), 600 + 10000) << r.out;
}

// The TCPStore load generator against ddprun's agent-served store: every client connects,
// passes the barrier and reads its peer's key (it fails on a missing reply or a closed
// connection), each phase after the one before.
TEST(BenchTools, StoreLoadMeetsEveryClientOnDdprunsStore) {
  auto server = ChildProcess::Start({kStoreLoad, "--serve=0"});
  ASSERT_TRUE(WaitUntil([&] { return server->OutSoFar().find('\n') != std::string::npos; },
                        absl::Seconds(20)))
      << "no port from --serve: " << server->ErrSoFar();
  const std::string port = server->OutSoFar().substr(0, server->OutSoFar().find('\n'));
  ProcessResult r =
      RunProcess({kStoreLoad, "--connect=127.0.0.1:" + port, "--clients=300", "--window=64",
                  absl::StrCat("--server-pid=", server->pid()), "--timeout=60"},
                 {}, absl::Seconds(90));
  kill(server->pid(), SIGTERM);
  EXPECT_EQ(server->Wait(absl::Seconds(20)).exit_code, 0);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::smatch found;
  ASSERT_TRUE(std::regex_search(
      r.out, found,
      std::regex("\"connect_ms\": ([0-9.]+), \"barrier_ms\": ([0-9.]+), \"peer_ms\": ([0-9.]+)")))
      << r.out;
  EXPECT_LE(std::stod(found[1]), std::stod(found[2]));
  EXPECT_LE(std::stod(found[2]), std::stod(found[3]));
  EXPECT_THAT(r.out, ::testing::ContainsRegex("\"server_peak_rss_mib\": [1-9]"));
}

TEST(BenchTools, StoreLoadWithoutAServerSaysWhichClientFailed) {
  ProcessResult r = RunProcess(
      {kStoreLoad, absl::StrCat("--connect=127.0.0.1:", FreeLoopbackPort()), "--clients=3"}, {},
      absl::Seconds(30));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("connect (client 0)"));
}

TEST(BenchTools, LoadgenWithOneConnectionPerAgentAgainstTheBareMaster) {
  Server bare(kBare);
  ProcessResult own = Loadgen(bare, 40, 0);
  ASSERT_EQ(own.exit_code, 0) << own.err;
  EXPECT_THAT(own.out, HasSubstr("\"agents\": 40, \"connections\": 40"));
}

TEST(BenchTools, LoadgenWithoutAMasterSaysSoWithinItsTimeout) {
  ProcessResult r = RunProcess({kLoadgen, absl::StrCat("--endpoint=127.0.0.1:", FreeLoopbackPort()),
                                "--agents=2", "--timeout=1"},
                               {}, absl::Seconds(30));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(
      r.err, HasSubstr("was not up within 1 s (0 up, 0 connecting): is the master running there?"));
}

TEST(BenchTools, LoadgenRefusesMoreConnectionsThanOpenFilesAllow) {
  ProcessResult r =
      RunProcess({kLoadgen, "--endpoint=127.0.0.1:1", "--agents=900000", "--connections=0"}, {},
                 absl::Seconds(30));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("hard limit (ulimit -Hn)"));
}

// The Python drivers, at the smallest size that runs every part of them.
TEST(BenchTools, ScaleStoreAndFootprintScriptsRunEndToEnd) {
  TempDir dir;
  ProcessResult scale =
      RunProcess({"/usr/bin/python3", kSource + "/bench/scale.py", "--build=" + kBuild, "--agents",
                  "50", "--news-agents", "50", "--runs", "2", "--json", dir.path() + "/scale.json"},
                 {}, absl::Seconds(120));
  ASSERT_EQ(scale.exit_code, 0) << scale.err;
  EXPECT_THAT(scale.out, HasSubstr("ddprun-master  one-per-agent N=    50: connect"));
  EXPECT_THAT(scale.out,
              ::testing::ContainsRegex("round +[0-9.]+ \\([0-9]+-[0-9]+\\).*\\(2 of 2 runs\\)"));
  EXPECT_THAT(scale.out, HasSubstr("failure news N=    50: crash -> told p50"));
  EXPECT_THAT(scale.out, ::testing::ContainsRegex("master restart N=    50: killed, a new master 3 "
                                                  "s later: every agent back in its round [0-9]+ "
                                                  "ms after its start"));
  ProcessResult store_scale =
      RunProcess({"/usr/bin/python3", kSource + "/bench/store_scale.py", "--build=" + kBuild,
                  "--clients", "64", "--runs", "1", "--json", dir.path() + "/store_scale.json"},
                 {}, absl::Seconds(120));
  ASSERT_EQ(store_scale.exit_code, 0) << store_scale.err;
  EXPECT_THAT(store_scale.out, ::testing::ContainsRegex("ddprun +64 +[0-9]"));
  ProcessResult store =
      RunProcess({"/usr/bin/python3", kSource + "/bench/store.py", "--build=" + kBuild, "--ops=512",
                  "--json", dir.path() + "/store.json"},
                 {}, absl::Seconds(180));
  ASSERT_EQ(store.exit_code, 0) << store.err;
  EXPECT_THAT(store.out, HasSubstr("1 client, p50 / bare gRPC unary p50: set"));
  ProcessResult footprint =
      RunProcess({"/usr/bin/python3", kSource + "/bench/footprint.py",
                  "--ddprun=" + kBuild + "/launcher/ddprun",
                  "--worker=" + kBuild + "/bench/bench_worker", "--seconds=1", "--no-torchrun"},
                 {}, absl::Seconds(120));
  ASSERT_EQ(footprint.exit_code, 0) << footprint.err;
  EXPECT_THAT(footprint.out, HasSubstr("ddprun c10d client"));
}

// TLS against plaintext: each run starts a master with --tls-* and gives the load generator the
// same certificate, so a TLS cell that completes was served over TLS (a plaintext client of a
// TLS master never connects); the ratio row needs both kinds to complete.
TEST(BenchTools, TheTlsScaleScriptMeetsATlsMasterOverTls) {
  TempDir dir;
  ProcessResult r =
      RunProcess({"/usr/bin/python3", kSource + "/bench/tls_scale.py", "--build=" + kBuild,
                  "--agents", "40", "--runs", "1", "--json", dir.path() + "/tls_scale.json"},
                 {}, absl::Seconds(180));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("      tls      shared-64 N=    40: connect"));
  EXPECT_THAT(r.out, HasSubstr("      tls  one-per-agent N=    40: connect"));
  EXPECT_THAT(r.out, ::testing::ContainsRegex("tls/plain  one-per-agent N=    40: connect "
                                              "[0-9.]+x  round [0-9.]+x  restart [0-9.]+x"));
  const std::string json = ReadFile(dir.path() + "/tls_scale.json");
  EXPECT_THAT(json, HasSubstr("\"tls\": true"));
  EXPECT_THAT(json, HasSubstr("\"tls\": false"));
}

#ifdef DDPRUN_ETCD  // built with the etcd-v3 backend
// The etcd-v3 backend's load at a small scale: a three-member etcd on loopback, 40 agents
// that elect one leader there, then the round and restarts as with c10d beside them.
TEST(BenchTools, TheEtcdScaleScriptElectsOneLeaderOnAThreeMemberEtcd) {
  TempDir dir;
  ProcessResult r =
      RunProcess({"/usr/bin/python3", kSource + "/bench/etcd_scale.py", "--build=" + kBuild,
                  "--agents", "40", "--runs", "1", "--json", dir.path() + "/etcd_scale.json"},
                 {}, absl::Seconds(180));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, ::testing::ContainsRegex("    40 c10d     election +0.0 ms .* round +[0-9.]+ "
                                              "ms  restarts [0-9]+/[0-9]+/[0-9]+ ms"));
  EXPECT_THAT(r.out,
              ::testing::ContainsRegex("    40 etcd-v3  election +[0-9.]+ ms  watches +[0-9.]+ "
                                       "ms  round +[0-9.]+ ms  restarts [0-9]+/[0-9]+/[0-9]+ "
                                       "ms  etcd RSS [0-9.]+ MiB"));
  const std::string json = ReadFile(dir.path() + "/etcd_scale.json");
  EXPECT_THAT(json, HasSubstr("\"campaign_ms\""));
  EXPECT_THAT(json, ::testing::Not(HasSubstr("\"error\"")));
}
#endif  // DDPRUN_ETCD

TEST(BenchTools, TheLaunchScriptsRunEndToEnd) {
  TempDir dir;
  ProcessResult binding = RunProcess(
      {"/usr/bin/python3", kSource + "/bench/binding.py", "--ddprun=" + kBuild + "/launcher/ddprun",
       "--worker=" + kBuild + "/bench/bench_worker", "--runs=1", "--json",
       dir.path() + "/binding.json"},
      {}, absl::Seconds(120));
  ASSERT_EQ(binding.exit_code, 0) << binding.out << binding.err;
  EXPECT_THAT(binding.out, HasSubstr("numa-excl: launch p90"));
  EXPECT_TRUE(FileExists(dir.path() + "/binding.json"));
  ProcessResult single =
      RunProcess({"/usr/bin/python3", kSource + "/bench/single_node.py",
                  "--ddprun=" + kBuild + "/launcher/ddprun",
                  "--worker=" + kBuild + "/bench/bench_worker", "--no-torchrun", "--runs=1"},
                 {}, absl::Seconds(120));
  ASSERT_EQ(single.exit_code, 0) << single.out << single.err;
  EXPECT_THAT(single.out, HasSubstr("launch_ms_nproc8"));
}

// The median of `agents` agents' crash -> restarted in docs/performance.md's table, in ms;
// -1 when the table does not have it.
double DocumentedRestartMs(int agents) {
  const std::string doc = ReadFile(kSource + "/docs/performance.md");
  const size_t section = doc.find("## 2. Crash -> restarted");
  std::smatch found;
  const std::regex row(absl::StrCat("\\| ", agents, " agents \\| [0-9.]+ / ([0-9.]+) / "));
  const std::string rest = section == std::string::npos ? "" : doc.substr(section);
  return std::regex_search(rest, found, row) ? std::stod(found[1]) : -1;
}

// A check against regressions of an order of magnitude, such as Nagle's delay on the master's
// sockets (2 agents: 45 ms for 7). The fastest of 5 runs, so that a loaded machine does not
// fail it; the figures themselves are bench/'s.
TEST(BenchTools, AMultiNodeRestartIsWithinTenTimesItsDocumentedFigure) {
#ifdef DDPRUN_SANITIZED
  // Every process of the restart (agents, workers) starts with ASan's shadow memory: 2 agents
  // took 103 ms at best there against 8 ms in the Release build. The check runs in Release.
  GTEST_SKIP() << "a time measured in an ASan+UBSan build is the sanitizers'";
#endif
  TempDir dir;
  const std::string json = dir.path() + "/multi_node.json";
  ProcessResult run = RunProcess(
      {"/usr/bin/python3", kSource + "/bench/multi_node.py",
       "--ddprun=" + kBuild + "/launcher/ddprun", "--worker=" + kBuild + "/bench/bench_worker",
       "--no-torchrun", "--runs=5", "--cases", "restart", "--json", json},
      {}, absl::Seconds(180));
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  const std::string results = ReadFile(json);
  for (int agents : {2, 4}) {
    const double documented = DocumentedRestartMs(agents);
    ASSERT_GT(documented, 0) << "docs/performance.md has no median for " << agents << " agents";
    std::smatch found;
    const std::regex fastest(
        absl::StrCat("\"restart_ms_", agents, "_agents\": \\{\\s*\"min\": ([0-9.]+)"));
    ASSERT_TRUE(std::regex_search(results, found, fastest)) << results;
    EXPECT_LT(std::stod(found[1]), 10 * documented)
        << agents << " agents: crash -> restarted took " << found[1] << " ms at best, documented "
        << documented << " ms\n"
        << run.out;
  }
}

// A PyTorch job's restart under the three launchers, one run of 2x2: every launcher's job
// ends (torchrun's nodes disagree on TORCHELASTIC_RESTART_COUNT, and a job that trusted it
// waited forever), and ddprun's split comes from its agents' own line.
TEST(BenchTools, TheTorchRestartScriptRunsEveryLauncherEndToEnd) {
  TempDir dir;
  ProcessResult run =
      RunProcess({"/usr/bin/python3", kSource + "/bench/torch_restart.py",
                  "--ddprun=" + kBuild + "/launcher/ddprun", "--runs=1", "--shapes", "2x2",
                  "--timeout=120", "--json", dir.path() + "/torch_restart.json"},
                 {}, absl::Seconds(400));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.err, ::testing::Not(HasSubstr(": exit ["))) << "a launcher's job failed";
  const std::string json = ReadFile(dir / "torch_restart.json");
  for (const char* launcher : {"ddprun --preload", "ddprun", "torchrun"}) {
    EXPECT_THAT(json, ::testing::ContainsRegex(absl::StrCat(
                          "\"", launcher, "\": \\{[^}]*\"all_reduce_ms\": \\{[^}]*\"n\": 1")))
        << launcher << ": " << json;
  }
  EXPECT_THAT(json, ::testing::ContainsRegex(
                        "\"ddprun --preload\": \\{.*\"split_connected_ms\": \\{[^}]*\"n\": 1"));
  EXPECT_THAT(run.out, HasSubstr("all_reduce: torchrun / ddprun --preload = "));
}

TEST(BenchTools, TheHangsScriptRunsEndToEnd) {
  TempDir dir;
  ProcessResult hangs = RunProcess(
      {"/usr/bin/python3", kSource + "/bench/hangs.py", "--ddprun=" + kBuild + "/launcher/ddprun",
       "--test-worker=" + kBuild + "/tests/integration/test_worker", "--runs=1", "--json",
       dir.path() + "/hangs.json"},
      {}, absl::Seconds(180));
  ASSERT_EQ(hangs.exit_code, 0) << hangs.out << hangs.err;
  EXPECT_THAT(hangs.out, HasSubstr("hang declared -> every agent has the report, 4 agents (ms)"));
  EXPECT_TRUE(FileExists(dir.path() + "/hangs.json"));
}

}  // namespace
}  // namespace ddprun::testing
