#pragma once
// LeaderFollower: the agent's side of an elected run (network_plugin.h's ElectedRendezvous),
// whatever store elects its leader. It is a GrpcRendezvous client of the master the election
// names, and follows it when it moves: the agent takes the old master for lost and asks the
// new one for its place back (docs/protocol.md, "Losing the master"). A backend (etcd_
// rendezvous.h) runs the election and says where the leader is with SetLeader, from any
// thread; the agent's thread alone owns the session.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "net/grpc_rendezvous.h"
#include "net/network_plugin.h"

namespace ddprun {

class LeaderFollower : public ElectedRendezvous {
 public:
  /// `store`: the name of what elects the leader ("etcd"); `where`: where it is, in words.
  LeaderFollower(NetworkRendezvousOptions options, std::string store, std::string where);

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
  /// the backend's words for where it will be, for messages.
  std::string store_addr() const override;
  absl::Duration heartbeat_interval() const override {
    return options_.settings.keep_alive_interval;
  }
  /// Also ends this node's part in the election: its run is over, it needs no leader.
  void CloseSession() override;

 protected:
  /// From any thread: the leader's master is at `address` ("": none known now).
  void SetLeader(const std::string& address);
  EventQueue& events() { return events_; }
  /// Ends the session with the leader's master: its Bye goes out, this node is gone.
  void EndSession() { session_.reset(); }
  const NetworkRendezvousOptions& rendezvous_options() const { return options_; }

  // What the agent's thread tells the backend.
  virtual void MasterLost() = 0;                              // the session broke
  virtual void RunOver(bool ended_for_all) = 0;               // no leader needed any more
  virtual void PlacedIn(const std::string& incarnation) = 0;  // a master placed this node
  /// Asked how the wait goes before any leader is known: a kProgress event is due.
  virtual void CheckElection() = 0;

 private:
  // Connects to the leader the backend names now, when it moved.
  void FollowLeader();

  const NetworkRendezvousOptions options_;
  const std::string store_;
  const std::string where_;
  EventQueue events_;
  std::unique_ptr<GrpcRendezvous> session_;
  std::string target_;                    // the master session_ talks to
  std::optional<NodeInfo> waiting_join_;  // asked before any leader was known
  std::optional<NodeInfo> asking_back_;   // a resume no master has answered yet

  absl::Mutex mu_;
  std::string leader_ ABSL_GUARDED_BY(mu_);  // the leader's master, "host:port"; "": none now
};

/// Whether every agent's session with `master` in `run_id` ends before `deadline`: the
/// run's nodes all left (an interrupt on every node ends a run too), so no next leader needs
/// what this one remembered.
bool EverySessionEnds(const HostedMaster& master, const std::string& run_id, absl::Time deadline);

/// What the run's last leader remembered (RunMemory's `bytes`, read from `store` at `key`), for a
/// new leader's master to take over: only when it is of the run (its incarnation) a master placed
/// this node in, `placed_in`. Another run of this id (one that never ended cleanly: every node
/// killed) left the rest; the new master overwrites it. Each refusal is said.
std::optional<RunMemory> TakeOver(const std::string& bytes, const std::string& placed_in,
                                  const std::string& run_id, const std::string& store,
                                  const std::string& key);

}  // namespace ddprun
