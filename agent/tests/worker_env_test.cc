#include "agent/worker_env.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ddprun {
namespace {

using ::testing::Contains;
using ::testing::Key;
using ::testing::Not;
using ::testing::Pair;

WorkerPlacement SamplePlacement() {
  WorkerPlacement p;
  p.local_rank = 1;
  p.rank = 5;
  p.group_rank = 2;
  p.local_world_size = 4;
  p.world_size = 12;
  p.group_world_size = 3;
  p.role_name = "trainer";
  p.master_addr = "10.0.0.1";
  p.master_port = 29500;
  p.restart_count = 2;
  p.max_restarts = 3;
  p.run_id = "job42";
  p.round = 7;
  p.error_file = "/logs/job42/attempt_7/1/error.json";
  return p;
}

TEST(BuildWorkerEnvTest, SetsEveryTorchrunVariable) {
  const EnvMap env = BuildWorkerEnv({}, SamplePlacement());
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
  const EnvMap env = BuildWorkerEnv(base, SamplePlacement());
  EXPECT_THAT(env, Contains(Pair("PATH", "/usr/bin:/bin")));
  EXPECT_THAT(env, Contains(Pair("HOME", "/home/u")));
  EXPECT_THAT(env, Contains(Pair("EMPTY", "")));
}

TEST(BuildWorkerEnvTest, OverridesStaleTorchrunVariablesFromBase) {
  const EnvMap base = {{"RANK", "99"},
                       {"WORLD_SIZE", "99"},
                       {"MASTER_PORT", "1"},
                       {"TORCHELASTIC_USE_AGENT_STORE", "True"}};
  const EnvMap env = BuildWorkerEnv(base, SamplePlacement());
  EXPECT_THAT(env, Contains(Pair("RANK", "5")));
  EXPECT_THAT(env, Contains(Pair("WORLD_SIZE", "12")));
  EXPECT_THAT(env, Contains(Pair("MASTER_PORT", "29500")));
  EXPECT_THAT(env, Contains(Pair("TORCHELASTIC_USE_AGENT_STORE", "False")));
}

// torch compares the exact string "True" (rendezvous.py, _torchelastic_use_agent_store).
TEST(BuildWorkerEnvTest, AnAgentStoreIsExactlyTrue) {
  WorkerPlacement p = SamplePlacement();
  p.agent_store = true;
  EXPECT_THAT(BuildWorkerEnv({{"TORCHELASTIC_USE_AGENT_STORE", "False"}}, p),
              Contains(Pair("TORCHELASTIC_USE_AGENT_STORE", "True")));
}

TEST(BuildWorkerEnvTest, AGlooInterfaceIsSetUnlessTheUserSetOne) {
  WorkerPlacement p = SamplePlacement();
  EXPECT_THAT(BuildWorkerEnv({}, p), Not(Contains(Key("GLOO_SOCKET_IFNAME"))));
  p.gloo_interface = "eth0";
  EXPECT_THAT(BuildWorkerEnv({}, p), Contains(Pair("GLOO_SOCKET_IFNAME", "eth0")));
  EXPECT_THAT(BuildWorkerEnv({{"GLOO_SOCKET_IFNAME", "ib0"}}, p),
              Contains(Pair("GLOO_SOCKET_IFNAME", "ib0")));
}

TEST(BuildWorkerEnvTest, KeepsUsersNcclAsyncErrorHandling) {
  const EnvMap base = {{"NCCL_ASYNC_ERROR_HANDLING", "0"},
                       {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "3"}};
  const EnvMap env = BuildWorkerEnv(base, SamplePlacement());
  EXPECT_THAT(env, Contains(Pair("NCCL_ASYNC_ERROR_HANDLING", "0")));
  EXPECT_THAT(env, Contains(Pair("TORCH_NCCL_ASYNC_ERROR_HANDLING", "3")));
}

TEST(BuildWorkerEnvTest, OmpNumThreadsDefaultsOnlyWhenUnsetAndSeveralWorkers) {
  WorkerPlacement p = SamplePlacement();
  p.local_world_size = 4;
  EXPECT_THAT(BuildWorkerEnv({}, p), Contains(Pair("OMP_NUM_THREADS", "1")));
  EXPECT_TRUE(WillDefaultOmpThreads({}, 4));

  EXPECT_THAT(BuildWorkerEnv({{"OMP_NUM_THREADS", "8"}}, p),
              Contains(Pair("OMP_NUM_THREADS", "8")));
  EXPECT_FALSE(WillDefaultOmpThreads({{"OMP_NUM_THREADS", "8"}}, 4));

  p.local_world_size = 1;
  EXPECT_THAT(BuildWorkerEnv({}, p), Not(Contains(Key("OMP_NUM_THREADS"))));
  EXPECT_FALSE(WillDefaultOmpThreads({}, 1));
}

TEST(BuildWorkerEnvTest, StoreAddress) {
  WorkerPlacement p = SamplePlacement();
  p.store_addr = "10.0.0.1:29401";
  EXPECT_THAT(BuildWorkerEnv({{"DDPRUN_STORE_ADDR", "stale:1"}}, p),
              Contains(Pair("DDPRUN_STORE_ADDR", "10.0.0.1:29401")));
}

TEST(BuildWorkerEnvTest, RemovesStaleStoreAddressWhenNoneIsOffered) {
  WorkerPlacement p = SamplePlacement();
  p.store_addr = "";
  EXPECT_THAT(BuildWorkerEnv({{"DDPRUN_STORE_ADDR", "stale:1"}}, p),
              Not(Contains(Key("DDPRUN_STORE_ADDR"))));
}

TEST(BuildWorkerEnvTest, SignalsToHandleWhenGiven) {
  WorkerPlacement p = SamplePlacement();
  p.signals_to_handle = "SIGTERM,SIGINT";
  EXPECT_THAT(BuildWorkerEnv({}, p),
              Contains(Pair("TORCHELASTIC_SIGNALS_TO_HANDLE", "SIGTERM,SIGINT")));
}

TEST(BuildWorkerEnvTest, EmptyErrorFileIsExportedEmpty) {
  WorkerPlacement p = SamplePlacement();
  p.error_file = "";
  EXPECT_THAT(BuildWorkerEnv({}, p), Contains(Pair("TORCHELASTIC_ERROR_FILE", "")));
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
