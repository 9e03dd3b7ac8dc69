#pragma once
// Starting one worker process: clone/exec into its own session and process group, with a
// parent-death signal so it can never outlive the agent, and exec errors reported back instead of
// lost.

#include <sys/types.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ddprun {

/// --numa-binding / --cpu-affinity for one worker, as the kernel takes it: made in the agent,
/// applied in the child between clone and exec (no numactl process in between).
struct ProcessBinding {
  std::vector<unsigned long> cpu_mask;   // a cpu_set_t for sched_setaffinity; empty: unbound
  std::vector<unsigned long> node_mask;  // set_mempolicy(MPOL_PREFERRED, ...); empty: unset
};

/// The masks of `cpus` and `preferred_node` (-1: none).
ProcessBinding MakeProcessBinding(const std::set<int>& cpus, int preferred_node);

struct SpawnSpec {
  std::vector<std::string> argv;  // argv[0] is looked up in PATH when it has no '/'
  std::vector<std::string> env;   // "KEY=VALUE"
  int stdout_fd = -1;             // dup2'ed onto fd 1 in the child; -1 inherits the agent's
  int stderr_fd = -1;             // likewise for fd 2
  /// The orphan guard's pipe: the child registers its process group there itself, before
  /// exec, so that nothing it forks can exist unknown to the guard (-1: no guard).
  int guard_fd = -1;
  /// Kept open across exec in the worker (its heartbeat pipe), at the same number; -1: none.
  int inherit_fd = -1;
  /// An attempt's cgroup.procs, open for writing: the child joins that cgroup first; -1: none.
  int cgroup_procs_fd = -1;
  /// CPUs and preferred memory node; null: the agent's. A failed sched_setaffinity fails the
  /// start; a refused set_mempolicy (a container without CAP_SYS_NICE) is only reported, in
  /// `*mempolicy_errno`.
  const ProcessBinding* binding = nullptr;
  int* mempolicy_errno = nullptr;
};

/// Starts the process and returns its pid, which is also its process group id. Returns an
/// error (and leaves no process) when exec fails: "cannot execute 'x': No such file...".
absl::StatusOr<pid_t> SpawnWorkerProcess(const SpawnSpec& spec);

/// SIGKILLs every child of this process except those in `keep`: what workers left behind that
/// re-parented to the agent (a child subreaper) after their parent exited, even if it left
/// the worker's session with setsid(). Returns how many of those were outside
/// `known_groups` (process groups the caller has already killed).
int KillStrayChildren(const std::vector<pid_t>& keep, const std::vector<pid_t>& known_groups);

}  // namespace ddprun
