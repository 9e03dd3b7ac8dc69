// The command line's rules with the environment passed in: nothing here reads or changes
// this process's environment.
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "launcher/backends.h"
#include "launcher/cli.h"
#include "launcher/option_docs.h"
#include "launcher/options.h"
#include "net/etcd_settings.h"
#include "tests/support/temp_dir.h"

namespace ddprun {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

DeviceCounts NoGpus() {
  DeviceCounts devices;
  devices.count_gpus = []() -> absl::StatusOr<int> { return 0; };
  devices.cpu_count = 4;
  return devices;
}

// An environment with PATH only: every other variable is the test's.
LaunchEnvironment Env(std::map<std::string, std::string> vars = {}) {
  LaunchEnvironment env;
  env.vars = std::move(vars);
  env.vars.emplace("PATH", "/usr/bin:/bin");
  env.cwd = "/work/here";
  return env;
}

absl::StatusOr<CliOutcome> Parse(const std::vector<std::string>& args,
                                 const LaunchEnvironment& env) {
  return ParseCommandLine(args, NoGpus(), env);
}

TEST(CliRulesTest, PetVariablesComeFromTheEnvironmentPassedIn) {
  absl::StatusOr<CliOutcome> out =
      Parse({"--no-python", "/bin/sh"}, Env({{"PET_NPROC_PER_NODE", "3"}}));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->config.nproc_per_node, 3);
  out = Parse({"--nproc-per-node=2", "--no-python", "/bin/sh"}, Env({{"PET_NPROC_PER_NODE", "3"}}));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->config.nproc_per_node, 2) << "the command line wins";
}

TEST(CliRulesTest, AFlagFromItsPetVariableReadsWordsAndNumbers) {
  for (const char* on : {"1", "true", "YES", "on", "enable", "2"}) {
    absl::StatusOr<CliOutcome> out = Parse({"/bin/sh"}, Env({{"PET_NO_PYTHON", on}}));
    ASSERT_TRUE(out.ok()) << on << ": " << out.status();
    EXPECT_EQ(out->config.worker_argv.front(), "/bin/sh") << on;
  }
  absl::StatusOr<CliOutcome> off =
      Parse({"/bin/sh"}, Env({{"PET_NO_PYTHON", "0"}, {"PYTHON_EXEC", "/bin/sh"}}));
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_EQ(off->config.worker_argv.front(), "/bin/sh");
  EXPECT_EQ(off->config.worker_argv[1], "-u") << "a Python worker: the flag is off";
  absl::StatusOr<CliOutcome> bad = Parse({"/bin/sh"}, Env({{"PET_NO_PYTHON", "maybe"}}));
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("PET_NO_PYTHON='maybe'"));
}

TEST(CliRulesTest, TorchrunsOwnVariablesComeAfterPet) {
  const LaunchEnvironment env = Env({{"TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "7"}});
  absl::StatusOr<CliOutcome> out = Parse({"--no-python", "/bin/sh"}, env);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->config.rules.shutdown_timeout, absl::Seconds(7));
  LaunchEnvironment both = env;
  both.vars["PET_SHUTDOWN_TIMEOUT"] = "9";
  out = Parse({"--no-python", "/bin/sh"}, both);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->config.rules.shutdown_timeout, absl::Seconds(9));
}

TEST(CliRulesTest, SlurmJobIdTokenAndWorkingFolderComeFromThePassedEnvironment) {
  absl::StatusOr<CliOutcome> out =
      Parse({"--log-dir=logs", "--no-python", "/bin/sh"},
            Env({{"SLURM_JOB_ID", "77"}, {"DDPRUN_RDZV_TOKEN", " s3cret\n"}}));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->config.run_id, "77");
  EXPECT_EQ(out->config.token, "s3cret");
  EXPECT_EQ(out->config.log_dir, "/work/here/logs");
}

TEST(CliRulesTest, PythonAndProgramsAreFoundOnThePassedPath) {
  testing::TempDir dir;
  const std::string python = dir.Write("py", "#!/bin/sh\n");
  ASSERT_EQ(::chmod(python.c_str(), 0755), 0);
  absl::StatusOr<CliOutcome> out =
      Parse({"-m", "mod"}, Env({{"PATH", dir.path()}, {"PYTHON_EXEC", "py"}}));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->config.worker_argv.front(), "py");
  absl::StatusOr<CliOutcome> missing = Parse({"-m", "mod"}, Env({{"PATH", "/nonexistent"}}));
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(std::string(missing.status().message()),
              HasSubstr("the Python interpreter 'python3' was not found on PATH"));
}

TEST(CliRulesTest, PreloadNamesModulesAutoIsTorchAndItsPetVariableWorks) {
  testing::TempDir dir;
  const std::string python = dir.Write("py", "#!/bin/sh\n");
  ASSERT_EQ(::chmod(python.c_str(), 0755), 0);
  const LaunchEnvironment env = Env({{"PATH", dir.path()}, {"PYTHON_EXEC", "py"}});
  absl::StatusOr<CliOutcome> out = Parse({"--preload", " torch, numpy.random ", "-m", "mod"}, env);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->config.preload, (std::vector<std::string>{"torch", "numpy.random"}));
  EXPECT_TRUE(out->notices.empty()) << "torch and numpy read no rank at import";
  out = Parse({"--preload", "torch,mylib.models", "-m", "mod"}, env);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(out->notices,
              ::testing::ElementsAre(
                  HasSubstr("--preload: mylib.models is imported once per node, with the node's "
                            "environment, not a rank's")));
  LaunchEnvironment pet = env;
  pet.vars["PET_PRELOAD"] = "auto";
  out = Parse({"-m", "mod"}, pet);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->config.preload, (std::vector<std::string>{"torch"}));
  out = Parse({"-m", "mod"}, env);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(out->config.preload.empty()) << "off unless asked for";
  for (const char* bad : {"1torch", "torch..nn", "a-b", "torch,"}) {
    EXPECT_FALSE(Parse({"--preload", bad, "-m", "mod"}, env).ok()) << bad;
  }
}

TEST(BackendRegistryTest, BackendsAreFoundByNameAndListedInMessages) {
  ASSERT_NE(FindRendezvousBackend("c10d"), nullptr);
  ASSERT_NE(FindRendezvousBackend("static"), nullptr);
#ifdef DDPRUN_ETCD
  for (const char* etcd : {"etcd-v3", "etcd", "etcd-v2"}) {
    ASSERT_NE(FindRendezvousBackend(etcd), nullptr) << etcd;
  }
  const std::string choices = "c10d, static or etcd-v3";
#else
  EXPECT_EQ(FindRendezvousBackend("etcd-v3"), nullptr) << "built with DDPRUN_ETCD=OFF";
  const std::string choices = "c10d or static";
#endif
  EXPECT_EQ(FindRendezvousBackend("zookeeper"), nullptr);
  EXPECT_EQ(RendezvousBackendChoices(), choices) << "torchrun's names unlisted";
  absl::StatusOr<CliOutcome> out =
      Parse({"--rdzv-backend=zookeeper", "--no-python", "/bin/sh"}, Env());
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().message(), "--rdzv-backend='zookeeper' is not valid: expected " + choices);
}

TEST(BackendRegistryTest, TheStaticBackendMakesTheNodeRankFixedAndC10dAHint) {
  absl::StatusOr<CliOutcome> out = Parse({"--no-python", "/bin/sh"}, Env());
  ASSERT_TRUE(out.ok());
  EXPECT_TRUE(out->config.fixed_node_rank);
  out = Parse({"--rdzv-backend=c10d", "--no-python", "/bin/sh"}, Env());
  ASSERT_TRUE(out.ok());
  EXPECT_FALSE(out->config.fixed_node_rank);
}

TEST(OptionsTableTest, NamesAreUniqueAndEveryOptionIsInDocsCliMd) {
  std::ifstream in(std::string(DDPRUN_SOURCE_DIR) + "/docs/cli.md");
  std::stringstream text;
  text << in.rdbuf();
  ASSERT_FALSE(text.str().empty());
  std::set<std::string> seen;
  for (const OptionDoc& option : DescribeOptions()) {
    for (const std::string& name : option.names) {
      EXPECT_TRUE(seen.insert(name).second) << name << " is declared twice";
    }
    const std::string& long_name =
        option.names.size() > 1 && option.names[0].size() == 2 ? option.names[1] : option.names[0];
    EXPECT_TRUE(absl::StrContains(text.str(), "`" + long_name))
        << long_name << " is in --help but not in docs/cli.md";
  }
}

// --- Node health (launcher/options_health.cc) ---

TEST(NodeHealthOptionsTest, LimitsAreOnForElasticJobsOnlyUnlessGiven) {
  absl::StatusOr<CliOutcome> elastic =
      Parse({"--nnodes=2:4", "--rdzv-backend=c10d", "--rdzv-endpoint=head:29400", "--no-python",
             "/bin/sh"},
            Env());
  ASSERT_TRUE(elastic.ok()) << elastic.status();
  EXPECT_EQ(elastic->config.rendezvous.node_health.max_node_failures, 3);
  EXPECT_EQ(elastic->config.rendezvous.node_health.max_node_flaps, 3);
  EXPECT_EQ(elastic->config.rendezvous.node_health.node_cooldown, absl::Seconds(300));
  absl::StatusOr<CliOutcome> fixed = Parse(
      {"--nnodes=2", "--rdzv-backend=c10d", "--rdzv-endpoint=head:29400", "--no-python", "/bin/sh"},
      Env());
  ASSERT_TRUE(fixed.ok()) << fixed.status();
  EXPECT_EQ(fixed->config.rendezvous.node_health.max_node_failures, 0);
  EXPECT_EQ(fixed->config.rendezvous.node_health.max_node_flaps, 0);
  absl::StatusOr<CliOutcome> given =
      Parse({"--nnodes=2", "--rdzv-backend=c10d", "--rdzv-endpoint=head:29400",
             "--max-node-failures=2", "--node-cooldown=0", "--no-python", "/bin/sh"},
            Env({{"PET_MAX_NODE_FLAPS", "5"}, {"PET_EXCLUDE_HOSTS", "n1, n2.rack"}}));
  ASSERT_TRUE(given.ok()) << given.status();
  EXPECT_EQ(given->config.rendezvous.node_health.max_node_failures, 2);
  EXPECT_EQ(given->config.rendezvous.node_health.max_node_flaps, 5);
  EXPECT_EQ(given->config.rendezvous.node_health.node_cooldown, absl::InfiniteDuration());
  EXPECT_EQ(given->config.rendezvous.node_health.exclude_hosts,
            (std::vector<std::string>{"n1", "n2.rack"}));
}

TEST(NodeHealthOptionsTest, HealthCheckTakesACommandTheBuiltinBothOrNone) {
  auto check = [](const std::string& value) {
    absl::StatusOr<CliOutcome> out =
        Parse({"--health-check=" + value, "--no-python", "/bin/sh"}, Env());
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? out->config.health_check : HealthCheckSettings{};
  };
  EXPECT_EQ(check("/opt/check.sh --fast").command, "/opt/check.sh --fast");
  EXPECT_FALSE(check("/opt/check.sh --fast").builtin);
  EXPECT_TRUE(check("builtin").builtin);
  EXPECT_EQ(check("builtin").command, "");
  EXPECT_TRUE(check("builtin,/opt/check.sh").builtin);
  EXPECT_EQ(check("builtin,/opt/check.sh").command, "/opt/check.sh");
  EXPECT_FALSE(check("none").any());
  absl::StatusOr<CliOutcome> bad =
      Parse({"--health-check=builtinx", "--no-python", "/bin/sh"}, Env());
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("--health-check='builtinx' is not valid"));
  bad = Parse({"--health-check-timeout=0", "--no-python", "/bin/sh"}, Env());
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("--health-check-timeout"));
  bad = Parse({"--health-check-min-free-disk=-1", "--no-python", "/bin/sh"}, Env());
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("expected GiB"));
}

TEST(NodeHealthOptionsTest, TheBuiltinCheckIsOnForGpuJobsAndReadsTheLogDirsDisk) {
  DeviceCounts eight = NoGpus();
  eight.count_gpus = []() -> absl::StatusOr<int> { return 8; };
  absl::StatusOr<CliOutcome> gpu = ParseCommandLine(
      {"--nproc-per-node=gpu", "--log-dir=/var/log/job", "--no-python", "/bin/sh"}, eight, Env());
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  EXPECT_TRUE(gpu->config.health_check.builtin);
  EXPECT_EQ(gpu->config.health_check.expected_gpus, 8);
  EXPECT_EQ(gpu->config.health_check.disk_path, "/var/log/job");
  absl::StatusOr<CliOutcome> off =
      ParseCommandLine({"--nproc-per-node=gpu", "--health-check=none", "--no-python", "/bin/sh"},
                       eight, Env({{"TMPDIR", "/scratch"}}));
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_FALSE(off->config.health_check.any());
  EXPECT_EQ(off->config.health_check.disk_path, "/scratch");
  absl::StatusOr<CliOutcome> cpu = Parse({"--nproc-per-node=4", "--no-python", "/bin/sh"}, Env());
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_FALSE(cpu->config.health_check.any());
}

#ifdef DDPRUN_ETCD  // the etcd-v3 backend's command line: built with it only
TEST(EtcdBackendTest, TheMembersComeFromTheEndpointWithEtcdsDefaultPort) {
  absl::StatusOr<CliOutcome> out = Parse(
      {"--nnodes=2", "--rdzv-backend=etcd-v3",
       "--rdzv-endpoint=etcd1,etcd2:2380,http://etcd3:2381/,[fd00::1]", "--no-python", "/bin/sh"},
      Env());
  ASSERT_TRUE(out.ok()) << out.status();
  // The backend's own settings, which only it reads.
  const auto etcd = [&] { return dynamic_cast<const EtcdSettings&>(*out->config.backend); };
  EXPECT_THAT(etcd().endpoints,
              ElementsAre("etcd1:2379", "etcd2:2380", "etcd3:2381", "[fd00::1]:2379"));
  EXPECT_FALSE(etcd().https);
  EXPECT_EQ(etcd().prefix, "/ddprun");
  EXPECT_EQ(etcd().lease_ttl, absl::Seconds(5));
  out = Parse({"--nnodes=2", "--rdzv-backend=etcd", "--rdzv-endpoint=https://etcd1",
               "--rdzv-conf=etcd_prefix=/jobs/,lease_ttl=2.5", "--no-python", "/bin/sh"},
              Env());
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(etcd().https) << "an https:// member asks for TLS";
  EXPECT_EQ(etcd().prefix, "/jobs");
  EXPECT_EQ(etcd().lease_ttl, absl::Seconds(3)) << "etcd's leases are whole seconds";
}

TEST(EtcdBackendTest, EveryBadEtcdSettingNamesWhatToFix) {
  const auto error = [](std::vector<std::string> args) {
    args.insert(args.begin(), {"--nnodes=2", "--rdzv-backend=etcd-v3"});
    args.insert(args.end(), {"--no-python", "/bin/sh"});
    absl::StatusOr<CliOutcome> out = Parse(args, Env());
    return out.ok() ? std::string("parsed") : std::string(out.status().message());
  };
  EXPECT_THAT(error({}), HasSubstr("needs --rdzv-endpoint=HOST[:PORT],...: etcd's members"));
  EXPECT_THAT(error({"--rdzv-endpoint=a,,b"}),
              HasSubstr("is not valid with --rdzv-backend=etcd-v3"));
  EXPECT_THAT(error({"--rdzv-endpoint=a", "--rdzv-conf=cacert=/etc/hostname"}),
              HasSubstr("add protocol=https"));
  EXPECT_THAT(error({"--rdzv-endpoint=a", "--rdzv-conf=protocol=https,cert=/etc/hostname"}),
              HasSubstr("cert and key go together"));
  EXPECT_THAT(error({"--rdzv-endpoint=a", "--rdzv-conf=etcd_user=me"}),
              HasSubstr("etcd_user and etcd_password_file go together"));
  EXPECT_THAT(error({"--rdzv-endpoint=a", "--rdzv-conf=etcd_user=me,etcd_password_file=/no/such"}),
              HasSubstr("--rdzv-conf etcd_password_file='/no/such' cannot be read"));
  EXPECT_THAT(error({"--rdzv-endpoint=a", "--rdzv-conf=protocol=ftp"}),
              HasSubstr("expected http or https"));
  EXPECT_THAT(error({"--rdzv-endpoint=a", "--rdzv-conf=lease_ttl=1"}),
              HasSubstr("expected seconds from 2 to 3600"));
  EXPECT_THAT(error({"--rdzv-endpoint=a", "--rdzv-conf=etcd_prefix=/"}),
              HasSubstr("expected a key prefix"));
}

// A token needs TLS with etcd-v3 (its master's address comes from etcd); secret files others
// may read and a password sent to etcd in clear text are said.
TEST(EtcdBackendTest, ATokenNeedsTlsAndExposedSecretsAreSaid) {
  testing::TempDir dir;
  const std::string token = dir.Write("token", "s3cret\n", 0644);
  const std::string password = dir.Write("password", "pw\n", 0600);
  absl::StatusOr<CliOutcome> out =
      Parse({"--nnodes=2", "--rdzv-backend=etcd-v3", "--rdzv-endpoint=a",
             "--rdzv-conf=token_file=" + token, "--no-python", "/bin/sh"},
            Env());
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(std::string(out.status().message()),
              HasSubstr("--rdzv-backend=etcd-v3 with a token (DDPRUN_RDZV_TOKEN or --rdzv-conf "
                        "token_file) needs TLS to the run's leader"));
  out = Parse({"--nnodes=2", "--rdzv-backend=etcd-v3", "--rdzv-endpoint=a",
               "--rdzv-conf=etcd_user=me,etcd_password_file=" + password, "--no-python", "/bin/sh"},
              Env());
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(out->notices,
              ::testing::Contains(HasSubstr("etcd_password_file with protocol=http: etcd's "
                                            "password crosses the network in clear text")));
  out = Parse({"--nnodes=2", "--rdzv-backend=c10d", "--rdzv-endpoint=a",
               "--rdzv-conf=token_file=" + token, "--no-python", "/bin/sh"},
              Env());
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(
      out->notices,
      ::testing::Contains("--rdzv-conf token_file='" + token +
                          "' can be read by other users (mode 0644): anyone on this machine can "
                          "read the secret in it; chmod 600 " +
                          token));
}

TEST(EtcdBackendTest, SeveralHostsAreEtcdsOnlyAndEtcdKeysAreEtcdsOnly) {
  absl::StatusOr<CliOutcome> out = Parse(
      {"--nnodes=2", "--rdzv-backend=c10d", "--rdzv-endpoint=a:1,b:2", "--no-python", "/bin/sh"},
      Env());
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(std::string(out.status().message()),
              HasSubstr("names several hosts, but --rdzv-backend=c10d takes one"));
  out = Parse(
      {"--nnodes=2", "--rdzv-backend=c10d", "--rdzv-endpoint=http://a:1", "--no-python", "/bin/sh"},
      Env());
  ASSERT_FALSE(out.ok()) << "a URL is etcd's way to name a member";
  EXPECT_THAT(std::string(out.status().message()), HasSubstr("expected HOST, HOST:PORT"));
  out = Parse({"--nnodes=2", "--rdzv-backend=c10d", "--rdzv-endpoint=a", "--rdzv-conf=lease_ttl=5",
               "--no-python", "/bin/sh"},
              Env());
  ASSERT_TRUE(out.ok()) << out.status() << ": ignored, with a line, as torchrun ignores it";
  EXPECT_THAT(out->notices, ::testing::Contains(HasSubstr("'lease_ttl' is not known with "
                                                          "--rdzv-backend=c10d: ignored")));
}
#endif  // DDPRUN_ETCD

}  // namespace
}  // namespace ddprun
