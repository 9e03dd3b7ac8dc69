#pragma once
// EtcdRendezvous: the etcd-v3 backend's side of a node (docs/etcd.md). The nodes of a run
// elect its leader in etcd: a key under the run's prefix, created in a transaction and bound
// to the creator's lease. The leader hosts the rendezvous master (the one RoundStateMachine of
// the run) on its workers' store port; every node, the leader too, is that master's client
// through a GrpcRendezvous. When the leader dies or is cut off, its lease expires, its key
// goes, the others see it go (a watch, not polling) and elect another; each node's agent
// sees its master lost, keeps its workers going and asks the new master for its place back
// (docs/protocol.md, "Losing the master"), which takes the round up from those resumes.
//
// Threads: the agent's calls come on its thread; one election thread campaigns, watches, and
// while this node leads, watches its lease; one keeps the lease alive; one writes what the
// leader's master remembers (RunMemory) to etcd; one watches the leader's own key while it
// leads (a change is someone else's: it steps down); a short-lived one looks at a leader that
// went silent. The agent's thread alone owns the GrpcRendezvous; the others only say where
// the leader is, under mu_, and wake the agent.

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "net/etcd_client.h"
#include "net/grpc_rendezvous.h"
#include "net/network_plugin.h"

namespace ddprun {

class EtcdRendezvous : public ElectedRendezvous {
 public:
  /// `host`: starts the master this node hosts while it leads (the plugin's host_master).
  using HostMaster = absl::StatusOr<std::unique_ptr<HostedMaster>> (*)(const MasterOptions&);
  EtcdRendezvous(ElectionOptions options, HostMaster host);
  /// Leaves the election: a leader whose run has ended removes the run's keys; the lease is
  /// revoked, so that the others elect at once rather than after its TTL.
  ~EtcdRendezvous() override;

  int event_fd() const override { return events_.fd(); }
  std::vector<RendezvousEvent> TakeEvents() override;
  void Join(const NodeInfo& node) override;
  void ReportFailure(int64_t round, std::vector<ReportedFailure> failures) override;
  void ReportSuccess(int64_t round) override;
  void ReportStopped(int64_t round) override;
  void Heartbeat() override;
  void ReportStacks(int64_t round, int world_size, const std::string& cause,
                    const std::vector<RankStack>& stacks) override;
  void Leave(const std::string& reason) override;
  void Reconnect() override;
  void CheckProgress() override;
  void ReportRestart(const RestartSplit& split) override;
  void ReportOutage(int64_t round, absl::Duration lost) override;
  void CheckReach(const std::string& store) override;
  /// The leader's master once one is known (workers get it as DDPRUN_STORE_ADDR); before,
  /// words for where it will be, for messages.
  std::string store_addr() const override;
  absl::Duration heartbeat_interval() const override {
    return options_.rendezvous.settings.keep_alive_interval;
  }
  HostedMaster* hosted_master() override;
  /// Also ends this node's part in the election: its run is over, it needs no leader.
  void CloseSession() override;

 private:
  // The agent's thread: connects to the leader etcd names now, when it moved.
  void FollowLeader();
  // The agent's thread, after its master was lost: whether the leader's agent is gone, on a
  // thread of its own (checker_); if it is, its lease is revoked.
  void CheckLeaderGone();
  // The election thread.
  void Elect();
  void Lead(int64_t revision);
  std::optional<RunMemory> RecallMemory();
  bool WriteMemory(int64_t revision);
  void DeleteRunKeys(int64_t revision);
  void WriteMemories();
  void WatchLeader(int64_t from_revision);
  // The leader key, when valid, becomes the leader; else it is refused (said once).
  void FollowLeaderKey(const std::string& value);
  // The key guard's thread.
  void GuardLeaderKey();
  std::string WatchOwnKey(int64_t revision);
  bool EnsureLease();
  // A lease this node led with, expired here while etcd did not answer: revoked once it does.
  void RevokeStaleLease();
  void StepDown(const std::string& why);
  void Said(const absl::Status& problem);
  std::string TlsHint(const absl::Status& problem) const;
  void SetLeader(const std::string& address);
  // The lease thread.
  void KeepLeaseAlive();
  bool LeaseHeld();
  void Pause(absl::Duration d);       // until stopping_
  void PauseLease(absl::Duration d);  // until lease_released_

  const ElectionOptions options_;
  const HostMaster host_;
  const std::string leader_key_;  // <prefix>/<run id>/leader
  const std::string state_key_;   // <prefix>/<run id>/state: the leader's RunMemory
  EtcdClient etcd_;
  EventQueue events_;

  // The agent's thread only.
  std::unique_ptr<GrpcRendezvous> inner_;
  std::string target_;                    // the master inner_ talks to
  std::optional<NodeInfo> waiting_join_;  // asked before any leader was known
  std::optional<NodeInfo> asking_back_;   // a resume no master has answered yet

  absl::Mutex mu_;
  std::string leader_ ABSL_GUARDED_BY(mu_);        // the leader's master: "host:port"; "": none now
  std::string etcd_problem_ ABSL_GUARDED_BY(mu_);  // why etcd does not answer, while it does not
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // The lease thread ends: after a leaving leader's last fenced writes, not with stopping_.
  bool lease_released_ ABSL_GUARDED_BY(mu_) = false;
  bool run_over_ ABSL_GUARDED_BY(mu_) = false;   // this node needs no leader any more
  bool run_ended_ ABSL_GUARDED_BY(mu_) = false;  // the agent was told the run ended for all
  grpc::ClientContext* watch_ ABSL_GUARDED_BY(mu_) = nullptr;       // to cancel at the end
  grpc::ClientContext* keep_alive_ ABSL_GUARDED_BY(mu_) = nullptr;  // to cancel at the end
  int64_t lease_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t stale_lease_ ABSL_GUARDED_BY(mu_) = 0;  // a lease this node led with, to revoke
  // When the last keep-alive that etcd answered was sent: the lease holds until then + TTL.
  absl::Time renewed_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();  // on MonotonicNow()
  absl::Time nudged_ ABSL_GUARDED_BY(mu_) =
      absl::InfinitePast();                                    // the last silent keep-alive ended
  std::unique_ptr<HostedMaster> master_ ABSL_GUARDED_BY(mu_);  // while this node leads
  // Masters of an earlier leadership, stopped: hosted_master()'s caller may still read one.
  std::vector<std::unique_ptr<HostedMaster>> retired_ ABSL_GUARDED_BY(mu_);
  int64_t leading_revision_ ABSL_GUARDED_BY(mu_) = 0;
  bool fence_lost_ ABSL_GUARDED_BY(mu_) = false;  // the leader key is not this node's any more
  std::string fence_why_ ABSL_GUARDED_BY(mu_);    // what the key guard saw happen to it
  grpc::ClientContext* guard_watch_ ABSL_GUARDED_BY(mu_) = nullptr;  // to cancel at the end
  std::string refused_leader_ ABSL_GUARDED_BY(mu_);  // the last invalid leader value, said once
  int64_t leader_lease_ ABSL_GUARDED_BY(mu_) = 0;    // the lease the leader's key is bound to
  // The run (its incarnation) a master last placed this node in: etcd's state is taken over
  // only when it is that run's.
  std::string placed_in_run_ ABSL_GUARDED_BY(mu_);

  // What this node's master remembered last (RunMemory's bytes), and what is in etcd.
  absl::Mutex memory_mu_;
  std::string memory_ ABSL_GUARDED_BY(memory_mu_);
  int64_t memory_version_ ABSL_GUARDED_BY(memory_mu_) = 0;
  int64_t written_version_ ABSL_GUARDED_BY(memory_mu_) = 0;

  std::thread election_;
  std::thread lease_thread_;
  std::thread memory_writer_;
  std::thread key_guard_;
  std::thread checker_;
  std::atomic<bool> checking_{false};
};

/// OK when `value`, read from a leader key, is "host:port" ("[v6]:port"): bounded, printable.
/// Else InvalidArgument with a printable, shortened copy of it.
absl::Status CheckLeaderAddress(absl::string_view value);

/// The master of run `run_id`'s leader, as etcd names it ("host:port"); NotFound when the
/// run has no leader (it ended, or has not started); FailedPrecondition when the key holds
/// something else.
absl::StatusOr<std::string> FindLeader(const EtcdSettings& etcd, const std::string& run_id);

}  // namespace ddprun
