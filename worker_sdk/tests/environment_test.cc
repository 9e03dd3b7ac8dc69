#include "ddp/worker/environment.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>

namespace ddp::worker {
namespace {

using ::testing::HasSubstr;

std::map<std::string, std::string> Torchrun() {
  return {{"RANK", "5"},
          {"LOCAL_RANK", "1"},
          {"WORLD_SIZE", "8"},
          {"LOCAL_WORLD_SIZE", "4"},
          {"GROUP_RANK", "1"},
          {"MASTER_ADDR", "node1"},
          {"MASTER_PORT", "29500"},
          {"TORCHELASTIC_RUN_ID", "job"},
          {"TORCHELASTIC_RESTART_COUNT", "2"},
          {"DDPRUN_ROUND", "7"},
          {"DDPRUN_STORE_ADDR", "10.0.0.1:29400"}};
}

std::string Error(const std::map<std::string, std::string>& vars) {
  absl::StatusOr<Environment> env = ParseEnvironment(vars);
  EXPECT_FALSE(env.ok());
  EXPECT_EQ(env.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(env.status().message());
}

TEST(EnvironmentTest, EveryVariableOfAnAgent) {
  absl::StatusOr<Environment> env = ParseEnvironment(Torchrun());
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->rank, 5);
  EXPECT_EQ(env->local_rank, 1);
  EXPECT_EQ(env->world_size, 8);
  EXPECT_EQ(env->local_world_size, 4);
  EXPECT_EQ(env->group_rank, 1);
  EXPECT_EQ(env->master_addr, "node1");
  EXPECT_EQ(env->master_port, 29500);
  EXPECT_EQ(env->run_id, "job");
  EXPECT_EQ(env->restart_count, 2);
  EXPECT_EQ(env->round, 7);
  EXPECT_EQ(env->store_addr, "10.0.0.1:29400");
}

TEST(EnvironmentTest, OnlyTheStandardVariablesAsAnyLauncherSetsThem) {
  absl::StatusOr<Environment> env = ParseEnvironment({{"RANK", "3"},
                                                      {"LOCAL_RANK", "3"},
                                                      {"WORLD_SIZE", "4"},
                                                      {"MASTER_ADDR", "127.0.0.1"},
                                                      {"MASTER_PORT", "1234"}});
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->local_world_size, 4);
  EXPECT_EQ(env->group_rank, 0);
  EXPECT_EQ(env->run_id, "none");
  EXPECT_EQ(env->restart_count, 0);
  EXPECT_EQ(env->round, 0);
  EXPECT_EQ(env->store_addr, "");  // rank 0 will serve the store
}

TEST(EnvironmentTest, TorchrunsAgentStoreOnMasterPortIsNoticed) {
  auto vars = Torchrun();
  EXPECT_FALSE(ParseEnvironment(vars)->agent_store_at_master_port);
  vars["TORCHELASTIC_USE_AGENT_STORE"] = "False";
  EXPECT_FALSE(ParseEnvironment(vars)->agent_store_at_master_port);
  vars["TORCHELASTIC_USE_AGENT_STORE"] = "True";
  EXPECT_TRUE(ParseEnvironment(vars)->agent_store_at_master_port);
}

TEST(EnvironmentTest, HeartbeatFdOnlyWhenTheAgentGivesOne) {
  auto vars = Torchrun();
  EXPECT_EQ(ParseEnvironment(vars)->heartbeat_fd, -1);
  vars["DDPRUN_HEARTBEAT_FD"] = "7";
  EXPECT_EQ(ParseEnvironment(vars)->heartbeat_fd, 7);
  vars["DDPRUN_HEARTBEAT_FD"] = "x";
  EXPECT_THAT(Error(vars), HasSubstr("DDPRUN_HEARTBEAT_FD='x' is not valid"));
}

TEST(EnvironmentTest, RoundDefaultsToTheRestartCount) {
  auto vars = Torchrun();
  vars.erase("DDPRUN_ROUND");
  EXPECT_EQ(ParseEnvironment(vars)->round, 2);
}

TEST(EnvironmentTest, GroupRankDefaultsFromRankAndLocalWorldSize) {
  auto vars = Torchrun();
  vars.erase("GROUP_RANK");
  EXPECT_EQ(ParseEnvironment(vars)->group_rank, 1);  // 5 / 4
}

class MissingVariableTest : public ::testing::TestWithParam<const char*> {};

TEST_P(MissingVariableTest, NamesItAndSaysWhoSetsIt) {
  auto vars = Torchrun();
  vars.erase(GetParam());
  const std::string message = Error(vars);
  EXPECT_THAT(message, HasSubstr(std::string(GetParam()) + " is not set"));
  EXPECT_THAT(message, HasSubstr("ddprun or torchrun"));
  vars[GetParam()] = "";
  EXPECT_THAT(Error(vars), HasSubstr(std::string(GetParam()) + " is not set"));
}

INSTANTIATE_TEST_SUITE_P(Required, MissingVariableTest,
                         ::testing::Values("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR",
                                           "MASTER_PORT"));

struct BadValue {
  const char* name;
  const char* value;
  const char* expected;
};

class BadValueTest : public ::testing::TestWithParam<BadValue> {};

TEST_P(BadValueTest, NamesTheVariableItsValueAndWhatWasExpected) {
  auto vars = Torchrun();
  vars[GetParam().name] = GetParam().value;
  const std::string message = Error(vars);
  EXPECT_THAT(message, HasSubstr(std::string(GetParam().name) + "='" + GetParam().value + "'"));
  EXPECT_THAT(message, HasSubstr(GetParam().expected));
}

INSTANTIATE_TEST_SUITE_P(
    Values, BadValueTest,
    ::testing::Values(BadValue{"WORLD_SIZE", "0", "a whole number >= 1"},
                      BadValue{"WORLD_SIZE", "four", "a whole number >= 1"},
                      BadValue{"RANK", "8", "[0, WORLD_SIZE=8)"},
                      BadValue{"RANK", "-1", "[0, WORLD_SIZE=8)"},
                      BadValue{"RANK", "1.5", "[0, WORLD_SIZE=8)"},
                      BadValue{"LOCAL_WORLD_SIZE", "9", "[1, WORLD_SIZE=8]"},
                      BadValue{"LOCAL_RANK", "4", "[0, LOCAL_WORLD_SIZE=4)"},
                      BadValue{"GROUP_RANK", "x", "below WORLD_SIZE"},
                      BadValue{"MASTER_PORT", "0", "a port in 1-65535"},
                      BadValue{"MASTER_PORT", "70000", "a port in 1-65535"},
                      BadValue{"TORCHELASTIC_RESTART_COUNT", "-2", "a whole number >= 0"},
                      BadValue{"DDPRUN_ROUND", "r3", "a whole number >= 0"},
                      BadValue{"DDPRUN_STORE_ADDR", "host", "HOST:PORT"},
                      BadValue{"DDPRUN_STORE_ADDR", "host:99999", "HOST:PORT"}));

}  // namespace
}  // namespace ddp::worker
