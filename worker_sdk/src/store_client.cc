// Store::Connect and StoreServer::Start: the SDK's side of proto/ddprun/v1/store.proto.

#include <grpcpp/grpcpp.h>

#include <atomic>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "ddp/worker/store.h"
#include "ddprun/v1/store.grpc.pb.h"
#include "rendezvous/run_access.h"
#include "rpc/grpc_channel.h"
#include "rpc/store_only_server.h"
#include "rpc/wire.h"

namespace ddp::worker {
namespace {

namespace pb = ::ddprun::v1;

// A blocking read's server-side timeout decides; the RPC's own deadline only adds room for
// the round trip, so that "keys not set in time" (naming them) is what comes back.
constexpr absl::Duration kRoundTripAllowance = absl::Seconds(10);

class GrpcStore : public Store {
 public:
  GrpcStore(std::string address, std::string run_id, absl::Duration call_timeout,
            bool wait_for_server, const StoreAccess& tls)
      : address_(std::move(address)),
        token_(tls.token),
        tls_(!tls.cert_pem.empty()),
        run_id_(std::move(run_id)),
        call_timeout_(call_timeout),
        wait_for_server_(wait_for_server) {
    grpc::ChannelArguments args;
    // Rank 0's store may come up a little after the others start: retry soon.
    ddprun::SetQuickReconnect(args);
    args.SetMaxReceiveMessageSize(64 * 1024 * 1024);
    args.SetMaxSendMessageSize(64 * 1024 * 1024);
    std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
    if (!tls.cert_pem.empty()) {
      grpc::SslCredentialsOptions ssl;
      ssl.pem_root_certs = tls.ca_pem;
      ssl.pem_private_key = tls.key_pem;
      ssl.pem_cert_chain = tls.cert_pem;
      credentials = grpc::SslCredentials(ssl);
    }
    channel_ = grpc::CreateCustomChannel(address_, credentials, args);
    stub_ = pb::Store::NewStub(channel_);
  }

  const std::string& address() const override { return address_; }

  absl::Status Set(const std::string& key, const std::string& value) override {
    pb::SetRequest request;
    request.set_run_id(run_id_);
    request.set_key(key);
    request.set_value(value);
    pb::SetResponse response;
    return Call("set", key, call_timeout_,
                [&](grpc::ClientContext* c) { return stub_->Set(c, request, &response); });
  }

  absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) override {
    pb::GetRequest request;
    request.set_run_id(run_id_);
    request.set_key(key);
    request.set_timeout_ms(TimeoutMs(timeout));
    pb::GetResponse response;
    absl::Status s = Call("get", key, timeout + kRoundTripAllowance, [&](grpc::ClientContext* c) {
      return stub_->Get(c, request, &response);
    });
    if (!s.ok()) return s;
    return std::move(*response.mutable_value());
  }

  absl::StatusOr<int64_t> Add(const std::string& key, int64_t delta) override {
    pb::AddRequest request;
    request.set_run_id(run_id_);
    request.set_key(key);
    request.set_delta(delta);
    pb::AddResponse response;
    absl::Status s = Call("add", key, call_timeout_, [&](grpc::ClientContext* c) {
      return stub_->Add(c, request, &response);
    });
    if (!s.ok()) return s;
    return response.value();
  }

  absl::StatusOr<std::string> CompareSet(const std::string& key, const std::string& expected,
                                         const std::string& desired) override {
    pb::CompareSetRequest request;
    request.set_run_id(run_id_);
    request.set_key(key);
    request.set_expected(expected);
    request.set_desired(desired);
    pb::CompareSetResponse response;
    absl::Status s = Call("compare_set", key, call_timeout_, [&](grpc::ClientContext* c) {
      return stub_->CompareSet(c, request, &response);
    });
    if (!s.ok()) return s;
    return std::move(*response.mutable_value());
  }

  absl::Status Wait(const std::vector<std::string>& keys, absl::Duration timeout) override {
    pb::WaitRequest request;
    request.set_run_id(run_id_);
    for (const std::string& key : keys) request.add_keys(key);
    request.set_timeout_ms(TimeoutMs(timeout));
    pb::WaitResponse response;
    return Call("wait", Describe(keys), timeout + kRoundTripAllowance,
                [&](grpc::ClientContext* c) { return stub_->Wait(c, request, &response); });
  }

  absl::StatusOr<bool> Check(const std::vector<std::string>& keys) override {
    pb::CheckRequest request;
    request.set_run_id(run_id_);
    for (const std::string& key : keys) request.add_keys(key);
    pb::CheckResponse response;
    absl::Status s = Call("check", Describe(keys), call_timeout_, [&](grpc::ClientContext* c) {
      return stub_->Check(c, request, &response);
    });
    if (!s.ok()) return s;
    return response.all_exist();
  }

  absl::StatusOr<bool> Delete(const std::string& key) override {
    pb::DeleteRequest request;
    request.set_run_id(run_id_);
    request.set_key(key);
    pb::DeleteResponse response;
    absl::Status s = Call("delete", key, call_timeout_, [&](grpc::ClientContext* c) {
      return stub_->Delete(c, request, &response);
    });
    if (!s.ok()) return s;
    return response.deleted();
  }

  absl::StatusOr<int64_t> NumKeys() override {
    pb::NumKeysRequest request;
    request.set_run_id(run_id_);
    pb::NumKeysResponse response;
    absl::Status s = Call("num_keys", "", call_timeout_, [&](grpc::ClientContext* c) {
      return stub_->NumKeys(c, request, &response);
    });
    if (!s.ok()) return s;
    return response.count();
  }

  absl::StatusOr<std::vector<std::string>> MultiGet(const std::vector<std::string>& keys,
                                                    absl::Duration timeout) override {
    pb::MultiGetRequest request;
    request.set_run_id(run_id_);
    for (const std::string& key : keys) request.add_keys(key);
    request.set_timeout_ms(TimeoutMs(timeout));
    pb::MultiGetResponse response;
    absl::Status s =
        Call("multi_get", Describe(keys), timeout + kRoundTripAllowance,
             [&](grpc::ClientContext* c) { return stub_->MultiGet(c, request, &response); });
    if (!s.ok()) return s;
    return std::vector<std::string>(response.values().begin(), response.values().end());
  }

  absl::Status MultiSet(const std::vector<std::string>& keys,
                        const std::vector<std::string>& values) override {
    pb::MultiSetRequest request;
    request.set_run_id(run_id_);
    for (const std::string& key : keys) request.add_keys(key);
    for (const std::string& value : values) request.add_values(value);
    pb::MultiSetResponse response;
    return Call("multi_set", Describe(keys), call_timeout_,
                [&](grpc::ClientContext* c) { return stub_->MultiSet(c, request, &response); });
  }

 private:
  static int64_t TimeoutMs(absl::Duration timeout) {
    return std::max<int64_t>(1, absl::ToInt64Milliseconds(timeout));
  }

  static std::string Describe(const std::vector<std::string>& keys) {
    if (keys.size() <= 3) return absl::StrJoin(keys, "', '");
    return absl::StrCat(keys.front(), "', ... ('", keys.size(), " keys)");
  }

  // Before the first answer: waits for the channel while the server may still be coming up
  // (connections refused), but a server that will never answer is said as soon as that is
  // clear, not after the call's deadline (300 s): over TLS, a handshake that fails
  // (certificates the server does not trust, or a server without TLS) at once; in plain
  // text, a server that closes every connection before HTTP/2 begins (a TLS server, or one
  // out of descriptors) for kClosedFor.
  absl::Status AwaitServer(absl::Time deadline) {
    constexpr absl::Duration kClosedFor = absl::Seconds(10);
    absl::Time closed_since = absl::InfiniteFuture();
    while (true) {
      const grpc_connectivity_state state = channel_->GetState(/*try_to_connect=*/true);
      if (state == GRPC_CHANNEL_READY) return absl::OkStatus();
      if (state == GRPC_CHANNEL_TRANSIENT_FAILURE) {
        // A call that does not wait fails at once with the last connection error.
        grpc::ClientContext probe;
        if (!token_.empty()) probe.AddMetadata(ddprun::kTokenMetadataKey, token_);
        probe.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
        pb::NumKeysRequest request;
        request.set_run_id(run_id_);
        pb::NumKeysResponse response;
        const grpc::Status status = stub_->NumKeys(&probe, request, &response);
        if (status.error_code() != grpc::StatusCode::UNAVAILABLE) return absl::OkStatus();
        if (tls_ && absl::StrContains(status.error_message(), "andshake")) {
          return absl::UnavailableError(absl::StrCat(
              "store at ", address_, ": the TLS handshake failed (", status.error_message(),
              "): DDPRUN_TLS_CERT, DDPRUN_TLS_KEY and DDPRUN_TLS_CA must be a certificate the "
              "master's CA signed and that CA (the agents' --rdzv-conf tls_*), and the master "
              "must use TLS"));
        }
        if (!tls_ && absl::StrContains(status.error_message(), "Socket closed")) {
          closed_since = std::min(closed_since, absl::Now());
          if (absl::Now() - closed_since >= kClosedFor) {
            return absl::UnavailableError(absl::StrCat(
                "store at ", address_, ": it closes every connection before it answers (for ",
                absl::FormatDuration(kClosedFor),
                "): a master with TLS takes only TLS clients: give the workers "
                "DDPRUN_TLS_CERT, DDPRUN_TLS_KEY and DDPRUN_TLS_CA (the agents' --rdzv-conf "
                "tls_* do); else the master may be out of file descriptors (its log says so)"));
          }
        } else {
          closed_since = absl::InfiniteFuture();
        }
      }
      if (absl::Now() >= deadline) return absl::OkStatus();  // the call says it could not reach
      channel_->WaitForStateChange(
          state, absl::ToChronoTime(std::min(deadline, absl::Now() + absl::Milliseconds(200))));
    }
  }

  template <typename Rpc>
  absl::Status Call(const char* verb, const std::string& key, absl::Duration deadline, Rpc rpc) {
    if (wait_for_server_ && !answered_.load()) {
      if (absl::Status s = AwaitServer(absl::Now() + deadline); !s.ok()) return s;
    }
    grpc::ClientContext context;
    if (!token_.empty()) context.AddMetadata(ddprun::kTokenMetadataKey, token_);
    // Before the first answer the server may not be up yet: wait for it. After, a server
    // that is gone (rank 0 exited) must fail calls at once, not after their deadline.
    context.set_wait_for_ready(wait_for_server_ && !answered_.load());
    context.set_deadline(absl::ToChronoTime(absl::Now() + deadline));
    const grpc::Status status = rpc(&context);
    if (status.ok() || channel_->GetState(false) == GRPC_CHANNEL_READY) answered_.store(true);
    if (status.ok()) return absl::OkStatus();
    const std::string what = key.empty() ? std::string(verb) : absl::StrCat(verb, " '", key, "'");
    if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED &&
        channel_->GetState(false) != GRPC_CHANNEL_READY) {
      return absl::UnavailableError(absl::StrCat(
          "store at ", address_, ": ", what, ": could not reach the store within ",
          absl::FormatDuration(deadline),
          "; is it up? (DDPRUN_STORE_ADDR: the ddprun master; otherwise rank 0 serves it at "
          "MASTER_ADDR:MASTER_PORT)"));
    }
    const absl::Status s = ddprun::FromGrpcStatus(status);
    return absl::Status(s.code(),
                        absl::StrCat("store at ", address_, ": ", what, ": ", s.message()));
  }

  const std::string address_;
  const std::string token_;
  const bool tls_;  // a TLS client (AwaitServer)
  const std::string run_id_;
  const absl::Duration call_timeout_;
  const bool wait_for_server_;
  std::atomic<bool> answered_{false};
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<pb::Store::Stub> stub_;
};

class GrpcStoreServer : public StoreServer {
 public:
  explicit GrpcStoreServer(std::unique_ptr<ddprun::StoreOnlyServer> server)
      : server_(std::move(server)) {}
  int port() const override { return server_->port(); }

 private:
  std::unique_ptr<ddprun::StoreOnlyServer> server_;
};

}  // namespace

std::unique_ptr<Store> Store::Connect(const std::string& address, const std::string& run_id,
                                      absl::Duration call_timeout, bool wait_for_server,
                                      const StoreAccess& tls) {
  return std::make_unique<GrpcStore>(address, run_id, call_timeout, wait_for_server, tls);
}

absl::StatusOr<std::unique_ptr<StoreServer>> StoreServer::Start(int port) {
  StoreServerOptions options;
  options.port = port;
  return Start(options);
}

absl::StatusOr<std::unique_ptr<StoreServer>> StoreServer::Start(const StoreServerOptions& given) {
  // The master's Store service, alone: one implementation of the verbs and their limits.
  ddprun::StoreOnlyOptions options;
  options.serving.port = given.port;
  options.token = given.token;
  if (!given.run_id.empty()) options.only_run_id = given.run_id;
  absl::StatusOr<std::unique_ptr<ddprun::StoreOnlyServer>> server =
      absl::UnavailableError("no address to listen on");
  // Every address: IPv6's "::" takes IPv4 too, unless the host has no IPv6.
  for (const char* host : {"::", "0.0.0.0"}) {
    options.serving.host = given.bind_host.empty() ? host : given.bind_host;
    server = ddprun::StoreOnlyServer::Start(options);
    if (server.ok() || !given.bind_host.empty()) break;
  }
  if (!server.ok()) {
    return absl::UnavailableError(absl::StrCat("rank 0 cannot serve the store on port ", given.port,
                                               " (MASTER_PORT): ", server.status().message()));
  }
  return std::unique_ptr<StoreServer>(new GrpcStoreServer(std::move(*server)));
}

}  // namespace ddp::worker
