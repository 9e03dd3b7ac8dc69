#include "common/env_map.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>

namespace ddprun {
namespace {

using ::testing::ElementsAre;

TEST(FlattenEnvTest, KeyEqualsValueInKeyOrder) {
  EXPECT_THAT(FlattenEnv({{"B", "2"}, {"A", "1"}, {"EMPTY", ""}, {"EQ", "x=y"}}),
              ElementsAre("A=1", "B=2", "EMPTY=", "EQ=x=y"));
  EXPECT_THAT(FlattenEnv({}), ElementsAre());
}

TEST(CurrentEnvironmentTest, HoldsThisProcesssVariables) {
  ASSERT_EQ(::setenv("DDPRUN_ENV_MAP_TEST", "a=b c", 1), 0);
  const EnvMap env = CurrentEnvironment();
  ASSERT_TRUE(env.count("DDPRUN_ENV_MAP_TEST"));
  EXPECT_EQ(env.at("DDPRUN_ENV_MAP_TEST"), "a=b c");
  ::unsetenv("DDPRUN_ENV_MAP_TEST");
  EXPECT_EQ(CurrentEnvironment().count("DDPRUN_ENV_MAP_TEST"), 0u);
}

}  // namespace
}  // namespace ddprun
