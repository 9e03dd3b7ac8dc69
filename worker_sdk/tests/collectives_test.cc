// Store collectives and the root-blob exchange behind InitNccl, with ranks as threads, each
// with its own Context and connection: against the master's store, and against the store
// rank 0 serves when the launcher gives none.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "ddp/worker/context.h"
#include "tests/support/child_process.h"
#include "worker_sdk/src/context_state.h"
#include "worker_sdk/src/root_blobs.h"
#include "worker_sdk/tests/loopback_master.h"

namespace ddp::worker {
namespace {

using ::testing::ContainsRegex;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;

// Runs `body` for each of `ranks` (of `world_size`) on its own thread; returns each status.
std::vector<absl::Status> RunRanks(int world_size, const std::vector<int>& ranks,
                                   const std::string& store_addr, int master_port,
                                   const std::function<absl::Status(Context&)>& body,
                                   bool agent_store = false) {
  std::vector<absl::Status> results(world_size);
  std::vector<std::thread> threads;
  for (int rank : ranks) {
    threads.emplace_back([&, rank] {
      ContextOptions options;
      options.store_call_timeout = absl::Seconds(20);
      Environment env = RankEnv(rank, world_size, master_port, store_addr);
      env.agent_store_at_master_port = agent_store;
      absl::StatusOr<Context> ctx = Context::Create(env, options);
      results[rank] = ctx.ok() ? body(*ctx) : ctx.status();
    });
  }
  for (auto& t : threads) t.join();
  return results;
}

std::vector<int> Ranks(int n) {
  std::vector<int> r(n);
  for (int i = 0; i < n; ++i) r[i] = i;
  return r;
}

using CollectivesTest = LoopbackMasterTest;

// Barrier, broadcast and all_gather, three times over, and the keys they leave: none.
absl::Status UseEveryCollective(Context& ctx, std::vector<std::string>* gathered) {
  for (int i = 0; i < 3; ++i) {
    if (absl::Status s = ctx.Barrier("step"); !s.ok()) return s;
    absl::StatusOr<std::string> b =
        ctx.Broadcast("config", ctx.world_size() - 1, absl::StrCat("from ", ctx.rank(), " #", i));
    if (!b.ok()) return b.status();
    if (*b != absl::StrCat("from ", ctx.world_size() - 1, " #", i)) {
      return absl::InternalError("broadcast got " + *b);
    }
    absl::StatusOr<std::vector<std::string>> all =
        ctx.AllGather("ranks", absl::StrCat("r", ctx.rank()));
    if (!all.ok()) return all.status();
    if (i == 0) gathered[ctx.rank()] = *all;
  }
  return ctx.Barrier("end");
}

TEST_F(CollectivesTest, EveryCollectiveThroughTheMastersStoreLeavesNoKeys) {
  constexpr int kRanks = 4;
  std::vector<std::string> gathered[kRanks];
  for (const absl::Status& s : RunRanks(kRanks, Ranks(kRanks), addr_, 1, [&](Context& ctx) {
         return UseEveryCollective(ctx, gathered);
       })) {
    EXPECT_TRUE(s.ok()) << s;
  }
  for (int r = 0; r < kRanks; ++r) EXPECT_THAT(gathered[r], ElementsAre("r0", "r1", "r2", "r3"));
  auto store = Store::Connect(addr_, "job", absl::Seconds(20));
  EXPECT_EQ(*store->NumKeys(), 0) << "collectives left keys behind";
}

TEST(CollectivesFallbackTest, RankZeroServesTheStoreWhenTheLauncherGivesNone) {
  constexpr int kRanks = 4;
  const int port = ddprun::testing::FreeLoopbackPort();
  std::vector<std::string> gathered[kRanks];
  // Rank 0 tends to finish first: its Context keeps the store up until the others are done.
  for (const absl::Status& s : RunRanks(kRanks, Ranks(kRanks), "", port, [&](Context& ctx) {
         return UseEveryCollective(ctx, gathered);
       })) {
    EXPECT_TRUE(s.ok()) << s;
  }
  EXPECT_THAT(gathered[2], ElementsAre("r0", "r1", "r2", "r3"));
}

TEST(CollectivesFallbackTest, UnderTorchrunsAgentStoreRankZeroServesOnTheNextPort) {
  const int port = ddprun::testing::FreeLoopbackPort();
  std::string addresses[2];
  auto results = RunRanks(
      2, Ranks(2), "", port - 1,
      [&](Context& ctx) {
        addresses[ctx.rank()] = ctx.store().address();
        return ctx.Barrier("start");
      },
      /*agent_store=*/true);
  EXPECT_TRUE(results[0].ok()) << results[0];
  EXPECT_TRUE(results[1].ok()) << results[1];
  EXPECT_EQ(addresses[1], absl::StrCat("127.0.0.1:", port));
}

TEST(CollectivesFallbackTest, AfterAFailedCollectiveRankZeroExitsWithoutWaitingForTheOthers) {
  const int port = ddprun::testing::FreeLoopbackPort();
  const absl::Time start = absl::Now();
  auto results = RunRanks(
      2, {0}, "", port, [](Context& ctx) { return ctx.Barrier("start", absl::Milliseconds(200)); });
  EXPECT_EQ(results[0].code(), absl::StatusCode::kDeadlineExceeded);
  // Its failure must reach the agent now, not after close_timeout (30 s).
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
}

TEST_F(CollectivesTest, BarrierTimeoutNamesTheRanksThatNeverCame) {
  auto results = RunRanks(4, {0, 2}, addr_, 1, [](Context& ctx) {
    return ctx.Barrier("start", absl::Milliseconds(300));
  });
  EXPECT_EQ(results[0].code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(results[0].message(), HasSubstr("rank 0: barrier 'start' timed out after 300ms"));
  EXPECT_THAT(results[0].message(), HasSubstr("ranks 1, 3 never arrived (2 of 4)"));
}

TEST_F(CollectivesTest, BroadcastTimeoutNamesTheRoot) {
  auto results = RunRanks(2, {1}, addr_, 1, [](Context& ctx) {
    return ctx.Broadcast("weights", 0, "", absl::Milliseconds(200)).status();
  });
  EXPECT_EQ(results[1].code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(results[1].message(),
              HasSubstr("rank 1: broadcast 'weights': no value from root rank 0"));
  EXPECT_THAT(std::string(results[1].message()),
              ContainsRegex("'ddp/r3/g[0-9]+/broadcast/weights/0/data'"));
  EXPECT_THAT(results[1].message(), HasSubstr("rank 0 may have crashed"));
}

TEST_F(CollectivesTest, AllGatherTimeoutNamesTheRanksThatNeverCame) {
  auto results = RunRanks(3, {0, 1}, addr_, 1, [](Context& ctx) {
    return ctx.AllGather("shapes", "x", absl::Milliseconds(200)).status();
  });
  EXPECT_THAT(results[1].message(), HasSubstr("rank 2 never arrived (1 of 3)"));
}

TEST_F(CollectivesTest, BadBroadcastRootIsAnError) {
  auto results = RunRanks(1, {0}, addr_, 1, [](Context& ctx) {
    return ctx.Broadcast("x", 1, "", absl::Seconds(1)).status();
  });
  EXPECT_EQ(results[0].code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(results[0].message(), HasSubstr("root 1 is not a rank (WORLD_SIZE=1)"));
}

TEST_F(CollectivesTest, KeyPrefixesAreScopedByRoundKindNameAndUse) {
  auto results = RunRanks(1, {0}, addr_, 1, [](Context& ctx) {
    EXPECT_THAT(internal::ContextAccess::NextKeyPrefix(ctx, "nccl", "world"),
                MatchesRegex("ddp/r3/g[0-9]+/nccl/world/0"));
    EXPECT_THAT(internal::ContextAccess::NextKeyPrefix(ctx, "nccl", "world"),
                MatchesRegex("ddp/r3/g[0-9]+/nccl/world/1"));
    EXPECT_THAT(internal::ContextAccess::NextKeyPrefix(ctx, "nccl", "tp"),
                MatchesRegex("ddp/r3/g[0-9]+/nccl/tp/0"));
    return absl::OkStatus();
  });
  EXPECT_TRUE(results[0].ok());
}

// A store address that does not resolve fails at once, naming where it came from, instead of
// waiting out the call timeout.
TEST(ContextTest, AStoreHostThatDoesNotResolveFailsAtOnce) {
  Environment env = RankEnv(1, 2, 29500, "");
  env.master_addr = "no-such-host.invalid";
  ContextOptions options;
  options.store_call_timeout = absl::Seconds(60);
  const absl::Time start = absl::Now();
  absl::StatusOr<Context> ctx = Context::Create(env, options);
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  ASSERT_FALSE(ctx.ok());
  EXPECT_THAT(ctx.status().message(),
              HasSubstr("the store's host (MASTER_ADDR) 'no-such-host.invalid' "
                        "does not resolve on this node"));
  env.store_addr = "[no-such-host.invalid]:29400";
  ctx = Context::Create(env, options);
  ASSERT_FALSE(ctx.ok());
  EXPECT_THAT(ctx.status().message(),
              HasSubstr("the store's host (DDPRUN_STORE_ADDR) 'no-such-host.invalid'"));
}

TEST_F(CollectivesTest, OneLiveContextPerRankAndALaterOneNeverMeetsTheEarliersKeys) {
  Environment env = RankEnv(0, 1, 1, addr_);
  std::string first_prefix;
  {
    absl::StatusOr<Context> first = Context::Create(env);
    ASSERT_TRUE(first.ok()) << first.status();
    absl::StatusOr<Context> second = Context::Create(env);
    EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(second.status().message(), HasSubstr("a Context for rank 0 already exists"));
    first_prefix = internal::ContextAccess::NextKeyPrefix(*first, "barrier", "x");
  }
  absl::StatusOr<Context> later = Context::Create(env);
  ASSERT_TRUE(later.ok()) << later.status();
  EXPECT_NE(internal::ContextAccess::NextKeyPrefix(*later, "barrier", "x"), first_prefix);
}

// The ncclUniqueId exchange without NCCL: roots make blobs, everyone gets all, in order.
TEST_F(CollectivesTest, RootBlobsOnePerBlockOfRanksReachEveryRank) {
  constexpr int kRanks = 5;
  std::atomic<int> made{0};
  std::vector<std::string> got[kRanks];
  auto results = RunRanks(kRanks, Ranks(kRanks), addr_, 1, [&](Context& ctx) {
    absl::StatusOr<std::vector<std::string>> blobs = ExchangeRootBlobs(
        ctx, internal::ContextAccess::NextKeyPrefix(ctx, "nccl", "world"),
        /*roots=*/RootCount(kRanks, 2),
        [&]() -> absl::StatusOr<std::string> {
          ++made;
          return absl::StrCat("id-of-", ctx.rank());
        },
        absl::Seconds(20), "ncclUniqueId");
    if (!blobs.ok()) return blobs.status();
    got[ctx.rank()] = *blobs;
    return absl::OkStatus();
  });
  for (const auto& s : results) EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(made.load(), 3);  // ranks 0, 2 and 4
  EXPECT_EQ(RootCount(kRanks, 2), 3);
  for (int r = 0; r < kRanks; ++r)
    EXPECT_THAT(got[r], ElementsAre("id-of-0", "id-of-2", "id-of-4"));
  auto store = Store::Connect(addr_, "job", absl::Seconds(20));
  EXPECT_EQ(*store->NumKeys(), 0);
}

TEST(RootPlacementTest, MatchesNcclsSplitOfRanksAmongIds) {
  // NCCL's own example: 3 ids over 7 ranks go to ranks 0-2, 3-4 and 5-6.
  EXPECT_EQ(FirstRankOfRoot(0, 7, 3), 0);
  EXPECT_EQ(FirstRankOfRoot(1, 7, 3), 3);
  EXPECT_EQ(FirstRankOfRoot(2, 7, 3), 5);
  const int expected_root[7] = {0, 0, 0, 1, 1, 2, 2};
  for (int rank = 0; rank < 7; ++rank)
    EXPECT_EQ(RootOfRank(rank, 7, 3), expected_root[rank]) << rank;
  // 300 ranks, at most 128 per id: 3 ids of 100 ranks, not 0/128/256.
  EXPECT_EQ(RootCount(300, 128), 3);
  EXPECT_EQ(FirstRankOfRoot(1, 300, 3), 100);
  EXPECT_EQ(FirstRankOfRoot(2, 300, 3), 200);
}

TEST_F(CollectivesTest, ARootThatCannotMakeItsBlobFailsEveryRankAtOnceWithItsReason) {
  auto results = RunRanks(2, Ranks(2), addr_, 1, [&](Context& ctx) {
    return ExchangeRootBlobs(
               ctx, "ddp/x", 1,
               []() -> absl::StatusOr<std::string> { return absl::InternalError("no network"); },
               absl::Seconds(20), "ncclUniqueId")
        .status();
  });
  EXPECT_THAT(results[0].message(), HasSubstr("no network"));
  EXPECT_EQ(results[1].code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(results[1].message(),
              HasSubstr("rank 1: rank 0 could not create the ncclUniqueId: no network"));
}

TEST_F(CollectivesTest, AMissingRootIsNamedWithItsKey) {
  auto results = RunRanks(2, {1}, addr_, 1, [&](Context& ctx) {
    return ExchangeRootBlobs(
               ctx, "ddp/r3/nccl/world/0", 1,
               []() -> absl::StatusOr<std::string> { return std::string("id"); },
               absl::Milliseconds(200), "ncclUniqueId")
        .status();
  });
  EXPECT_EQ(results[1].code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(results[1].message(),
              HasSubstr("rank 1: no ncclUniqueId from rank 0 under key 'ddp/r3/nccl/world/0/id/0' "
                        "after 200ms; rank 0 may have crashed - see its log"));
}

}  // namespace
}  // namespace ddp::worker
