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
  static absl::StatusOr<std::shared_ptr<NcclWatchdog>> Start() {
    auto watchdog = std::shared_ptr<NcclWatchdog>(new NcclWatchdog);
    if (::pipe2(watchdog->pipe_, O_CLOEXEC | O_NONBLOCK) != 0) {
      return absl::InternalError(
          absl::StrCat("cannot start the NCCL watchdog: pipe2: ", strerror(errno)));
    }
    watchdog->weak_self_ = watchdog;
    watchdog->thread_ = std::thread([w = watchdog.get()] { w->Loop(); });
    return watchdog;
  }

  ~NcclWatchdog() {
    // The previous actions first, so that a signal from now on takes its old course; one
    // already in the pipe is still handled by the thread before it stops.
    RestoreSignals();
    Wake(kStop);
    thread_.join();
    int mine = pipe_[1];
    g_signal_pipe.compare_exchange_strong(mine, -1);
    ::close(pipe_[0]);
    ::close(pipe_[1]);
  }

  void Watch(const std::shared_ptr<internal::NcclAccess::Handle>& handle) {
    handle->watchdog = weak_self_;
    std::lock_guard<std::mutex> lock(mu_);
    watched_.push_back(handle);
  }

  absl::Status AbortOnSignal(int sig) {
    int expected = -1;
    if (!g_signal_pipe.compare_exchange_strong(expected, pipe_[1]) && expected != pipe_[1]) {
      return absl::AlreadyExistsError(
          absl::StrCat("another Context's NCCL watchdog handles signals in this process; signal ",
                       sig, " stays with it"));
    }
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [s, old] : previous_) {
      if (s == sig) return absl::OkStatus();  // already handled
    }
    struct sigaction action {};
    action.sa_handler = &OnSignal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    struct sigaction old {};
    if (::sigaction(sig, &action, &old) != 0) {
      return absl::InvalidArgumentError(absl::StrCat("cannot handle signal ", sig));
    }
    previous_.emplace_back(sig, old);
    return absl::OkStatus();
  }

 private:
  static constexpr unsigned char kStop = 0;
  // How long aborting may take before a signal goes on regardless.
  static constexpr absl::Duration kAbortBudget = absl::Seconds(5);

  NcclWatchdog() = default;

  static void OnSignal(int sig) {
    const int saved = errno;
    const unsigned char byte = static_cast<unsigned char>(sig);
    const int fd = g_signal_pipe.load();
    if (fd >= 0) (void)!::write(fd, &byte, 1);
    errno = saved;
  }

  void Wake(unsigned char byte) { (void)!::write(pipe_[1], &byte, 1); }

  std::vector<std::shared_ptr<internal::NcclAccess::Handle>> Live() {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::shared_ptr<internal::NcclAccess::Handle>> live;
    std::vector<std::weak_ptr<internal::NcclAccess::Handle>> kept;
    for (auto& weak : watched_) {
      if (auto handle = weak.lock()) {
        live.push_back(handle);
        kept.push_back(weak);
      }
    }
    watched_.swap(kept);
    return live;
  }

  void CheckErrors() {
    for (auto& handle : Live()) {
      NcclCommunicator comm = internal::NcclAccess::Make(handle);
      if (absl::Status s = comm.AsyncError(); !s.ok() && !comm.aborted()) {
        comm.Abort(std::string(s.message()));
      }
    }
  }

  // Aborts everything, but lets the signal go on after kAbortBudget even if an abort hangs.
  void AbortAllWithin(const std::string& why) {
    auto live =
        std::make_shared<std::vector<std::shared_ptr<internal::NcclAccess::Handle>>>(Live());
    std::packaged_task<void()> task([live, why] {
      for (auto& handle : *live) internal::NcclAccess::Make(handle).Abort(why);
    });
    std::future<void> done = task.get_future();
    std::thread(std::move(task)).detach();
    (void)done.wait_for(absl::ToChronoSeconds(kAbortBudget));
  }

  void Loop() {
    while (true) {
      pollfd p{pipe_[0], POLLIN, 0};
      const int ready = ::poll(&p, 1, 1000);  // errors surface within a second
      if (ready <= 0) {
        CheckErrors();
        continue;
      }
      unsigned char byte = 0;
      while (::read(pipe_[0], &byte, 1) == 1) {
        if (byte == kStop) return;
        AbortAllWithin(
            absl::StrCat("signal ", static_cast<int>(byte), " arrived: the round is over"));
        RaiseAgain(byte);
      }
    }
  }

  // The signal goes on to what would have handled it without us: the old action is put
  // back (if it is not already: a second signal queued behind the first, or the watchdog
  // being destroyed) and the signal sent again. A later AbortOnSignal(sig) installs the
  // handler again.
  void RaiseAgain(int sig) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto it = previous_.begin(); it != previous_.end(); ++it) {
        if (it->first == sig) {
          ::sigaction(sig, &it->second, nullptr);
          previous_.erase(it);
          break;
        }
      }
    }
    ::kill(::getpid(), sig);
  }

  void RestoreSignals() {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [sig, old] : previous_) ::sigaction(sig, &old, nullptr);
    previous_.clear();
  }

  static inline std::atomic<int> g_signal_pipe{-1};  // the owning watchdog's write end
  int pipe_[2] = {-1, -1};
  std::weak_ptr<NcclWatchdog> weak_self_;
  std::mutex mu_;
  std::vector<std::weak_ptr<internal::NcclAccess::Handle>> watched_;
  std::vector<std::pair<int, struct sigaction>> previous_;
  std::thread thread_;
};

}  // namespace ddp::worker
