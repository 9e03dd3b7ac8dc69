#pragma once
// The agent's single event loop: epoll over signalfd, timerfd and the workers' output pipes.
// One thread owns it and everything its handlers touch; nothing here polls on an interval,
// so a worker's exit is handled as soon as the kernel reports it.

#include <signal.h>

#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/unique_fd.h"

namespace ddprun {

class EventLoop {
 public:
  using Handler = std::function<void(uint32_t epoll_events)>;

  static absl::StatusOr<std::unique_ptr<EventLoop>> Create();

  /// Calls `handler` whenever `fd` is readable (or hung up). The loop does not own `fd`.
  absl::Status WatchReadable(int fd, Handler handler);
  /// Also calls the handler of a watched `fd` when it is writable (or stops doing so).
  absl::Status WatchWritable(int fd, bool writable);
  void Unwatch(int fd);

  /// Waits for events for at most `timeout` (absl::InfiniteDuration() to block) and runs
  /// the handlers of the ready fds.
  absl::Status RunOnce(absl::Duration timeout);

 private:
  explicit EventLoop(UniqueFd epoll_fd) : epoll_fd_(std::move(epoll_fd)) {}
  UniqueFd epoll_fd_;
  std::map<int, std::shared_ptr<Handler>> handlers_;
};

/// Blocks `signals` for this thread (so they are only seen through the fd) and reads them
/// from a signalfd. Worker processes get an empty mask back before exec.
class SignalChannel {
 public:
  static absl::StatusOr<SignalChannel> Open(const std::vector<int>& signals);
  int fd() const { return fd_.get(); }
  /// The signals pending now (non-blocking).
  std::vector<int> Drain();

 private:
  explicit SignalChannel(UniqueFd fd) : fd_(std::move(fd)) {}
  UniqueFd fd_;
};

/// A one-shot timer readable through the event loop.
class OneShotTimer {
 public:
  static absl::StatusOr<OneShotTimer> Create();
  int fd() const { return fd_.get(); }
  void Arm(absl::Duration after);
  void Disarm();
  /// Consumes the expiration; true when the timer had fired.
  bool Acknowledge();

 private:
  explicit OneShotTimer(UniqueFd fd) : fd_(std::move(fd)) {}
  UniqueFd fd_;
};

}  // namespace ddprun
