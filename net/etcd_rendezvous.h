#pragma once
// EtcdRendezvous: the etcd-v3 backend's side of a node (docs/etcd.md). The nodes of a run
// elect its leader in etcd: a key under the run's prefix, created in a transaction and bound
// to the creator's lease. The leader hosts the rendezvous master (the one RoundStateMachine of
// the run) on its workers' store port; every node, the leader too, is that master's client
// (LeaderFollower). When the leader dies or is cut off, its lease expires, its key goes, the
// others see it go (a watch, not polling) and elect another.
//
// When to campaign, lead, step down and revoke is LeaderElection's, run by ElectionExecutor
// (net/election_executor.h); this makes etcd's calls. The watch runs on gRPC's threads and
// posts what it sees; a thread of its own keeps the lease alive, so that a call that waits on
// a silent member never delays a renewal.

#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "net/election_executor.h"
#include "net/etcd_client.h"

namespace ddprun {

class EtcdRendezvous : public ElectionExecutor {
 public:
  EtcdRendezvous(ElectionOptions options, HostMaster host);
  ~EtcdRendezvous() override;

 private:
  absl::StatusOr<LeaderElection::Read> ReadLeader() override;
  absl::StatusOr<int64_t> GrantLease() override;
  absl::StatusOr<LeaderElection::Campaign> Campaign(int64_t lease) override;
  void Watch(int64_t id, int64_t revision) override;
  void SwitchWatch() override;
  void StopWatch() override { watch_.reset(); }
  void KeepAlive(int64_t lease) override;
  void StopKeepAlive() override;
  absl::Status Revoke(int64_t lease) override { return etcd_.RevokeLease(lease); }
  absl::StatusOr<bool> WriteMemory(int64_t revision, const std::string& memory,
                                   absl::Time until) override;
  absl::StatusOr<std::optional<std::string>> ReadMemory() override;
  void RemoveRunKeys(int64_t revision) override;
  std::string RefusedHint() const override;
  // The lease's thread.
  void KeepLeaseAlive();

  const EtcdSettings settings_;   // options().backend's
  const std::string leader_key_;  // <prefix>/<run id>/leader
  const std::string state_key_;   // <prefix>/<run id>/state: the leader's RunMemory
  EtcdClient etcd_;

  // The election's thread only.
  std::unique_ptr<EtcdWatch> watch_;
  int64_t watch_id_ = 0;

  absl::Mutex mu_;
  int64_t kept_lease_ ABSL_GUARDED_BY(mu_) = 0;  // the lease the lease's thread renews
  grpc::ClientContext* keep_alive_ ABSL_GUARDED_BY(mu_) = nullptr;  // its stream, to end
  // The lease's thread ends: after a leaving leader's last fenced writes.
  bool lease_released_ ABSL_GUARDED_BY(mu_) = false;
  std::thread lease_thread_;
};

}  // namespace ddprun
