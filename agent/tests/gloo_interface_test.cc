// GlooInterfaceChoice: none unless wanted; on loopback alone, none (loopback is right there).
#include "agent/gloo_interface.h"

#include "gtest/gtest.h"

namespace ddprun {
namespace {

TEST(GlooInterfaceChoiceTest, NoneUnlessWanted) {
  GlooInterfaceChoice choice(/*wanted=*/false, "127.0.0.1");
  EXPECT_EQ(choice.For("127.0.0.1", ""), "");
}

TEST(GlooInterfaceChoiceTest, EverythingOnLoopbackGivesNone) {
  GlooInterfaceChoice choice(/*wanted=*/true, "127.0.0.1");
  EXPECT_EQ(choice.For("127.0.0.1", "127.0.0.1"), "") << "gloo on loopback reaches them";
  EXPECT_EQ(choice.For("127.0.0.1", ""), "") << "the second time too (said once)";
}

}  // namespace
}  // namespace ddprun
