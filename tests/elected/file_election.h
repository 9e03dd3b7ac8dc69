#pragma once
// FileElection: a second elected backend's executor (the "files" backend of
// elected_backend_test.cc), on a FileStore in one folder. What every elected backend shares is
// ElectionExecutor's; this makes the store's calls, and one thread of its own polls the leader
// key for the watch and renews the lease (a folder has no streams).

#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "net/election_executor.h"
#include "tests/elected/file_settings.h"
#include "tests/elected/file_store.h"

namespace ddprun {

class FileElection : public ElectionExecutor {
 public:
  FileElection(ElectionOptions options, HostMaster host);
  ~FileElection() override;

 private:
  absl::StatusOr<LeaderElection::Read> ReadLeader() override;
  absl::StatusOr<int64_t> GrantLease() override;
  absl::StatusOr<LeaderElection::Campaign> Campaign(int64_t lease) override;
  void Watch(int64_t id, int64_t revision) override;
  void SwitchWatch() override;
  void StopWatch() override;
  void KeepAlive(int64_t lease) override;
  void StopKeepAlive() override;
  absl::Status Revoke(int64_t lease) override { return store_.Revoke(lease); }
  absl::StatusOr<bool> WriteMemory(int64_t revision, const std::string& memory,
                                   absl::Time until) override;
  absl::StatusOr<std::optional<std::string>> ReadMemory() override;
  void RemoveRunKeys(int64_t revision) override;
  std::string RefusedHint() const override { return "check the folder's permissions"; }
  // The poller's thread: every few tens of milliseconds, the watch and the lease.
  void Poll();
  void PollWatch();
  void PollLease();

  const FileSettings settings_;
  const std::string leader_key_, state_key_, prefix_;
  FileStore store_;

  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int64_t watch_ ABSL_GUARDED_BY(mu_) = 0;  // 0: none
  int64_t watch_from_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t kept_lease_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time renewed_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  // The poller's: the watch it polls for, and what it has told of the key.
  int64_t polled_watch_ = 0;
  int64_t told_mod_ = 0;
  bool told_deleted_ = false;
  std::thread poller_;
};

}  // namespace ddprun
