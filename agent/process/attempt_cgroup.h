#pragma once
// A cgroup v2 group per attempt, holding its workers and everything they start: a process
// that leaves its process group (setsid, a daemon) stays in the cgroup, and `cgroup.kill`
// ends them all at once. The orphan guard does the same when the agent itself is killed.
//
// It needs a cgroup v2 hierarchy where this agent may make a group under its own (root, or
// a delegated subtree as systemd gives with Delegate=yes). Without one, a worker's daemon
// that left its process group may outlive an agent killed with SIGKILL; the agent says so
// once at the first attempt (docs/security.md).

#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "common/unique_fd.h"

namespace ddprun {

class AttemptCgroup {
 public:
  /// A new group `name` under this process's own cgroup v2 group. Unavailable (saying why)
  /// when there is no cgroup v2 hierarchy or it may not be written.
  static absl::StatusOr<AttemptCgroup> Create(const std::string& name);
  AttemptCgroup(AttemptCgroup&& other) noexcept
      : path_(std::exchange(other.path_, std::string())), procs_(std::move(other.procs_)) {}
  AttemptCgroup& operator=(AttemptCgroup&&) = delete;
  ~AttemptCgroup();  // KillAndRemove

  const std::string& path() const { return path_; }
  /// Open for writing: a child writes "0" to it before exec to join the group.
  int procs_fd() const { return procs_.get(); }
  /// Kills every process in the group and removes it (once it is empty, within a bound).
  void KillAndRemove();

 private:
  AttemptCgroup(std::string path, UniqueFd procs)
      : path_(std::move(path)), procs_(std::move(procs)) {}
  std::string path_;
  UniqueFd procs_;
};

/// The cgroup v2 folder this process is in (mount point + /proc/self/cgroup's "0::" path).
absl::StatusOr<std::string> OwnCgroupV2Dir();

/// Writes "1" to `path`/cgroup.kill, waits up to `bound` for the group to empty, removes
/// it. False when it could not be removed.
bool KillCgroup(const std::string& path, int bound_ms);

}  // namespace ddprun
