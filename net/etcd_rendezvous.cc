#include "net/etcd_rendezvous.h"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/clock.h"
#include "common/ip_address.h"
#include "common/printable.h"
#include "net/endpoint_probe.h"
#include "rpc/run_memory_wire.h"
#include "spdlog/spdlog.h"

namespace ddprun {
namespace {

namespace pb = ::etcdserverpb;

// etcd refused this node: waiting will not change that (EtcdClient says so when every member
// it asked refused it: a wrong password, a certificate neither side trusts, no rights).
bool Refusal(const absl::Status& status) {
  return absl::IsPermissionDenied(status) || absl::IsUnauthenticated(status);
}

// After an election problem, the next try.
constexpr absl::Duration kRetry = absl::Milliseconds(250);
// How long a look at a leader that went silent may take (a TCP connection to its port).
constexpr absl::Duration kLeaderLook = absl::Seconds(1);

// A host name (255 bytes at most), ':' and a port, an IPv6 address in brackets.
constexpr size_t kMaxLeaderValue = 1 + 255 + 1 + 1 + 5;

// At most the first 64 bytes of a value read from etcd, made printable, for a log line.
std::string Shown(absl::string_view value) {
  constexpr size_t kShown = 64;
  return value.size() <= kShown
             ? Printable(value)
             : absl::StrCat(Printable(value.substr(0, kShown)), "... (", value.size(), " bytes)");
}

// Whether every agent's session with `master` in `run_id` ends before `deadline`: the
// run's nodes all left (an interrupt on every node ends a run too), so no next leader needs
// what this one remembered.
bool EverySessionEnds(const HostedMaster& master, const std::string& run_id, absl::Time deadline) {
  for (;;) {
    if (master.SessionCount(run_id) == 0) return true;
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return false;
    pollfd fd = {master.session_end_fd(), POLLIN, 0};
    if (::poll(&fd, 1, static_cast<int>(absl::ToInt64Milliseconds(left)) + 1) < 0 &&
        errno != EINTR) {
      return false;
    }
    uint64_t count = 0;
    (void)!::read(master.session_end_fd(), &count, sizeof count);
  }
}

}  // namespace

absl::Status CheckLeaderAddress(absl::string_view value) {
  const auto refused = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("its value '", Shown(value), "' is not a leader's address (", why, ")"));
  };
  if (value.size() > kMaxLeaderValue) {
    return refused(absl::StrCat("longer than ", kMaxLeaderValue, " bytes"));
  }
  const size_t colon = value.rfind(':');
  if (colon == absl::string_view::npos) return refused("no :PORT");
  absl::string_view host = value.substr(0, colon);
  int port = 0;
  if (!absl::SimpleAtoi(value.substr(colon + 1), &port) || port < 1 || port > 65535) {
    return refused("the port is not 1-65535");
  }
  if (absl::ConsumePrefix(&host, "[") && !absl::ConsumeSuffix(&host, "]")) {
    return refused("an IPv6 address without its closing ]");
  }
  if (!IsHostOrAddressText(host)) return refused("not a host name or an IP address");
  return absl::OkStatus();
}

EtcdRendezvous::EtcdRendezvous(ElectionOptions options, HostMaster host)
    : options_(std::move(options)),
      host_(host),
      leader_key_(absl::StrCat(options_.etcd.prefix, "/", options_.rendezvous.run_id, "/leader")),
      state_key_(absl::StrCat(options_.etcd.prefix, "/", options_.rendezvous.run_id, "/state")),
      etcd_(options_.etcd) {
  lease_thread_ = std::thread([this] { KeepLeaseAlive(); });
  memory_writer_ = std::thread([this] { WriteMemories(); });
  key_guard_ = std::thread([this] { GuardLeaderKey(); });
  election_ = std::thread([this] { Elect(); });
}

EtcdRendezvous::~EtcdRendezvous() {
  inner_.reset();  // its Bye goes to the leader: this node is gone, not away
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    if (watch_ != nullptr) watch_->TryCancel();
    if (guard_watch_ != nullptr) guard_watch_->TryCancel();
  }
  election_.join();
  memory_writer_.join();
  key_guard_.join();
  if (checker_.joinable()) checker_.join();
  std::unique_ptr<HostedMaster> master;
  int64_t revision;
  bool ended;
  {
    absl::MutexLock lock(&mu_);
    master = std::move(master_);
    revision = leading_revision_;
    ended = run_ended_;
  }
  const absl::Time grace_ends = absl::Now() + options_.rendezvous.settings.keep_alive_interval;
  if (master != nullptr) {
    // An ended run's keys go with it, so that a long-lived etcd does not fill up (the other
    // agents may not have closed their sessions yet); so do the keys of a run every node
    // left (Ctrl-C on each), within the grace the master's shutdown gives their sessions
    // anyway. A run that goes on keeps them for the next leader, with what this one
    // remembered last. The lease is kept alive meanwhile: a lapse would elect another node
    // while this one still decides, and the writes below are fenced by this node's key.
    if (!ended && !EverySessionEnds(*master, options_.rendezvous.run_id, grace_ends)) {
      (void)WriteMemory(revision);
    } else {
      DeleteRunKeys(revision);
    }
  }
  int64_t lease;
  {
    absl::MutexLock lock(&mu_);
    lease_released_ = true;
    if (keep_alive_ != nullptr) keep_alive_->TryCancel();
  }
  lease_thread_.join();
  {
    absl::MutexLock lock(&mu_);
    lease = lease_;
  }
  if (master != nullptr) {
    options_.on_lead(nullptr);
    master->Shutdown(std::max(absl::ZeroDuration(), grace_ends - absl::Now()));
  }
  // The others elect at once, instead of after the lease's TTL.
  if (lease != 0) (void)etcd_.RevokeLease(lease);
}

// Fenced: a node that leads the run now (this one's lease lapsed) keeps its keys, which it
// needs; a plain delete took them from it and it led with no key and no memory.
void EtcdRendezvous::DeleteRunKeys(int64_t revision) {
  const std::string prefix =
      absl::StrCat(options_.etcd.prefix, "/", options_.rendezvous.run_id, "/");
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

void EtcdRendezvous::CloseSession() {
  inner_.reset();  // its Bye goes to the leader: this node is gone, not away
  absl::MutexLock lock(&mu_);
  run_over_ = true;  // a leader that goes now needs no successor from here
}

std::string EtcdRendezvous::store_addr() const {
  if (!target_.empty()) return target_;
  return absl::StrCat("the run's leader, elected in etcd at ",
                      absl::StrJoin(options_.etcd.endpoints, ","));
}

HostedMaster* EtcdRendezvous::hosted_master() {
  absl::MutexLock lock(&mu_);
  return master_.get();
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

// ---- The agent's thread ----

void EtcdRendezvous::FollowLeader() {
  std::string leader;
  {
    absl::MutexLock lock(&mu_);
    leader = leader_;
  }
  if (leader.empty() || leader == target_) return;
  const bool had_session = inner_ != nullptr;
  target_ = leader;
  if (!had_session) {
    NetworkRendezvousOptions options = options_.rendezvous;
    options.endpoint = leader;
    inner_ = std::make_unique<GrpcRendezvous>(options, &events_);
    if (waiting_join_) {
      inner_->Join(*waiting_join_);
      waiting_join_.reset();
    }
    return;
  }
  inner_->Retarget(leader);  // its last report stays, for the resume
  if (asking_back_) {
    // The agent asks for its place back already: the new leader's master is asked now.
    inner_->Join(*asking_back_);
    return;
  }
  // The session with the last leader's master is over (it died or stepped down): the agent
  // takes its master for lost, reconnects (to this leader) and asks for its place back.
  RendezvousEvent moved;
  moved.kind = RendezvousEvent::Kind::kLost;
  moved.status =
      absl::UnavailableError(absl::StrCat("the run's leader moved to ", leader, " (etcd)"));
  events_.Push(std::move(moved));
}

std::vector<RendezvousEvent> EtcdRendezvous::TakeEvents() {
  std::vector<RendezvousEvent> events = events_.Take();
  for (const RendezvousEvent& event : events) {
    using Kind = RendezvousEvent::Kind;
    if (event.kind == Kind::kEnd || event.kind == Kind::kRefused) {
      // This node's run is over: a leader that goes now needs no successor from here.
      absl::MutexLock lock(&mu_);
      run_over_ = true;
      // Ended for every node (not only released from this one): its keys may go.
      if (event.kind == Kind::kEnd && event.outcome != RunOutcome::kReleased) run_ended_ = true;
    }
    if (event.kind != Kind::kLost && event.kind != Kind::kProgress && event.kind != Kind::kReach) {
      asking_back_.reset();  // a master answered
    }
    if (event.kind == Kind::kLost) CheckLeaderGone();
    if (event.kind == Kind::kAssigned && !event.assignment.run_incarnation.empty()) {
      absl::MutexLock lock(&mu_);
      placed_in_run_ = event.assignment.run_incarnation;
    }
  }
  FollowLeader();
  return events;
}

void EtcdRendezvous::Join(const NodeInfo& node) {
  if (node.resume) {
    asking_back_ = node;
  } else {
    asking_back_.reset();
  }
  FollowLeader();
  if (inner_ == nullptr) {
    waiting_join_ = node;  // sent once a leader is known
    return;
  }
  inner_->Join(node);
}

void EtcdRendezvous::Reconnect() {
  std::string leader;
  {
    absl::MutexLock lock(&mu_);
    leader = leader_;
  }
  if (!leader.empty() && leader != target_ && inner_ != nullptr) {
    target_ = leader;
    inner_->Retarget(leader);
    return;
  }
  if (inner_ != nullptr) inner_->Reconnect();
}

void EtcdRendezvous::ReportFailure(int64_t round, std::vector<ReportedFailure> failures) {
  if (inner_ != nullptr) inner_->ReportFailure(round, std::move(failures));
}
void EtcdRendezvous::ReportSuccess(int64_t round) {
  if (inner_ != nullptr) inner_->ReportSuccess(round);
}
void EtcdRendezvous::ReportStopped(int64_t round) {
  if (inner_ != nullptr) inner_->ReportStopped(round);
}
void EtcdRendezvous::Heartbeat() {
  if (inner_ != nullptr) inner_->Heartbeat();
}
void EtcdRendezvous::ReportStacks(int64_t round, int world_size, const std::string& cause,
                                  const std::vector<RankStack>& stacks) {
  if (inner_ != nullptr) inner_->ReportStacks(round, world_size, cause, stacks);
}
void EtcdRendezvous::Leave(const std::string& reason) {
  if (inner_ != nullptr) inner_->Leave(reason);
}
void EtcdRendezvous::ReportRestart(const RestartSplit& split) {
  if (inner_ != nullptr) inner_->ReportRestart(split);
}
void EtcdRendezvous::ReportOutage(int64_t round, absl::Duration lost) {
  if (inner_ != nullptr) inner_->ReportOutage(round, lost);
}
void EtcdRendezvous::CheckReach(const std::string& store) {
  if (inner_ != nullptr) inner_->CheckReach(store);
}

void EtcdRendezvous::CheckProgress() {
  if (inner_ != nullptr) return inner_->CheckProgress();
  RendezvousEvent progress;
  progress.kind = RendezvousEvent::Kind::kProgress;
  std::string problem;
  {
    absl::MutexLock lock(&mu_);
    problem = etcd_problem_;
  }
  if (problem.empty()) {
    progress.detail = "the nodes are electing the run's leader in etcd";
  } else {
    progress.status = absl::UnavailableError("etcd does not answer");
    progress.detail = absl::StrCat("no leader yet: ", problem);
  }
  events_.Push(std::move(progress));
}

void EtcdRendezvous::CheckLeaderGone() {
  if (checking_.exchange(true)) return;  // one look at a time
  if (checker_.joinable()) checker_.join();
  std::string leader;
  int64_t lease;
  {
    absl::MutexLock lock(&mu_);
    leader = leader_;
    lease = leader_lease_;
  }
  if (leader.empty() || leader == options_.self || lease == 0) {
    checking_ = false;
    return;
  }
  checker_ = std::thread([this, leader, lease] {
    // A killed agent's kernel closes its sessions' sockets, then its store's listening one:
    // a first look a moment later, and two more while the port still listens.
    for (absl::Duration after :
         {absl::Milliseconds(20), absl::Milliseconds(250), absl::Seconds(1)}) {
      Pause(after);
      {
        absl::MutexLock lock(&mu_);
        if (stopping_ || leader_ != leader) break;  // ending, or a new leader is known
      }
      // Refused: nothing listens on the leader's store port, which its agent holds for its
      // whole life: the agent is gone, and its lease need not run out before another leads.
      const EndpointReach reach = ProbeEndpoint(leader, kLeaderLook);
      if (reach.kind == EndpointReach::Kind::kRefused) {
        spdlog::warn(
            "run '{}': its leader at {} is gone (nothing listens there any more: {}); its etcd "
            "lease is revoked so that another node leads now",
            options_.rendezvous.run_id, leader, reach.detail);
        (void)etcd_.RevokeLease(lease);
        break;
      }
      if (reach.kind != EndpointReach::Kind::kListens) {
        // Its host is out of reach: the etcd member this node watches through may be on it,
        // or behind the same cut, and would never say that the leader's key went. Watch
        // through another member.
        absl::MutexLock lock(&mu_);
        if (watch_ != nullptr) watch_->TryCancel();
        break;
      }
    }
    checking_ = false;
  });
}

// ---- The election thread ----

void EtcdRendezvous::Pause(absl::Duration d) {
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithTimeout(absl::Condition(&stopping_), d);
}

void EtcdRendezvous::PauseLease(absl::Duration d) {
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithTimeout(absl::Condition(&lease_released_), d);
}

void EtcdRendezvous::Said(const absl::Status& problem) {
  std::string was;
  {
    absl::MutexLock lock(&mu_);
    was = etcd_problem_;
    etcd_problem_ = problem.ok() ? "" : absl::StrCat(problem.message(), TlsHint(problem));
  }
  if (problem.ok()) {
    if (!was.empty()) spdlog::warn("etcd answers again");
    return;
  }
  if (Refusal(problem)) {
    RendezvousEvent refused;
    refused.kind = RendezvousEvent::Kind::kRefused;
    refused.status = absl::PermissionDeniedError(
        absl::StrCat(problem.message(),
                     "; check --rdzv-conf etcd_user and etcd_password_file (authentication), or "
                     "protocol, cacert, cert and key (TLS)"));
    events_.Push(std::move(refused));
    absl::MutexLock lock(&mu_);
    stopping_ = true;  // nothing more to try
    return;
  }
  if (was.empty()) {
    spdlog::warn(
        "etcd does not answer ({}): this node asks again and again; workers that run go on, and "
        "the run's membership waits until etcd answers{}",
        std::string(problem.message()), TlsHint(problem));
  }
}

// Over TLS, an etcd that asks for client certificates and does not trust this node's closes
// the connection once the handshake is over: gRPC says only that the read failed, or that
// the connection was reset, as the timing goes.
std::string EtcdRendezvous::TlsHint(const absl::Status& problem) const {
  const absl::string_view m = problem.message();
  if (!options_.etcd.https || options_.etcd.cert_pem.empty() ||
      (!absl::StrContains(m, "Endpoint read failed") && !absl::StrContains(m, "Socket closed") &&
       !absl::StrContains(m, "Connection reset by peer"))) {
    return "";
  }
  return "; over TLS, a connection etcd closes like this is often a client certificate it does "
         "not trust: check --rdzv-conf cert and key against etcd's --trusted-ca-file";
}

void EtcdRendezvous::SetLeader(const std::string& address) {
  {
    absl::MutexLock lock(&mu_);
    if (leader_ == address) return;
    leader_ = address;
  }
  if (!address.empty()) {
    spdlog::info("run '{}': its leader's rendezvous master is at {} (etcd)",
                 options_.rendezvous.run_id, address);
  }
  events_.Wake();
}

void EtcdRendezvous::FollowLeaderKey(const std::string& value) {
  const absl::Status bad = CheckLeaderAddress(value);
  if (bad.ok()) return SetLeader(value);
  bool said;
  {
    absl::MutexLock lock(&mu_);
    said = refused_leader_ == value;
    refused_leader_ = value;
  }
  if (!said) {
    spdlog::error(
        "run '{}': etcd's key {} is not the work of ddprun: {}; this node follows no leader until "
        "it holds one (whoever may write {} in etcd wrote it: docs/security.md#etcd-v3)",
        options_.rendezvous.run_id, leader_key_, std::string(bad.message()), options_.etcd.prefix);
  }
  SetLeader("");
}

bool EtcdRendezvous::LeaseHeld() {
  // A margin before the TTL runs out: etcd counts it from when the renewal reached it, which
  // is after it was sent, but a leader that stops at the last moment would still be stopping.
  const absl::Duration margin = std::min(options_.etcd.lease_ttl / 10, absl::Milliseconds(500));
  absl::MutexLock lock(&mu_);
  const absl::Time now = MonotonicNow();
  if (lease_ != 0 && keep_alive_ != nullptr && now > renewed_ + options_.etcd.lease_ttl / 2 &&
      now > nudged_ + options_.etcd.lease_ttl / 4) {
    // No renewal for half the TTL: the member it talks to went silent (frozen, cut off). The
    // keep-alive is ended so that it asks another member, before the lease runs out.
    keep_alive_->TryCancel();
    nudged_ = now;
  }
  return lease_ != 0 && now < renewed_ + options_.etcd.lease_ttl - margin;
}

bool EtcdRendezvous::EnsureLease() {
  if (LeaseHeld()) return true;
  const absl::Time asked = MonotonicNow();
  absl::StatusOr<int64_t> lease = etcd_.GrantLease(options_.etcd.lease_ttl);
  Said(lease.status());
  if (!lease.ok()) return false;
  absl::MutexLock lock(&mu_);
  lease_ = *lease;
  renewed_ = asked;
  return true;
}

void EtcdRendezvous::RevokeStaleLease() {
  int64_t stale;
  {
    absl::MutexLock lock(&mu_);
    stale = stale_lease_;
  }
  if (stale == 0) return;
  const absl::Status revoked = etcd_.RevokeLease(stale);
  // Revoked, or gone already (NotFound): either way etcd answered.
  if (absl::IsUnavailable(revoked) || absl::IsDeadlineExceeded(revoked)) return;
  absl::MutexLock lock(&mu_);
  if (stale_lease_ == stale) stale_lease_ = 0;
}

void EtcdRendezvous::Elect() {
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      if (stopping_ || run_over_) return;  // no leader needed: the run is over here
    }
    RevokeStaleLease();
    // A read first: once a leader is elected, a node that starts or comes back follows it
    // without a lease and a transaction, which etcd would have to commit (4,000 agents
    // starting at once: 2 s less, docs/performance.md).
    absl::StatusOr<EtcdClient::Read> read = etcd_.Get(leader_key_);
    Said(read.status());
    if (!read.ok()) {
      Pause(kRetry);
      continue;
    }
    if (read->value) {
      {
        absl::MutexLock lock(&mu_);
        leader_lease_ = read->value->lease;
      }
      FollowLeaderKey(read->value->value);
      WatchLeader(read->revision + 1);
      continue;
    }
    if (!EnsureLease()) {
      Pause(kRetry);
      continue;
    }
    int64_t lease;
    {
      absl::MutexLock lock(&mu_);
      lease = lease_;
    }
    absl::StatusOr<EtcdClient::Campaign> campaign =
        etcd_.CreateUnlessPresent(leader_key_, options_.self, lease);
    Said(campaign.status());
    if (!campaign.ok()) {
      Pause(kRetry);
      continue;
    }
    {
      absl::MutexLock lock(&mu_);
      leader_lease_ = campaign->holder.lease;
    }
    if (campaign->won) {
      Lead(campaign->holder.create_revision);
    } else {
      // Another node won the race: a follower needs no lease (it takes one to campaign).
      {
        absl::MutexLock lock(&mu_);
        if (lease_ == lease) lease_ = 0;
      }
      (void)etcd_.RevokeLease(lease);
      FollowLeaderKey(campaign->holder.value);
      WatchLeader(campaign->revision + 1);
    }
  }
}

// What the run's last leader remembered (RunMemory), for this node's master to take over:
// only when it is of the run a master placed this node in. Another run of this id (one
// that never ended cleanly: every node killed) left the rest; the new master overwrites it.
std::optional<RunMemory> EtcdRendezvous::RecallMemory() {
  absl::StatusOr<EtcdClient::Read> read = etcd_.Get(state_key_);
  if (!read.ok() || !read->value) return std::nullopt;  // none yet, or etcd went: start afresh
  absl::StatusOr<RunMemory> memory = RunMemoryFromBytes(read->value->value);
  if (!memory.ok()) {
    spdlog::warn("run '{}': ignored what its last leader left in etcd at {}: {}",
                 options_.rendezvous.run_id, state_key_, std::string(memory.status().message()));
    return std::nullopt;
  }
  std::string placed_in;
  {
    absl::MutexLock lock(&mu_);
    placed_in = placed_in_run_;
  }
  if (memory->run_incarnation.empty() || memory->run_incarnation != placed_in) {
    spdlog::warn(
        "run '{}': etcd holds another run's state at {} (run {}, {} restarts spent, {} nodes' "
        "records), which this node {}: not taken over; this run starts with its whole budget. "
        "An earlier job of this --rdzv-id that did not end (every node killed) left it; a "
        "new --rdzv-id per job keeps jobs apart",
        options_.rendezvous.run_id, state_key_,
        memory->run_incarnation.empty() ? "unstamped" : memory->run_incarnation,
        memory->restarts_spent, memory->nodes.size(),
        placed_in.empty() ? "was never placed in a round of" : "was not in");
    return std::nullopt;
  }
  return *std::move(memory);
}

// Writes what the master remembered last, if it has not been, while this node's election
// holds (the transaction compares the leader key's revision): false when it no longer does.
bool EtcdRendezvous::WriteMemory(int64_t revision) {
  std::string bytes;
  int64_t version;
  {
    absl::MutexLock lock(&memory_mu_);
    if (memory_version_ == written_version_) return true;
    bytes = memory_;
    version = memory_version_;
  }
  absl::StatusOr<bool> written = etcd_.PutIfFenced(leader_key_, revision, state_key_, bytes);
  Said(written.status());
  if (!written.ok()) return true;  // etcd did not answer: the next look tries again
  if (!*written) return false;
  absl::MutexLock lock(&memory_mu_);
  written_version_ = version;
  return true;
}

// The memory writer's thread: etcd calls that may wait (2 s a member) never hold up the
// lease's watch in Lead(). A write is fenced by the election it was made for, so one that
// comes late after a step-down changes nothing.
void EtcdRendezvous::WriteMemories() {
  for (;;) {
    int64_t revision;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      revision = leading_revision_;
    }
    bool pending;
    {
      absl::MutexLock lock(&memory_mu_);
      pending = memory_version_ != written_version_;
    }
    if (revision == 0 || !pending) {
      Pause(absl::Milliseconds(100));
      continue;
    }
    if (!WriteMemory(revision)) {
      absl::MutexLock lock(&mu_);
      if (leading_revision_ == revision) fence_lost_ = true;
    }
    Pause(absl::Milliseconds(100));
  }
}

void EtcdRendezvous::Lead(int64_t revision) {
  MasterOptions master_options = options_.master;
  master_options.recalled = RecallMemory();
  master_options.remember = [this](const std::string&, const RunMemory& memory) {
    absl::MutexLock lock(&memory_mu_);
    memory_ = RunMemoryToBytes(memory);
    ++memory_version_;
  };
  absl::StatusOr<std::unique_ptr<HostedMaster>> master = host_(master_options);
  if (!master.ok()) {
    spdlog::error("this node was elected the leader of run '{}' but cannot host its master: {}",
                  options_.rendezvous.run_id, std::string(master.status().message()));
    // Another node leads instead: with this lease revoked, the key goes at once.
    int64_t lease;
    {
      absl::MutexLock lock(&mu_);
      lease = std::exchange(lease_, 0);
    }
    (void)etcd_.RevokeLease(lease);
    return Pause(kRetry);
  }
  options_.on_lead(master->get());
  {
    absl::MutexLock lock(&mu_);
    master_ = std::move(*master);
    leading_revision_ = revision;
    fence_lost_ = false;
    fence_why_.clear();
  }
  spdlog::info(
      "this node leads run '{}' (etcd revision {}): it hosts the rendezvous master at {}{}",
      options_.rendezvous.run_id, revision, options_.self,
      master_options.recalled
          ? absl::StrCat(", with what the last leader remembered (",
                         master_options.recalled->nodes.size(), " nodes' records, ",
                         master_options.recalled->restarts_spent, " restarts spent)")
          : "");
  SetLeader(options_.self);
  // Lead while the lease holds: the lease thread renews it.
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;  // the destructor ends the master
    }
    if (!LeaseHeld()) break;
    bool fence_lost;
    std::string why;
    {
      absl::MutexLock lock(&mu_);
      fence_lost = std::exchange(fence_lost_, false);
      why = fence_why_;
    }
    if (fence_lost) {
      return StepDown(absl::StrCat("its election is over: ", leader_key_,
                                   why.empty() ? " is not the key it created any more" : why));
    }
    Pause(std::min(options_.etcd.lease_ttl / 10, absl::Milliseconds(200)));
  }
  absl::Time renewed;
  {
    absl::MutexLock lock(&mu_);
    renewed = renewed_;
  }
  StepDown(renewed == absl::InfinitePast()
               ? std::string("etcd let its lease expire")
               : absl::StrCat("etcd has not renewed its lease for ",
                              absl::FormatDuration(
                                  absl::Trunc(MonotonicNow() - renewed, absl::Milliseconds(1)))));
}

void EtcdRendezvous::StepDown(const std::string& why) {
  std::unique_ptr<HostedMaster> master;
  {
    absl::MutexLock lock(&mu_);
    master = std::move(master_);
    leading_revision_ = 0;
    // Expired here, maybe not in etcd (without a quorum, etcd lets no lease run out): it is
    // revoked once etcd answers, so that the key goes then and not a TTL later.
    stale_lease_ = std::exchange(lease_, 0);
    // Its keep-alive may wait on a member that went silent: the next one asks another.
    if (keep_alive_ != nullptr) keep_alive_->TryCancel();
    if (guard_watch_ != nullptr) guard_watch_->TryCancel();
  }
  spdlog::warn(
      "this node no longer leads run '{}' ({}): its rendezvous master stops, and the nodes that "
      "reach etcd elect another; the workers go on",
      options_.rendezvous.run_id, why);
  options_.on_lead(nullptr);
  SetLeader("");
  if (master != nullptr) master->Shutdown(absl::ZeroDuration());
  // The agent may still read the stopped master (ServeWhileOthersRun): keep it until the end.
  absl::MutexLock lock(&mu_);
  master_.reset();
  retired_.push_back(std::move(master));
}

void EtcdRendezvous::WatchLeader(int64_t from_revision) {
  grpc::ClientContext context;
  if (absl::Status s = etcd_.PrepareStream(context); !s.ok()) {
    Said(s);
    return Pause(kRetry);
  }
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    watch_ = &context;
  }
  const std::string endpoint = etcd_.endpoint();
  std::shared_ptr<grpc::Channel> channel = etcd_.channel();
  auto stub = pb::Watch::NewStub(channel);
  auto stream = stub->Watch(&context);
  pb::WatchRequest request;
  request.mutable_create_request()->set_key(leader_key_);
  request.mutable_create_request()->set_start_revision(from_revision);
  bool deleted = false;
  if (stream->Write(request)) {
    pb::WatchResponse response;
    while (!deleted && stream->Read(&response)) {
      if (response.canceled()) break;
      for (const auto& event : response.events()) {
        deleted = event.type() == mvccpb::Event::DELETE;  // the last event is what holds
        if (event.type() == mvccpb::Event::PUT) {
          {
            absl::MutexLock lock(&mu_);
            leader_lease_ = event.kv().lease();
          }
          FollowLeaderKey(event.kv().value());
        }
      }
    }
  }
  {
    absl::MutexLock lock(&mu_);
    watch_ = nullptr;
  }
  context.TryCancel();
  const grpc::Status ended = stream->Finish();
  etcd_.StreamEnded(ended);
  if (deleted) {
    bool over;
    {
      absl::MutexLock lock(&mu_);
      over = run_over_;
      if (over) stopping_ = true;  // nothing to elect a leader for
    }
    if (over) return;
    spdlog::warn("run '{}': its leader left (its etcd key is gone): electing another",
                 options_.rendezvous.run_id);
    SetLeader("");
    return;
  }
  // The member went away or lost its quorum: the next campaign asks another.
  etcd_.PassOver(endpoint);
  if (!ended.ok() && ended.error_code() != grpc::StatusCode::CANCELLED) {
    Said(absl::UnavailableError(absl::StrCat("etcd at ", endpoint, ": ", ended.error_message())));
  }
  Pause(kRetry);
}

// ---- The key guard's thread ----

// While this node leads, its leader key is watched: nothing of ddprun's rewrites it, so any
// change (deleted, overwritten with another address) was made by someone else, and another
// node may lead by now or the others follow another address. The leader steps down at once
// rather than serve a round beside another master until its lease runs out.
void EtcdRendezvous::GuardLeaderKey() {
  for (;;) {
    int64_t revision;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      revision = leading_revision_;
    }
    if (revision == 0) {
      Pause(absl::Milliseconds(50));
      continue;
    }
    const std::string changed = WatchOwnKey(revision);
    absl::MutexLock lock(&mu_);
    if (changed.empty() || leading_revision_ != revision) continue;
    fence_lost_ = true;
    fence_why_ = changed;
    // One notice per election: wait until Lead() has stepped down.
    const auto over = [this, revision]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return stopping_ || leading_revision_ != revision;
    };
    mu_.Await(absl::Condition(&over));
  }
}

// What happened to the key created at `revision` (" was deleted", ...), or "" when the watch
// ended without an event (the member went, the leadership ended).
std::string EtcdRendezvous::WatchOwnKey(int64_t revision) {
  grpc::ClientContext context;
  if (absl::Status s = etcd_.PrepareStream(context); !s.ok()) {
    Pause(kRetry);
    return "";
  }
  {
    absl::MutexLock lock(&mu_);
    if (stopping_ || leading_revision_ != revision) return "";
    guard_watch_ = &context;
  }
  const std::string endpoint = etcd_.endpoint();
  auto stream = pb::Watch::NewStub(etcd_.channel())->Watch(&context);
  pb::WatchRequest request;
  request.mutable_create_request()->set_key(leader_key_);
  request.mutable_create_request()->set_start_revision(revision + 1);
  std::string changed;
  if (stream->Write(request)) {
    pb::WatchResponse response;
    while (changed.empty() && stream->Read(&response)) {
      if (response.canceled()) break;
      for (const auto& event : response.events()) {
        changed = event.type() == mvccpb::Event::DELETE
                      ? std::string(" was deleted (not by ddprun)")
                      : absl::StrCat(" was overwritten (not by ddprun) with '",
                                     Shown(event.kv().value()), "'");
      }
    }
  }
  {
    absl::MutexLock lock(&mu_);
    guard_watch_ = nullptr;
  }
  context.TryCancel();
  const grpc::Status ended = stream->Finish();
  etcd_.StreamEnded(ended);
  if (!changed.empty()) return changed;
  bool still_leading;
  {
    absl::MutexLock lock(&mu_);
    still_leading = !stopping_ && leading_revision_ == revision;
  }
  if (still_leading) {
    etcd_.PassOver(endpoint);  // the member went away or lost its quorum: watch through another
    Pause(kRetry);
  }
  return "";
}

// ---- The lease thread ----

void EtcdRendezvous::KeepLeaseAlive() {
  for (;;) {
    int64_t lease;
    {
      absl::MutexLock lock(&mu_);
      if (lease_released_) return;
      lease = lease_;
    }
    if (lease == 0) {
      PauseLease(absl::Milliseconds(50));
      continue;
    }
    grpc::ClientContext context;
    if (!etcd_.PrepareStream(context).ok()) {
      PauseLease(kRetry);
      continue;
    }
    {
      absl::MutexLock lock(&mu_);
      if (lease_released_) return;
      keep_alive_ = &context;
    }
    const std::string endpoint = etcd_.endpoint();
    auto stub = pb::Lease::NewStub(etcd_.channel());
    auto stream = stub->LeaseKeepAlive(&context);
    pb::LeaseKeepAliveRequest request;
    request.set_id(lease);
    pb::LeaseKeepAliveResponse response;
    bool failed = false;
    for (;;) {
      const absl::Time sent = MonotonicNow();
      if (!stream->Write(request) || !stream->Read(&response)) {
        failed = true;
        break;
      }
      absl::MutexLock lock(&mu_);
      if (lease_ != lease) break;  // a new lease: a new stream
      if (response.ttl() <= 0) {
        // etcd let it expire: a leader steps down; a node that campaigns takes a new one.
        renewed_ = absl::InfinitePast();
        lease_ = 0;
        break;
      }
      renewed_ = sent;
      mu_.AwaitWithTimeout(absl::Condition(&lease_released_), options_.etcd.lease_ttl / 3);
      if (lease_released_) break;
    }
    {
      absl::MutexLock lock(&mu_);
      keep_alive_ = nullptr;
    }
    context.TryCancel();
    const grpc::Status finished = stream->Finish();
    etcd_.StreamEnded(finished);
    if (failed) {
      spdlog::debug("etcd lease keep-alive on {} ended: {}", endpoint, finished.error_message());
      etcd_.PassOver(endpoint);  // the member went away or lost its quorum
      PauseLease(absl::Milliseconds(100));
    }
  }
}

}  // namespace ddprun
