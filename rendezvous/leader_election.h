#pragma once
// LeaderElection: the rules by which the nodes of an elected backend's run choose the leader
// that hosts its rendezvous master (docs/architecture.md, LeaderElection), built like
// RoundStateMachine and AgentStateMachine. Pure: a backend's executor runs the actions against
// its store, feeds back what it answered with monotonic time, and calls Tick at NextDeadline();
// tests drive it with a fake clock (tests/testdata/election/*.txt).
//
//   reading --(key held)--> following --(key deleted)--> reading
//      |  ^                                                 ^
//      |  +--(lost the race)-- campaigning                  |
//      +--(no key)--> (a lease) campaigning --(won, hosted)--> leading
//   leading --(lease not renewed in time, the key changed, a fenced write refused)--> reading
//   any --(the store refused this node; the run over and no leader needed)--> over
//
// The store speaks of a key, a lease bound to it, and revisions, which a Kubernetes Lease or
// a Consul session also have. Every call is answered before the
// next is made (one executor thread); the watch and the lease's renewals run beside them.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/log_level.h"

namespace ddprun {

enum class ElectionRole { kReading, kFollowing, kCampaigning, kLeading, kOver };
const char* ElectionRoleName(ElectionRole role);

struct ElectionSettings {
  std::string run_id;  // for messages
  std::string self;    // "host:port": where this node's master serves while it leads
  // For messages: the store's name, the leader key, the prefix of every run's keys, and the
  // page that says who may write them.
  std::string store;
  std::string key;
  std::string prefix;
  std::string security_doc;
  // How long the leader holds its place after it stops renewing it.
  absl::Duration lease_ttl = absl::Seconds(5);
  absl::Duration retry = absl::Milliseconds(250);  // after a call the store did not answer
  // The least time between two writes of the master's memory (they coalesce meanwhile).
  absl::Duration memory_every = absl::Milliseconds(100);
};

/// The leader key as the store holds it.
struct LeaderKey {
  std::string value;            // the leader's master, "host:port"
  int64_t lease = 0;            // the lease it is bound to
  int64_t create_revision = 0;  // the election's fence
};

struct ElectionAction {
  enum class Kind {
    kRead,             // read the leader key; answer LeaderRead
    kGrantLease,       // a lease of lease_ttl; answer LeaseGranted
    kCampaign,         // create the key = self, bound to `lease`, unless present; Campaigned
    kHost,             // host the master, fenced by `revision`; answer Hosted
    kStepDown,         // stop the hosted master; `text` says why
    kWatch,            // watch the key from `revision` on (watch `watch`), ending any other
    kSwitchWatch,      // the watch's member may be cut off: end it, watch through another
    kKeepAlive,        // keep `lease` alive (0: keep none); renewals answer LeaseRenewed
    kSwitchKeepAlive,  // no renewal for half the TTL: renew through another member
    kRevoke,           // revoke `lease`; answer Revoked
    kWriteMemory,      // the master's memory `version`, fenced by `revision`, before
                       // `deadline`; answer MemoryWritten
    kProbeLeader,      // does anything listen at `address`? answer LeaderProbed
    kFollow,           // the agent's master is at `address` ("": none known now)
    kRefused,          // the store refused this node: the agent is told `text`
    kLog,              // `text` at `level`
  };
  Kind kind = Kind::kLog;
  int64_t lease = 0;
  int64_t revision = 0;
  int64_t watch = 0;
  int64_t version = 0;
  absl::Time deadline = absl::InfiniteFuture();
  std::string address;
  LogLevel level{};
  std::string text;
};

/// OK when `value`, read from a leader key, is "host:port" ("[v6]:port"): bounded, printable.
/// Else InvalidArgument with a printable, shortened copy of it.
absl::Status CheckLeaderAddress(absl::string_view value);

class LeaderElection {
 public:
  /// What the store answered to a read of the leader key.
  struct Read {
    std::optional<LeaderKey> key;
    int64_t revision = 0;
  };
  struct Campaign {
    bool won = false;
    LeaderKey holder;  // the key after the call: this node's, or the one there before
    int64_t revision = 0;
  };
  /// What a watch saw happen to the key.
  struct KeyChange {
    bool deleted = false;
    LeaderKey key;  // when put
  };
  /// What answered at the leader's address.
  enum class Reach { kListens, kRefused, kUnreachable };

  explicit LeaderElection(ElectionSettings settings);

  void Start(absl::Time now);
  // Answers to the calls.
  void LeaderRead(const absl::StatusOr<Read>& read, absl::Time now);
  void LeaseGranted(const absl::StatusOr<int64_t>& lease, absl::Time asked, absl::Time now);
  void Campaigned(const absl::StatusOr<Campaign>& campaign, absl::Time now);
  /// `recalled`: what the master took over from the last leader, in words ("" nothing).
  void Hosted(const absl::Status& hosted, const std::string& recalled, absl::Time now);
  void Revoked(int64_t lease, const absl::Status& revoked, absl::Time now);
  void MemoryWritten(int64_t version, const absl::StatusOr<bool>& fenced, absl::Time now);
  void LeaderProbed(const std::string& address, Reach reach, const std::string& detail,
                    absl::Time now);
  // What the streams saw.
  void KeyChanged(int64_t watch, const KeyChange& change, absl::Time now);
  /// `why`: OK when it was ended (cancelled, or by the store), else what failed.
  void WatchEnded(int64_t watch, const absl::Status& why, absl::Time now);
  /// A renewal of `lease` sent at `sent` was answered; `expired`: the store let it run out.
  void LeaseRenewed(int64_t lease, absl::Time sent, bool expired, absl::Time now);
  // What the agent saw.
  void MemoryChanged(int64_t version, absl::Time now);  // the master remembered more
  void MasterLost(absl::Time now);                      // its session with the leader's master
  void RunOver(absl::Time now);                         // this node needs no leader any more
  void Tick(absl::Time now);

  std::vector<ElectionAction> TakeActions();
  absl::Time NextDeadline() const;

  ElectionRole role() const { return role_; }
  /// Why the store does not answer, while it does not ("" when it does).
  const std::string& problem() const { return problem_; }
  int64_t lease() const { return lease_; }
  int64_t leading_revision() const { return role_ == ElectionRole::kLeading ? revision_ : 0; }

 private:
  void Elect(absl::Time now);  // reading: a stale lease revoked first, then the key read
  void Follow(const LeaderKey& key, int64_t watch_from);
  void FollowValue(const std::string& value);  // the key's value, checked
  void FollowAddress(const std::string& address);
  void Watch(int64_t from);
  void KeepAlive(int64_t lease);
  void StepDown(const std::string& why, absl::Time now);
  void Retry(absl::Time now);
  // Every answer passes here: whether the store answered; false when it did not.
  bool Answered(const absl::Status& status);
  bool LeaseHeld(absl::Time now) const;
  absl::Time LeaseEnds() const;
  void MaybeWriteMemory(absl::Time now);
  void Emit(ElectionAction action) { actions_.push_back(std::move(action)); }
  void Log(LogLevel level, std::string text);

  const ElectionSettings settings_;
  ElectionRole role_ = ElectionRole::kReading;
  std::vector<ElectionAction> actions_;
  std::string problem_;
  bool run_over_ = false;
  absl::Time retry_at_ = absl::InfiniteFuture();

  // The lease this node campaigns and leads with; when its last renewal was sent.
  int64_t lease_ = 0;
  absl::Time renewed_ = absl::InfinitePast();
  absl::Time nudged_ = absl::InfinitePast();
  int64_t stale_lease_ = 0;  // led with, expired here: revoked once the store answers

  std::string leader_;         // the address followed; "" none
  int64_t leader_lease_ = 0;   // the lease the leader's key is bound to
  std::string refused_value_;  // the last invalid key value, said once
  int64_t watch_ = 0;          // the current watch; 0 none
  int64_t watches_ = 0;        // how many were opened: each its own number
  int64_t revision_ = 0;       // while leading: the election's fence

  // The master's memory while leading: the newest version, the one in the store.
  int64_t memory_version_ = 0;
  int64_t written_version_ = 0;
  bool writing_ = false;
  absl::Time write_at_ = absl::InfinitePast();

  // A look at a leader whose master was lost: is its agent gone?
  struct Probe {
    std::string address;
    int64_t lease = 0;
    int step = 0;
    absl::Time at;
  };
  std::optional<Probe> probe_;
};

}  // namespace ddprun
