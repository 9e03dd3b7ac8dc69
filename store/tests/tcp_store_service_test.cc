#include "store/tcp_store_service.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "store/tests/tcp_store_requests.h"

namespace ddprun {
namespace {

using tcpstore::Dialect;
using tcpstore::EncodeI64;
using tcpstore::EncodeString;
using tcpstore::EncodeU32;
using tcpstore::EncodeU8;
using tcpstore::Verb;
using tcpstore::testing::Hex;
using tcpstore::testing::RequestBytes;
using tcpstore::testing::ValidateBytes;
using ::testing::HasSubstr;

constexpr Dialect kOld = Dialect::kLegacy;
constexpr Dialect kNew = Dialect::kValidated;

// Drives a service as the I/O layer would, and collects what each connection gets.
class TcpStoreServiceTest : public ::testing::Test {
 protected:
  void SetUp() override { service_.BeginRound(0); }

  void Send(TcpStoreService::ConnectionId id, const std::string& bytes) {
    if (opened_.insert(id).second) service_.Open(id);
    service_.Receive(id, bytes);
    Collect();
  }
  void Collect() {
    for (TcpStoreService::Output& out : service_.TakeOutput()) {
      received_[out.connection] += out.bytes;
      if (out.close) closed_[out.connection] = out.why;
    }
  }
  // What `id` received since the last call.
  std::string Got(TcpStoreService::ConnectionId id) {
    std::string got = received_[id];
    received_[id].clear();
    return got;
  }

  TcpStoreService service_;
  std::set<TcpStoreService::ConnectionId> opened_;
  std::map<TcpStoreService::ConnectionId, std::string> received_;
  std::map<TcpStoreService::ConnectionId, std::string> closed_;
};

// What torch 1.13's init_process_group sends (tcpstore-protocol.md §9), and its answers.
TEST_F(TcpStoreServiceTest, ALegacyClientSetsWaitsAndGets) {
  Send(1, RequestBytes(Verb::kAdd, kOld).Str("init/").I64(1));
  EXPECT_EQ(Got(1), EncodeI64(1));
  Send(1, RequestBytes(Verb::kSet, kOld).Str("/rank_0").Str("host"));
  Send(1, std::string(RequestBytes(Verb::kWait, kOld).U64(1).Str("/rank_0")) +
              std::string(RequestBytes(Verb::kGet, kOld).Str("/rank_0")));
  EXPECT_EQ(Got(1), EncodeU8(0) + EncodeString("host"));
  EXPECT_TRUE(closed_.empty());
  // Counted for the agent's metrics (ddprun_agent_store_operations_total).
  EXPECT_EQ(service_.calls(Verb::kAdd), 1);
  EXPECT_EQ(service_.calls(Verb::kWait), 1);
  EXPECT_EQ(service_.calls(Verb::kMultiGet), 0);
}

TEST_F(TcpStoreServiceTest, AValidatedClientIsPingedBackAndSharesTheStoreWithALegacyOne) {
  Send(1, ValidateBytes() + std::string(RequestBytes(Verb::kPing, kNew).U32(4242)));
  EXPECT_EQ(Got(1), EncodeU32(4242));
  Send(1, RequestBytes(Verb::kSet, kNew).Str("/k").Str("from 2.x"));
  Send(2, RequestBytes(Verb::kGet, kOld).Str("/k"));
  EXPECT_EQ(Got(2), EncodeString("from 2.x"));
}

TEST_F(TcpStoreServiceTest, AWaitIsAnsweredWhenAnotherConnectionSetsTheKey) {
  Send(1,
       ValidateBytes() + std::string(RequestBytes(Verb::kWait, kNew).U64(2).Str("/a").Str("/b")));
  EXPECT_EQ(Got(1), "");
  Send(2, RequestBytes(Verb::kSet, kOld).Str("/a").Str("1"));
  EXPECT_EQ(Got(1), "");
  Send(2, RequestBytes(Verb::kAdd, kOld).Str("/b").I64(1));
  EXPECT_EQ(Got(1), EncodeU8(tcpstore::kStopWaiting));
}

TEST_F(TcpStoreServiceTest, CancelWaitIsAlwaysAnsweredAndSilencesTheWait) {
  Send(1, ValidateBytes() + std::string(RequestBytes(Verb::kWait, kNew).U64(1).Str("/never")));
  Send(1, RequestBytes(Verb::kCancelWait, kNew));
  EXPECT_EQ(Got(1), EncodeU8(tcpstore::kWaitCanceled));
  Send(2, RequestBytes(Verb::kSet, kOld).Str("/never").Str("now"));
  EXPECT_EQ(Got(1), "") << "a cancelled wait must not answer later";
  Send(1, RequestBytes(Verb::kCancelWait, kNew));
  EXPECT_EQ(Got(1), EncodeU8(tcpstore::kWaitCanceled));
  EXPECT_EQ(service_.store().Waiting(), 0);
}

TEST_F(TcpStoreServiceTest, PipelinedRequestsAreAnsweredInOrder) {
  Send(1, ValidateBytes() + std::string(RequestBytes(Verb::kSet, kNew).Str("/x").Str("1")) +
              std::string(RequestBytes(Verb::kWait, kNew).U64(1).Str("/x")) +
              std::string(RequestBytes(Verb::kGet, kNew).Str("/x")) +
              std::string(RequestBytes(Verb::kNumKeys, kNew)));
  EXPECT_EQ(Got(1), EncodeU8(0) + EncodeString("1") + EncodeI64(1));
}

TEST_F(TcpStoreServiceTest, RequestsSplitIntoSingleBytesAreServedTheSame) {
  const std::string session =
      ValidateBytes() + std::string(RequestBytes(Verb::kPing, kNew).U32(7)) +
      std::string(RequestBytes(Verb::kAdd, kNew).Str("init/").I64(1)) +
      std::string(RequestBytes(Verb::kCompareSet, kNew).Str("/c").Str("").Str("v"));
  for (char byte : session) Send(1, std::string(1, byte));
  EXPECT_EQ(Got(1), EncodeU32(7) + EncodeI64(1) + EncodeString("v"));
  // And a legacy SET whose 0 byte alone could have been VALIDATE.
  for (char byte : std::string(RequestBytes(Verb::kSet, kOld).Str("/s").Str("v")))
    Send(2, std::string(1, byte));
  Send(2, RequestBytes(Verb::kGet, kOld).Str("/s"));
  EXPECT_EQ(Got(2), EncodeString("v"));
}

TEST_F(TcpStoreServiceTest, EveryVerbAnswersAsPyTorchsServer) {
  Send(1, ValidateBytes());
  auto ask = [&](const std::string& bytes) {
    Send(1, bytes);
    return Got(1);
  };
  EXPECT_EQ(ask(RequestBytes(Verb::kCompareSet, kNew).Str("/c").Str("x").Str("y")),
            EncodeString("x"));
  EXPECT_EQ(ask(RequestBytes(Verb::kCompareSet, kNew).Str("/c").Str("").Str("first")),
            EncodeString("first"));
  EXPECT_EQ(ask(RequestBytes(Verb::kCompareSet, kNew).Str("/c").Str("no").Str("z")),
            EncodeString("first"));
  EXPECT_EQ(ask(RequestBytes(Verb::kCompareSet, kNew).Str("/c").Str("first").Str("second")),
            EncodeString("second"));
  EXPECT_EQ(ask(RequestBytes(Verb::kCheck, kNew).U64(2).Str("/c").Str("/none")),
            EncodeU8(tcpstore::kNotReady));
  EXPECT_EQ(ask(RequestBytes(Verb::kCheck, kNew).U64(1).Str("/c")), EncodeU8(tcpstore::kReady));
  EXPECT_EQ(ask(RequestBytes(Verb::kGet, kNew).Str("/none")), EncodeString("")) << "as libuv";
  EXPECT_EQ(ask(RequestBytes(Verb::kAppend, kNew).Str("/l").Str("ab")), "");
  EXPECT_EQ(ask(RequestBytes(Verb::kAppend, kNew).Str("/l").Str("cd")), "");
  EXPECT_EQ(
      ask(RequestBytes(Verb::kMultiSet, kNew).U64(2).Str("/m1").Str("1").Str("/m2").Str("22")), "");
  EXPECT_EQ(ask(RequestBytes(Verb::kMultiGet, kNew).U64(3).Str("/l").Str("/m2").Str("/none")),
            EncodeString("abcd") + EncodeString("22") + EncodeString(""));
  EXPECT_EQ(ask(RequestBytes(Verb::kNumKeys, kNew)), EncodeI64(4));
  EXPECT_EQ(ask(RequestBytes(Verb::kDelete, kNew).Str("/m1")), EncodeI64(1));
  EXPECT_EQ(ask(RequestBytes(Verb::kDelete, kNew).Str("/m1")), EncodeI64(0));
  EXPECT_EQ(ask(RequestBytes(Verb::kListKeys, kNew)),
            EncodeI64(3) + EncodeString("/c") + EncodeString("/l") + EncodeString("/m2"));
  EXPECT_EQ(ask(RequestBytes(Verb::kQueuePush, kNew).Str("/q").Str("job")), "");
  EXPECT_EQ(ask(RequestBytes(Verb::kQueueLen, kNew).Str("/q")), EncodeI64(1));
  EXPECT_EQ(ask(RequestBytes(Verb::kCheck, kNew).U64(1).Str("/q")), EncodeU8(tcpstore::kReady));
  EXPECT_EQ(ask(RequestBytes(Verb::kQueuePop, kNew).Str("/q")), EncodeI64(1) + EncodeString("job"));
  EXPECT_EQ(ask(RequestBytes(Verb::kQueuePop, kNew).Str("/q")), EncodeI64(0))
      << "no value when empty";
  EXPECT_TRUE(closed_.empty());
}

TEST_F(TcpStoreServiceTest, ABarrierReleasesItsCallersTogether) {
  Send(1, ValidateBytes() + std::string(RequestBytes(Verb::kBarrier, kNew).Str("/bar").I64(2)));
  EXPECT_EQ(Got(1), "");
  Send(2, ValidateBytes() + std::string(RequestBytes(Verb::kBarrier, kNew).Str("/bar").I64(2)));
  EXPECT_EQ(Got(1), EncodeU8(0));
  EXPECT_EQ(Got(2), EncodeU8(0));
}

TEST_F(TcpStoreServiceTest, BadRequestsCloseTheConnectionSayingWhy) {
  Send(1, RequestBytes(Verb::kSet, kOld).Str("/s").Str("text"));
  Send(1, RequestBytes(Verb::kAdd, kOld).Str("/s").I64(1));
  ASSERT_TRUE(closed_.count(1));
  EXPECT_THAT(closed_[1],
              HasSubstr("its request failed: store key '/s' holds a value that is not an integer"));
  Send(2, ValidateBytes() + Hex("13"));
  EXPECT_THAT(closed_[2], HasSubstr("it sent query code 19"));
  Send(3, RequestBytes(Verb::kWatchKey, kOld).Str("/w"));
  EXPECT_THAT(closed_[3], HasSubstr("it sent WATCH_KEY"));
  Send(4, ValidateBytes() + ValidateBytes());
  EXPECT_THAT(closed_[4], HasSubstr("it sent VALIDATE after its first request"));
  EXPECT_EQ(service_.connections(), 0);
  // A closed connection's later bytes are ignored.
  service_.Receive(1, std::string(RequestBytes(Verb::kGet, kOld).Str("/s")));
  EXPECT_EQ(Got(1), "");
}

// Rounds: what a dead round wrote is never seen by the next one. The dead round's
// connections get no more answers (their workers are being stopped by their own agents, who
// should find them waiting, not failing of a reset), and are closed when the next begins.
TEST_F(TcpStoreServiceTest, AnEndedRoundAnswersNothingMoreAndTheNextStartsEmpty) {
  Send(1, RequestBytes(Verb::kSet, kOld).Str("/default_pg/0//cpu//0/0").Str("old peer address"));
  service_.EndRound();
  Send(1, RequestBytes(Verb::kNumKeys, kOld));
  EXPECT_EQ(Got(1), "");
  EXPECT_FALSE(closed_.count(1));
  service_.BeginRound(1);
  Collect();
  ASSERT_TRUE(closed_.count(1));
  EXPECT_EQ(closed_[1], "") << "an orderly close, not a refusal";
  Send(2, std::string(RequestBytes(Verb::kCheck, kOld).U64(1).Str("/default_pg/0//cpu//0/0")));
  EXPECT_EQ(Got(2), EncodeU8(tcpstore::kNotReady));
}

// As PyTorch's servers: a WAIT or CHECK of no keys is answered at once, MULTI_GET and
// MULTI_SET of none are no-ops (store.wait([]) from a script must not reset the connection).
TEST_F(TcpStoreServiceTest, RequestsForNoKeysAreAnsweredAtOnce) {
  Send(1, ValidateBytes() + std::string(RequestBytes(Verb::kWait, kNew).U64(0)) +
              std::string(RequestBytes(Verb::kCheck, kNew).U64(0)) +
              std::string(RequestBytes(Verb::kMultiSet, kNew).U64(0)) +
              std::string(RequestBytes(Verb::kMultiGet, kNew).U64(0)) +
              std::string(RequestBytes(Verb::kNumKeys, kNew)));
  EXPECT_EQ(Got(1), EncodeU8(0) + EncodeU8(tcpstore::kReady) + EncodeI64(0));
  EXPECT_TRUE(closed_.empty());
}

// A worker of the next round may reach this store before this agent has its assignment:
// its requests wait, unanswered, and are served in the new round's store.
TEST_F(TcpStoreServiceTest, ConnectionsBetweenRoundsAreHeldAndServedWhenTheRoundBegins) {
  service_.EndRound();
  Send(1, ValidateBytes() + std::string(RequestBytes(Verb::kPing, kNew).U32(99)) +
              std::string(RequestBytes(Verb::kSet, kNew).Str("/early").Str("1")));
  EXPECT_EQ(Got(1), "");
  EXPECT_FALSE(service_.serving());
  // A dying worker of the last round that wrote, then went away, leaves nothing behind.
  Send(2, RequestBytes(Verb::kSet, kOld).Str("/stale").Str("x"));
  service_.Closed(2);
  service_.BeginRound(1);
  Collect();
  EXPECT_EQ(Got(1), EncodeU32(99));
  Send(3, std::string(RequestBytes(Verb::kCheck, kOld).U64(1).Str("/early")) +
              std::string(RequestBytes(Verb::kCheck, kOld).U64(1).Str("/stale")));
  EXPECT_EQ(Got(3), EncodeU8(tcpstore::kReady) + EncodeU8(tcpstore::kNotReady));
}

TEST_F(TcpStoreServiceTest, AHeldConnectionThatSendsTooMuchIsClosed) {
  service_.EndRound();
  Send(1, std::string(tcpstore::kMaxRequestBytes + 1, '\x03'));
  EXPECT_THAT(closed_[1],
              HasSubstr("it sent more than 64 MiB of requests that could not be served yet (its "
                        "round had not begun)"));
}

// The review's attack: after one SET of an 8 MiB value, a MULTI_GET naming it 131,072 times
// made the agent build a 1 TiB reply (OOM-killed). A reply is sized before it is built.
TEST_F(TcpStoreServiceTest, AReadWhoseReplyWouldPassItsBoundClosesTheConnection) {
  const std::string big(KvStore::kMaxValueBytes, 'v');
  Send(1, RequestBytes(Verb::kSet, kOld).Str("/big").Str(big));
  RequestBytes multi_get(Verb::kMultiGet, kOld);
  multi_get.U64(5);
  for (int i = 0; i < 5; ++i) multi_get.Str("/big");  // 40 MiB
  Send(2, multi_get);
  EXPECT_EQ(Got(2), "");
  EXPECT_THAT(closed_[2], HasSubstr("the values of the 5 keys read at once come to more than 32 "
                                    "MiB, the most one reply holds"));
  RequestBytes four(Verb::kMultiGet, kOld);  // 32 MiB and a little: refused too
  four.U64(4).Str("/big").Str("/big").Str("/big").Str("/big");
  Send(3, four);
  EXPECT_EQ(Got(3).size(), 4 * (8 + big.size())) << "4 x 8 MiB is within the bound";
}

// A client that pipelines GETs of an 8 MiB value and never reads: served up to 16 MiB of
// unread replies, then its requests wait (no reply is built) until the I/O layer has
// written what it owes; past 64 MiB of waiting requests it is closed.
TEST_F(TcpStoreServiceTest, AClientThatDoesNotReadItsRepliesWaitsThenIsClosed) {
  Send(1,
       RequestBytes(Verb::kSet, kOld).Str("/big").Str(std::string(KvStore::kMaxValueBytes, 'v')));
  std::string gets;
  for (int i = 0; i < 100; ++i) gets += RequestBytes(Verb::kGet, kOld).Str("/big");
  Send(2, gets);
  const size_t one = 8 + KvStore::kMaxValueBytes;
  EXPECT_EQ(Got(2).size(), 2 * one) << "16 MiB owed: the third GET waits";
  service_.Drained(2);
  Collect();
  EXPECT_EQ(Got(2).size(), 2 * one) << "read: two more";
  EXPECT_TRUE(closed_.empty());
  std::string many;
  while (many.size() <= tcpstore::kMaxRequestBytes) many += gets;
  Send(2, many);
  EXPECT_THAT(closed_[2], HasSubstr("(it does not read its replies)"));
}

TEST_F(TcpStoreServiceTest, UnreadInputAndRepliesOfEveryConnectionTogetherAreBounded) {
  // The first 56 MiB of a 64 MiB MULTI_SET on each of five connections: the fifth passes
  // 256 MiB (the review held 600 MiB with ten).
  RequestBytes multi_set(Verb::kMultiSet, kOld);
  multi_set.U64(8);
  for (int i = 0; i < 8; ++i) {
    multi_set.Str(absl::StrCat("/k", i)).Str(std::string(KvStore::kMaxValueBytes - 64, 'x'));
  }
  const std::string partial = std::string(multi_set).substr(0, 56 << 20);
  for (TcpStoreService::ConnectionId id = 1; id <= 4; ++id) Send(id, partial);
  EXPECT_TRUE(closed_.empty());
  Send(5, partial);
  EXPECT_THAT(closed_[5], HasSubstr("unread input, every connection together, pass 256 MiB"));

  // Unread replies: connections that each owe 16 MiB and more, until 512 MiB.
  const std::string big(KvStore::kMaxValueBytes, 'v');
  Send(10, RequestBytes(Verb::kSet, kOld).Str("/big").Str(big));
  std::string gets;
  for (int i = 0; i < 3; ++i) gets += RequestBytes(Verb::kGet, kOld).Str("/big");
  TcpStoreService::ConnectionId id = 100;
  while (closed_.count(id) == 0 && id < 200) Send(++id, gets);
  EXPECT_THAT(closed_[id], HasSubstr("while the store's clients have not read"));
  EXPECT_LT(id - 100, 40u) << "512 MiB / 16 MiB each";
}

// LIST_KEYS copied every key name into one reply, whatever the store held: its reply has
// the read bound too, measured before anything is copied.
TEST(TcpStoreServiceLimitsTest, AListOfKeysPastTheReplyBoundClosesTheConnection) {
  TcpStoreLimits limits;
  limits.max_reply_bytes = 1 << 20;
  TcpStoreService service(limits);
  service.BeginRound(0);
  service.Open(1);
  std::string sets;
  for (int i = 0; i < 200; ++i) {
    sets +=
        RequestBytes(Verb::kSet, kOld).Str(absl::StrCat("/", i, std::string(8000, 'k'))).Str("v");
  }
  service.Receive(1, sets);
  (void)service.TakeOutput();
  service.Open(2);
  service.Receive(2, ValidateBytes() + std::string(RequestBytes(Verb::kListKeys, kNew)));
  std::vector<TcpStoreService::Output> out = service.TakeOutput();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(out[0].close);
  EXPECT_TRUE(out[0].bytes.empty()) << "no reply was built";
  EXPECT_THAT(out[0].why, HasSubstr("it sent LIST_KEYS, whose reply would hold 1600"));
  EXPECT_THAT(out[0].why, HasSubstr("bytes of key names, more than the 1 MiB one reply holds"));
}

TEST_F(TcpStoreServiceTest, OneConnectionParksAtMostItsShareOfWaits) {
  std::string waits;
  for (size_t i = 0; i <= TcpStoreService::Limits().max_waits_per_connection; ++i) {
    waits += RequestBytes(Verb::kWait, kOld).U64(1).Str(absl::StrCat("/never", i));
  }
  Send(1, waits);
  EXPECT_THAT(closed_[1], HasSubstr("it has 64 WAITs or BARRIERs parked at once"));
  EXPECT_EQ(service_.store().Waiting(), 0) << "its waits are gone with it";
  Send(2, RequestBytes(Verb::kWait, kOld).U64(1).Str("/k"));
  Send(3, RequestBytes(Verb::kSet, kOld).Str("/k").Str("v"));
  EXPECT_EQ(Got(2), EncodeU8(0)) << "another connection still waits";
}

// A round's ranks connecting (init/) and passing torch 1.13's store barrier are reported
// once each, when the last rank does it, and again in the next round's store.
TEST_F(TcpStoreServiceTest, TheLastRankToConnectAndToReachTheBarrierIsMarkedOncePerRound) {
  service_.BeginRound(3, /*world_size=*/2);
  Send(1, RequestBytes(Verb::kAdd, kOld).Str("init/").I64(1));
  EXPECT_TRUE(service_.TakeMarks().empty()) << "one rank of two";
  Send(2, RequestBytes(Verb::kAdd, kOld).Str("init/").I64(1));
  std::vector<StoreMark> marks = service_.TakeMarks();
  ASSERT_EQ(marks.size(), 1u);
  EXPECT_EQ(marks[0].kind, StoreMark::Kind::kEveryRankConnected);
  EXPECT_EQ(marks[0].round, 3);
  EXPECT_TRUE(marks[0].legacy_client);
  const std::string barrier = "//worker/attempt_0/default_pg/store_based_barrier_key:1";
  Send(1, RequestBytes(Verb::kAdd, kOld).Str(barrier).I64(1));
  Send(1, RequestBytes(Verb::kAdd, kOld).Str(barrier).I64(0));
  EXPECT_TRUE(service_.TakeMarks().empty()) << "polling with ADD 0 is not arriving";
  Send(2, RequestBytes(Verb::kAdd, kOld).Str(barrier).I64(1));
  Send(3, RequestBytes(Verb::kAdd, kOld).Str("init/").I64(1));  // a third client: no news
  marks = service_.TakeMarks();
  ASSERT_EQ(marks.size(), 1u);
  EXPECT_EQ(marks[0].kind, StoreMark::Kind::kBarrierPassed);

  service_.BeginRound(4, /*world_size=*/1);
  Send(4, ValidateBytes() + std::string(RequestBytes(Verb::kAdd, kNew).Str("init/").I64(1)));
  marks = service_.TakeMarks();
  ASSERT_EQ(marks.size(), 1u);
  EXPECT_EQ(marks[0].round, 4);
  EXPECT_FALSE(marks[0].legacy_client) << "torch 2.2 and later";
}

// Without a world size (a round begun by a caller that does not follow progress), no marks.
TEST_F(TcpStoreServiceTest, ARoundWithoutAWorldSizeIsNotFollowed) {
  Send(1, RequestBytes(Verb::kAdd, kOld).Str("init/").I64(1));
  EXPECT_TRUE(service_.TakeMarks().empty());
}

}  // namespace
}  // namespace ddprun
