#include "store/run_stores.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <optional>

namespace ddprun {
namespace {

using ::testing::HasSubstr;

const absl::Time kStart = absl::UnixEpoch() + absl::Hours(1);

// What one blocking read got, once its completion has run.
struct Answer {
  int calls = 0;
  std::optional<absl::StatusOr<std::vector<std::string>>> values;
  KvStore::Done Done() {
    return [this](absl::StatusOr<std::vector<std::string>> v) {
      ++calls;
      values = std::move(v);
    };
  }
};

void RunCompletions(RunStores& stores) {
  for (auto& completion : stores.TakeCompletions()) completion();
}

TEST(RunStoresTest, TheBytesOfEveryRunAreBoundedTogether) {
  StoreLimits limits;
  limits.max_bytes_per_run = 80;
  limits.max_store_bytes = 100;
  RunStores stores(limits);
  EXPECT_TRUE(stores.Call("a", [](KvStore& s) { return s.Set("k", std::string(59, 'x')); }).ok());
  absl::Status refused =
      stores.Call("b", [](KvStore& s) { return s.Set("k", std::string(49, 'x')); });
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.message(), HasSubstr("the master's Store budget for every run together"));
  EXPECT_EQ(stores.Bytes(), std::make_pair(int64_t{60}, int64_t{60}));
  stores.Forget("a", absl::AbortedError("gone"));
  EXPECT_TRUE(stores.Call("b", [](KvStore& s) { return s.Set("k", std::string(49, 'x')); }).ok());
  EXPECT_EQ(stores.Bytes(), std::make_pair(int64_t{50}, int64_t{50}));
  EXPECT_FALSE(stores.Holds("a"));
}

TEST(RunStoresTest, AConnectionPastItsParkedReadsIsRefusedUntilOneIsAnswered) {
  StoreLimits limits;
  limits.max_waiters_per_connection = 1;
  RunStores stores(limits);
  Answer first, second, third, other;
  stores.Wait("job", "peer1", {"k"}, kStart, absl::InfiniteFuture(), first.Done());
  stores.Wait("job", "peer1", {"k"}, kStart, absl::InfiniteFuture(), second.Done());
  stores.Wait("job", "peer2", {"k"}, kStart, absl::InfiniteFuture(), other.Done());
  RunCompletions(stores);
  ASSERT_EQ(second.calls, 1);
  EXPECT_EQ(second.values->status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(second.values->status().message(), HasSubstr("this connection has 1 blocking"));
  EXPECT_EQ(first.calls + other.calls, 0);
  EXPECT_EQ(stores.Waiting(), 2);
  ASSERT_TRUE(stores.Call("job", [](KvStore& s) { return s.Set("k", "v"); }).ok());
  RunCompletions(stores);
  ASSERT_EQ(first.calls, 1);
  EXPECT_EQ(**first.values, std::vector<std::string>{"v"});
  EXPECT_EQ(other.calls, 1);
  stores.Wait("job", "peer1", {"missing"}, kStart, absl::InfiniteFuture(), third.Done());
  RunCompletions(stores);
  EXPECT_EQ(third.calls, 0) << "the answered read still counted against its connection";
  EXPECT_EQ(stores.Waiting(), 1);
}

TEST(RunStoresTest, ADropFailsTheReadsAndACancelOfTheOldStoreIsANoOp) {
  StoreLimits limits;
  limits.max_waiters_per_connection = 1;
  RunStores stores(limits);
  Answer parked, after;
  const ParkedRead read =
      stores.Wait("job", "peer", {"k"}, kStart, absl::InfiniteFuture(), parked.Done());
  ASSERT_NE(read.waiter, 0u);
  ASSERT_TRUE(stores.Call("job", [](KvStore& s) { return s.Set("other", "v"); }).ok());
  stores.Drop("job", absl::AbortedError("round 4 has begun"));
  EXPECT_FALSE(stores.Cancel("job", read));
  RunCompletions(stores);
  ASSERT_EQ(parked.calls, 1);
  EXPECT_EQ(parked.values->status().code(), absl::StatusCode::kAborted);
  EXPECT_TRUE(stores.Holds("job"));
  EXPECT_EQ(stores.Bytes(), std::make_pair(int64_t{0}, int64_t{0}));
  // Its connection's count was freed with the answer: a new read may park.
  const ParkedRead next =
      stores.Wait("job", "peer", {"k"}, kStart, absl::InfiniteFuture(), after.Done());
  EXPECT_TRUE(stores.Cancel("job", next));
  RunCompletions(stores);
  EXPECT_EQ(after.calls, 0);
  EXPECT_EQ(stores.Waiting(), 0);
}

TEST(RunStoresTest, AReadWaitsAtMostMaxStoreWaitAndFailsAtItsDeadline) {
  StoreLimits limits;
  limits.max_store_wait = absl::Seconds(10);
  RunStores stores(limits);
  Answer answer;
  const ParkedRead read =
      stores.Wait("job", "peer", {"k"}, kStart, absl::InfiniteFuture(), answer.Done());
  EXPECT_EQ(read.deadline, kStart + absl::Seconds(10));
  EXPECT_EQ(stores.NextDeadline(), kStart + absl::Seconds(10));
  stores.Expire(kStart + absl::Seconds(9));
  RunCompletions(stores);
  EXPECT_EQ(answer.calls, 0);
  stores.Expire(kStart + absl::Seconds(10));
  RunCompletions(stores);
  ASSERT_EQ(answer.calls, 1);
  EXPECT_EQ(answer.values->status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(stores.NextDeadline(), absl::InfiniteFuture());
}

TEST(RunStoresTest, AbortAllEndsTheReadsAndRefusesLaterOnes) {
  RunStores stores{StoreLimits()};
  Answer parked, later;
  stores.Wait("job", "peer", {"k"}, kStart, absl::InfiniteFuture(), parked.Done());
  stores.AbortAll(absl::UnavailableError("the store is shutting down"));
  stores.Wait("job", "peer", {"k"}, kStart, absl::InfiniteFuture(), later.Done());
  RunCompletions(stores);
  ASSERT_EQ(parked.calls, 1);
  ASSERT_EQ(later.calls, 1);
  EXPECT_EQ(parked.values->status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(later.values->status().message(), HasSubstr("shutting down"));
}

}  // namespace
}  // namespace ddprun
