#include "net/etcd_rendezvous.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/clock.h"
#include "net/endpoint_probe.h"
#include "rpc/run_memory_wire.h"
#include "spdlog/spdlog.h"

namespace ddprun {
namespace {

namespace pb = ::etcdserverpb;

// How long a look at a leader that went silent may take (a TCP connection to its port).
constexpr absl::Duration kLeaderLook = absl::Seconds(1);

const EtcdSettings& EtcdOf(const ElectionOptions& options) {
  return static_cast<const EtcdSettings&>(*options.backend);
}

ElectionSettings SettingsFor(const ElectionOptions& options, const std::string& leader_key) {
  ElectionSettings s;
  s.run_id = options.rendezvous.run_id;
  s.self = options.self;
  s.store = "etcd";
  s.key = leader_key;
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
    : LeaderFollower(options.rendezvous, "etcd",
                     absl::StrCat("etcd at ", absl::StrJoin(EtcdOf(options).endpoints, ","))),
      options_(std::move(options)),
      settings_(EtcdOf(options_)),
      host_(host),
      leader_key_(absl::StrCat(settings_.prefix, "/", options_.rendezvous.run_id, "/leader")),
      state_key_(absl::StrCat(settings_.prefix, "/", options_.rendezvous.run_id, "/state")),
      etcd_(settings_),
      election_(SettingsFor(options_, leader_key_)) {
  lease_thread_ = std::thread([this] { KeepLeaseAlive(); });
  election_thread_ = std::thread([this] { Run(); });
}

EtcdRendezvous::~EtcdRendezvous() {
  EndSession();  // its Bye goes to the leader: this node is gone, not away
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  election_thread_.join();
  watch_.reset();
  // What was posted before the end is taken in (the master's last memory, the run's end);
  // the election acts no more.
  std::deque<std::function<void()>> inputs;
  {
    absl::MutexLock lock(&mu_);
    inputs.swap(inbox_);
  }
  for (std::function<void()>& input : inputs) input();
  const absl::Time grace_ends = absl::Now() + options_.rendezvous.settings.keep_alive_interval;
  std::unique_ptr<HostedMaster> master = std::move(master_);
  if (master != nullptr) LeaveAsLeader(*master, grace_ends);
  {
    absl::MutexLock lock(&mu_);
    lease_released_ = true;
    if (keep_alive_ != nullptr) keep_alive_->TryCancel();
  }
  lease_thread_.join();
  if (master != nullptr) {
    options_.on_lead(nullptr);
    hosting_ = nullptr;
    master->Shutdown(std::max(absl::ZeroDuration(), grace_ends - absl::Now()));
  }
  // The others elect at once, instead of after the lease's TTL.
  if (election_.lease() != 0) (void)etcd_.RevokeLease(election_.lease());
}

// An ended run's keys go with it, so that a long-lived etcd does not fill up (the other
// agents may not have closed their sessions yet); so do the keys of a run every node left
// (Ctrl-C on each), within the grace the master's shutdown gives their sessions anyway. A
// run that goes on keeps them for the next leader, with what this one remembered last. The
// lease is kept alive meanwhile: a lapse would elect another node while this one still
// decides, and both writes are fenced by this node's key (another's keys stay its own).
void EtcdRendezvous::LeaveAsLeader(HostedMaster& master, absl::Time grace_ends) {
  const int64_t revision = election_.leading_revision();
  if (!run_ended_ && !EverySessionEnds(master, options_.rendezvous.run_id, grace_ends)) {
    if (!memory_.empty()) (void)etcd_.PutIfFenced(leader_key_, revision, state_key_, memory_);
    return;
  }
  const std::string prefix = absl::StrCat(settings_.prefix, "/", options_.rendezvous.run_id, "/");
  absl::StatusOr<bool> deleted = etcd_.DeletePrefixIfFenced(leader_key_, revision, prefix);
  if (!deleted.ok()) {
    spdlog::warn("could not remove run '{}''s keys ({}*) from etcd: {}", options_.rendezvous.run_id,
                 prefix, std::string(deleted.status().message()));
  } else if (!*deleted) {
    spdlog::info(
        "run '{}''s keys stay in etcd: this node's leader key is gone or not its own "
        "(another node leads, or someone changed it); once the run is over, "
        "`etcdctl del --prefix {}` removes them",
        options_.rendezvous.run_id, prefix);
  }
}

// ---- What the agent's thread posts ----

void EtcdRendezvous::Post(std::function<void()> input) {
  absl::MutexLock lock(&mu_);
  inbox_.push_back(std::move(input));
}

void EtcdRendezvous::MasterLost() {
  Post([this] { election_.MasterLost(MonotonicNow()); });
}

void EtcdRendezvous::RunOver(bool ended_for_all) {
  Post([this, ended_for_all] {
    run_ended_ = run_ended_ || ended_for_all;
    election_.RunOver(MonotonicNow());
  });
}

void EtcdRendezvous::PlacedIn(const std::string& incarnation) {
  Post([this, incarnation] { placed_in_run_ = incarnation; });
}

void EtcdRendezvous::CheckElection() {
  Post([this] {
    RendezvousEvent progress;
    progress.kind = RendezvousEvent::Kind::kProgress;
    if (election_.problem().empty()) {
      progress.detail = "the nodes are electing the run's leader in etcd";
    } else {
      progress.status = absl::UnavailableError("etcd does not answer");
      progress.detail = absl::StrCat("no leader yet: ", election_.problem());
    }
    events().Push(std::move(progress));
  });
}

// ---- The election's thread ----

void EtcdRendezvous::Run() {
  election_.Start(MonotonicNow());
  for (;;) {
    for (std::vector<ElectionAction> actions = election_.TakeActions(); !actions.empty();
         actions = election_.TakeActions()) {
      for (const ElectionAction& action : actions) Execute(action);
    }
    std::deque<std::function<void()>> inputs;
    {
      absl::MutexLock lock(&mu_);
      const auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || !inbox_.empty();
      };
      mu_.AwaitWithTimeout(absl::Condition(&ready), election_.NextDeadline() - MonotonicNow());
      if (stopping_) return;
      inputs.swap(inbox_);
    }
    for (std::function<void()>& input : inputs) input();
    election_.Tick(MonotonicNow());
  }
}

void EtcdRendezvous::Execute(const ElectionAction& action) {
  using Kind = ElectionAction::Kind;
  switch (action.kind) {
    case Kind::kRead: {
      absl::StatusOr<EtcdClient::Read> read = etcd_.Get(leader_key_);
      if (!read.ok()) return election_.LeaderRead(read.status(), MonotonicNow());
      LeaderElection::Read answer;
      if (read->value) answer.key = KeyOf(*read->value);
      answer.revision = read->revision;
      return election_.LeaderRead(answer, MonotonicNow());
    }
    case Kind::kGrantLease: {
      const absl::Time asked = MonotonicNow();
      absl::StatusOr<int64_t> lease = etcd_.GrantLease(settings_.lease_ttl);
      return election_.LeaseGranted(lease, asked, MonotonicNow());
    }
    case Kind::kCampaign: {
      absl::StatusOr<EtcdClient::Campaign> c =
          etcd_.CreateUnlessPresent(leader_key_, options_.self, action.lease);
      if (!c.ok()) return election_.Campaigned(c.status(), MonotonicNow());
      return election_.Campaigned(LeaderElection::Campaign{c->won, KeyOf(c->holder), c->revision},
                                  MonotonicNow());
    }
    case Kind::kHost:
      return Host();
    case Kind::kStepDown:
      return StepDown();
    case Kind::kWatch:
      return Watch(action);
    case Kind::kSwitchWatch:
      if (watch_ != nullptr) watch_->Cancel();  // its end passes its member over
      return;
    case Kind::kKeepAlive:
      return KeepAlive(action.lease);
    case Kind::kSwitchKeepAlive:
      return KeepAlive(election_.lease());
    case Kind::kRevoke:
      return election_.Revoked(action.lease, etcd_.RevokeLease(action.lease), MonotonicNow());
    case Kind::kWriteMemory: {
      const absl::Time until = absl::Now() + (action.deadline - MonotonicNow());
      absl::StatusOr<bool> written =
          etcd_.PutIfFenced(leader_key_, action.revision, state_key_, memory_, until);
      return election_.MemoryWritten(action.version, written, MonotonicNow());
    }
    case Kind::kProbeLeader: {
      const EndpointReach reach = ProbeEndpoint(action.address, kLeaderLook);
      using Reach = LeaderElection::Reach;
      return election_.LeaderProbed(action.address,
                                    reach.kind == EndpointReach::Kind::kRefused ? Reach::kRefused
                                    : reach.kind == EndpointReach::Kind::kListens
                                        ? Reach::kListens
                                        : Reach::kUnreachable,
                                    reach.detail, MonotonicNow());
    }
    case Kind::kFollow:
      return SetLeader(action.address);
    case Kind::kRefused: {
      RendezvousEvent refused;
      refused.kind = RendezvousEvent::Kind::kRefused;
      refused.status = absl::PermissionDeniedError(
          absl::StrCat(action.text,
                       "; check --rdzv-conf etcd_user and etcd_password_file (authentication), "
                       "or protocol, cacert, cert and key (TLS)"));
      return events().Push(std::move(refused));
    }
    case Kind::kLog:
      if (action.level == LogLevel::kError) return spdlog::error("{}", action.text);
      if (action.level == LogLevel::kWarning) return spdlog::warn("{}", action.text);
      return spdlog::info("{}", action.text);
  }
}

void EtcdRendezvous::Watch(const ElectionAction& action) {
  watch_.reset();  // its end comes as another watch's: the election takes no notice
  const int64_t id = watch_id_ = action.watch;
  const auto on_change = [this, id](const EtcdWatch::Change& change) {
    Post([this, id, change] {
      election_.KeyChanged(id, LeaderElection::KeyChange{change.deleted, KeyOf(change.key)},
                           MonotonicNow());
    });
  };
  const auto on_end = [this, id](const absl::Status& why, const std::string& endpoint) {
    Post([this, id, why, endpoint] {
      if (id != watch_id_) return;
      // The member went away or lost its quorum (or a look at the leader asked for another):
      // the next call and watch ask another.
      etcd_.PassOver(endpoint);
      election_.WatchEnded(id, why, MonotonicNow());
    });
  };
  watch_ = std::make_unique<EtcdWatch>(etcd_, leader_key_, action.revision, on_change, on_end);
}

void EtcdRendezvous::Host() {
  MasterOptions master_options = options_.master;
  master_options.recalled = RecallMemory();
  master_options.remember = [this](const std::string&, const RunMemory& memory) {
    Post([this, bytes = RunMemoryToBytes(memory)] {
      memory_ = bytes;
      election_.MemoryChanged(++memory_version_, MonotonicNow());
    });
  };
  absl::StatusOr<std::unique_ptr<HostedMaster>> master = host_(master_options);
  std::string recalled;
  if (master.ok()) {
    options_.on_lead(master->get());
    master_ = *std::move(master);
    hosting_ = master_.get();
    if (master_options.recalled) {
      recalled = absl::StrCat("with what the last leader remembered (",
                              master_options.recalled->nodes.size(), " nodes' records, ",
                              master_options.recalled->restarts_spent, " restarts spent)");
    }
  }
  election_.Hosted(master.status(), recalled, MonotonicNow());
}

void EtcdRendezvous::StepDown() {
  if (master_ == nullptr) return;
  options_.on_lead(nullptr);
  hosting_ = nullptr;
  master_->Shutdown(absl::ZeroDuration());
  // The agent may still read the stopped master (ServeWhileOthersRun): kept until the end.
  retired_.push_back(std::move(master_));
}

// What the run's last leader remembered, when this node may take it over (TakeOver).
std::optional<RunMemory> EtcdRendezvous::RecallMemory() {
  absl::StatusOr<EtcdClient::Read> read = etcd_.Get(state_key_);
  if (!read.ok() || !read->value) return std::nullopt;  // none yet, or etcd went: start afresh
  return TakeOver(read->value->value, placed_in_run_, options_.rendezvous.run_id, "etcd",
                  state_key_);
}

// ---- The lease's thread ----

void EtcdRendezvous::KeepAlive(int64_t lease) {
  absl::MutexLock lock(&mu_);
  kept_lease_ = lease;
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
        election_.LeaseRenewed(lease, sent, expired, MonotonicNow());
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
