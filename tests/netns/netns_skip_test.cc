// Where network namespaces cannot be made (here: not root), every netns test must report a
// skip, not crash on the cluster it did not get.
#include <unistd.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/child_process.h"

namespace ddprun {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(NetnsSkipTest, WithoutNamespacesEveryTestSkipsAndNoneCrashes) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to run the tests as another user";
  for (const char* binary : {NETNS_TESTS_BIN, DDP_ACROSS_HOSTS_TESTS_BIN}) {
    // As nobody: NetnsCluster::Create refuses ("network namespaces need root").
    testing::ProcessResult r = testing::RunProcess(
        {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", binary}, {},
        absl::Seconds(120));
    EXPECT_EQ(r.exit_code, 0) << binary << "\n" << r.out << r.err;
    EXPECT_THAT(r.out, HasSubstr("no network namespaces here")) << binary;
    EXPECT_THAT(r.out, Not(HasSubstr("FAILED"))) << binary;
    EXPECT_THAT(r.out, HasSubstr("PASSED")) << binary;
  }
}

}  // namespace
}  // namespace ddprun
