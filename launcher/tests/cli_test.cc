#include "launcher/cli.h"
#include "launcher/option_docs.h"
#include "launcher/options.h"
#include "launcher/rdzv_conf_keys.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/temp_dir.h"

extern char** environ;

namespace ddprun {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

// Sets or unsets one environment variable for the scope, restoring the previous value after.
class ScopedEnv {
 public:
  ScopedEnv(std::string name, std::optional<std::string> value) : name_(std::move(name)) {
    if (const char* old = ::getenv(name_.c_str())) old_ = old;
    if (value) {
      ::setenv(name_.c_str(), value->c_str(), /*overwrite=*/1);
    } else {
      ::unsetenv(name_.c_str());
    }
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_.c_str(), old_->c_str(), 1);
    } else {
      ::unsetenv(name_.c_str());
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

using ::ddprun::testing::TempDir;

DeviceCounts FakeDevices(int gpus = 0, int cpus = 4) {
  DeviceCounts devices;
  devices.count_gpus = [gpus]() -> absl::StatusOr<int> { return gpus; };
  devices.cpu_count = cpus;
  return devices;
}

bool LooksLikeUuid4(const std::string& id) {
  if (id.size() != 36) return false;
  for (size_t i = 0; i < id.size(); ++i) {
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (id[i] != '-') return false;
    } else if (!std::isxdigit(static_cast<unsigned char>(id[i])) ||
               std::isupper(static_cast<unsigned char>(id[i]))) {
      return false;
    }
  }
  return id[14] == '4' && std::string("89ab").find(id[19]) != std::string::npos;
}

// Every test starts from an environment without the variables ParseCommandLine reads.
class ParseCommandLineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::vector<std::string> names = {
        "PYTHON_EXEC", "SLURM_JOB_ID", "TORCH_ELASTIC_SHUTDOWN_TIMEOUT",
        "TORCH_ELASTIC_EXIT_BARRIER_TIMEOUT", "TORCHELASTIC_SIGNALS_TO_HANDLE"};
    for (char** entry = environ; *entry != nullptr; ++entry) {
      const std::string kv(*entry);
      if (absl::StartsWith(kv, "PET_")) names.push_back(kv.substr(0, kv.find('=')));
    }
    for (const std::string& name : names) {
      cleared_.push_back(std::make_unique<ScopedEnv>(name, std::nullopt));
    }
  }
  void TearDown() override {
    // Restore in reverse order of clearing.
    while (!cleared_.empty()) cleared_.pop_back();
  }

  // Parses `args` and expects success.
  CliOutcome ParseOk(const std::vector<std::string>& args,
                     const DeviceCounts& devices = FakeDevices()) {
    absl::StatusOr<CliOutcome> outcome = ParseCommandLine(args, devices);
    EXPECT_TRUE(outcome.ok()) << outcome.status();
    return outcome.ok() ? *std::move(outcome) : CliOutcome{};
  }

  // Parses `args` and expects an error; returns its message.
  absl::Status ParseError(const std::vector<std::string>& args,
                          const DeviceCounts& devices = FakeDevices()) {
    absl::StatusOr<CliOutcome> outcome = ParseCommandLine(args, devices);
    EXPECT_FALSE(outcome.ok()) << "parsed without error";
    return outcome.status();
  }

  static std::string Message(const absl::Status& status) { return std::string(status.message()); }

 private:
  std::vector<std::unique_ptr<ScopedEnv>> cleared_;
};

// ---------------------------------------------------------------------------- defaults

TEST_F(ParseCommandLineTest, DefaultsForAProgram) {
  CliOutcome out = ParseOk({"--no-python", "/bin/sh"});
  EXPECT_EQ(out.action, CliOutcome::Action::kRun);
  const AgentConfig& c = out.config;
  EXPECT_EQ(c.rendezvous.min_nodes, 1);
  EXPECT_EQ(c.rendezvous.max_nodes, 1);
  EXPECT_EQ(c.nproc_per_node, 1);
  EXPECT_EQ(c.node_rank, 0);
  EXPECT_EQ(c.rdzv_backend, "static");
  EXPECT_EQ(c.run_id, "none");
  EXPECT_FALSE(c.standalone);
  EXPECT_EQ(c.master_addr, "localhost");
  EXPECT_FALSE(c.master_port.has_value());
  EXPECT_EQ(c.role, "default");
  EXPECT_EQ(c.rendezvous.max_restarts, 0);
  EXPECT_THAT(c.worker_argv, ElementsAre("/bin/sh"));
  EXPECT_EQ(c.entrypoint_name, "/bin/sh");
  EXPECT_EQ(c.redirects.all_ranks, kStdNone);
  EXPECT_EQ(c.tee.all_ranks, kStdNone);
  EXPECT_FALSE(c.local_ranks_filter.has_value());
  EXPECT_THAT(c.signals_to_handle, ElementsAre(SIGTERM, SIGINT, SIGHUP, SIGQUIT));
  EXPECT_EQ(c.rules.shutdown_timeout, absl::Seconds(30));
  EXPECT_EQ(c.rendezvous.exit_barrier_timeout, absl::Seconds(300));
  EXPECT_TRUE(out.notices.empty());
}

// The defaults are declared once, in the config (agent/agent_config.h and the settings it
// holds): the option table and the --rdzv-conf keys show them as their parsers read them
// back. A job started without options runs with exactly what a config built in code has.
TEST_F(ParseCommandLineTest, TheCommandLinesDefaultsAreTheConfigsOwn) {
  const AgentConfig c = ParseOk({"--no-python", "/bin/sh"}).config;
  const AgentConfig d;
  EXPECT_EQ(c.rendezvous.min_nodes, d.rendezvous.min_nodes);
  EXPECT_EQ(c.rendezvous.max_nodes, d.rendezvous.max_nodes);
  EXPECT_EQ(c.rendezvous.max_restarts, d.rendezvous.max_restarts);
  EXPECT_EQ(c.rendezvous.exit_barrier_timeout, d.rendezvous.exit_barrier_timeout);
  EXPECT_EQ(c.rendezvous.node_health.node_cooldown, d.rendezvous.node_health.node_cooldown);
  EXPECT_EQ(c.nproc_per_node, d.nproc_per_node);
  EXPECT_EQ(c.node_rank, d.node_rank);
  EXPECT_EQ(c.role, d.role);
  EXPECT_EQ(c.rdzv_backend, d.rdzv_backend);
  EXPECT_EQ(c.run_id, d.run_id);
  EXPECT_EQ(c.redirects.all_ranks, d.redirects.all_ranks);
  EXPECT_EQ(c.tee.all_ranks, d.tee.all_ranks);
  EXPECT_EQ(c.signals_to_handle, kAlwaysHandledSignals);
  EXPECT_EQ(c.rules.shutdown_timeout, d.rules.shutdown_timeout);
  EXPECT_EQ(c.worker_heartbeat_timeout, d.worker_heartbeat_timeout);
  EXPECT_EQ(c.worker_heartbeat_startup_timeout, d.worker_heartbeat_startup_timeout);
  EXPECT_EQ(c.uninterruptible_timeout, d.uninterruptible_timeout);
  EXPECT_EQ(c.rules.kill_timeout, d.rules.kill_timeout);
  EXPECT_EQ(c.health_check.timeout, d.health_check.timeout);
  EXPECT_EQ(c.health_check.min_free_disk_bytes, d.health_check.min_free_disk_bytes);
  EXPECT_EQ(c.event_log.kind, d.event_log.kind);
  EXPECT_EQ(c.close_timeout, d.close_timeout);
  EXPECT_EQ(c.heartbeat_timeout, d.heartbeat_timeout);
  EXPECT_EQ(c.master_outage_timeout, d.master_outage_timeout);
  EXPECT_EQ(c.read_timeout, d.read_timeout);
  // c10d's endpoint without a port.
  const AgentConfig c10d = ParseOk({"--nnodes=2", "--rdzv-backend=c10d", "--rdzv-endpoint=node0",
                                    "--no-python", "/bin/sh"})
                               .config;
  EXPECT_EQ(c10d.endpoint_port, d.endpoint_port);
}

// The defaults --help and docs/cli.md show, made from the config's values, read as a user
// writes them.
TEST_F(ParseCommandLineTest, DefaultsAreShownAsAUserWritesThem) {
  std::map<std::string, std::string> shown;
  for (const OptionSpec& spec : Options()) shown[spec.name] = spec.default_value;
  EXPECT_EQ(shown["--shutdown-timeout"], "30");
  EXPECT_EQ(shown["--kill-timeout"], "10");
  EXPECT_EQ(shown["--worker-heartbeat-startup-timeout"], "600");
  EXPECT_EQ(shown["--health-check-min-free-disk"], "0");
  EXPECT_EQ(shown["--signals-to-handle"], "SIGTERM,SIGINT,SIGHUP,SIGQUIT");
  EXPECT_EQ(shown["--nnodes"], "1:1");
  for (const RdzvConfKey& key : RdzvConfKeys()) {
    if (key.name == "master_outage_timeout") EXPECT_EQ(key.default_value, "300");
    if (key.name == "heartbeat_timeout") EXPECT_EQ(key.default_value, "5");
  }
}

// ---------------------------------------------------------------------------- --nproc-per-node

TEST_F(ParseCommandLineTest, NprocDashedSpellingWithEquals) {
  CliOutcome out = ParseOk({"--nproc-per-node=2", "--no-python", "/bin/sh"});
  EXPECT_EQ(out.config.nproc_per_node, 2);
}

TEST_F(ParseCommandLineTest, NprocUnderscoreSpellingWithSpace) {
  CliOutcome out = ParseOk({"--nproc_per_node", "2", "--no-python", "/bin/sh"});
  EXPECT_EQ(out.config.nproc_per_node, 2);
}

TEST_F(ParseCommandLineTest, NprocAutoUsesInjectedDevices) {
  EXPECT_EQ(ParseOk({"--nproc-per-node=auto", "--no-python", "/bin/sh"}, FakeDevices(3, 8))
                .config.nproc_per_node,
            3);
  EXPECT_EQ(ParseOk({"--nproc-per-node=auto", "--no-python", "/bin/sh"}, FakeDevices(0, 8))
                .config.nproc_per_node,
            8);
}

TEST_F(ParseCommandLineTest, NprocBadValueIsAnError) {
  absl::Status status = ParseError({"--nproc-per-node=abc", "--no-python", "/bin/sh"});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(status), HasSubstr("--nproc-per-node='abc'"));
}

// The review's 100,000 workers produced a 45 MB failure summary; values the master would
// refuse are refused here, where the user sees them first.
TEST_F(ParseCommandLineTest, ValuesPastWhatAJobCanUseAreRefused) {
  EXPECT_THAT(Message(ParseError({"--nproc-per-node=100000", "--no-python", "/bin/sh"})),
              HasSubstr("at most 4096 workers on one node"));
  EXPECT_EQ(ParseOk({"--nproc-per-node=4096", "--no-python", "/bin/sh"}).config.nproc_per_node,
            4096);
  EXPECT_THAT(
      Message(ParseError({"--rdzv-conf=keep_alive_interval=0.0001", "--no-python", "/bin/sh"})),
      HasSubstr("expected seconds from 0.001 to 31536000 (1ms to 8760h)"));
}

TEST_F(ParseCommandLineTest, PetEnvironmentGivesTheDefault) {
  ScopedEnv pet("PET_NPROC_PER_NODE", "3");
  CliOutcome out = ParseOk({"--no-python", "/bin/sh"});
  EXPECT_EQ(out.config.nproc_per_node, 3);
}

TEST_F(ParseCommandLineTest, ExplicitFlagBeatsPetEnvironment) {
  ScopedEnv pet("PET_NPROC_PER_NODE", "3");
  CliOutcome out = ParseOk({"--nproc-per-node=2", "--no-python", "/bin/sh"});
  EXPECT_EQ(out.config.nproc_per_node, 2);
}

TEST_F(ParseCommandLineTest, BadPetValueIsAnError) {
  ScopedEnv pet("PET_NPROC_PER_NODE", "zero");
  absl::Status status = ParseError({"--no-python", "/bin/sh"});
  EXPECT_THAT(Message(status), HasSubstr("--nproc-per-node"));
  EXPECT_THAT(Message(status), HasSubstr("'zero'"));
}

// ---------------------------------------------------------------------------- rendezvous

TEST_F(ParseCommandLineTest, StandaloneUsesC10dAndARandomRunId) {
  CliOutcome first = ParseOk({"--standalone", "--no-python", "/bin/sh"});
  CliOutcome second = ParseOk({"--standalone", "--no-python", "/bin/sh"});
  EXPECT_TRUE(first.config.standalone);
  EXPECT_EQ(first.config.rdzv_backend, "c10d");
  EXPECT_TRUE(LooksLikeUuid4(first.config.run_id)) << first.config.run_id;
  EXPECT_TRUE(LooksLikeUuid4(second.config.run_id)) << second.config.run_id;
  EXPECT_NE(first.config.run_id, second.config.run_id);
}

TEST_F(ParseCommandLineTest, StandaloneIgnoresRdzvOptions) {
  CliOutcome out = ParseOk(
      {"--standalone", "--rdzv-backend=static", "--rdzv-id=job1", "--no-python", "/bin/sh"});
  EXPECT_EQ(out.config.rdzv_backend, "c10d");
  EXPECT_NE(out.config.run_id, "job1");
}

TEST_F(ParseCommandLineTest, InASlurmJobTheJobIdIsTheDefaultRunId) {
  ScopedEnv job("SLURM_JOB_ID", "4242");
  EXPECT_EQ(
      ParseOk({"--nnodes=2", "--rdzv-backend=c10d", "--rdzv-endpoint=h", "--no-python", "/bin/sh"})
          .config.run_id,
      "4242");
  // What the job script says wins: the option, then PET_RDZV_ID.
  EXPECT_EQ(ParseOk({"--rdzv-id=mine", "--no-python", "/bin/sh"}).config.run_id, "mine");
  EXPECT_EQ(ParseOk({"--rdzv-id=none", "--no-python", "/bin/sh"}).config.run_id, "none");
  {
    ScopedEnv pet("PET_RDZV_ID", "from-pet");
    EXPECT_EQ(ParseOk({"--no-python", "/bin/sh"}).config.run_id, "from-pet");
  }
  // --standalone still draws its own.
  EXPECT_NE(ParseOk({"--standalone", "--no-python", "/bin/sh"}).config.run_id, "4242");
}

TEST_F(ParseCommandLineTest, RdzvOptions) {
  CliOutcome out = ParseOk({"--rdzv-backend=c10d", "--rdzv_endpoint=host:29400", "--rdzv-id=job7",
                            "--rdzv-conf=join_timeout=5", "--no-python", "/bin/sh"});
  EXPECT_EQ(out.config.rdzv_backend, "c10d");
  EXPECT_EQ(out.config.rdzv_endpoint, "host:29400");
  EXPECT_EQ(out.config.run_id, "job7");
  EXPECT_THAT(out.config.rdzv_conf, ElementsAre(Pair("join_timeout", "5")));
}

TEST_F(ParseCommandLineTest, BadRdzvValuesAreErrors) {
  EXPECT_THAT(Message(ParseError({"--rdzv-backend=zookeeper", "--no-python", "/bin/sh"})),
              HasSubstr("--rdzv-backend='zookeeper'"));
  EXPECT_THAT(Message(ParseError({"--rdzv-conf=a=1,a=2", "--no-python", "/bin/sh"})),
              HasSubstr("--rdzv-conf='a=1,a=2'"));
  EXPECT_THAT(Message(ParseError({"--rdzv-id=a/b", "--no-python", "/bin/sh"})),
              HasSubstr("--rdzv-id='a/b'"));
  EXPECT_THAT(Message(ParseError({"--rdzv-id=" + std::string(257, 'j'), "--no-python", "/bin/sh"})),
              HasSubstr("it has 257 bytes"));
  EXPECT_THAT(Message(ParseError({"--rdzv-id=..", "--no-python", "/bin/sh"})),
              HasSubstr("not '.' or '..'"));
  EXPECT_THAT(Message(ParseError({"--rdzv-id=a\nb", "--no-python", "/bin/sh"})),
              HasSubstr("control character"));
  EXPECT_TRUE(ParseOk({"--rdzv-id=" + std::string(256, 'j'), "--no-python", "/bin/sh"})
                  .config.run_id.size() == 256);
}

TEST_F(ParseCommandLineTest, MultiNodeC10dNeedsAnEndpoint) {
  absl::Status status = ParseError({"--nnodes=2", "--rdzv-backend=c10d", "--no-python", "/bin/sh"});
  EXPECT_THAT(Message(status), HasSubstr("needs --rdzv-endpoint=HOST[:PORT]"));
  CliOutcome out = ParseOk({"--nnodes=1:3", "--rdzv-backend=c10d", "--rdzv-endpoint=head:1234",
                            "--local-addr=10.0.0.7", "--no-python", "/bin/sh"});
  EXPECT_EQ(out.config.endpoint_host, "head");
  EXPECT_EQ(out.config.endpoint_port, 1234);
  EXPECT_EQ(out.config.local_addr, "10.0.0.7");      // what this node offers as MASTER_ADDR
  EXPECT_FALSE(out.config.master_port.has_value());  // its store's port: the kernel picks one
  EXPECT_FALSE(out.config.is_host.has_value());      // inferred at start-up
  EXPECT_EQ(ParseOk({"--nnodes=2", "--rdzv-backend=c10d", "--rdzv-endpoint=head",
                     "--master-port=29600", "--no-python", "/bin/sh"})
                .config.master_port,
            29600);
  EXPECT_EQ(ParseOk({"--nnodes=2", "--rdzv-backend=c10d", "--rdzv-endpoint=head", "--no-python",
                     "/bin/sh"})
                .config.endpoint_port,
            29400);
}

TEST_F(ParseCommandLineTest, MultiNodeStaticUsesNodeZeroAsTheMaster) {
  EXPECT_THAT(Message(ParseError({"--nnodes=2", "--no-python", "/bin/sh"})),
              HasSubstr("needs --master-addr and --master-port"));
  EXPECT_THAT(Message(ParseError({"--nnodes=1:2", "--master-addr=h", "--master-port=1",
                                  "--no-python", "/bin/sh"})),
              HasSubstr("must be a fixed count"));
  EXPECT_THAT(Message(ParseError({"--nnodes=2", "--node-rank=2", "--master-addr=h",
                                  "--master-port=1", "--no-python", "/bin/sh"})),
              HasSubstr("--node-rank=2 is not valid"));
  CliOutcome node0 = ParseOk({"--nnodes=2", "--node-rank=0", "--master-addr=head",
                              "--master-port=29500", "--no-python", "/bin/sh"});
  EXPECT_EQ(node0.config.endpoint_host, "head");
  EXPECT_EQ(node0.config.endpoint_port, 29500);
  EXPECT_EQ(node0.config.is_host, std::optional<bool>(true));
  // torchrun's workers get exactly these as MASTER_ADDR and MASTER_PORT.
  EXPECT_EQ(node0.config.master_addr, "head");
  EXPECT_EQ(node0.config.master_port, 29500);
  CliOutcome node1 = ParseOk({"--nnodes=2", "--node-rank=1", "--master-addr=head",
                              "--master-port=29500", "--no-python", "/bin/sh"});
  EXPECT_EQ(node1.config.is_host, std::optional<bool>(false));
  EXPECT_TRUE(node1.config.node_rank_given);
}

TEST_F(ParseCommandLineTest, RdzvConfKeys) {
  TempDir dir;
  const std::string token_file = dir.Write("token", "  s3cret\n");
  CliOutcome out =
      ParseOk({"--rdzv-conf=join_timeout=5,last_call_timeout=0.5,keep_alive_interval=1,"
               "keep_alive_max_attempt=4,heartbeat_timeout=2,read_timeout=7.5,"
               "is_host=0,token_file=" +
                   token_file,
               "--no-python", "/bin/sh"});
  EXPECT_EQ(out.config.rendezvous.join_timeout, absl::Seconds(5));
  EXPECT_EQ(out.config.rendezvous.last_call_timeout, absl::Milliseconds(500));
  EXPECT_EQ(out.config.rendezvous.keep_alive_interval, absl::Seconds(1));
  EXPECT_EQ(out.config.rendezvous.keep_alive_max_attempt, 4);
  EXPECT_EQ(out.config.heartbeat_timeout, absl::Seconds(2));
  EXPECT_EQ(out.config.read_timeout, absl::Milliseconds(7500));
  EXPECT_EQ(out.config.is_host, std::optional<bool>(false));
  EXPECT_EQ(out.config.token, "s3cret");
  // torchrun ignores keys it does not read: a line, and the job runs.
  EXPECT_THAT(ParseOk({"--rdzv-conf=joint_timeout=5", "--no-python", "/bin/sh"}).notices,
              ::testing::Contains(HasSubstr("did you mean join_timeout?")));
  EXPECT_THAT(Message(ParseError({"--rdzv-conf=join_timeout=soon", "--no-python", "/bin/sh"})),
              HasSubstr("--rdzv-conf join_timeout='soon'"));
  EXPECT_THAT(
      Message(ParseError({"--rdzv-conf=token_file=/no/such/file", "--no-python", "/bin/sh"})),
      HasSubstr("cannot be read"));
  // /dev/zero never ends: it was read without bound.
  EXPECT_THAT(Message(ParseError({"--rdzv-conf=token_file=/dev/zero", "--no-python", "/bin/sh"})),
              HasSubstr("token_file='/dev/zero' holds more than 4096 bytes; a token is one line"));
  ScopedEnv token("DDPRUN_RDZV_TOKEN", "from-env");
  EXPECT_EQ(ParseOk({"--no-python", "/bin/sh"}).config.token, "from-env");
}

TEST_F(ParseCommandLineTest, BadNnodesIsAnError) {
  absl::Status status = ParseError({"--nnodes=0", "--no-python", "/bin/sh"});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(status), HasSubstr("--nnodes='0'"));
}

TEST_F(ParseCommandLineTest, MasterAddressAndPort) {
  CliOutcome out =
      ParseOk({"--master-addr=10.0.0.1", "--master-port=29500", "--no-python", "/bin/sh"});
  EXPECT_EQ(out.config.master_addr, "10.0.0.1");
  EXPECT_EQ(out.config.master_port, 29500);

  out = ParseOk({"--local-addr=10.0.0.2", "--no-python", "/bin/sh"});
  EXPECT_EQ(out.config.master_addr, "10.0.0.2");
  EXPECT_EQ(out.config.local_addr, "10.0.0.2");

  for (const std::string port : {"0", "65536", "x"}) {
    EXPECT_THAT(Message(ParseError({"--master-port=" + port, "--no-python", "/bin/sh"})),
                HasSubstr("--master-port='" + port + "'"));
  }
}

// ---------------------------------------------------------------------------- worker command

TEST_F(ParseCommandLineTest, ScriptArgumentsPassVerbatim) {
  CliOutcome out = ParseOk({"--no-python", "/bin/sh", "-c", "echo --nnodes=5"});
  EXPECT_THAT(out.config.worker_argv, ElementsAre("/bin/sh", "-c", "echo --nnodes=5"));
  EXPECT_EQ(out.config.nproc_per_node, 1);
  EXPECT_EQ(out.config.rendezvous.max_nodes, 1);
}

TEST_F(ParseCommandLineTest, OptionLikeScriptArgumentsAreNotParsed) {
  CliOutcome out =
      ParseOk({"--no-python", "/bin/sh", "--help", "--nproc-per-node=9", "--version", "-m", "--"});
  EXPECT_EQ(out.action, CliOutcome::Action::kRun);
  EXPECT_EQ(out.config.nproc_per_node, 1);
  EXPECT_THAT(out.config.worker_argv,
              ElementsAre("/bin/sh", "--help", "--nproc-per-node=9", "--version", "-m", "--"));
}

TEST_F(ParseCommandLineTest, DoubleDashEndsTheOptions) {
  CliOutcome out = ParseOk({"--no-python", "--", "/bin/sh", "-c", "true"});
  EXPECT_THAT(out.config.worker_argv, ElementsAre("/bin/sh", "-c", "true"));
}

TEST_F(ParseCommandLineTest, PythonScriptRunsWithPythonExec) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  const std::string script = dir.Write("train.py", "print('hi')\n", 0644);
  ScopedEnv python("PYTHON_EXEC", "/bin/sh");
  CliOutcome out = ParseOk({script, "--lr", "0.1", "--nnodes=7"});
  EXPECT_THAT(out.config.worker_argv,
              ElementsAre("/bin/sh", "-u", script, "--lr", "0.1", "--nnodes=7"));
  EXPECT_EQ(out.config.entrypoint_name, script);
  EXPECT_EQ(out.config.rendezvous.max_nodes, 1);
}

TEST_F(ParseCommandLineTest, PythonScriptThatIsNotAFileIsAnError) {
  TempDir dir;
  ScopedEnv python("PYTHON_EXEC", "/bin/sh");
  absl::Status status = ParseError({dir.path() + "/missing.py"});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(status), HasSubstr("missing.py"));
  EXPECT_THAT(Message(status), HasSubstr("is not a file"));

  status = ParseError({dir.path()});  // a folder
  EXPECT_THAT(Message(status), HasSubstr("is not a file"));
}

TEST_F(ParseCommandLineTest, MissingPythonInterpreterIsAnError) {
  TempDir dir;
  const std::string script = dir.Write("train.py", "", 0644);
  ScopedEnv python("PYTHON_EXEC", dir.path() + "/no-such-python");
  absl::Status status = ParseError({script});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(status), HasSubstr("no-such-python"));
  EXPECT_THAT(Message(status), HasSubstr("PYTHON_EXEC"));
}

TEST_F(ParseCommandLineTest, ModuleBuildsDashM) {
  ScopedEnv python("PYTHON_EXEC", "/bin/sh");
  CliOutcome out = ParseOk({"-m", "pkg.train", "--epochs", "2"});
  EXPECT_THAT(out.config.worker_argv,
              ElementsAre("/bin/sh", "-u", "-m", "pkg.train", "--epochs", "2"));
  EXPECT_EQ(out.config.entrypoint_name, "pkg.train");

  out = ParseOk({"--module", "pkg.train"});
  EXPECT_THAT(out.config.worker_argv, ElementsAre("/bin/sh", "-u", "-m", "pkg.train"));
}

TEST_F(ParseCommandLineTest, ModuleWithNoPythonIsAnError) {
  absl::Status status = ParseError({"-m", "--no-python", "/bin/sh"});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(status), HasSubstr("--no-python"));
  EXPECT_THAT(Message(status), HasSubstr("--module"));
}

TEST_F(ParseCommandLineTest, UnknownOptionIsAnError) {
  absl::Status status = ParseError({"--no-such-option", "--no-python", "/bin/sh"});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(status), HasSubstr("--no-such-option"));
}

TEST_F(ParseCommandLineTest, MissingScriptIsAnError) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{}, std::vector<std::string>{"--nproc-per-node=2"},
        std::vector<std::string>{"--no-python", "--"}}) {
    absl::Status status = ParseError(args);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(Message(status), HasSubstr("missing training_script"));
  }
}

TEST_F(ParseCommandLineTest, NoPythonWithNonexistentProgramIsAnError) {
  TempDir dir;
  const std::string program = dir.path() + "/no-such-program";
  absl::Status status = ParseError({"--no-python", program});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(status), HasSubstr(program));
  EXPECT_THAT(Message(status), HasSubstr("does not exist"));
}

TEST_F(ParseCommandLineTest, NoPythonWithNonExecutableFileIsAnError) {
  TempDir dir;
  const std::string program = dir.Write("prog", "#!/bin/sh\n", 0644);
  absl::Status status = ParseError({"--no-python", program});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(status), HasSubstr(program));
  EXPECT_THAT(Message(status), HasSubstr("not executable"));
}

TEST_F(ParseCommandLineTest, NoPythonWithExecutableFile) {
  TempDir dir;
  const std::string program = dir.Write("prog", "#!/bin/sh\n", 0755);
  CliOutcome out = ParseOk({"--no-python", program, "a"});
  EXPECT_THAT(out.config.worker_argv, ElementsAre(program, "a"));
}

TEST_F(ParseCommandLineTest, NoPythonSearchesPath) {
  CliOutcome out = ParseOk({"--no-python", "sh", "-c", "true"});
  EXPECT_THAT(out.config.worker_argv, ElementsAre("sh", "-c", "true"));
  absl::Status status = ParseError({"--no-python", "ddprun-no-such-program-on-path"});
  EXPECT_THAT(Message(status), HasSubstr("was not found on PATH"));
}

// ---------------------------------------------------------------------------- --help, --version

TEST_F(ParseCommandLineTest, HelpPrintsTheOptions) {
  for (const std::string flag : {"--help", "-h"}) {
    absl::StatusOr<CliOutcome> out = ParseCommandLine({flag}, FakeDevices());
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->action, CliOutcome::Action::kPrint);
    EXPECT_THAT(out->text, HasSubstr("--nproc-per-node"));
    EXPECT_THAT(out->text, HasSubstr("PET_"));
  }
}

TEST_F(ParseCommandLineTest, VersionPrintsTheVersion) {
  absl::StatusOr<CliOutcome> out = ParseCommandLine({"--version"}, FakeDevices());
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->action, CliOutcome::Action::kPrint);
  EXPECT_THAT(out->text, HasSubstr("ddprun "));
  EXPECT_THAT(out->text, HasSubstr(VersionText()));
  EXPECT_THAT(VersionText(), ::testing::StartsWith("ddprun "));
}

// ---------------------------------------------------------------------------- -r / -t

TEST_F(ParseCommandLineTest, TeeImpliesRedirectForAllRanks) {
  CliOutcome out = ParseOk({"--nproc-per-node=2", "-t", "1", "-r", "2", "--no-python", "/bin/sh"});
  EXPECT_EQ(out.config.tee.all_ranks, kStdOut);
  EXPECT_EQ(out.config.redirects.all_ranks, kStdBoth);
}

TEST_F(ParseCommandLineTest, TeeImpliesRedirectPerRank) {
  CliOutcome out = ParseOk(
      {"--nproc-per-node=4", "--tee=0:1,2:2", "--redirects=0:2,1:1", "--no-python", "/bin/sh"});
  EXPECT_EQ(out.config.tee.ForRank(0), kStdOut);
  EXPECT_EQ(out.config.tee.ForRank(2), kStdErr);
  EXPECT_EQ(out.config.redirects.ForRank(0), kStdBoth);
  EXPECT_EQ(out.config.redirects.ForRank(1), kStdOut);
  EXPECT_EQ(out.config.redirects.ForRank(2), kStdErr);
  EXPECT_EQ(out.config.redirects.ForRank(3), kStdNone);
}

TEST_F(ParseCommandLineTest, PerRankTeeCombinesWithAllRanksRedirect) {
  CliOutcome out =
      ParseOk({"--nproc-per-node=3", "-r", "1", "-t", "2:2", "--no-python", "/bin/sh"});
  EXPECT_EQ(out.config.redirects.ForRank(0), kStdOut);
  EXPECT_EQ(out.config.redirects.ForRank(1), kStdOut);
  EXPECT_EQ(out.config.redirects.ForRank(2), kStdBoth);
}

TEST_F(ParseCommandLineTest, PerRankSpecNamingARankBeyondNprocIsAnError) {
  absl::Status status =
      ParseError({"--nproc-per-node=2", "-r", "0:1,2:3", "--no-python", "/bin/sh"});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(status), HasSubstr("--redirects"));
  EXPECT_THAT(Message(status), HasSubstr("local rank 2"));

  status = ParseError({"--nproc-per-node=2", "--tee=5:1", "--no-python", "/bin/sh"});
  EXPECT_THAT(Message(status), HasSubstr("--tee"));
  EXPECT_THAT(Message(status), HasSubstr("local rank 5"));
}

TEST_F(ParseCommandLineTest, BadRedirectValueIsAnError) {
  absl::Status status = ParseError({"-r", "4", "--no-python", "/bin/sh"});
  EXPECT_THAT(Message(status), HasSubstr("--redirects='4'"));
}

TEST_F(ParseCommandLineTest, LocalRanksFilter) {
  CliOutcome out =
      ParseOk({"--nproc-per-node=4", "--local-ranks-filter=0,3", "--no-python", "/bin/sh"});
  ASSERT_TRUE(out.config.local_ranks_filter.has_value());
  EXPECT_THAT(*out.config.local_ranks_filter, ElementsAre(0, 3));

  absl::Status status =
      ParseError({"--nproc-per-node=2", "--local-ranks-filter=2", "--no-python", "/bin/sh"});
  EXPECT_THAT(Message(status), HasSubstr("--local-ranks-filter='2'"));
}

// ---------------------------------------------------------------------------- shutdown

TEST_F(ParseCommandLineTest, BadSignalNameIsAnError) {
  absl::Status status = ParseError({"--signals-to-handle=SIGNOPE", "--no-python", "/bin/sh"});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(status), HasSubstr("--signals-to-handle='SIGNOPE'"));
}

TEST_F(ParseCommandLineTest, TorchElasticSignalsEnvironmentGivesTheDefault) {
  ScopedEnv signals("TORCHELASTIC_SIGNALS_TO_HANDLE", "SIGUSR2");
  EXPECT_THAT(ParseOk({"--no-python", "/bin/sh"}).config.signals_to_handle,
              ElementsAre(SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR2));
  EXPECT_THAT(
      ParseOk({"--signals-to-handle=SIGINT", "--no-python", "/bin/sh"}).config.signals_to_handle,
      ElementsAre(SIGTERM, SIGINT, SIGHUP, SIGQUIT));
}

TEST_F(ParseCommandLineTest, ShutdownTimeoutFlag) {
  CliOutcome out = ParseOk({"--shutdown-timeout=2.5", "--no-python", "/bin/sh"});
  EXPECT_EQ(out.config.rules.shutdown_timeout, absl::Milliseconds(2500));
}

TEST_F(ParseCommandLineTest, TorchElasticShutdownTimeoutEnvironmentWhenFlagAbsent) {
  ScopedEnv timeout("TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "7");
  EXPECT_EQ(ParseOk({"--no-python", "/bin/sh"}).config.rules.shutdown_timeout, absl::Seconds(7));
  EXPECT_EQ(
      ParseOk({"--shutdown-timeout=3", "--no-python", "/bin/sh"}).config.rules.shutdown_timeout,
      absl::Seconds(3));
}

TEST_F(ParseCommandLineTest, TorchElasticExitBarrierTimeoutEnvironmentWhenFlagAbsent) {
  ScopedEnv timeout("TORCH_ELASTIC_EXIT_BARRIER_TIMEOUT", "12");
  EXPECT_EQ(ParseOk({"--no-python", "/bin/sh"}).config.rendezvous.exit_barrier_timeout,
            absl::Seconds(12));
}

// ---------------------------------------------------------------------------- other options

TEST_F(ParseCommandLineTest, MaxRestartsAndRole) {
  CliOutcome out = ParseOk({"--max-restarts=3", "--role=trainer", "--no-python", "/bin/sh"});
  EXPECT_EQ(out.config.rendezvous.max_restarts, 3);
  EXPECT_EQ(out.config.role, "trainer");
  EXPECT_THAT(Message(ParseError({"--max-restarts=-1", "--no-python", "/bin/sh"})),
              HasSubstr("--max-restarts='-1'"));
}

TEST_F(ParseCommandLineTest, StartMethodOtherThanSpawnGivesANotice) {
  CliOutcome out = ParseOk({"--start-method=fork", "--no-python", "/bin/sh"});
  ASSERT_EQ(out.notices.size(), 1u);
  EXPECT_THAT(out.notices[0], HasSubstr("--start-method=fork"));
  EXPECT_THAT(Message(ParseError({"--start-method=thread", "--no-python", "/bin/sh"})),
              HasSubstr("--start-method='thread'"));
}

TEST_F(ParseCommandLineTest, LogDir) {
  CliOutcome out = ParseOk({"--log-dir=/tmp/logs", "--no-python", "/bin/sh"});
  EXPECT_EQ(out.config.log_dir, "/tmp/logs");
}

TEST_F(ParseCommandLineTest, RepeatedOptionTakesTheLastValueAsTorchrunDoes) {
  CliOutcome out = ParseOk({"--nproc-per-node=2", "--nproc-per-node=3", "--no-python", "/bin/sh"});
  EXPECT_EQ(out.config.nproc_per_node, 3);
}

TEST_F(ParseCommandLineTest, EmptyValueWithEqualsIsEmptyNotTheNextArgument) {
  CliOutcome out = ParseOk({"--log-dir=", "--no-python", "/bin/sh", "--x=", "y"});
  EXPECT_EQ(out.config.log_dir, "");
  EXPECT_THAT(out.config.worker_argv, ElementsAre("/bin/sh", "--x=", "y"));
  EXPECT_THAT(Message(ParseError({"--role=", "--no-python", "/bin/sh"})), HasSubstr("--role=''"));
}

// Every option that takes a value: `--x=` means the empty value, never the internal mark
// that tells it from a missing one (an option left out of the unmarking once showed it).
TEST_F(ParseCommandLineTest, EveryOptionShowsAnEmptyValueAsEmpty) {
  int checked = 0;
  for (const OptionDoc& option : DescribeOptions()) {
    if (!option.takes_value) continue;
    ++checked;
    const std::string name = option.names.back();
    absl::StatusOr<CliOutcome> outcome =
        ParseCommandLine({name + "=", "--no-python", "/bin/sh"}, FakeDevices());
    if (outcome.ok()) continue;
    const std::string message(outcome.status().message());
    EXPECT_EQ(message.find('\x1f'), std::string::npos) << name << ": " << message;
  }
  EXPECT_GT(checked, 20);
}

TEST_F(ParseCommandLineTest, MissingValueSaysWhatToWrite) {
  EXPECT_THAT(Message(ParseError({"--nnodes"})), HasSubstr("option --nnodes needs a value"));
}

TEST_F(ParseCommandLineTest, HelpShowsTheTrainingScriptInTheUsageLine) {
  CliOutcome out = ParseOk({"--help"});
  EXPECT_THAT(out.text, HasSubstr("Usage: ddprun [OPTIONS] training_script [args...]"));
}
TEST_F(ParseCommandLineTest, SignalsToHandleAddToTheDefaultFour) {
  CliOutcome out = ParseOk({"--signals-to-handle=SIGUSR1,SIGTERM", "--no-python", "/bin/sh"});
  EXPECT_THAT(out.config.signals_to_handle, ElementsAre(SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1));
}
TEST_F(ParseCommandLineTest, StandaloneWithSeveralNodesIsRefused) {
  EXPECT_THAT(Message(ParseError({"--standalone", "--nnodes=2", "--no-python", "/bin/sh"})),
              HasSubstr("--standalone is for one-node jobs"));
}

TEST_F(ParseCommandLineTest, TokenFromTheEnvironmentLosesItsNewline) {
  ScopedEnv token("DDPRUN_RDZV_TOKEN", "s3cret\n");
  EXPECT_EQ(ParseOk({"--no-python", "/bin/sh"}).config.token, "s3cret");
}
}  // namespace
}  // namespace ddprun
