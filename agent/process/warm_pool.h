#pragma once
// The warm pool (--preload, docs/warm-restart.md): one Python interpreter per node that has
// imported the modules the job names, and nothing more, and forks each worker. A worker then
// starts with `import torch` done instead of paying for it (seconds) at every start and
// restart. Each forked worker is what SpawnWorkerProcess would have made — the agent is its
// parent, same session, cgroup, binding, streams, heartbeat pipe, environment, argv and
// __main__ — only its memory comes from the interpreter.
//
// Fails closed: when the imports fail, when the interpreter has a thread, has loaded the GPU
// driver or the network, or initialised CUDA, or when it dies, workers start the usual way
// and the agent says why once. When a file of a preloaded module changes on disk (a fixed
// bug), the next attempt gets a new interpreter.

#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/process/orphan_guard.h"
#include "agent/process/worker_process.h"
#include "common/env_map.h"
#include "common/event_loop.h"
#include "common/unique_fd.h"

namespace ddprun {

struct WarmPoolSettings {
  std::vector<std::string> modules;      // --preload, "auto" already made "torch"
  std::vector<std::string> worker_argv;  // the interpreter, its flags, then -m M or a script
  EnvMap env;                            // what the imports run with (NodeWorkerEnv)
  std::string cwd;                       // the agent's working folder: each worker's
  // How long the imports may take: past it the pool is given up, and workers start the
  // usual way.
  absl::Duration import_wait = absl::Minutes(5);
};

/// The modules of a --preload value ("torch,numpy"; "auto": torch), or why it is not one.
absl::StatusOr<std::vector<std::string>> ParsePreload(const std::string& value);

class WarmPool {
 public:
  /// Starts the interpreter; it imports while the agent goes on.
  static absl::StatusOr<std::unique_ptr<WarmPool>> Start(WarmPoolSettings settings,
                                                         OrphanGuard& guard);
  ~WarmPool();  // the interpreter ends with it

  /// The agent's loop waits for the imports from now on (no call of this class waits for
  /// them then): `on_settled` runs when they are done, failed, or past import_wait, so that
  /// workers held for them start.
  absl::Status WatchImports(EventLoop& loop, std::function<void()> on_settled);
  /// The interpreter is importing: a worker started now would wait for it.
  bool importing() const { return pid_ > 0 && !ready_ && !given_up_; }

  /// Before an attempt's workers: a new interpreter if a preloaded module's file changed.
  void BeginAttempt();
  /// Starts a worker as SpawnWorkerProcess(spec) would: forked from the interpreter when it
  /// can, else the usual way. Errors are SpawnWorkerProcess's.
  absl::StatusOr<pid_t> StartWorker(const SpawnSpec& spec);
  /// The interpreter's own exit; false if `pid` is not it.
  bool OnProcessExited(pid_t pid, int wait_status);

  /// The interpreter's pid; -1 once workers start the usual way.
  pid_t pid() const { return pid_; }
  /// Forked so far (for the tests and the log).
  int forked() const { return forked_; }

 private:
  WarmPool(WarmPoolSettings settings, OrphanGuard& guard)
      : settings_(std::move(settings)), guard_(guard) {}
  absl::Status Launch();
  // Waits for "ready" after Launch; false: the pool is given up (and why was said).
  bool AwaitReady();
  // The imports' answer ("ready", or why not): true when ready; else the pool is given up.
  bool TakeImportAnswer(const absl::StatusOr<std::vector<std::string>>& reply, absl::Time began);
  // With the loop: the interpreter's answer, or import_wait passed.
  void WatchLaunched();
  void StopWatching();
  void OnImportAnswer();
  void OnImportsLate();
  void Settled();
  absl::StatusOr<pid_t> Fork(const SpawnSpec& spec);
  // Workers start the usual way from now on; `why` is said once.
  void GiveUp(const std::string& why);
  void EndInterpreter();
  absl::StatusOr<std::vector<std::string>> Receive(absl::Duration bound);

  const WarmPoolSettings settings_;
  OrphanGuard& guard_;
  UniqueFd socket_;  // SOCK_SEQPACKET to the interpreter
  pid_t pid_ = -1;
  bool ready_ = false;
  bool given_up_ = false;
  int forked_ = 0;
  std::vector<pid_t> ended_;   // interpreters ended and not reaped yet
  EventLoop* loop_ = nullptr;  // set by WatchImports
  std::function<void()> on_settled_;
  std::unique_ptr<OneShotTimer> import_timer_;  // import_wait after each launch
  absl::Time launched_;
  bool watching_ = false;  // the loop watches socket_ for the imports' answer
};

}  // namespace ddprun
