#pragma once
// StackCollection: where each worker of an attempt is, recorded before any of them is
// stopped after a hang (docs/hangs.md).
//
//   Freeze()  every running worker is stopped where it is (SIGSTOP), so that none of them
//             sees another die first (a peer's closed socket would wake it from a collective)
//   Begin()   after `settle` (other nodes freeze theirs meanwhile), each worker's stack:
//               Python (faulthandler on): SIGABRT to its main thread, then SIGCONT; it prints
//                 every thread's traceback on its stderr and exits
//               in uninterruptible sleep: the kernel's wait (/proc), as no handler can run
//               native: eu-stack (elfutils) reads it while it is stopped
//   done      when every dump is in, or `dump_bound` after Begin: the workers left are continued
//             (SIGCONT) and `on_done` runs, so that the stop that waited can go out
//   Take()    once the attempt's output is drained: one RankStack per worker
//
// On request (kSnapshot), the same without stopping anyone: each stack is eu-stack's.
//
// No waiting of its own: the agent's event loop calls it.

#include <sys/types.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "agent/logs/piped_stream.h"
#include "agent/process/orphan_guard.h"
#include "common/event_loop.h"
#include "common/unique_fd.h"
#include "rendezvous/stack_report.h"

namespace ddprun {

class StackCollection {
 public:
  struct Worker {
    int local_rank = 0;
    int rank = 0;
    pid_t pid = 0;
    PipedStream* err = nullptr;  // its stderr through the agent; null: `stderr_file` or none
    std::string stderr_file;     // its stderr written straight to this file ("": none)
  };

  enum class Method {
    kPython,    // stop them, then SIGABRT: faulthandler prints every thread, and they exit
    kNative,    // stop them, then eu-stack
    kSnapshot,  // eu-stack while they run on (on request): nothing is stopped for good
  };
  /// `dump_bound`: how long the dumps may take before `on_done` runs without the missing
  /// ones (HangTimings::dump_bound).
  StackCollection(EventLoop& loop, OrphanGuard& guard, Method method, absl::Duration dump_bound,
                  std::function<void()> on_done);
  ~StackCollection();
  StackCollection(const StackCollection&) = delete;
  StackCollection& operator=(const StackCollection&) = delete;

  /// Stops `running` where they are; once per attempt.
  void Freeze(const std::vector<Worker>& running);
  bool frozen() const { return !workers_.empty(); }
  /// Takes the stacks after `settle`; once. Freeze first.
  void Begin(absl::Duration settle);
  /// Every dump is in, or its time is up (or Begin could not run).
  bool done() const { return phase_ == Phase::kDone; }
  /// A process ended: a worker (a dump may be in) or an eu-stack of ours (then true).
  bool OnProcessExited(pid_t pid);
  /// One stack per frozen worker, on `host`; call once the workers' output is drained.
  std::vector<RankStack> Take(const std::string& host);

 private:
  enum class Phase { kIdle, kSettling, kDumping, kDone };
  struct Target {
    Worker worker;
    bool exited = false;
    bool python_pending = false;  // SIGABRT sent, not exited yet
    std::string stderr_capture;
    off_t stderr_offset = -1;
    std::optional<RankStack> kernel;
    pid_t reader = 0;  // eu-stack, while it runs
    UniqueFd reader_output;
    std::string reader_error;  // why there is no native stack
  };

  void Dump(Target& target);
  void ReadNative(Target& target);
  void OnTimer();
  void MaybeDone();
  void Done();
  RankStack StackOf(Target& target);

  EventLoop& loop_;
  OrphanGuard& guard_;
  const Method method_;
  const absl::Duration dump_bound_;
  const std::function<void()> on_done_;
  Phase phase_ = Phase::kIdle;
  std::unique_ptr<OneShotTimer> timer_;  // the settle, then dump_bound_
  std::vector<Target> workers_;
};

}  // namespace ddprun
