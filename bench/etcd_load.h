#pragma once
// What N agents of the etcd-v3 backend ask of etcd (net/etcd_rendezvous.h), played from one
// process for ddprun-loadgen: a read of the run's leader key each; for those that find none,
// a lease (renewed every third of its TTL for as long as this object lives) and a campaign
// (the transaction that creates the key unless it exists); and, for every agent but the
// winner, a watch on that key. The
// leases' keep-alives and the watches share --connections streams, as the campaigns share a
// few clients: etcd serves the same requests as from N processes.

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "net/etcd_client.h"
#include "net/etcd_settings.h"

namespace ddprun {

struct EtcdLoadOptions {
  EtcdSettings etcd;
  std::string run_id;
  std::string self;  // what every agent would publish as its master: the master under test
  int agents = 1000;
  int connections = 64;  // streams for the keep-alives and the watches
  int threads = 16;      // campaigns in flight at once
};

class EtcdLoad {
 public:
  /// Every agent has a lease, has campaigned, and (but the winner) watches the leader's key.
  static absl::StatusOr<std::unique_ptr<EtcdLoad>> Elect(const EtcdLoadOptions& options);
  /// Stops the keep-alives, removes the run's keys and revokes the leases.
  ~EtcdLoad();

  const std::string& leader() const { return leader_; }
  double campaign_ms() const {
    return campaign_ms_;
  }                                              // first lease asked -> every campaign answered
  double watch_ms() const { return watch_ms_; }  // -> every watch created
  int64_t keep_alives() const { return keep_alives_.load(); }

 private:
  explicit EtcdLoad(EtcdLoadOptions options) : options_(std::move(options)) {}
  absl::Status Campaign();
  absl::Status Watch(int64_t from_revision);
  void KeepAlive(int stream);

  const EtcdLoadOptions options_;
  std::string leader_;
  double campaign_ms_ = 0, watch_ms_ = 0;
  std::vector<int64_t> leases_;
  std::vector<std::shared_ptr<grpc::Channel>> channels_;  // to the first member, as agents'
  std::vector<std::unique_ptr<grpc::ClientContext>> watch_contexts_;
  std::vector<std::thread> watch_readers_, keep_alive_threads_;
  absl::Mutex mu_;
  int created_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<grpc::ClientContext*> keep_alive_contexts_ ABSL_GUARDED_BY(mu_);
  std::atomic<int64_t> keep_alives_{0};
};

}  // namespace ddprun
