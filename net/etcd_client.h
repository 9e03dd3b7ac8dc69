#pragma once
// EtcdClient: the few calls of etcd's v3 gRPC API the etcd-v3 backend makes (leases, a
// create-unless-present transaction, fenced puts, reads, prefix deletes), over the project's
// gRPC with the client generated from etcd's own protos. Unary calls are synchronous and
// bounded; a member that does not answer is passed over for the next one of
// EtcdSettings::endpoints. The streams (lease keep-alive, watch) are opened by their users
// on PrepareStream()'s context. A call that every member asked refused (credentials, a
// certificate, rights) fails PermissionDenied: asking again would not change it. Thread-safe.

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "etcd/etcdserver/etcdserverpb/rpc.grpc.pb.h"
#include "net/etcd_settings.h"

namespace ddprun {

struct EtcdValue {
  std::string value;
  int64_t create_revision = 0;  // the revision that created the key: a holder's fence
  int64_t lease = 0;
};

class EtcdWatch;

class EtcdClient {
 public:
  explicit EtcdClient(EtcdSettings settings);

  /// A lease of `ttl` (etcd may round it up to its least); its ID.
  absl::StatusOr<int64_t> GrantLease(absl::Duration ttl);
  absl::Status RevokeLease(int64_t lease);

  /// Creates `key` = `value`, bound to `lease`, unless the key exists. `won` says which;
  /// `holder` is the key as it is after the call (this caller's, or the one there before);
  /// `revision` the store's revision then.
  struct Campaign {
    bool won = false;
    EtcdValue holder;
    int64_t revision = 0;
  };
  absl::StatusOr<Campaign> CreateUnlessPresent(const std::string& key, const std::string& value,
                                               int64_t lease);
  /// Puts `key` = `value` only while `fence_key` is the one created at `create_revision` (the
  /// caller still leads); false when it is not. No member is asked after `until`.
  absl::StatusOr<bool> PutIfFenced(const std::string& fence_key, int64_t create_revision,
                                   const std::string& key, const std::string& value,
                                   absl::Time until = absl::InfiniteFuture());
  /// The key's value (nullopt when it does not exist), and the store's revision then.
  struct Read {
    std::optional<EtcdValue> value;
    int64_t revision = 0;
  };
  absl::StatusOr<Read> Get(const std::string& key);
  /// Deletes every key that begins with `prefix` (the load generator's cleanup; a leader uses
  /// the fenced form below).
  absl::Status DeletePrefix(const std::string& prefix);
  /// The same, only while `fence_key` is the one created at `create_revision`, untouched since
  /// (the caller still leads); false when it is not.
  absl::StatusOr<bool> DeletePrefixIfFenced(const std::string& fence_key, int64_t create_revision,
                                            const std::string& prefix);

  /// For a stream: the channel of the member this client calls now, and a context that
  /// carries the authentication token and asks the member to end the stream when it has no
  /// etcd leader (a member cut off from its quorum would otherwise stay silent).
  std::shared_ptr<grpc::Channel> channel();
  absl::Status PrepareStream(grpc::ClientContext& context);
  /// A stream on the current member failed: the next calls and streams try another.
  void PassOver(const std::string& endpoint);
  /// A stream ended with `status`: a token etcd no longer takes is dropped, for a new one.
  void StreamEnded(const grpc::Status& status);
  std::string endpoint();

  /// How long one unary call may take on one member.
  static constexpr absl::Duration kCallTimeout = absl::Seconds(2);

 private:
  // Runs `call` on the current member, then on each other one while they do not answer,
  // until `until`.
  template <typename Call>
  absl::Status OnSomeMember(const char* what, Call call, absl::Time until = absl::InfiniteFuture());
  absl::Status Authenticate(size_t member);
  // Said after a failure's words: over TLS, what a connection etcd closes like this often is.
  std::string TlsHint(absl::string_view failure) const;
  friend class EtcdWatch;  // its end says it too
  absl::Status Prepare(grpc::ClientContext& context, size_t member);

  const EtcdSettings settings_;
  std::vector<std::shared_ptr<grpc::Channel>> channels_;  // one per endpoint
  absl::Mutex mu_;
  size_t current_ ABSL_GUARDED_BY(mu_) = 0;
  std::string token_ ABSL_GUARDED_BY(mu_);  // with a user: from Authenticate
};

/// A watch of one key from a revision on, through the member `client` calls now. Each change
/// goes to `on_change`, the watch's end to `on_end` with the member it watched through (OK:
/// it was cancelled, or etcd ended it; Unavailable: the member went or lost its quorum), on
/// gRPC's threads. Destroying it cancels the
/// watch and waits for its end.
class EtcdWatch
    : public grpc::ClientBidiReactor<etcdserverpb::WatchRequest, etcdserverpb::WatchResponse> {
 public:
  struct Change {
    bool deleted = false;
    EtcdValue key;  // when put
  };
  using OnChange = std::function<void(const Change&)>;
  using OnEnd = std::function<void(const absl::Status&, const std::string& endpoint)>;
  EtcdWatch(EtcdClient& client, const std::string& key, int64_t from, OnChange on_change,
            OnEnd on_end);
  ~EtcdWatch() override;
  /// Ends the watch (its on_end follows, Cancelled).
  void Cancel() { context_.TryCancel(); }

 private:
  void OnReadDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;

  EtcdClient& client_;
  const std::string endpoint_;
  const OnChange on_change_;
  const OnEnd on_end_;
  grpc::ClientContext context_;
  std::unique_ptr<etcdserverpb::Watch::Stub> stub_;
  etcdserverpb::WatchRequest request_;
  etcdserverpb::WatchResponse response_;
  absl::Mutex mu_;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
};

/// The master of run `run_id`'s leader, as etcd names it ("host:port"); NotFound when the
/// run has no leader (it ended, or has not started); FailedPrecondition when the key holds
/// something else. What `ddprun status` and `stop` ask first.
absl::StatusOr<std::string> FindLeader(const EtcdSettings& etcd, const std::string& run_id);

/// "etcd key range end" for every key beginning with `prefix` (etcd's convention).
std::string PrefixEnd(const std::string& prefix);

}  // namespace ddprun
