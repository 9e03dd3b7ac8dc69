#pragma once
// NcclWatchdog: a thread that aborts a Context's communicators on an asynchronous NCCL error,
// and all of them when a chosen signal arrives (so that a stop from the agent is not stuck
// behind a hung collective). Signal handlers are process-wide: one watchdog at a time owns
// them.

#include <poll.h>
#include <signal.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "src/nccl_internal.h"

namespace ddp::worker {

// Aborts watched communicators on an asynchronous NCCL error, and all of them when a chosen
// signal arrives. Signal handlers are process-wide: one watchdog at a time owns them.
class NcclWatchdog {
 public:
  static absl::StatusOr<std::shared_ptr<NcclWatchdog>> Start();
  /// Puts the signal actions back, stops the thread.
  ~NcclWatchdog();

  /// Checks `handle` for asynchronous errors from now on (about once a second).
  void Watch(const std::shared_ptr<internal::NcclAccess::Handle>& handle);
  /// When `sig` arrives, aborts every watched communicator, then lets the signal take its
  /// previous course. AlreadyExists when another watchdog of this process owns the signals.
  absl::Status AbortOnSignal(int sig);

 private:
  static constexpr unsigned char kStop = 0;
  // How long aborting may take before a signal goes on regardless.
  static constexpr absl::Duration kAbortBudget = absl::Seconds(5);

  NcclWatchdog() = default;

  static void OnSignal(int sig);  // async-signal-safe: one byte into the owner's pipe
  void Wake(unsigned char byte) { (void)!::write(pipe_[1], &byte, 1); }
  std::vector<std::shared_ptr<internal::NcclAccess::Handle>> Live();
  void CheckErrors();

  // Aborts everything, but lets the signal go on after kAbortBudget even if an abort hangs.
  void AbortAllWithin(const std::string& why);

  void Loop();
  // The signal goes on to what would have handled it without us: the old action is put
  // back (if it is not already: a second signal queued behind the first, or the watchdog
  // being destroyed) and the signal sent again. A later AbortOnSignal(sig) installs the
  // handler again.
  void RaiseAgain(int sig);
  void RestoreSignals();

  static inline std::atomic<int> g_signal_pipe{-1};  // the owning watchdog's write end
  int pipe_[2] = {-1, -1};
  std::weak_ptr<NcclWatchdog> weak_self_;
  std::mutex mu_;
  std::vector<std::weak_ptr<internal::NcclAccess::Handle>> watched_;
  std::vector<std::pair<int, struct sigaction>> previous_;
  std::thread thread_;
};

}  // namespace ddp::worker
