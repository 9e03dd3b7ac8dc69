#include "net/etcd_rendezvous.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/clock.h"
#include "spdlog/spdlog.h"

namespace ddprun {
namespace {

namespace pb = ::etcdserverpb;

const EtcdSettings& EtcdOf(const ElectionOptions& options) {
  return static_cast<const EtcdSettings&>(*options.backend);
}

// <prefix>/<run id>/<name>: the run's keys.
std::string RunKey(const ElectionOptions& options, const char* name) {
  return absl::StrCat(EtcdOf(options).prefix, "/", options.rendezvous.run_id, "/", name);
}

ElectionSettings SettingsFor(const ElectionOptions& options) {
  ElectionSettings s;
  s.run_id = options.rendezvous.run_id;
  s.self = options.self;
  s.store = "etcd";
  s.key = RunKey(options, "leader");
  s.prefix = EtcdOf(options).prefix;
  s.security_doc = "docs/security.md#etcd-v3";
  s.lease_ttl = EtcdOf(options).lease_ttl;
  return s;
}

LeaderKey KeyOf(const EtcdValue& value) {
  LeaderKey key;
  key.value = value.value;
  key.lease = value.lease;
  key.create_revision = value.create_revision;
  return key;
}

}  // namespace

EtcdRendezvous::EtcdRendezvous(ElectionOptions options, HostMaster host)
    : ElectionExecutor(
          options, host, SettingsFor(options),
          {"etcd", absl::StrCat("etcd at ", absl::StrJoin(EtcdOf(options).endpoints, ",")),
           RunKey(options, "state")}),
      settings_(EtcdOf(options)),
      leader_key_(RunKey(options, "leader")),
      state_key_(RunKey(options, "state")),
      etcd_(settings_) {
  lease_thread_ = std::thread([this] { KeepLeaseAlive(); });
  Begin();
}

EtcdRendezvous::~EtcdRendezvous() {
  End();
  lease_thread_.join();
}

absl::StatusOr<LeaderElection::Read> EtcdRendezvous::ReadLeader() {
  absl::StatusOr<EtcdClient::Read> read = etcd_.Get(leader_key_);
  if (!read.ok()) return read.status();
  LeaderElection::Read answer;
  if (read->value) answer.key = KeyOf(*read->value);
  answer.revision = read->revision;
  return answer;
}

absl::StatusOr<int64_t> EtcdRendezvous::GrantLease() {
  return etcd_.GrantLease(settings_.lease_ttl);
}

absl::StatusOr<LeaderElection::Campaign> EtcdRendezvous::Campaign(int64_t lease) {
  absl::StatusOr<EtcdClient::Campaign> c =
      etcd_.CreateUnlessPresent(leader_key_, options().self, lease);
  if (!c.ok()) return c.status();
  return LeaderElection::Campaign{c->won, KeyOf(c->holder), c->revision};
}

void EtcdRendezvous::Watch(int64_t id, int64_t revision) {
  watch_.reset();  // its end comes as another watch's: the election takes no notice
  watch_id_ = id;
  const auto on_change = [this, id](const EtcdWatch::Change& change) {
    Post([this, id, change] {
      election().KeyChanged(id, LeaderElection::KeyChange{change.deleted, KeyOf(change.key)},
                            MonotonicNow());
    });
  };
  const auto on_end = [this, id](const absl::Status& why, const std::string& endpoint) {
    Post([this, id, why, endpoint] {
      if (id != watch_id_) return;
      // The member went away or lost its quorum (or a look at the leader asked for another):
      // the next call and watch ask another.
      etcd_.PassOver(endpoint);
      election().WatchEnded(id, why, MonotonicNow());
    });
  };
  watch_ = std::make_unique<EtcdWatch>(etcd_, leader_key_, revision, on_change, on_end);
}

void EtcdRendezvous::SwitchWatch() {
  if (watch_ != nullptr) watch_->Cancel();  // its end passes its member over
}

absl::StatusOr<bool> EtcdRendezvous::WriteMemory(int64_t revision, const std::string& memory,
                                                 absl::Time until) {
  return etcd_.PutIfFenced(leader_key_, revision, state_key_, memory, until);
}

absl::StatusOr<std::optional<std::string>> EtcdRendezvous::ReadMemory() {
  absl::StatusOr<EtcdClient::Read> read = etcd_.Get(state_key_);
  if (!read.ok()) return read.status();
  if (!read->value) return std::optional<std::string>();
  return std::optional<std::string>(read->value->value);
}

void EtcdRendezvous::RemoveRunKeys(int64_t revision) {
  const std::string& run_id = options().rendezvous.run_id;
  const std::string prefix = absl::StrCat(settings_.prefix, "/", run_id, "/");
  absl::StatusOr<bool> deleted = etcd_.DeletePrefixIfFenced(leader_key_, revision, prefix);
  if (!deleted.ok()) {
    spdlog::warn("could not remove run '{}''s keys ({}*) from etcd: {}", run_id, prefix,
                 std::string(deleted.status().message()));
  } else if (!*deleted) {
    spdlog::info(
        "run '{}''s keys stay in etcd: this node's leader key is gone or not its own "
        "(another node leads, or someone changed it); once the run is over, "
        "`etcdctl del --prefix {}` removes them",
        run_id, prefix);
  }
}

std::string EtcdRendezvous::RefusedHint() const {
  return "check --rdzv-conf etcd_user and etcd_password_file (authentication), or protocol, "
         "cacert, cert and key (TLS)";
}

// ---- The lease's thread ----

void EtcdRendezvous::KeepAlive(int64_t lease) {
  absl::MutexLock lock(&mu_);
  kept_lease_ = lease;
  if (keep_alive_ != nullptr) keep_alive_->TryCancel();
}

void EtcdRendezvous::StopKeepAlive() {
  absl::MutexLock lock(&mu_);
  lease_released_ = true;
  if (keep_alive_ != nullptr) keep_alive_->TryCancel();
}

void EtcdRendezvous::KeepLeaseAlive() {
  for (;;) {
    grpc::ClientContext context;
    int64_t lease;
    {
      absl::MutexLock lock(&mu_);
      const auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return lease_released_ || kept_lease_ != 0;
      };
      mu_.Await(absl::Condition(&ready));
      if (lease_released_) return;
      lease = kept_lease_;
      keep_alive_ = &context;
    }
    const auto moved_on = [this, lease]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return lease_released_ || kept_lease_ != lease;
    };
    const std::string endpoint = etcd_.endpoint();
    bool failed = !etcd_.PrepareStream(context).ok();
    bool expired = false;
    std::unique_ptr<pb::Lease::Stub> stub = pb::Lease::NewStub(etcd_.channel());
    std::unique_ptr<grpc::ClientReaderWriter<pb::LeaseKeepAliveRequest, pb::LeaseKeepAliveResponse>>
        stream;
    if (!failed) stream = stub->LeaseKeepAlive(&context);
    pb::LeaseKeepAliveRequest request;
    request.set_id(lease);
    pb::LeaseKeepAliveResponse response;
    while (!failed && !expired) {
      const absl::Time sent = MonotonicNow();
      if (!stream->Write(request) || !stream->Read(&response)) {
        failed = true;
        break;
      }
      expired = response.ttl() <= 0;  // etcd let it expire: the election takes another
      Post([this, lease, sent, expired] {
        election().LeaseRenewed(lease, sent, expired, MonotonicNow());
      });
      absl::MutexLock lock(&mu_);
      if (mu_.AwaitWithTimeout(absl::Condition(&moved_on), settings_.lease_ttl / 3)) break;
    }
    if (stream != nullptr) {
      context.TryCancel();
      etcd_.StreamEnded(stream->Finish());
    }
    bool pass_over = false;
    {
      absl::MutexLock lock(&mu_);
      keep_alive_ = nullptr;
      // A stream this node did not end failed: its member went away, lost its quorum, or
      // went silent (the election asked for another).
      pass_over = failed && !moved_on();
      if (expired) mu_.Await(absl::Condition(&moved_on));
      if (pass_over) mu_.AwaitWithTimeout(absl::Condition(&moved_on), absl::Milliseconds(100));
    }
    if (pass_over) {
      spdlog::debug("etcd lease keep-alive on {} ended", endpoint);
      etcd_.PassOver(endpoint);
    }
  }
}

}  // namespace ddprun
