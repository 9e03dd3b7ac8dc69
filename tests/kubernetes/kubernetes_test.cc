// The manifests in examples/kubernetes: check_manifests.py parses the YAML and checks how
// Kubernetes wires it (Indexed Job, headless Service, endpoint, token volume, probes), then
// each ddprun container's environment, as Kubernetes would build it, goes through ddprun's
// own command-line parser: every PET_* value must be one ddprun takes, with the meaning the
// manifest intends.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "launcher/cli.h"
#include "tests/support/child_process.h"
#include "tests/support/temp_dir.h"

namespace ddprun::testing {
namespace {

const std::string kSource = DDPRUN_SOURCE_DIR;

struct Container {
  std::string where;
  std::map<std::string, std::string> env;
};

std::vector<Container> CheckedContainers() {
  ProcessResult r =
      RunProcess({"/usr/bin/python3", kSource + "/tests/kubernetes/check_manifests.py",
                  kSource + "/examples/kubernetes/indexed-job.yaml",
                  kSource + "/examples/kubernetes/elastic-with-master.yaml"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::vector<Container> out;
  for (absl::string_view line : absl::StrSplit(r.out, '\n', absl::SkipEmpty())) {
    std::vector<std::string> fields = absl::StrSplit(line, '\t');
    Container c{fields[0], {}};
    for (size_t i = 1; i < fields.size(); ++i) {
      std::vector<std::string> kv = absl::StrSplit(fields[i], absl::MaxSplits('=', 1));
      c.env[kv[0]] = kv.size() > 1 ? kv[1] : "";
    }
    out.push_back(std::move(c));
  }
  return out;
}

// ddprun's configuration from `env` alone, as in the pod (with `train.py` swapped for a
// program that exists here, and the token volume for a file in `token_dir`).
absl::StatusOr<AgentConfig> ConfigFromEnv(std::map<std::string, std::string> env,
                                          const std::string& token_dir) {
  for (auto& [name, value] : env) {
    value = absl::StrReplaceAll(value, {{"/etc/ddprun/", token_dir + "/"}});
    ::setenv(name.c_str(), value.c_str(), 1);
  }
  DeviceCounts devices;
  devices.count_gpus = []() -> absl::StatusOr<int> { return 8; };
  devices.cpu_count = 64;
  absl::StatusOr<CliOutcome> outcome = ParseCommandLine({"--no-python", "/bin/true"}, devices);
  for (const auto& [name, value] : env) ::unsetenv(name.c_str());
  if (!outcome.ok()) return outcome.status();
  return outcome->config;
}

TEST(KubernetesManifests, EveryDdprunContainerGetsTheConfigurationItsManifestMeans) {
  TempDir tokens;
  tokens.Write("token", "s3cret\n");
  const std::vector<Container> containers = CheckedContainers();
  ASSERT_EQ(containers.size(), 2u);
  for (const Container& c : containers) {
    absl::StatusOr<AgentConfig> config = ConfigFromEnv(c.env, tokens.path());
    ASSERT_TRUE(config.ok()) << c.where << ": " << config.status();
    EXPECT_EQ(config->nproc_per_node, 8) << c.where;  // PET_NPROC_PER_NODE=gpu, 8 GPUs
    EXPECT_EQ(config->rdzv_backend, "c10d") << c.where;
    EXPECT_EQ(config->run_id, "0b7c6f3e-uid") << c.where;  // the Job's uid
    EXPECT_EQ(config->local_addr, "10.0.0.7") << c.where;  // the pod IP
    if (c.where.find("indexed-job") != std::string::npos) {
      EXPECT_EQ(config->rendezvous.min_nodes, 2);
      EXPECT_EQ(config->rendezvous.max_nodes, 2);
      EXPECT_EQ(config->endpoint_host, "ddprun-train-0.ddprun-train");
      EXPECT_EQ(config->rendezvous.max_restarts, 3);
    } else {
      EXPECT_EQ(config->rendezvous.min_nodes, 2);
      EXPECT_EQ(config->rendezvous.max_nodes, 4);
      EXPECT_EQ(config->endpoint_host, "ddprun-master");
      EXPECT_EQ(config->is_host, std::optional<bool>(false));
      EXPECT_EQ(config->token, "s3cret");
    }
  }
}

}  // namespace
}  // namespace ddprun::testing
