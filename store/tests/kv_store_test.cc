#include "store/kv_store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <optional>

namespace ddprun {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Runs a store's completions and remembers what each waiter got.
class KvStoreTest : public ::testing::Test {
 protected:
  KvStore::Done Capture(std::optional<absl::StatusOr<std::vector<std::string>>>& slot) {
    return [&slot](absl::StatusOr<std::vector<std::string>> result) { slot = std::move(result); };
  }
  void RunCompletions() {
    for (auto& completion : store_.TakeCompletions()) completion();
  }

  KvStore store_;
  absl::Time now_ = absl::FromUnixSeconds(1000);
};

TEST_F(KvStoreTest, SetThenGetAtOnce) {
  ASSERT_TRUE(store_.Set("k", "v").ok());
  std::optional<absl::StatusOr<std::vector<std::string>>> got;
  store_.WaitFor({"k"}, now_ + absl::Seconds(1), Capture(got));
  RunCompletions();
  ASSERT_TRUE(got.has_value());
  ASSERT_TRUE(got->ok());
  EXPECT_THAT(**got, ElementsAre("v"));
}

TEST_F(KvStoreTest, GetBlocksUntilTheKeyIsSet) {
  std::optional<absl::StatusOr<std::vector<std::string>>> got;
  store_.WaitFor({"id"}, now_ + absl::Seconds(60), Capture(got));
  RunCompletions();
  EXPECT_FALSE(got.has_value());
  EXPECT_EQ(store_.NextDeadline(), now_ + absl::Seconds(60));
  ASSERT_TRUE(store_.Set("id", std::string("\0\1", 2)).ok());
  RunCompletions();
  ASSERT_TRUE(got.has_value() && got->ok());
  EXPECT_EQ((**got)[0], std::string("\0\1", 2));
  EXPECT_EQ(store_.NextDeadline(), absl::InfiniteFuture());
}

TEST_F(KvStoreTest, WaitTimesOutNamingTheMissingKeys) {
  ASSERT_TRUE(store_.Set("a", "1").ok());
  std::optional<absl::StatusOr<std::vector<std::string>>> got;
  store_.WaitFor({"a", "b", "c"}, now_ + absl::Seconds(5), Capture(got));
  store_.Expire(now_ + absl::Seconds(4));
  RunCompletions();
  EXPECT_FALSE(got.has_value());
  store_.Expire(now_ + absl::Seconds(5));
  RunCompletions();
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(got->status().message()), HasSubstr("b, c"));
  EXPECT_THAT(std::string(got->status().message()), HasSubstr("may have crashed"));
}

TEST_F(KvStoreTest, CancelledWaiterIsNeverCompleted) {
  std::optional<absl::StatusOr<std::vector<std::string>>> got;
  const auto id = store_.WaitFor({"k"}, now_ + absl::Seconds(5), Capture(got));
  store_.Cancel(id);
  ASSERT_TRUE(store_.Set("k", "v").ok());
  store_.Expire(now_ + absl::Seconds(10));
  RunCompletions();
  EXPECT_FALSE(got.has_value());
}

TEST_F(KvStoreTest, AddCountsFromZeroAndRejectsNonIntegers) {
  EXPECT_EQ(*store_.Add("n", 1), 1);
  EXPECT_EQ(*store_.Add("n", 5), 6);
  EXPECT_EQ(*store_.Add("n", -10), -4);
  ASSERT_TRUE(store_.Set("s", "text").ok());
  EXPECT_EQ(store_.Add("s", 1).status().code(), absl::StatusCode::kFailedPrecondition);
}

// Found by fuzz/fuzz_kv_store: this overflowed (undefined behaviour) before.
TEST_F(KvStoreTest, AddPastTheInt64RangeIsAnErrorAndKeepsTheValue) {
  ASSERT_EQ(*store_.Add("n", INT64_MAX), INT64_MAX);
  absl::StatusOr<int64_t> over = store_.Add("n", 1);
  EXPECT_EQ(over.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(over.status().message(), HasSubstr("would overflow a 64-bit integer"));
  EXPECT_EQ(*store_.Add("n", 0), INT64_MAX);
  ASSERT_TRUE(store_.Set("m", "-9223372036854775808").ok());
  EXPECT_EQ(store_.Add("m", -1).status().code(), absl::StatusCode::kOutOfRange);
}

TEST_F(KvStoreTest, AddWakesAWaiter) {
  std::optional<absl::StatusOr<std::vector<std::string>>> got;
  store_.WaitFor({"barrier"}, now_ + absl::Seconds(5), Capture(got));
  ASSERT_TRUE(store_.Add("barrier", 1).ok());
  RunCompletions();
  ASSERT_TRUE(got.has_value() && got->ok());
  EXPECT_THAT(**got, ElementsAre("1"));
}

TEST_F(KvStoreTest, CompareSetAsTorch) {
  EXPECT_EQ(*store_.CompareSet("k", "", "first"), "first");  // absent matches empty
  EXPECT_EQ(*store_.CompareSet("k", "wrong", "second"), "first");
  EXPECT_EQ(*store_.CompareSet("k", "first", "second"), "second");
  EXPECT_EQ(*store_.CompareSet("absent", "x", "y"), "x");  // torch returns expected
  EXPECT_FALSE(*store_.Check({"absent"}));
}

TEST_F(KvStoreTest, CheckDeleteNumKeys) {
  ASSERT_TRUE(store_.MultiSet({"a", "b"}, {"1", "2"}).ok());
  EXPECT_EQ(store_.NumKeys(), 2);
  EXPECT_TRUE(*store_.Check({"a", "b"}));
  EXPECT_FALSE(*store_.Check({"a", "c"}));
  EXPECT_TRUE(*store_.Delete("a"));
  EXPECT_FALSE(*store_.Delete("a"));
  EXPECT_EQ(store_.NumKeys(), 1);
}

TEST_F(KvStoreTest, MultiGetReturnsValuesInKeyOrder) {
  ASSERT_TRUE(store_.MultiSet({"x", "y"}, {"1", "2"}).ok());
  std::optional<absl::StatusOr<std::vector<std::string>>> got;
  store_.WaitFor({"y", "x"}, now_, Capture(got));
  RunCompletions();
  ASSERT_TRUE(got.has_value() && got->ok());
  EXPECT_THAT(**got, ElementsAre("2", "1"));
}

TEST_F(KvStoreTest, LimitsAreEnforcedWithClearErrors) {
  const std::string long_key(KvStore::kMaxKeyBytes + 1, 'k');
  absl::Status s = store_.Set(long_key, "v");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("the limit is 8192"));
  EXPECT_TRUE(store_.Set(std::string(KvStore::kMaxKeyBytes, 'k'), "v").ok());
  s = store_.Set("big", std::string(KvStore::kMaxValueBytes + 1, 'v'));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("'big'"));
  EXPECT_TRUE(store_.Set("big", std::string(KvStore::kMaxValueBytes, 'v')).ok());
  EXPECT_EQ(store_.Set("", "v").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_.MultiSet({"a"}, {"1", "2"}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_.Check({}).status().code(), absl::StatusCode::kInvalidArgument);
  std::optional<absl::StatusOr<std::vector<std::string>>> got;
  store_.WaitFor({long_key}, now_ + absl::Seconds(1), Capture(got));
  RunCompletions();
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->status().code(), absl::StatusCode::kInvalidArgument);
}

// What a store holds is counted through every verb that adds or removes, so that its
// limits (and the master's budget across runs) hold whatever a client sends.
TEST_F(KvStoreTest, BytesHeldAreCountedThroughEveryVerbAndBounded) {
  KvStore::Limits limits;
  limits.max_keys = 4;
  limits.max_bytes = 100;
  store_.set_limits(limits);
  ASSERT_TRUE(store_.Set("a", "0123456789").ok());  // 1 + 10
  EXPECT_EQ(store_.bytes(), 11);
  ASSERT_TRUE(store_.Set("a", "01").ok());  // replaced: the difference only
  EXPECT_EQ(store_.bytes(), 3);
  ASSERT_TRUE(store_.Append("a", "23").ok());
  EXPECT_EQ(store_.bytes(), 5);
  ASSERT_TRUE(store_.Add("n", 12).ok());  // "n" + "12"
  EXPECT_EQ(store_.bytes(), 8);
  ASSERT_TRUE(store_.CompareSet("c", "", "xyz").ok());
  EXPECT_EQ(store_.bytes(), 12);
  ASSERT_TRUE(store_.QueuePush("q", "abcd").ok());  // the name once, then each element
  ASSERT_TRUE(store_.QueuePush("q", "ef").ok());
  EXPECT_EQ(store_.bytes(), 19);
  ASSERT_TRUE(store_.QueuePop("q").ok());
  ASSERT_TRUE(store_.QueuePop("q").ok());
  EXPECT_EQ(store_.bytes(), 12);
  ASSERT_TRUE(store_.Delete("c").ok());
  EXPECT_EQ(store_.bytes(), 8);
  absl::Status big = store_.Set("b", std::string(100, 'x'));
  EXPECT_EQ(big.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(big.message()), HasSubstr("the limit of one run's store (100 bytes"));
  EXPECT_FALSE(store_.Find("b").has_value());
  EXPECT_EQ(store_.MultiSet({"x", "y", "z"}, {"1", "2", "3"}).code(),
            absl::StatusCode::kResourceExhausted);  // 2 keys held + 3 > 4: none is stored
  EXPECT_FALSE(store_.Find("x").has_value());
  EXPECT_EQ(store_.bytes(), 8);
}

TEST_F(KvStoreTest, ParkedReadsAreBounded) {
  KvStore::Limits limits;
  limits.max_waiters = 1;
  store_.set_limits(limits);
  std::optional<absl::StatusOr<std::vector<std::string>>> first, second;
  store_.WaitFor({"k"}, now_ + absl::Seconds(5), Capture(first));
  store_.WaitFor({"k"}, now_ + absl::Seconds(5), Capture(second));
  RunCompletions();
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_FALSE(first.has_value());
  ASSERT_TRUE(store_.Set("k", "v").ok());
  RunCompletions();
  EXPECT_TRUE(first.has_value() && first->ok());
}

TEST_F(KvStoreTest, AppendCreatesThenConcatenatesAndWakes) {
  std::optional<absl::StatusOr<std::vector<std::string>>> got;
  store_.WaitFor({"log"}, now_ + absl::Seconds(5), Capture(got));
  ASSERT_TRUE(store_.Append("log", "a").ok());
  RunCompletions();
  ASSERT_TRUE(got.has_value() && got->ok());
  EXPECT_THAT(**got, ElementsAre("a"));
  ASSERT_TRUE(store_.Append("log", std::string("\0b", 2)).ok());
  EXPECT_EQ(store_.Find("log"), std::string("a\0b", 3));
  ASSERT_TRUE(store_.Set("big", std::string(KvStore::kMaxValueBytes, 'v')).ok());
  EXPECT_EQ(store_.Append("big", "x").code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(KvStoreTest, FindAndKeysNeverBlock) {
  EXPECT_EQ(store_.Find("absent"), std::nullopt);
  ASSERT_TRUE(store_.MultiSet({"b", "a"}, {"2", "1"}).ok());
  EXPECT_EQ(store_.Find("a"), "1");
  EXPECT_THAT(store_.Keys(), ElementsAre("a", "b"));
}

TEST_F(KvStoreTest, AWaitForSeveralKeysCompletesOnlyWhenAllArePresent) {
  std::optional<absl::StatusOr<std::vector<std::string>>> got;
  store_.WaitFor({"a", "b", "c"}, absl::InfiniteFuture(), Capture(got), /*want_values=*/false);
  ASSERT_TRUE(store_.Set("a", "1").ok());
  ASSERT_TRUE(store_.Set("c", "3").ok());
  RunCompletions();
  EXPECT_FALSE(got.has_value());
  EXPECT_EQ(store_.NextDeadline(), absl::InfiniteFuture());
  ASSERT_TRUE(store_.Add("b", 1).ok());
  RunCompletions();
  ASSERT_TRUE(got.has_value() && got->ok());
  EXPECT_TRUE((*got)->empty()) << "a plain wait gets no values";
}

// A key present when the wait began but deleted since does not count as there.
TEST_F(KvStoreTest, AKeyDeletedWhileWaitingIsWaitedForAgain) {
  ASSERT_TRUE(store_.Set("a", "1").ok());
  std::optional<absl::StatusOr<std::vector<std::string>>> got;
  store_.WaitFor({"a", "b"}, now_ + absl::Seconds(5), Capture(got));
  ASSERT_TRUE(*store_.Delete("a"));
  ASSERT_TRUE(store_.Set("b", "2").ok());
  RunCompletions();
  EXPECT_FALSE(got.has_value());
  ASSERT_TRUE(store_.Set("a", "again").ok());
  RunCompletions();
  ASSERT_TRUE(got.has_value() && got->ok());
  EXPECT_THAT(**got, ElementsAre("again", "2"));
}

TEST_F(KvStoreTest, ManyWaitersOnOneKeyAllComplete) {
  int completed = 0;
  for (int i = 0; i < 1000; ++i) {
    store_.WaitFor({"id"}, now_ + absl::Seconds(i + 1),
                   [&](absl::StatusOr<std::vector<std::string>> v) { completed += v.ok(); });
  }
  EXPECT_EQ(store_.Waiting(), 1000);
  ASSERT_TRUE(store_.Set("id", "x").ok());
  RunCompletions();
  EXPECT_EQ(completed, 1000);
  EXPECT_EQ(store_.Waiting(), 0);
  EXPECT_EQ(store_.NextDeadline(), absl::InfiniteFuture());
}

TEST_F(KvStoreTest, QueuesArePushedAndPoppedInOrderApartFromKeys) {
  ASSERT_TRUE(store_.Set("q", "a key").ok());
  ASSERT_TRUE(store_.QueuePush("q", "1").ok());
  ASSERT_TRUE(store_.QueuePush("q", "2").ok());
  EXPECT_EQ(*store_.QueueLength("q"), 2);
  KvStore::Popped first = *store_.QueuePop("q");
  EXPECT_EQ(first.length_before, 2);
  EXPECT_EQ(first.value, "1");
  EXPECT_EQ(store_.QueuePop("q")->value, "2");
  KvStore::Popped empty = *store_.QueuePop("q");
  EXPECT_EQ(empty.length_before, 0);
  EXPECT_EQ(empty.value, std::nullopt);
  EXPECT_EQ(store_.Find("q"), "a key");
  EXPECT_EQ(store_.NumKeys(), 1) << "queues are not keys";
}

// As the libuv TCPStore: a non-empty queue counts as present, and a push releases one read
// waiting for it (a blocking pop), not all of them.
TEST_F(KvStoreTest, APushReleasesOneWaiterOfTheQueue) {
  EXPECT_FALSE(*store_.Check({"jobs"}));
  std::optional<absl::StatusOr<std::vector<std::string>>> first, second;
  store_.WaitFor({"jobs"}, absl::InfiniteFuture(), Capture(first), false);
  store_.WaitFor({"jobs"}, absl::InfiniteFuture(), Capture(second), false);
  ASSERT_TRUE(store_.QueuePush("jobs", "work").ok());
  RunCompletions();
  EXPECT_TRUE(first.has_value());
  EXPECT_FALSE(second.has_value());
  EXPECT_TRUE(*store_.Check({"jobs"}));
  ASSERT_TRUE(store_.QueuePush("jobs", "more").ok());
  RunCompletions();
  EXPECT_TRUE(second.has_value());
}

TEST_F(KvStoreTest, ABarrierReleasesEveryCallerWhenTheLastArrives) {
  std::optional<absl::StatusOr<std::vector<std::string>>> a, b, c;
  EXPECT_NE(store_.Barrier("bar", 3, Capture(a)), 0u);
  EXPECT_NE(store_.Barrier("bar", 3, Capture(b)), 0u);
  RunCompletions();
  EXPECT_FALSE(a.has_value());
  EXPECT_EQ(store_.Find("bar"), "2") << "the count is an ordinary key, as torch's";
  EXPECT_EQ(store_.Barrier("bar", 3, Capture(c)), 0u);
  RunCompletions();
  ASSERT_TRUE(a.has_value() && b.has_value() && c.has_value());
  EXPECT_TRUE(a->ok() && b->ok() && c->ok());
  EXPECT_EQ(store_.Waiting(), 0);
  // Never reset: a fourth caller passes at once (a barrier key is good for one barrier).
  std::optional<absl::StatusOr<std::vector<std::string>>> late;
  EXPECT_EQ(store_.Barrier("bar", 3, Capture(late)), 0u);
  RunCompletions();
  EXPECT_TRUE(late.has_value() && late->ok());
}

TEST_F(KvStoreTest, ABarrierIsReleasedByAWriteToItsKeyAndRefusesNonIntegers) {
  std::optional<absl::StatusOr<std::vector<std::string>>> waiting, plain;
  store_.WaitFor({"b"}, absl::InfiniteFuture(), Capture(plain), false);
  store_.Barrier("b", 2, Capture(waiting));
  RunCompletions();
  EXPECT_TRUE(plain.has_value()) << "the counter made the key present";
  EXPECT_FALSE(waiting.has_value());
  ASSERT_TRUE(store_.Set("b", "9").ok());
  RunCompletions();
  ASSERT_TRUE(waiting.has_value() && waiting->ok());
  ASSERT_TRUE(store_.Set("text", "x").ok());
  std::optional<absl::StatusOr<std::vector<std::string>>> bad;
  store_.Barrier("text", 2, Capture(bad));
  RunCompletions();
  ASSERT_TRUE(bad.has_value());
  EXPECT_EQ(bad->status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(KvStoreTest, ACancelledBarrierCallerStillCountedIsNeverCompleted) {
  std::optional<absl::StatusOr<std::vector<std::string>>> gone, last;
  const KvStore::WaiterId id = store_.Barrier("b", 2, Capture(gone));
  store_.Cancel(id);
  store_.Barrier("b", 2, Capture(last));
  RunCompletions();
  EXPECT_FALSE(gone.has_value());
  EXPECT_TRUE(last.has_value() && last->ok());
}

// A wait for a queue and a key: the push counts for it (as libuv's), the key releases it.
TEST_F(KvStoreTest, AWaitForAQueueAndAKeyIsReleasedWhenBothCame) {
  std::optional<absl::StatusOr<std::vector<std::string>>> got;
  store_.WaitFor({"q", "k"}, absl::InfiniteFuture(), Capture(got), false);
  ASSERT_TRUE(store_.QueuePush("q", "job").ok());
  RunCompletions();
  EXPECT_FALSE(got.has_value());
  ASSERT_TRUE(store_.Set("k", "v").ok());
  RunCompletions();
  EXPECT_TRUE(got.has_value() && got->ok());
}

// Every rank gathers every rank's key: each write touches each waiter once.
TEST_F(KvStoreTest, AnAllGatherOfManyRanksCompletesEveryWaiter) {
  constexpr int kRanks = 512;
  std::vector<std::string> keys;
  for (int r = 0; r < kRanks; ++r) keys.push_back("data/" + std::to_string(r));
  int completed = 0;
  for (int r = 0; r < kRanks; ++r) {
    store_.WaitFor(keys, absl::InfiniteFuture(), [&](absl::StatusOr<std::vector<std::string>> v) {
      completed += v.ok() && v->size() == keys.size();
    });
  }
  for (int r = 0; r < kRanks; ++r) ASSERT_TRUE(store_.Set(keys[r], "x").ok());
  RunCompletions();
  EXPECT_EQ(completed, kRanks);
  EXPECT_EQ(store_.Waiting(), 0);
}

}  // namespace
}  // namespace ddprun
