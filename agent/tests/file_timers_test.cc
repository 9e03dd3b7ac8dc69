#include "agent/hangs/file_timers.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace ddprun {
namespace {

using ::testing::HasSubstr;

// FileTimerRequest.to_json() of torch 1.13 and of main: the same fields.
constexpr char kTorchAcquire[] =
    R"({"version": 1, "pid": 4321, "scope_id": "train.py#42", "expiration_time": 1700000010.5, "signal": 9})";
constexpr char kTorchRelease[] =
    R"({"version": 1, "pid": 4321, "scope_id": "train.py#42", "expiration_time": -1, "signal": 0})";

absl::Time At(double unix_seconds) { return absl::UnixEpoch() + absl::Seconds(unix_seconds); }

TimerRequest Request(int pid, const std::string& scope, double expiration, int signal) {
  return TimerRequest{pid, scope, expiration, signal};
}

TEST(FileTimersTest, TorchsRequestsParseWithOrWithoutAVersion) {
  absl::StatusOr<TimerRequest> r = ParseTimerRequest(kTorchAcquire);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->pid, 4321);
  EXPECT_EQ(r->scope, "train.py#42");
  EXPECT_DOUBLE_EQ(r->expiration, 1700000010.5);
  EXPECT_EQ(r->signal, 9);
  EXPECT_TRUE(ParseTimerRequest(kTorchRelease).ok());
  absl::StatusOr<TimerRequest> bare =
      ParseTimerRequest(R"({"pid": 7, "scope_id": "s", "expiration_time": 5})");
  ASSERT_TRUE(bare.ok()) << bare.status();
  EXPECT_EQ(bare->signal, 0);
}

TEST(FileTimersTest, ALineThatIsNotARequestSaysWhatIsWrong) {
  EXPECT_THAT(ParseTimerRequest("hello").status().message(), HasSubstr("not a JSON object"));
  EXPECT_THAT(ParseTimerRequest(R"({"scope_id": "s", "expiration_time": 5})").status().message(),
              HasSubstr("'pid' is missing"));
  EXPECT_THAT(
      ParseTimerRequest(R"({"pid": -3, "scope_id": "s", "expiration_time": 5})").status().message(),
      HasSubstr("is not a process id"));
  EXPECT_THAT(ParseTimerRequest(R"({"pid": 3, "expiration_time": 5})").status().message(),
              HasSubstr("'scope_id' is missing"));
  EXPECT_THAT(ParseTimerRequest(R"({"pid": 3, "scope_id": "s", "expiration_time": "x"})")
                  .status()
                  .message(),
              HasSubstr("'expiration_time' is missing or not a number"));
  EXPECT_THAT(
      ParseTimerRequest(R"({"pid": 3, "scope_id": "s", "expiration_time": 5, "signal": 99})")
          .status()
          .message(),
      HasSubstr("'signal' is not a signal number"));
}

TEST(FileTimersTest, AnExpiredProcessGetsItsEarliestTimerThatHasASignalOnce) {
  FileTimers timers;
  timers.Apply(Request(10, "outer", 100, 0));
  timers.Apply(Request(10, "inner", 101, 15));
  timers.Apply(Request(10, "late", 200, 9));
  timers.Apply(Request(11, "other", 150, 9));
  EXPECT_EQ(timers.NextDeadline(), At(100));
  EXPECT_TRUE(timers.TakeExpired(At(99)).empty());
  std::vector<FileTimers::Expiry> expired = timers.TakeExpired(At(101));
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0].pid, 10);
  EXPECT_EQ(expired[0].scope, "inner") << "the earliest expired timer with a signal";
  EXPECT_EQ(expired[0].signal, 15);
  EXPECT_EQ(expired[0].deadline, At(101));
  EXPECT_EQ(timers.size(), 1u) << "every timer of pid 10 is forgotten, also the later one";
  EXPECT_EQ(timers.NextDeadline(), At(150));
}

TEST(FileTimersTest, AnExpiryWithNoSignalIsReportedWithSignalZero) {
  FileTimers timers;
  timers.Apply(Request(10, "s", 100, 0));
  std::vector<FileTimers::Expiry> expired = timers.TakeExpired(At(100));
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0].signal, 0);
}

TEST(FileTimersTest, AReleaseAnExitAndARenewalEachChangeWhatExpires) {
  FileTimers timers;
  timers.Apply(Request(10, "s", 100, 9));
  timers.Apply(Request(10, "s", -1, 0));  // released
  timers.Apply(Request(11, "s", 100, 9));
  timers.ForgetPid(11);  // exited
  timers.Apply(Request(12, "s", 100, 9));
  timers.Apply(Request(12, "s", 300, 9));  // the same scope again: its new deadline
  EXPECT_TRUE(timers.TakeExpired(At(200)).empty());
  EXPECT_EQ(timers.NextDeadline(), At(300));
}

TEST(FileTimersTest, TheNumberOfTimersIsBounded) {
  FileTimers timers;
  for (size_t i = 0; i < FileTimers::kMaxTimers; ++i) {
    ASSERT_TRUE(timers.Apply(Request(10, std::to_string(i), 100, 9)));
  }
  EXPECT_FALSE(timers.Apply(Request(10, "one more", 100, 9)));
  EXPECT_TRUE(timers.Apply(Request(10, "0", 50, 9))) << "renewing a held timer is not refused";
  EXPECT_TRUE(timers.Apply(Request(10, "1", -1, 0))) << "nor is a release";
}

TEST(UninterruptibleDwellTest, OnlyAnUnbrokenStretchOfTheTimeoutCountsAndItIsReportedOnce) {
  UninterruptibleDwell dwell(absl::Seconds(10));
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  EXPECT_FALSE(dwell.Observe(0, true, t0));
  EXPECT_FALSE(dwell.Observe(0, false, t0 + absl::Seconds(5)));  // it ran again
  EXPECT_FALSE(dwell.Observe(0, true, t0 + absl::Seconds(6)));
  EXPECT_FALSE(dwell.Observe(0, true, t0 + absl::Seconds(15)));
  std::optional<absl::Duration> overdue = dwell.Observe(0, true, t0 + absl::Seconds(16));
  ASSERT_TRUE(overdue);
  EXPECT_EQ(*overdue, absl::Seconds(10));
  EXPECT_FALSE(dwell.Observe(0, true, t0 + absl::Seconds(30))) << "reported once";
  EXPECT_FALSE(dwell.Observe(1, true, t0 + absl::Seconds(30))) << "each worker on its own";
}

}  // namespace
}  // namespace ddprun
