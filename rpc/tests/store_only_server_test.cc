// A Store served alone (the worker SDK's rank-0 store) over gRPC on loopback.

#include "rpc/store_only_server.h"

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "ddprun/v1/rendezvous.grpc.pb.h"
#include "ddprun/v1/store.grpc.pb.h"
#include "tests/support/child_process.h"

namespace ddprun {
namespace {

namespace pb = ::ddprun::v1;
using ::testing::HasSubstr;

class StoreOnlyServerTest : public ::testing::Test {
 protected:
  void Start(StoreOnlyOptions options = {}) {
    options.serving.host = "127.0.0.1";
    auto server = StoreOnlyServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    channel_ = grpc::CreateChannel(absl::StrCat("127.0.0.1:", server_->port()),
                                   grpc::InsecureChannelCredentials());
    store_ = pb::Store::NewStub(channel_);
  }
  static void Within(grpc::ClientContext& context, absl::Duration timeout) {
    context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  }
  grpc::Status Set(const std::string& run_id, const std::string& key,
                   const std::string& value = "v") {
    grpc::ClientContext context;
    Within(context, absl::Seconds(20));
    pb::SetRequest set;
    set.set_run_id(run_id);
    set.set_key(key);
    set.set_value(value);
    pb::SetResponse reply;
    return store_->Set(&context, set, &reply);
  }
  std::unique_ptr<StoreOnlyServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<pb::Store::Stub> store_;
};

TEST_F(StoreOnlyServerTest, ServesTheStoreOfAnyRunAndNoRendezvous) {
  ASSERT_NO_FATAL_FAILURE(Start());
  EXPECT_TRUE(Set("job", "k").ok());
  EXPECT_TRUE(Set("another-job", "k").ok());
  auto rendezvous = pb::Rendezvous::NewStub(channel_);
  grpc::ClientContext context;
  Within(context, absl::Seconds(20));
  auto session = rendezvous->Session(&context);
  pb::MasterMessage message;
  EXPECT_FALSE(session->Read(&message));
  EXPECT_EQ(session->Finish().error_code(), grpc::StatusCode::UNIMPLEMENTED);
}

TEST_F(StoreOnlyServerTest, ItsTokenRunAndRunCountAreChecked) {
  StoreOnlyOptions options;
  options.only_run_id = "job";
  ASSERT_NO_FATAL_FAILURE(Start(options));
  grpc::Status other = Set("other", "k");
  EXPECT_EQ(other.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(other.error_message(), HasSubstr("this store serves another run than 'other'"));
  server_.reset();
  options = StoreOnlyOptions();
  options.token = "s3cret";
  ASSERT_NO_FATAL_FAILURE(Start(options));
  EXPECT_EQ(Set("job", "k").error_code(), grpc::StatusCode::PERMISSION_DENIED);
  server_.reset();
  options = StoreOnlyOptions();
  options.max_runs = 1;
  ASSERT_NO_FATAL_FAILURE(Start(options));
  EXPECT_TRUE(Set("job", "k").ok());
  grpc::Status full = Set("second", "k");
  EXPECT_EQ(full.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(full.error_message(), HasSubstr("this store holds 1 runs"));
}

// Its ticker ends a read at the read's own timeout; a stop ends the reads still waiting.
TEST_F(StoreOnlyServerTest, AReadEndsAtItsTimeoutAndAtTheStop) {
  ASSERT_NO_FATAL_FAILURE(Start());
  grpc::ClientContext timed;
  Within(timed, absl::Seconds(60));
  pb::GetRequest get;
  get.set_run_id("job");
  get.set_key("never");
  get.set_timeout_ms(300);
  pb::GetResponse reply;
  const absl::Time start = absl::Now();
  grpc::Status expired = store_->Get(&timed, get, &reply);
  EXPECT_EQ(expired.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << expired.error_message();
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));
  EXPECT_EQ(server_->PendingStoreReads(), 0);

  grpc::ClientContext waiting;
  Within(waiting, absl::Seconds(60));
  get.set_timeout_ms(0);  // the store's 60 s
  grpc::Status stopped;
  bool done = false;
  absl::Mutex mu;
  store_->async()->Get(&waiting, &get, &reply, [&](grpc::Status s) {
    absl::MutexLock lock(&mu);
    stopped = std::move(s);
    done = true;
  });
  ASSERT_TRUE(
      testing::WaitUntil([&] { return server_->PendingStoreReads() == 1; }, absl::Seconds(30)));
  ASSERT_EQ(server_->PendingStoreReads(), 1);
  server_->Shutdown(absl::Seconds(5));
  absl::MutexLock lock(&mu);
  ASSERT_TRUE(mu.AwaitWithTimeout(absl::Condition(&done), absl::Seconds(30)));
  EXPECT_EQ(stopped.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(stopped.error_message(), HasSubstr("shutting down"));
}

// What an outsider or a lying worker sends the rank-0 store: forged run ids, keys and values
// past their bounds, a read whose reply would be huge, more bytes than the store's budget.
TEST_F(StoreOnlyServerTest, ForgedFieldsAndOversizedRequestsAreRefusedBeforeTheyAreHeld) {
  StoreOnlyOptions options;
  options.limits.max_store_bytes = 4 << 20;
  ASSERT_NO_FATAL_FAILURE(Start(options));
  EXPECT_EQ(Set("../etc", "k").error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Set(std::string(10000, 'r'), "k").error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Set("job", std::string(9 * 1024, 'k')).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Set("job", "big", std::string((8 << 20) + 1, 'v')).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  // 1 MiB named 40 times: a 40 MiB reply, past the 32 MiB a read may return.
  ASSERT_TRUE(Set("job", "mib", std::string(1 << 20, 'v')).ok());
  grpc::ClientContext context;
  Within(context, absl::Seconds(20));
  pb::MultiGetRequest get;
  get.set_run_id("job");
  for (int i = 0; i < 40; ++i) get.add_keys("mib");
  pb::MultiGetResponse reply;
  grpc::Status huge = store_->MultiGet(&context, get, &reply);
  EXPECT_EQ(huge.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << huge.error_message();
  // Every run together: 4 MiB here, of which "job" holds 1 MiB.
  for (int run = 0; run < 2; ++run) {
    EXPECT_TRUE(Set(absl::StrCat("run", run), "k", std::string(1 << 20, 'v')).ok());
  }
  grpc::Status full = Set("run2", "k", std::string(1 << 20, 'v'));
  EXPECT_EQ(full.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(full.error_message(), HasSubstr("Store budget for every run together"));
}

// One connection that parks read after read is refused past its share; the others still park.
TEST_F(StoreOnlyServerTest, AFloodOfWaitsFromOneConnectionIsCapped) {
  StoreOnlyOptions options;
  options.limits.max_waiters_per_connection = 3;
  ASSERT_NO_FATAL_FAILURE(Start(options));
  struct Call {
    grpc::ClientContext context;
    pb::GetRequest request;
    pb::GetResponse reply;
    grpc::Status status;
    bool done = false;
  };
  absl::Mutex mu;
  std::vector<std::unique_ptr<Call>> calls;
  for (int i = 0; i < 4; ++i) {
    auto call = std::make_unique<Call>();
    Within(call->context, absl::Seconds(60));
    call->request.set_run_id("job");
    call->request.set_key("never");
    Call* c = call.get();
    store_->async()->Get(&c->context, &c->request, &c->reply, [&mu, c](grpc::Status s) {
      absl::MutexLock lock(&mu);
      c->status = std::move(s);
      c->done = true;
    });
    calls.push_back(std::move(call));
    if (i < 3) {
      ASSERT_TRUE(testing::WaitUntil([&] { return server_->PendingStoreReads() == i + 1; },
                                     absl::Seconds(30)));
    }
  }
  {
    absl::MutexLock lock(&mu);
    ASSERT_TRUE(mu.AwaitWithTimeout(absl::Condition(&calls[3]->done), absl::Seconds(30)));
    EXPECT_EQ(calls[3]->status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
    EXPECT_THAT(calls[3]->status.error_message(), HasSubstr("this connection has 3 blocking"));
  }
  EXPECT_EQ(server_->PendingStoreReads(), 3);
  server_->Shutdown(absl::Seconds(5));
  absl::MutexLock lock(&mu);
  for (auto& call : calls) {
    ASSERT_TRUE(mu.AwaitWithTimeout(absl::Condition(&call->done), absl::Seconds(30)));
  }
}

}  // namespace
}  // namespace ddprun
