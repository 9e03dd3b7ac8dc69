#pragma once
// EtcdRendezvous: the etcd-v3 backend's side of a node (docs/etcd.md). The nodes of a run
// elect its leader in etcd: a key under the run's prefix, created in a transaction and bound
// to the creator's lease. The leader hosts the rendezvous master (the one RoundStateMachine of
// the run) on its workers' store port; every node, the leader too, is that master's client
// (LeaderFollower). When the leader dies or is cut off, its lease expires, its key goes, the
// others see it go (a watch, not polling) and elect another.
//
// When to campaign, lead, step down and revoke is LeaderElection's (rendezvous/leader_
// election.h); this is its executor. One thread runs the election's actions against etcd and
// feeds the answers back, with what the streams and the agent posted meanwhile; one keeps the
// lease alive, so that a call that waits on a silent member never delays a renewal. The watch
// runs on gRPC's threads and posts what it sees.

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "net/etcd_client.h"
#include "net/leader_follower.h"
#include "rendezvous/leader_election.h"

namespace ddprun {

class EtcdRendezvous : public LeaderFollower {
 public:
  /// `host`: starts the master this node hosts while it leads (the plugin's host_master).
  using HostMaster = absl::StatusOr<std::unique_ptr<HostedMaster>> (*)(const MasterOptions&);
  EtcdRendezvous(ElectionOptions options, HostMaster host);
  /// Leaves the election: a leader whose run has ended removes the run's keys; the lease is
  /// revoked, so that the others elect at once rather than after its TTL.
  ~EtcdRendezvous() override;

  HostedMaster* hosted_master() override { return hosting_.load(); }

 private:
  void MasterLost() override;
  void RunOver(bool ended_for_all) override;
  void PlacedIn(const std::string& incarnation) override;
  void CheckElection() override;

  // Runs `input` on the election's thread.
  void Post(std::function<void()> input);
  // The election's thread.
  void Run();
  void Execute(const ElectionAction& action);
  void Watch(const ElectionAction& action);
  void Host();
  void StepDown();
  std::optional<RunMemory> RecallMemory();
  // The lease's thread.
  void KeepLeaseAlive();
  void KeepAlive(int64_t lease);  // 0: none; the same lease: through another member
  // The destructor, once the election's thread is over.
  void LeaveAsLeader(HostedMaster& master, absl::Time grace_ends);

  const ElectionOptions options_;
  const EtcdSettings settings_;  // options_.backend's
  const HostMaster host_;
  const std::string leader_key_;  // <prefix>/<run id>/leader
  const std::string state_key_;   // <prefix>/<run id>/state: the leader's RunMemory
  EtcdClient etcd_;

  // The election's thread only (the destructor's once it is over).
  LeaderElection election_;
  std::unique_ptr<EtcdWatch> watch_;
  int64_t watch_id_ = 0;
  std::unique_ptr<HostedMaster> master_;  // while this node leads
  // Masters of an earlier leadership, stopped: hosted_master()'s caller may still read one.
  std::vector<std::unique_ptr<HostedMaster>> retired_;
  std::string memory_;  // what the master remembered last (RunMemory's bytes)
  int64_t memory_version_ = 0;
  bool run_ended_ = false;  // the agent was told the run ended for all: its keys may go
  // The run (its incarnation) a master last placed this node in: etcd's state is taken over
  // only when it is that run's.
  std::string placed_in_run_;
  std::atomic<HostedMaster*> hosting_{nullptr};

  absl::Mutex mu_;
  std::deque<std::function<void()>> inbox_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int64_t kept_lease_ ABSL_GUARDED_BY(mu_) = 0;  // the lease the lease's thread renews
  grpc::ClientContext* keep_alive_ ABSL_GUARDED_BY(mu_) = nullptr;  // its stream, to end
  // The lease's thread ends: after a leaving leader's last fenced writes, not with stopping_.
  bool lease_released_ ABSL_GUARDED_BY(mu_) = false;

  std::thread election_thread_;
  std::thread lease_thread_;
};

}  // namespace ddprun
