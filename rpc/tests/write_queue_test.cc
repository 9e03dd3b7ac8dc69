#include "rpc/write_queue.h"

#include <string>

#include "gtest/gtest.h"

namespace ddprun {
namespace {

TEST(WriteQueueTest, OneWriteInFlightTheRestInOrder) {
  WriteQueue<std::string> q;
  const std::string* first = q.Push("a");
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(*first, "a");
  EXPECT_EQ(q.Push("b"), nullptr) << "a write is in flight";
  EXPECT_EQ(q.Push("c"), nullptr);
  auto next = q.Done(true);
  ASSERT_NE(next.write, nullptr);
  EXPECT_EQ(*next.write, "b");
  EXPECT_EQ(*q.Done(true).write, "c");
  EXPECT_EQ(q.Done(true).write, nullptr) << "idle";
  EXPECT_NE(q.Push("d"), nullptr) << "idle: the next push writes at once";
}

TEST(WriteQueueTest, AFailedWriteStopsWriting) {
  WriteQueue<std::string> q;
  q.Push("a");
  q.Push("b");
  EXPECT_EQ(q.Done(false).write, nullptr);
}

TEST(WriteQueueTest, ACloseWaitsForTheWriteInFlightAndComesOnce) {
  WriteQueue<std::string, int> q;
  q.Push("a");
  q.Push("b");
  EXPECT_FALSE(q.CloseAfterWrites(7)) << "deferred behind the writes";
  EXPECT_FALSE(q.CloseAfterWrites(8)) << "one close only";
  auto next = q.Done(true);
  EXPECT_EQ(*next.write, "b");
  EXPECT_FALSE(next.close);
  next = q.Done(true);
  EXPECT_EQ(next.write, nullptr);
  ASSERT_TRUE(next.close);
  EXPECT_EQ(*next.close, 7);
  EXPECT_TRUE(q.Finish());
  EXPECT_FALSE(q.Finish()) << "finished once";
  EXPECT_EQ(q.Push("late"), nullptr) << "dropped after the end";
}

TEST(WriteQueueTest, AnIdleStreamClosesAtOnce) {
  WriteQueue<std::string, int> q;
  EXPECT_EQ(q.CloseAfterWrites(3), 3);
}

}  // namespace
}  // namespace ddprun
