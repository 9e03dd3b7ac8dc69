// SetUpHangChecks: what workers inherit so that a hang can be found and read.
#include "agent/hangs/hang_checks.h"

#include <sys/stat.h>

#include "gtest/gtest.h"
#include "tests/support/temp_dir.h"

namespace ddprun {
namespace {

class HangChecksTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<OrphanGuard> guard = OrphanGuard::Start();
    ASSERT_TRUE(guard.ok()) << guard.status();
    guard_ = std::make_unique<OrphanGuard>(std::move(*guard));
  }
  std::unique_ptr<OrphanGuard> guard_;
};

TEST_F(HangChecksTest, PythonWorkersGetFaulthandlerUnlessTheUserTurnedItOff) {
  EnvMap env;
  absl::StatusOr<HangChecks> on = SetUpHangChecks(/*python_workers=*/true, env, *guard_);
  ASSERT_TRUE(on.ok()) << on.status();
  EXPECT_TRUE(on->python_dumps);
  EXPECT_EQ(env["PYTHONFAULTHANDLER"], "1");
  EXPECT_FALSE(on->timer_fifo.has_value()) << "not asked for";

  EnvMap off = {{"PYTHONFAULTHANDLER", ""}};
  EXPECT_FALSE(SetUpHangChecks(true, off, *guard_)->python_dumps);
  EXPECT_EQ(off["PYTHONFAULTHANDLER"], "");

  EnvMap native;
  EXPECT_FALSE(SetUpHangChecks(/*python_workers=*/false, native, *guard_)->python_dumps);
  EXPECT_EQ(native.count("PYTHONFAULTHANDLER"), 0u);
}

TEST_F(HangChecksTest, AskedToServeTheFileTimerTheAgentMakesItsFifo) {
  testing::TempDir dir;
  EnvMap env = {{"TORCHELASTIC_ENABLE_FILE_TIMER", "1"},
                {"TORCHELASTIC_TIMER_FILE", dir / "timers"}};
  absl::StatusOr<HangChecks> checks = SetUpHangChecks(false, env, *guard_);
  ASSERT_TRUE(checks.ok()) << checks.status();
  ASSERT_TRUE(checks->timer_fifo.has_value());
  EXPECT_EQ(env["TORCHELASTIC_TIMER_FILE"], checks->timer_fifo->path());
  struct stat st {};
  ASSERT_EQ(::stat(checks->timer_fifo->path().c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
}

}  // namespace
}  // namespace ddprun
