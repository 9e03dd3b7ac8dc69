#pragma once
// Guarantees that no worker, nor any process a worker forked, outlives the agent — even when
// the agent is killed with SIGKILL and can run no code of its own.
//
// PR_SET_PDEATHSIG kills each worker with the agent, but not the worker's children, which
// the kernel re-parents to init. So at start-up the agent forks this small guard process
// before it does anything else. Each worker registers its process group over a pipe before
// it execs, and the agent unregisters groups that are gone; when that pipe reads end-of-file — the
// agent exited, however it died — the guard sends SIGKILL to every group still listed, and exits.

#include <sys/types.h>

#include <string>

#include "absl/status/statusor.h"
#include "common/unique_fd.h"

namespace ddprun {

class OrphanGuard {
 public:
  /// Forks the guard. Call before any thread is started.
  static absl::StatusOr<OrphanGuard> Start();

  /// The pipe a new worker writes "+<pgid>\n" to itself before exec (see SpawnSpec), so
  /// that the guard knows its group before anything in it can fork.
  int registration_fd() const { return to_guard_.get(); }
  /// Group `pgid` is gone; the guard must not touch it (its id may be reused).
  void Forget(pid_t pgid);
  /// Cgroup `path` (an attempt's, see AttemptCgroup) is killed if the agent dies; forgotten
  /// once the agent removed it.
  void WatchCgroup(const std::string& path);
  void ForgetCgroup(const std::string& path);
  /// A file or an empty folder the guard removes if the agent dies without doing so (the
  /// workers' Store token). Removed in the order given.
  void RemoveIfAgentDies(const std::string& path);

  pid_t pid() const { return pid_; }

 private:
  OrphanGuard(UniqueFd to_guard, pid_t pid) : to_guard_(std::move(to_guard)), pid_(pid) {}
  void Send(char op, pid_t pgid);
  void Send(char op, const std::string& payload);

  UniqueFd to_guard_;
  pid_t pid_ = -1;
};

}  // namespace ddprun
