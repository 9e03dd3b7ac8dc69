#pragma once
// ElectionExecutor: what every elected backend's side of a node shares (docs/architecture.md,
// "an elected backend"). LeaderElection (rendezvous/leader_election.h) decides when to read,
// campaign, lead, step down and revoke; this runs its actions on one thread, feeds the
// answers back with what the agent and the store's streams posted meanwhile, hosts the
// master while this node leads (with what the last leader remembered) and follows the
// leader's (LeaderFollower). A backend is a subclass that makes the store's calls: its
// constructor ends with Begin(), its destructor starts with End().

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "net/leader_follower.h"
#include "rendezvous/leader_election.h"

namespace ddprun {

class ElectionExecutor : public LeaderFollower {
 public:
  /// Starts the master this node hosts while it leads (the plugin's host_master).
  using HostMaster = absl::StatusOr<std::unique_ptr<HostedMaster>> (*)(const MasterOptions&);

  HostedMaster* hosted_master() override { return hosting_.load(); }

 protected:
  /// What the backend says of its store, in messages.
  struct StoreNames {
    std::string name;        // "etcd"
    std::string where;       // "etcd at a:2379,b:2379"
    std::string memory_key;  // where the leader keeps what its master remembers
  };
  ElectionExecutor(ElectionOptions options, HostMaster host, ElectionSettings election,
                   StoreNames store);
  ~ElectionExecutor() override;

  /// Starts the election's thread: the subclass's constructor's last call.
  void Begin();
  /// Leaves the election, the subclass's destructor's first call: this node's session ends;
  /// what was posted is taken in; a leader whose run ended (or every node left) removes the
  /// run's keys, else keeps its last memory there for the next; the lease is revoked, so
  /// that the others elect at once rather than after its TTL.
  void End();

  /// Runs `input` on the election's thread.
  void Post(std::function<void()> input);
  /// The rules: on the election's thread (and End's) only.
  LeaderElection& election() { return election_; }
  const ElectionOptions& options() const { return options_; }

  // The store's calls, made on the election's thread (End's, once it is over).
  virtual absl::StatusOr<LeaderElection::Read> ReadLeader() = 0;
  virtual absl::StatusOr<int64_t> GrantLease() = 0;
  /// Creates the key, this node's address bound to `lease`, unless it is there.
  virtual absl::StatusOr<LeaderElection::Campaign> Campaign(int64_t lease) = 0;
  /// Watches the key from `revision` on as watch `id`, ending any other; what it sees is
  /// posted as election().KeyChanged(id, ...) and WatchEnded(id, ...).
  virtual void Watch(int64_t id, int64_t revision) = 0;
  /// The watch's member may be cut off: end it (its end passes that member over).
  virtual void SwitchWatch() = 0;
  virtual void StopWatch() = 0;
  /// Renews `lease` from now on (0: none; the same lease again: through another member);
  /// each renewal is posted as election().LeaseRenewed.
  virtual void KeepAlive(int64_t lease) = 0;
  /// No renewal any more (End, after the leader's last fenced writes).
  virtual void StopKeepAlive() = 0;
  virtual absl::Status Revoke(int64_t lease) = 0;
  /// Writes `memory` under the memory key if the leader key's create revision is still
  /// `revision` (this node leads), giving up at `until`; false: it is not.
  virtual absl::StatusOr<bool> WriteMemory(int64_t revision, const std::string& memory,
                                           absl::Time until) = 0;
  /// What the memory key holds; none: nothing.
  virtual absl::StatusOr<std::optional<std::string>> ReadMemory() = 0;
  /// Removes every key of the run if this node's leader key (`revision`) still is; says
  /// what it did.
  virtual void RemoveRunKeys(int64_t revision) = 0;
  /// What to check when the store refuses this node ("check --rdzv-conf ...").
  virtual std::string RefusedHint() const = 0;

 private:
  void MasterLost() override;
  void RunOver(bool ended_for_all) override;
  void PlacedIn(const std::string& incarnation) override;
  void CheckElection() override;

  // The election's thread.
  void Run();
  void Execute(const ElectionAction& action);
  void Host();
  void StepDown();
  std::optional<RunMemory> RecallMemory();
  void LeaveAsLeader(HostedMaster& master, absl::Time grace_ends);

  const ElectionOptions options_;
  const HostMaster host_;
  const StoreNames store_;

  // The election's thread only (End's once it is over).
  LeaderElection election_;
  std::unique_ptr<HostedMaster> master_;  // while this node leads
  // Masters of an earlier leadership, stopped: hosted_master()'s caller may still read one.
  std::vector<std::unique_ptr<HostedMaster>> retired_;
  std::string memory_;  // what the master remembered last (RunMemory's bytes)
  int64_t memory_version_ = 0;
  bool run_ended_ = false;  // the agent was told the run ended for all: its keys may go
  // The run (its incarnation) a master last placed this node in: the store's memory is
  // taken over only when it is that run's.
  std::string placed_in_run_;
  std::atomic<HostedMaster*> hosting_{nullptr};

  absl::Mutex mu_;
  std::deque<std::function<void()>> inbox_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace ddprun
