// The NCCL watchdog's signal path, which needs no GPU: a signal reaches the watchdog, then
// the handler that was there before, as often as it arrived; one watchdog owns signals.

#include <signal.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>

#include "absl/time/time.h"
#include "ddp/worker/context.h"
#include "tests/support/child_process.h"
#include "worker_sdk/tests/loopback_master.h"

namespace ddp::worker {
namespace {

using ::testing::HasSubstr;

std::atomic<int> g_user_handler_calls{0};
void UserHandler(int) { ++g_user_handler_calls; }

Context OneRank(int rank, int world_size) {
  // The store is never used: no collective runs.
  absl::StatusOr<Context> ctx = Context::Create(RankEnv(rank, world_size, 1, "127.0.0.1:1"));
  EXPECT_TRUE(ctx.ok()) << ctx.status();
  return std::move(*ctx);
}

bool WaitForCalls(int calls) {
  return ddprun::testing::WaitUntil([&] { return g_user_handler_calls.load() >= calls; },
                                    absl::Seconds(20));
}

TEST(NcclWatchdogTest, ASignalGoesOnToThePreviousHandlerAfterTheAborts) {
  struct sigaction user {};
  user.sa_handler = &UserHandler;
  sigemptyset(&user.sa_mask);
  struct sigaction saved {};
  ASSERT_EQ(::sigaction(SIGUSR1, &user, &saved), 0);
  g_user_handler_calls = 0;
  {
    Context ctx = OneRank(0, 2);
    ASSERT_TRUE(ctx.AbortNcclOnSignal(SIGUSR1).ok());
    Context other = OneRank(1, 2);
    absl::Status second = other.AbortNcclOnSignal(SIGUSR2);
    EXPECT_EQ(second.code(), absl::StatusCode::kAlreadyExists);
    EXPECT_THAT(second.message(), HasSubstr("another Context's NCCL watchdog handles signals"));

    ASSERT_EQ(::raise(SIGUSR1), 0);
    ASSERT_TRUE(WaitForCalls(1)) << "the signal never reached the handler installed before";
    // Handled once: the user's handler is back; installing again works.
    ASSERT_TRUE(ctx.AbortNcclOnSignal(SIGUSR1).ok());
    ASSERT_EQ(::raise(SIGUSR1), 0);
    ASSERT_TRUE(WaitForCalls(2));
  }
  // The Contexts are gone: the user's handler is in place, not the SDK's.
  struct sigaction now {};
  ASSERT_EQ(::sigaction(SIGUSR1, nullptr, &now), 0);
  EXPECT_EQ(now.sa_handler, &UserHandler);
  ::sigaction(SIGUSR1, &saved, nullptr);
}

}  // namespace
}  // namespace ddp::worker
