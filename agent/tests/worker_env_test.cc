#include "agent/worker_env.h"

#include <signal.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ddprun {
namespace {

using ::testing::Contains;
using ::testing::Key;
using ::testing::Not;
using ::testing::Pair;

// A worker of a three-node job: what its environment is made of.
struct Sample {
  AgentConfig config;
  AttemptPlan plan;
  WorkerSeat seat;

  EnvMap Env(const EnvMap& base = {}) const { return BuildWorkerEnv(base, config, plan, seat); }
};

Sample SampleWorker() {
  Sample s;
  s.config.nproc_per_node = 4;
  s.config.role = "trainer";
  s.config.rendezvous.max_restarts = 3;
  s.config.run_id = "job42";
  Assignment& round = s.plan.assignment;
  round.group_rank = 2;
  round.world_size = 12;
  round.group_world_size = 3;
  round.master_addr = "10.0.0.1";
  round.master_port = 29500;
  round.restart_count = 2;
  round.round = 7;
  s.seat.local_rank = 1;
  s.seat.rank = 5;
  s.seat.error_file = "/logs/job42/attempt_7/1/error.json";
  return s;
}

TEST(BuildWorkerEnvTest, SetsEveryTorchrunVariable) {
  const EnvMap env = SampleWorker().Env();
  EXPECT_THAT(env, Contains(Pair("LOCAL_RANK", "1")));
  EXPECT_THAT(env, Contains(Pair("RANK", "5")));
  EXPECT_THAT(env, Contains(Pair("GROUP_RANK", "2")));
  EXPECT_THAT(env, Contains(Pair("ROLE_RANK", "5")));
  EXPECT_THAT(env, Contains(Pair("ROLE_NAME", "trainer")));
  EXPECT_THAT(env, Contains(Pair("LOCAL_WORLD_SIZE", "4")));
  EXPECT_THAT(env, Contains(Pair("WORLD_SIZE", "12")));
  EXPECT_THAT(env, Contains(Pair("GROUP_WORLD_SIZE", "3")));
  EXPECT_THAT(env, Contains(Pair("ROLE_WORLD_SIZE", "12")));
  EXPECT_THAT(env, Contains(Pair("MASTER_ADDR", "10.0.0.1")));
  EXPECT_THAT(env, Contains(Pair("MASTER_PORT", "29500")));
  EXPECT_THAT(env, Contains(Pair("TORCHELASTIC_RESTART_COUNT", "2")));
  EXPECT_THAT(env, Contains(Pair("TORCHELASTIC_MAX_RESTARTS", "3")));
  EXPECT_THAT(env, Contains(Pair("TORCHELASTIC_RUN_ID", "job42")));
  EXPECT_THAT(env, Contains(Pair("TORCHELASTIC_USE_AGENT_STORE", "False")));
  EXPECT_THAT(env, Contains(Pair("TORCHELASTIC_ERROR_FILE", "/logs/job42/attempt_7/1/error.json")));
  EXPECT_THAT(env, Contains(Pair("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1")));
  EXPECT_THAT(env, Contains(Pair("NCCL_ASYNC_ERROR_HANDLING", "1")));
  EXPECT_THAT(env, Contains(Pair("DDPRUN_ROUND", "7")));
  EXPECT_THAT(env, Contains(Pair("OMP_NUM_THREADS", "1")));
  EXPECT_THAT(env, Not(Contains(Key("DDPRUN_STORE_ADDR"))));
  EXPECT_THAT(env, Not(Contains(Key("TORCHELASTIC_SIGNALS_TO_HANDLE"))));
}

TEST(BuildWorkerEnvTest, KeepsBaseVariables) {
  const EnvMap base = {{"PATH", "/usr/bin:/bin"}, {"HOME", "/home/u"}, {"EMPTY", ""}};
  const EnvMap env = SampleWorker().Env(base);
  EXPECT_THAT(env, Contains(Pair("PATH", "/usr/bin:/bin")));
  EXPECT_THAT(env, Contains(Pair("HOME", "/home/u")));
  EXPECT_THAT(env, Contains(Pair("EMPTY", "")));
}

TEST(BuildWorkerEnvTest, OverridesStaleTorchrunVariablesFromBase) {
  const EnvMap base = {{"RANK", "99"},
                       {"WORLD_SIZE", "99"},
                       {"MASTER_PORT", "1"},
                       {"TORCHELASTIC_USE_AGENT_STORE", "True"}};
  const EnvMap env = SampleWorker().Env(base);
  EXPECT_THAT(env, Contains(Pair("RANK", "5")));
  EXPECT_THAT(env, Contains(Pair("WORLD_SIZE", "12")));
  EXPECT_THAT(env, Contains(Pair("MASTER_PORT", "29500")));
  EXPECT_THAT(env, Contains(Pair("TORCHELASTIC_USE_AGENT_STORE", "False")));
}

// torch compares the exact string "True" (rendezvous.py, _torchelastic_use_agent_store).
TEST(BuildWorkerEnvTest, AnAgentStoreIsExactlyTrue) {
  Sample p = SampleWorker();
  p.plan.agent_store = true;
  EXPECT_THAT(p.Env({{"TORCHELASTIC_USE_AGENT_STORE", "False"}}),
              Contains(Pair("TORCHELASTIC_USE_AGENT_STORE", "True")));
}

TEST(BuildWorkerEnvTest, AGlooInterfaceIsSetUnlessTheUserSetOne) {
  Sample p = SampleWorker();
  EXPECT_THAT(p.Env(), Not(Contains(Key("GLOO_SOCKET_IFNAME"))));
  p.plan.gloo_interface = "eth0";
  EXPECT_THAT(p.Env(), Contains(Pair("GLOO_SOCKET_IFNAME", "eth0")));
  EXPECT_THAT(p.Env({{"GLOO_SOCKET_IFNAME", "ib0"}}), Contains(Pair("GLOO_SOCKET_IFNAME", "ib0")));
}

TEST(BuildWorkerEnvTest, KeepsUsersNcclAsyncErrorHandling) {
  const EnvMap base = {{"NCCL_ASYNC_ERROR_HANDLING", "0"},
                       {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "3"}};
  const EnvMap env = SampleWorker().Env(base);
  EXPECT_THAT(env, Contains(Pair("NCCL_ASYNC_ERROR_HANDLING", "0")));
  EXPECT_THAT(env, Contains(Pair("TORCH_NCCL_ASYNC_ERROR_HANDLING", "3")));
}

TEST(BuildWorkerEnvTest, OmpNumThreadsDefaultsOnlyWhenUnsetAndSeveralWorkers) {
  Sample p = SampleWorker();
  p.config.nproc_per_node = 4;
  EXPECT_THAT(p.Env(), Contains(Pair("OMP_NUM_THREADS", "1")));
  EXPECT_TRUE(WillDefaultOmpThreads({}, 4));

  EXPECT_THAT(p.Env({{"OMP_NUM_THREADS", "8"}}), Contains(Pair("OMP_NUM_THREADS", "8")));
  EXPECT_FALSE(WillDefaultOmpThreads({{"OMP_NUM_THREADS", "8"}}, 4));

  p.config.nproc_per_node = 1;
  EXPECT_THAT(p.Env(), Not(Contains(Key("OMP_NUM_THREADS"))));
  EXPECT_FALSE(WillDefaultOmpThreads({}, 1));
}

TEST(BuildWorkerEnvTest, StoreAddress) {
  Sample p = SampleWorker();
  p.plan.store_addr = "10.0.0.1:29401";
  EXPECT_THAT(p.Env({{"DDPRUN_STORE_ADDR", "stale:1"}}),
              Contains(Pair("DDPRUN_STORE_ADDR", "10.0.0.1:29401")));
}

TEST(BuildWorkerEnvTest, RemovesStaleStoreAddressWhenNoneIsOffered) {
  Sample p = SampleWorker();
  p.plan.store_addr = "";
  EXPECT_THAT(p.Env({{"DDPRUN_STORE_ADDR", "stale:1"}}), Not(Contains(Key("DDPRUN_STORE_ADDR"))));
}

TEST(BuildWorkerEnvTest, SignalsToHandleWhenGiven) {
  Sample p = SampleWorker();
  p.config.signals_to_handle = {SIGTERM, SIGINT};
  EXPECT_THAT(p.Env(), Contains(Pair("TORCHELASTIC_SIGNALS_TO_HANDLE", "SIGTERM,SIGINT")));
}

TEST(BuildWorkerEnvTest, EmptyErrorFileIsExportedEmpty) {
  Sample p = SampleWorker();
  p.seat.error_file = "";
  EXPECT_THAT(p.Env(), Contains(Pair("TORCHELASTIC_ERROR_FILE", "")));
}

TEST(BuildWorkerEnvTest, TheMastersTlsFilesGoWithAStoreAddress) {
  Sample p = SampleWorker();
  p.config.tls.cert_path = "/etc/ddprun/node.pem";
  p.config.tls.ca_path = "/etc/ddprun/ca.pem";
  EXPECT_THAT(p.Env({{"DDPRUN_TLS_CERT", "stale"}}), Not(Contains(Key("DDPRUN_TLS_CERT"))))
      << "no Store to reach: no TLS files";
  p.plan.store_addr = "10.0.0.1:29401";
  EXPECT_THAT(p.Env(), Contains(Pair("DDPRUN_TLS_CERT", "/etc/ddprun/node.pem")));
  EXPECT_THAT(p.Env(), Contains(Pair("DDPRUN_TLS_CA", "/etc/ddprun/ca.pem")));
  EXPECT_THAT(p.Env({{"DDPRUN_TLS_KEY", "stale"}}), Not(Contains(Key("DDPRUN_TLS_KEY"))));
}

TEST(BuildWorkerEnvTest, AVirtualLocalRankIsZeroAndSeesItsOwnAccelerator) {
  Sample p = SampleWorker();
  p.config.virtual_local_rank = true;
  p.config.device_variable = "CUDA_VISIBLE_DEVICES";
  p.config.device_values = {"0", "1", "2", "3"};
  EXPECT_THAT(p.Env(), Contains(Pair("LOCAL_RANK", "0")));
  EXPECT_THAT(p.Env(), Contains(Pair("CUDA_VISIBLE_DEVICES", "1")));
  EXPECT_THAT(p.Env(), Contains(Pair("RANK", "5")));
}

TEST(BuildWorkerEnvTest, AHeartbeatFdOnlyWhenTheWorkerHasOne) {
  Sample p = SampleWorker();
  EXPECT_THAT(p.Env({{"DDPRUN_HEARTBEAT_FD", "9"}}), Not(Contains(Key("DDPRUN_HEARTBEAT_FD"))));
  p.seat.heartbeat_fd = 5;
  EXPECT_THAT(p.Env(), Contains(Pair("DDPRUN_HEARTBEAT_FD", "5")));
}

TEST(SubstituteLocalRankTest, ReplacesEveryOccurrence) {
  EXPECT_EQ(SubstituteLocalRank("--out=log_${local_rank}.txt", 3), "--out=log_3.txt");
  EXPECT_EQ(SubstituteLocalRank("${local_rank}-${local_rank}", 12), "12-12");
  EXPECT_EQ(SubstituteLocalRank("no macro", 1), "no macro");
  EXPECT_EQ(SubstituteLocalRank("$local_rank {local_rank} ${rank}", 1),
            "$local_rank {local_rank} ${rank}");
  EXPECT_EQ(SubstituteLocalRank("", 0), "");
}

}  // namespace
}  // namespace ddprun
