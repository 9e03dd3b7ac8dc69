#include "store/tcp_store_protocol.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

#include "store/kv_store.h"
#include "store/tests/tcp_store_requests.h"

namespace ddprun::tcpstore {
namespace {

using tcpstore::testing::Hex;
using tcpstore::testing::RequestBytes;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

Parsed Parse(const std::string& bytes, Dialect dialect) { return ParseRequest(bytes, dialect); }
Parsed Parse(absl::string_view bytes, Dialect dialect) { return ParseRequest(bytes, dialect); }

TEST(TcpStoreProtocol, TheFirstBytesTellTheDialect) {
  EXPECT_EQ(DetectDialect(""), Dialect::kUnknown);
  EXPECT_EQ(DetectDialect(Hex("03")), Dialect::kLegacy);   // 1.13: ADD init/
  EXPECT_EQ(DetectDialect(Hex("00")), Dialect::kUnknown);  // VALIDATE or a 1.13 SET
  EXPECT_EQ(DetectDialect(Hex("00cef785")), Dialect::kUnknown);
  EXPECT_EQ(DetectDialect(Hex("00cef7853c")), Dialect::kValidated);
  EXPECT_EQ(DetectDialect(Hex("000300000000")), Dialect::kLegacy);  // SET, a 3-byte key
}

// Bytes captured from PyTorch's clients (../shared/reference/tcpstore-protocol.md §2, §5).
TEST(TcpStoreProtocol, ParsesCapturedRequestsOfBothDialects) {
  const std::string legacy_set =
      Hex("00"
          "0300000000000000"
          "2f6b31"
          "0200000000000000"
          "7631");
  Parsed p = Parse(legacy_set, Dialect::kLegacy);
  ASSERT_EQ(p.kind, Parsed::Kind::kRequest);
  EXPECT_EQ(p.request.verb, Verb::kSet);
  EXPECT_THAT(p.request.keys, ElementsAre("/k1"));
  EXPECT_THAT(p.request.values, ElementsAre("v1"));
  EXPECT_EQ(p.consumed, legacy_set.size());

  p = Parse(Hex("01"
                "0300000000000000"
                "2f6b31"
                "0200000000000000"
                "7631"),
            Dialect::kValidated);
  EXPECT_EQ(p.request.verb, Verb::kSet);

  p = Parse(Hex("06"
                "0100000000000000"
                "0300000000000000"
                "2f6b31"),
            Dialect::kValidated);
  ASSERT_EQ(p.kind, Parsed::Kind::kRequest);
  EXPECT_EQ(p.request.verb, Verb::kWait);
  EXPECT_THAT(p.request.keys, ElementsAre("/k1"));

  p = Parse(Hex("12"
                "0400000000000000"
                "2f626172"
                "0200000000000000"),
            Dialect::kValidated);
  EXPECT_EQ(p.request.verb, Verb::kBarrier);
  EXPECT_THAT(p.request.keys, ElementsAre("/bar"));
  EXPECT_EQ(p.request.number, 2);

  p = Parse(Hex("11"), Dialect::kValidated);
  EXPECT_EQ(p.request.verb, Verb::kListKeys);
  p = Parse(Hex("0d"
                "39300000"),
            Dialect::kValidated);
  EXPECT_EQ(p.request.verb, Verb::kPing);
  EXPECT_EQ(p.request.number, 12345);
  p = Parse(Hex("00cef7853c"), Dialect::kValidated);
  EXPECT_EQ(p.request.verb, Verb::kValidate);
  EXPECT_EQ(p.request.number, kValidationMagic);
}

TEST(TcpStoreProtocol, CodesDifferBelowEightAndAgreeFromEight) {
  EXPECT_EQ(QueryCode(Verb::kSet, Dialect::kLegacy), 0);
  EXPECT_EQ(QueryCode(Verb::kSet, Dialect::kValidated), 1);
  EXPECT_EQ(QueryCode(Verb::kNumKeys, Dialect::kLegacy), 6);
  EXPECT_EQ(QueryCode(Verb::kNumKeys, Dialect::kValidated), 7);
  for (Verb v :
       {Verb::kDelete, Verb::kAppend, Verb::kMultiGet, Verb::kMultiSet, Verb::kCancelWait}) {
    EXPECT_EQ(QueryCode(v, Dialect::kLegacy), QueryCode(v, Dialect::kValidated));
  }
  EXPECT_EQ(QueryCode(Verb::kWatchKey, Dialect::kLegacy), 7);
  EXPECT_EQ(QueryCode(Verb::kWatchKey, Dialect::kValidated), -1);
  EXPECT_EQ(QueryCode(Verb::kBarrier, Dialect::kValidated), 18);
  EXPECT_EQ(QueryCode(Verb::kPing, Dialect::kLegacy), -1);
}

TEST(TcpStoreProtocol, EveryVerbsFieldsRoundTrip) {
  const Dialect d = Dialect::kValidated;
  Parsed p = Parse(RequestBytes(Verb::kCompareSet, d).Str("k").Str("").Str("new"), d);
  EXPECT_THAT(p.request.values, ElementsAre("", "new"));
  p = Parse(RequestBytes(Verb::kAdd, d).Str("n").I64(-5), d);
  EXPECT_EQ(p.request.number, -5);
  p = Parse(RequestBytes(Verb::kMultiSet, d)
                .U64(2)
                .Str("a")
                .Str("1")
                .Str("b")
                .Str(std::string("\0\1", 2)),
            d);
  EXPECT_THAT(p.request.keys, ElementsAre("a", "b"));
  EXPECT_THAT(p.request.values, ElementsAre("1", std::string("\0\1", 2)));
  p = Parse(RequestBytes(Verb::kCheck, d).U64(3).Str("a").Str("b").Str("c"), d);
  EXPECT_THAT(p.request.keys, ElementsAre("a", "b", "c"));
  p = Parse(RequestBytes(Verb::kQueuePush, d).Str("q").Str("v"), d);
  EXPECT_EQ(p.request.verb, Verb::kQueuePush);
  p = Parse(RequestBytes(Verb::kCancelWait, d), d);
  EXPECT_EQ(p.request.verb, Verb::kCancelWait);
  EXPECT_EQ(p.consumed, 1u);
}

// Requests arrive in pieces (the 1.13 client sends the code byte alone; 2.x flushes at
// 1440 bytes): every prefix asks for more, and says how much at least.
TEST(TcpStoreProtocol, APartialRequestAsksForMoreUntilItIsWhole) {
  const std::string whole =
      RequestBytes(Verb::kSet, Dialect::kLegacy).Str("/key").Str(std::string(3000, 'v'));
  for (size_t n = 0; n < whole.size(); ++n) {
    Parsed p = Parse(absl::string_view(whole).substr(0, n), Dialect::kLegacy);
    ASSERT_EQ(p.kind, Parsed::Kind::kNeedMore) << n;
    ASSERT_GT(p.needed, n);
    ASSERT_LE(p.needed, whole.size());
  }
  Parsed p = Parse(whole + "extra", Dialect::kLegacy);
  ASSERT_EQ(p.kind, Parsed::Kind::kRequest);
  EXPECT_EQ(p.consumed, whole.size());
}

TEST(TcpStoreProtocol, RefusesWhatIsOverTheLimitsOrUnknown) {
  const Dialect d = Dialect::kValidated;
  Parsed p = Parse(RequestBytes(Verb::kGet, d).U64(KvStore::kMaxKeyBytes + 1), d);
  EXPECT_EQ(p.kind, Parsed::Kind::kRefused);
  EXPECT_THAT(p.why, HasSubstr("GET with a key of 8193 bytes; the limit is 8192"));
  p = Parse(RequestBytes(Verb::kSet, d).Str("k").U64(uint64_t{1} << 62), d);
  EXPECT_EQ(p.kind, Parsed::Kind::kRefused) << "a huge length is refused, never waited for";
  p = Parse(RequestBytes(Verb::kWait, d).U64(KvStore::kMaxKeysPerCall + 1), d);
  EXPECT_THAT(p.why, HasSubstr("131073 keys in one request"));
  // Each value within its limit, the whole over 64 MiB.
  RequestBytes many(Verb::kMultiSet, d);
  many.U64(9);
  for (int i = 0; i < 9; ++i) many.Str("k").Str(std::string(KvStore::kMaxValueBytes, 'x'));
  p = Parse(std::string(many), d);
  EXPECT_EQ(p.kind, Parsed::Kind::kRefused);
  EXPECT_THAT(p.why, HasSubstr("a request of more than 67108864 bytes"));
  p = Parse(Hex("13"), d);
  EXPECT_EQ(p.kind, Parsed::Kind::kRefused);
  EXPECT_THAT(p.why, HasSubstr("query code 19"));
  EXPECT_THAT(p.why, HasSubstr("newer than this ddprun"));
  EXPECT_EQ(Parse(Hex("0d"), Dialect::kLegacy).kind, Parsed::Kind::kRefused);
}

TEST(TcpStoreProtocol, RepliesAreLittleEndian) {
  EXPECT_EQ(EncodeString("ab"), Hex("0200000000000000"
                                    "6162"));
  EXPECT_EQ(EncodeI64(-1), Hex("ffffffffffffffff"));
  EXPECT_EQ(EncodeI64(3), Hex("0300000000000000"));
  EXPECT_EQ(EncodeU32(0x3C85F7CE), Hex("cef7853c"));
  EXPECT_EQ(EncodeU8(kWaitCanceled), Hex("01"));
}

}  // namespace
// A MULTI_SET of 100,000 keys that arrives in 64 KiB pieces was walked from its first key
// at every piece: each call now goes on from the item the last one reached, and the
// request parsed at the end is the same as one parsed whole.
TEST(TcpStoreProtocolTest, ALargeRequestArrivingInPiecesIsMeasuredOnwardNotAgain) {
  RequestBytes multi_set(Verb::kMultiSet, Dialect::kValidated);
  constexpr int kKeys = 100000;
  multi_set.U64(kKeys);
  for (int i = 0; i < kKeys; ++i) multi_set.Str(absl::StrCat("/k", i)).Str("v");
  const std::string whole = multi_set;
  MeasureProgress progress;
  uint64_t last_items = 0;
  int calls = 0;
  for (size_t have = 64 * 1024; have < whole.size(); have += 64 * 1024) {
    Parsed partial =
        ParseRequest(absl::string_view(whole).substr(0, have), Dialect::kValidated, &progress);
    ASSERT_EQ(partial.kind, Parsed::Kind::kNeedMore);
    EXPECT_GT(progress.items, last_items) << "it went on from where it was";
    last_items = progress.items;
    ++calls;
  }
  EXPECT_GT(calls, 10);
  Parsed done = ParseRequest(whole, Dialect::kValidated, &progress);
  ASSERT_EQ(done.kind, Parsed::Kind::kRequest);
  EXPECT_EQ(done.consumed, whole.size());
  ASSERT_EQ(done.request.keys.size(), static_cast<size_t>(kKeys));
  EXPECT_EQ(done.request.keys[kKeys - 1], absl::StrCat("/k", kKeys - 1));
  EXPECT_EQ(done.request.values[kKeys - 1], "v");
  EXPECT_EQ(progress.items, 0u) << "reset for the next request";
}

}  // namespace ddprun::tcpstore
