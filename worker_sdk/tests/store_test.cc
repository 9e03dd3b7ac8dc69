// The SDK's Store client against a real master on loopback.

#include "ddp/worker/store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/small_file.h"
#include "rendezvous/tls_config.h"
#include "tests/support/child_process.h"
#include "tests/support/delay_proxy.h"
#include "tests/support/test_certificates.h"
#include "worker_sdk/tests/loopback_master.h"

namespace ddp::worker {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class StoreTest : public LoopbackMasterTest {
 protected:
  void SetUp() override {
    LoopbackMasterTest::SetUp();
    store_ = Store::Connect(addr_, "job", absl::Seconds(20));
  }
  std::unique_ptr<Store> store_;
};

TEST_F(StoreTest, EveryVerb) {
  ASSERT_TRUE(store_->Set("a", "1").ok());
  EXPECT_EQ(*store_->Get("a", absl::Seconds(5)), "1");
  EXPECT_EQ(*store_->Add("n", 2), 2);
  EXPECT_EQ(*store_->Add("n", 3), 5);
  EXPECT_EQ(*store_->CompareSet("c", "", "first"), "first");
  EXPECT_EQ(*store_->CompareSet("c", "wrong", "second"), "first");
  EXPECT_EQ(*store_->CompareSet("c", "first", "second"), "second");
  EXPECT_TRUE(*store_->Check({"a", "n"}));
  EXPECT_FALSE(*store_->Check({"a", "absent"}));
  ASSERT_TRUE(store_->MultiSet({"x", "y"}, {"10", "20"}).ok());
  EXPECT_THAT(*store_->MultiGet({"y", "x"}, absl::Seconds(5)), ElementsAre("20", "10"));
  EXPECT_TRUE(store_->Wait({"x", "y"}, absl::Seconds(5)).ok());
  EXPECT_EQ(*store_->NumKeys(), 5);
  EXPECT_TRUE(*store_->Delete("a"));
  EXPECT_FALSE(*store_->Delete("a"));
  EXPECT_EQ(*store_->NumKeys(), 4);
  // Another run id is another namespace.
  auto other = Store::Connect(store_->address(), "other-job", absl::Seconds(20));
  EXPECT_EQ(*other->NumKeys(), 0);
}

TEST_F(StoreTest, AReadTimeoutNamesTheKeyAndTheStore) {
  absl::StatusOr<std::string> got = store_->Get("ncclUniqueId", absl::Milliseconds(100));
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(got.status().message(), HasSubstr("store at " + store_->address()));
  EXPECT_THAT(got.status().message(), HasSubstr("ncclUniqueId"));
}

TEST_F(StoreTest, LimitsAreClearErrors) {
  absl::Status s = store_->Set(std::string(9000, 'k'), "v");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("8192"));
}

// A connection attempt may take gRPC's default 20 s: with the old 10 ms setting of
// GRPC_ARG_MIN_RECONNECT_BACKOFF_MS (read by gRPC as the attempt's time limit), a store
// behind a link slower than about 1.2 s was never reached.
TEST_F(StoreTest, AStoreBehindASlowLinkIsReached) {
  ddprun::testing::LinkShape shape;
  shape.delay = absl::Milliseconds(1500);
  auto proxy = ddprun::testing::DelayProxy::Start(master_->port(), shape);
  ASSERT_TRUE(proxy.ok()) << proxy.status();
  auto far = Store::Connect(absl::StrCat("127.0.0.1:", (*proxy)->port()), "job", absl::Seconds(25));
  EXPECT_TRUE(far->Set("far", "1").ok());
}

TEST(StoreClientTest, AnUnreachableStoreSaysWhereItLookedAndWhoServesIt) {
  const int port = ddprun::testing::FreeLoopbackPort();
  auto store = Store::Connect(absl::StrCat("127.0.0.1:", port), "job", absl::Milliseconds(300));
  absl::Status s = store->Set("k", "v");
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(s.message(), HasSubstr(absl::StrCat("127.0.0.1:", port)));
  EXPECT_THAT(s.message(), HasSubstr("could not reach the store"));
  EXPECT_THAT(s.message(), HasSubstr("MASTER_ADDR:MASTER_PORT"));
}

TEST(StoreServerTest, ServesOnThePortAndAClientMayStartFirst) {
  const int port = ddprun::testing::FreeLoopbackPort();
  auto store = Store::Connect(absl::StrCat("127.0.0.1:", port), "job", absl::Seconds(20));
  absl::StatusOr<std::string> early;
  std::thread reader([&] { early = store->Get("k", absl::Seconds(20)); });
  auto server = StoreServer::Start(port);
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_EQ((*server)->port(), port);
  auto writer = Store::Connect(absl::StrCat("127.0.0.1:", port), "job", absl::Seconds(20));
  ASSERT_TRUE(writer->Set("k", "v").ok());
  reader.join();
  ASSERT_TRUE(early.ok()) << early.status();
  EXPECT_EQ(*early, "v");
}

// What listens on `port` (LISTEN sockets in /proc/net/tcp and tcp6), as "ADDR" in the
// kernel's hex, e.g. "0100007F" for 127.0.0.1.
std::vector<std::string> ListenersOn(int port) {
  std::vector<std::string> found;
  const std::string hex_port = absl::StrFormat("%04X", port);
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::istringstream lines(ddprun::testing::ReadFile(table));
    std::string line;
    while (std::getline(lines, line)) {
      std::istringstream fields(line);
      std::string slot, local, remote, state;
      fields >> slot >> local >> remote >> state;
      const size_t colon = local.rfind(':');
      if (state == "0A" && colon != std::string::npos && local.substr(colon + 1) == hex_port) {
        found.push_back(local.substr(0, colon));
      }
    }
  }
  return found;
}

// The review found rank 0's store on every address, without token, for any run.
TEST(StoreServerTest, ARankZeroStoreServesItsRunWithItsTokenAtItsAddressOnly) {
  StoreServerOptions options;
  options.bind_host = "127.0.0.1";
  options.run_id = "job";
  options.token = "s3cret";
  auto server = StoreServer::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  EXPECT_THAT(ListenersOn(port), ElementsAre("0100007F"));
  const std::string addr = absl::StrCat("127.0.0.1:", port);
  StoreAccess with_token;
  with_token.token = "s3cret";
  absl::Status none = Store::Connect(addr, "job", absl::Seconds(20))->Set("k", "v");
  EXPECT_EQ(none.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(none.message(), HasSubstr("DDPRUN_STORE_TOKEN_FILE"));
  absl::Status other =
      Store::Connect(addr, "other", absl::Seconds(20), true, with_token)->Set("k", "v");
  EXPECT_EQ(other.code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(Store::Connect(addr, "job", absl::Seconds(20), true, with_token)->Set("k", "v").ok());
}

// A store-only master (the SDK's rank-0 store) with TLS, on loopback, and the test's
// certificates in `dir`.
class StoreTlsTest : public ::testing::Test {
 protected:
  void StartTlsMaster() {
    ASSERT_TRUE(ddprun::testing::MakeTestCertificates(dir).ok());
    ddprun::StoreOnlyOptions options;
    options.serving.host = "127.0.0.1";
    absl::StatusOr<ddprun::TlsConfig> tls =
        ddprun::ReadTlsFiles(dir / "node.pem", dir / "node.key", dir / "ca.pem", "test");
    ASSERT_TRUE(tls.ok()) << tls.status();
    options.serving.tls = *tls;
    auto started = ddprun::StoreOnlyServer::Start(options);
    ASSERT_TRUE(started.ok()) << started.status();
    master = std::move(*started);
    addr = absl::StrCat("127.0.0.1:", master->port());
  }
  ddprun::testing::TempDir dir;
  std::unique_ptr<ddprun::StoreOnlyServer> master;
  std::string addr;
};

// The review: an SDK whose TLS settings do not match the master's waited out the 300 s call
// timeout. A failed handshake is said at once, with what to check.
TEST_F(StoreTlsTest, ACertificateTheMasterDoesNotTrustFailsAtOnceWithATlsHint) {
  ASSERT_NO_FATAL_FAILURE(StartTlsMaster());
  StoreAccess rogue;
  rogue.cert_pem = *ddprun::ReadSmallFile(dir / "rogue.pem");
  rogue.key_pem = *ddprun::ReadSmallFile(dir / "rogue.key");
  rogue.ca_pem = *ddprun::ReadSmallFile(dir / "rogue-ca.pem");
  const absl::Time start = absl::Now();
  absl::Status s = Store::Connect(addr, "job", absl::Seconds(300), true, rogue)->Set("k", "v");
  EXPECT_LT(absl::Now() - start, absl::Seconds(60)) << "it waited for the call timeout";
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(s.message(), HasSubstr("the TLS handshake failed"));
  EXPECT_THAT(s.message(), HasSubstr("DDPRUN_TLS_CA"));
  StoreAccess trusted;
  trusted.cert_pem = *ddprun::ReadSmallFile(dir / "node.pem");
  trusted.key_pem = *ddprun::ReadSmallFile(dir / "node.key");
  trusted.ca_pem = *ddprun::ReadSmallFile(dir / "ca.pem");
  EXPECT_TRUE(Store::Connect(addr, "job", absl::Seconds(30), true, trusted)->Set("k", "v").ok());
}

// The review: the SDK's plaintext client against a TLS master waited out its 300 s call
// timeout, then asked "is it up?". A server that closes every connection before HTTP/2
// begins is said within seconds, naming TLS.
TEST_F(StoreTlsTest, APlaintextClientOfATlsMasterFailsWithinSecondsNamingTls) {
  ASSERT_NO_FATAL_FAILURE(StartTlsMaster());
  const absl::Time start = absl::Now();
  absl::Status s =
      Store::Connect(addr, "job", absl::Seconds(300), true, StoreAccess())->Set("k", "v");
  EXPECT_LT(absl::Now() - start, absl::Seconds(60)) << "it waited for the call timeout";
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(s.message(), HasSubstr("closes every connection before it answers"));
  EXPECT_THAT(s.message(), HasSubstr("DDPRUN_TLS_CERT"));
}

TEST(StoreServerTest, APortInUseNamesMasterPort) {
  auto first = StoreServer::Start(0);
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = StoreServer::Start((*first)->port());
  ASSERT_FALSE(second.ok());
  EXPECT_THAT(second.status().message(), HasSubstr("(MASTER_PORT)"));
}

}  // namespace
}  // namespace ddp::worker
