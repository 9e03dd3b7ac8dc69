#include "net/etcd_client.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "rendezvous/leader_election.h"
#include "rpc/grpc_channel.h"
#include "rpc/wire.h"

namespace ddprun {
namespace {

namespace pb = ::etcdserverpb;

std::shared_ptr<grpc::ChannelCredentials> Credentials(const EtcdSettings& settings) {
  if (!settings.https) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = settings.ca_pem;  // empty: the system's roots
  ssl.pem_private_key = settings.key_pem;
  ssl.pem_cert_chain = settings.cert_pem;
  return grpc::SslCredentials(ssl);
}

grpc::ChannelArguments ChannelArguments() {
  grpc::ChannelArguments args;
  // A member cut off by the network shows as a ping left unanswered on the streams (the
  // lease's keep-alive, a watch). etcd answers pings more often than every 5 s
  // (--grpc-keepalive-min-time), or any without a call open, by closing the connection.
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 3000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 0);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  SetQuickReconnect(args);
  return args;
}

// The member did not answer, or answered that it cannot serve now (no leader, its quorum
// lost): another member may.
bool TryAnotherMember(const grpc::Status& status) {
  return status.error_code() == grpc::StatusCode::UNAVAILABLE ||
         status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ||
         absl::StrContains(status.error_message(), "no leader") ||
         absl::StrContains(status.error_message(), "leader changed");
}

// The token is one etcd no longer takes: it expired, or users or roles changed since.
bool TokenExpired(const grpc::Status& status) {
  return absl::StrContains(status.error_message(), "invalid auth token") ||
         absl::StrContains(status.error_message(), "revision of auth store is old");
}

// This member will not take this node, whenever asked: its credentials or certificate.
bool RefusedBy(const grpc::Status& status) {
  const std::string& m = status.error_message();
  if (status.error_code() == grpc::StatusCode::PERMISSION_DENIED ||
      status.error_code() == grpc::StatusCode::UNAUTHENTICATED) {
    return true;
  }
  return absl::StrContains(m, "authentication failed") ||
         absl::StrContains(m, "user name is empty") || absl::StrContains(m, "permission denied") ||
         absl::StrContains(m, "andshake failed") ||
         absl::StrContains(m, "CERTIFICATE_VERIFY_FAILED") || absl::StrContains(m, "TLSV1_ALERT");
}

}  // namespace

std::string PrefixEnd(const std::string& prefix) {
  std::string end = prefix;
  while (!end.empty()) {
    if (static_cast<unsigned char>(end.back()) < 0xff) {
      end.back() = static_cast<char>(static_cast<unsigned char>(end.back()) + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');  // every key
}

EtcdClient::EtcdClient(EtcdSettings settings) : settings_(std::move(settings)) {
  for (const std::string& endpoint : settings_.endpoints) {
    channels_.push_back(
        grpc::CreateCustomChannel(endpoint, Credentials(settings_), ChannelArguments()));
  }
}

std::shared_ptr<grpc::Channel> EtcdClient::channel() {
  absl::MutexLock lock(&mu_);
  return channels_[current_];
}

std::string EtcdClient::endpoint() {
  absl::MutexLock lock(&mu_);
  return settings_.endpoints[current_];
}

void EtcdClient::StreamEnded(const grpc::Status& status) {
  if (!TokenExpired(status)) return;
  absl::MutexLock lock(&mu_);
  token_.clear();  // the next stream or call authenticates again
}

// Over TLS, an etcd that asks for client certificates and does not trust this node's closes
// the connection once the handshake is over: gRPC says only that the read failed, or that
// the connection was reset, as the timing goes.
std::string EtcdClient::TlsHint(absl::string_view failure) const {
  if (!settings_.https || settings_.cert_pem.empty() ||
      (!absl::StrContains(failure, "Endpoint read failed") &&
       !absl::StrContains(failure, "Socket closed") &&
       !absl::StrContains(failure, "Connection reset by peer"))) {
    return "";
  }
  return "; over TLS, a connection etcd closes like this is often a client certificate it does "
         "not trust: check --rdzv-conf cert and key against etcd's --trusted-ca-file";
}

void EtcdClient::PassOver(const std::string& endpoint) {
  absl::MutexLock lock(&mu_);
  if (settings_.endpoints[current_] == endpoint) current_ = (current_ + 1) % channels_.size();
}

absl::Status EtcdClient::Authenticate(size_t member) {
  pb::AuthenticateRequest request;
  request.set_name(settings_.user);
  request.set_password(settings_.password);
  pb::AuthenticateResponse response;
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + kCallTimeout));
  const grpc::Status status =
      pb::Auth::NewStub(channels_[member])->Authenticate(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  absl::MutexLock lock(&mu_);
  token_ = response.token();
  return absl::OkStatus();
}

absl::Status EtcdClient::Prepare(grpc::ClientContext& context, size_t member) {
  if (!settings_.user.empty()) {
    bool have_token;
    {
      absl::MutexLock lock(&mu_);
      have_token = !token_.empty();
    }
    if (!have_token) {
      if (absl::Status s = Authenticate(member); !s.ok()) return s;
    }
    absl::MutexLock lock(&mu_);
    context.AddMetadata("token", token_);
  }
  return absl::OkStatus();
}

absl::Status EtcdClient::PrepareStream(grpc::ClientContext& context) {
  size_t member;
  {
    absl::MutexLock lock(&mu_);
    member = current_;
  }
  // etcd's clientv3.WithRequireLeader: the member ends the stream when it loses its leader.
  context.AddMetadata("hasleader", "true");
  return Prepare(context, member);
}

template <typename Call>
absl::Status EtcdClient::OnSomeMember(const char* what, Call call, absl::Time until) {
  size_t first;
  {
    absl::MutexLock lock(&mu_);
    first = current_;
  }
  grpc::Status last;
  std::string tried;
  int asked = 0, refused = 0;
  for (size_t i = 0; i < channels_.size() && (i == 0 || absl::Now() < until); ++i) {
    const size_t member = (first + i) % channels_.size();
    for (int attempt = 0; attempt < 2; ++attempt) {
      grpc::ClientContext context;
      context.set_deadline(absl::ToChronoTime(std::min(absl::Now() + kCallTimeout, until)));
      if (absl::Status s = Prepare(context, member); !s.ok()) {
        last = grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
        break;
      }
      last = call(channels_[member], context);
      if (!TokenExpired(last) || attempt == 1) break;
      absl::MutexLock lock(&mu_);
      token_.clear();  // a new one on the next try
    }
    if (last.ok()) {
      absl::MutexLock lock(&mu_);
      current_ = member;
      return absl::OkStatus();
    }
    absl::StrAppend(&tried, tried.empty() ? "" : "; ", settings_.endpoints[member], ": ",
                    last.error_message().empty() ? "no answer" : last.error_message());
    ++asked;
    refused += RefusedBy(last);
    if (!TryAnotherMember(last)) break;
  }
  std::string text = absl::StrCat("etcd ", what, " failed (", tried, ")");
  absl::StrAppend(&text, TlsHint(text));
  // Refused by every member asked: a refusal. One that had no leader, or did not answer,
  // may take this node once it does.
  if (refused == asked) return absl::PermissionDeniedError(text);
  const absl::Status why = FromGrpcStatus(last);
  return absl::Status(RefusedBy(last) ? absl::StatusCode::kUnavailable : why.code(), text);
}

absl::StatusOr<int64_t> EtcdClient::GrantLease(absl::Duration ttl) {
  pb::LeaseGrantRequest request;
  request.set_ttl(std::max<int64_t>(1, absl::ToInt64Seconds(absl::Ceil(ttl, absl::Seconds(1)))));
  pb::LeaseGrantResponse response;
  absl::Status status = OnSomeMember("lease grant", [&](auto channel, grpc::ClientContext& c) {
    return pb::Lease::NewStub(channel)->LeaseGrant(&c, request, &response);
  });
  if (!status.ok()) return status;
  if (!response.error().empty()) {
    return absl::UnavailableError(absl::StrCat("etcd lease grant: ", response.error()));
  }
  return response.id();
}

absl::Status EtcdClient::RevokeLease(int64_t lease) {
  pb::LeaseRevokeRequest request;
  request.set_id(lease);
  pb::LeaseRevokeResponse response;
  return OnSomeMember("lease revoke", [&](auto channel, grpc::ClientContext& c) {
    return pb::Lease::NewStub(channel)->LeaseRevoke(&c, request, &response);
  });
}

absl::StatusOr<EtcdClient::Campaign> EtcdClient::CreateUnlessPresent(const std::string& key,
                                                                     const std::string& value,
                                                                     int64_t lease) {
  pb::TxnRequest request;
  pb::Compare* absent = request.add_compare();
  absent->set_key(key);
  absent->set_target(pb::Compare::CREATE);
  absent->set_result(pb::Compare::EQUAL);
  absent->set_create_revision(0);
  pb::PutRequest* put = request.add_success()->mutable_request_put();
  put->set_key(key);
  put->set_value(value);
  put->set_lease(lease);
  // Either way, the key as it stands after the transaction.
  for (auto* branch : {request.add_success(), request.add_failure()}) {
    branch->mutable_request_range()->set_key(key);
  }
  pb::TxnResponse response;
  absl::Status status = OnSomeMember("transaction", [&](auto channel, grpc::ClientContext& c) {
    return pb::KV::NewStub(channel)->Txn(&c, request, &response);
  });
  if (!status.ok()) return status;
  Campaign campaign;
  campaign.won = response.succeeded();
  campaign.revision = response.header().revision();
  const pb::RangeResponse& range =
      response.responses(response.responses_size() - 1).response_range();
  if (range.kvs_size() > 0) {
    campaign.holder.value = range.kvs(0).value();
    campaign.holder.create_revision = range.kvs(0).create_revision();
    campaign.holder.lease = range.kvs(0).lease();
  }
  return campaign;
}

namespace {

// A transaction that succeeds only while `fence_key` is the one created at `create_revision`.
pb::TxnRequest FencedTxn(const std::string& fence_key, int64_t create_revision) {
  pb::TxnRequest request;
  pb::Compare* fence = request.add_compare();
  fence->set_key(fence_key);
  fence->set_target(pb::Compare::CREATE);
  fence->set_result(pb::Compare::EQUAL);
  fence->set_create_revision(create_revision);
  // Nothing of the leader's rewrites its key: one modified since it was created was
  // overwritten by someone else (a put keeps the creation revision).
  pb::Compare* untouched = request.add_compare();
  untouched->set_key(fence_key);
  untouched->set_target(pb::Compare::MOD);
  untouched->set_result(pb::Compare::EQUAL);
  untouched->set_mod_revision(create_revision);
  return request;
}

}  // namespace

absl::StatusOr<bool> EtcdClient::PutIfFenced(const std::string& fence_key, int64_t create_revision,
                                             const std::string& key, const std::string& value,
                                             absl::Time until) {
  pb::TxnRequest request = FencedTxn(fence_key, create_revision);
  pb::PutRequest* put = request.add_success()->mutable_request_put();
  put->set_key(key);
  put->set_value(value);
  pb::TxnResponse response;
  absl::Status status = OnSomeMember(
      "fenced put",
      [&](auto channel, grpc::ClientContext& c) {
        return pb::KV::NewStub(channel)->Txn(&c, request, &response);
      },
      until);
  if (!status.ok()) return status;
  return response.succeeded();
}

absl::StatusOr<bool> EtcdClient::DeletePrefixIfFenced(const std::string& fence_key,
                                                      int64_t create_revision,
                                                      const std::string& prefix) {
  pb::TxnRequest request = FencedTxn(fence_key, create_revision);
  pb::DeleteRangeRequest* deletion = request.add_success()->mutable_request_delete_range();
  deletion->set_key(prefix);
  deletion->set_range_end(PrefixEnd(prefix));
  pb::TxnResponse response;
  absl::Status status = OnSomeMember("fenced delete", [&](auto channel, grpc::ClientContext& c) {
    return pb::KV::NewStub(channel)->Txn(&c, request, &response);
  });
  if (!status.ok()) return status;
  return response.succeeded();
}

absl::StatusOr<EtcdClient::Read> EtcdClient::Get(const std::string& key) {
  pb::RangeRequest request;
  request.set_key(key);
  pb::RangeResponse response;
  absl::Status status = OnSomeMember("read", [&](auto channel, grpc::ClientContext& c) {
    return pb::KV::NewStub(channel)->Range(&c, request, &response);
  });
  if (!status.ok()) return status;
  Read read;
  read.revision = response.header().revision();
  if (response.kvs_size() > 0) {
    EtcdValue value;
    value.value = response.kvs(0).value();
    value.create_revision = response.kvs(0).create_revision();
    value.lease = response.kvs(0).lease();
    read.value = std::move(value);
  }
  return read;
}

absl::Status EtcdClient::DeletePrefix(const std::string& prefix) {
  pb::DeleteRangeRequest request;
  request.set_key(prefix);
  request.set_range_end(PrefixEnd(prefix));
  pb::DeleteRangeResponse response;
  return OnSomeMember("delete", [&](auto channel, grpc::ClientContext& c) {
    return pb::KV::NewStub(channel)->DeleteRange(&c, request, &response);
  });
}

absl::StatusOr<std::string> FindLeader(const EtcdSettings& etcd, const std::string& run_id) {
  EtcdClient client(etcd);
  const std::string key = absl::StrCat(etcd.prefix, "/", run_id, "/leader");
  absl::StatusOr<EtcdClient::Read> read = client.Get(key);
  if (!read.ok()) return read.status();
  if (!read->value) {
    return absl::NotFoundError(
        absl::StrCat("run '", run_id, "' has no leader in etcd at ",
                     absl::StrJoin(etcd.endpoints, ","), " (no key ", key,
                     "): it has ended, has not started, or runs under another "
                     "--rdzv-id or etcd_prefix"));
  }
  if (absl::Status bad = CheckLeaderAddress(read->value->value); !bad.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "run '", run_id, "': etcd's key ", key, " is not the work of ddprun: ", bad.message(),
        "; whoever may write ", etcd.prefix, " in etcd wrote it (docs/security.md#etcd-v3)"));
  }
  return read->value->value;
}

EtcdWatch::EtcdWatch(EtcdClient& client, const std::string& key, int64_t from, OnChange on_change,
                     OnEnd on_end)
    : client_(client),
      endpoint_(client.endpoint()),
      on_change_(std::move(on_change)),
      on_end_(std::move(on_end)) {
  if (absl::Status prepared = client_.PrepareStream(context_); !prepared.ok()) {
    on_end_(prepared, endpoint_);
    done_ = true;
    return;
  }
  request_.mutable_create_request()->set_key(key);
  request_.mutable_create_request()->set_start_revision(from);
  stub_ = pb::Watch::NewStub(client_.channel());
  stub_->async()->Watch(&context_, this);
  StartWrite(&request_);
  StartRead(&response_);
  StartCall();
}

EtcdWatch::~EtcdWatch() {
  context_.TryCancel();
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(&done_));
}

void EtcdWatch::OnReadDone(bool ok) {
  if (!ok) return;  // OnDone follows with the stream's status
  for (const mvccpb::Event& event : response_.events()) {
    Change change;
    change.deleted = event.type() == mvccpb::Event::DELETE;
    change.key.value = event.kv().value();
    change.key.lease = event.kv().lease();
    change.key.create_revision = event.kv().create_revision();
    on_change_(change);
  }
  // etcd ended the watch (its revision was compacted, the member lost its leader).
  if (response_.canceled()) return context_.TryCancel();
  StartRead(&response_);
}

void EtcdWatch::OnDone(const grpc::Status& status) {
  client_.StreamEnded(status);
  absl::Status why;  // OK: cancelled, or ended by etcd
  if (!status.ok() && status.error_code() != grpc::StatusCode::CANCELLED) {
    const std::string text = absl::StrCat("etcd at ", endpoint_, ": ", status.error_message());
    why = absl::UnavailableError(absl::StrCat(text, client_.TlsHint(text)));
  }
  on_end_(why, endpoint_);
  absl::MutexLock lock(&mu_);
  done_ = true;
}

}  // namespace ddprun
