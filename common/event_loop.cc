#include "common/event_loop.h"

#include <errno.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

namespace ddprun {

absl::StatusOr<std::unique_ptr<EventLoop>> EventLoop::Create() {
  const int fd = ::epoll_create1(EPOLL_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, "epoll_create1");
  return std::unique_ptr<EventLoop>(new EventLoop(UniqueFd(fd)));
}

absl::Status EventLoop::WatchReadable(int fd, Handler handler) {
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.fd = fd;
  if (::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, fd, &event) != 0) {
    return ErrnoStatus(errno, "epoll_ctl(ADD)");
  }
  handlers_[fd] = std::make_shared<Handler>(std::move(handler));
  return absl::OkStatus();
}

absl::Status EventLoop::WatchWritable(int fd, bool writable) {
  epoll_event event{};
  event.events = writable ? EPOLLIN | EPOLLOUT : EPOLLIN;
  event.data.fd = fd;
  if (::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_MOD, fd, &event) != 0) {
    return ErrnoStatus(errno, "epoll_ctl(MOD)");
  }
  return absl::OkStatus();
}

void EventLoop::Unwatch(int fd) {
  if (handlers_.erase(fd) == 0) return;
  ::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_DEL, fd, nullptr);
}

absl::Status EventLoop::RunOnce(absl::Duration timeout) {
  constexpr int kMaxEvents = 64;
  epoll_event events[kMaxEvents];
  const int timeout_ms = timeout == absl::InfiniteDuration()
                             ? -1
                             : static_cast<int>(absl::ToInt64Milliseconds(timeout));
  const int n = ::epoll_wait(epoll_fd_.get(), events, kMaxEvents, timeout_ms);
  if (n < 0) {
    if (errno == EINTR) return absl::OkStatus();
    return ErrnoStatus(errno, "epoll_wait");
  }
  for (int i = 0; i < n; ++i) {
    // A handler may unwatch other fds; look each one up afresh and keep it alive while it runs.
    auto it = handlers_.find(events[i].data.fd);
    if (it == handlers_.end()) continue;
    std::shared_ptr<Handler> handler = it->second;
    (*handler)(events[i].events);
  }
  return absl::OkStatus();
}

absl::StatusOr<SignalChannel> SignalChannel::Open(const std::vector<int>& signals) {
  sigset_t mask;
  sigemptyset(&mask);
  for (int sig : signals) sigaddset(&mask, sig);
  if (::sigprocmask(SIG_BLOCK, &mask, nullptr) != 0) return ErrnoStatus(errno, "sigprocmask");
  const int fd = ::signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, "signalfd");
  return SignalChannel(UniqueFd(fd));
}

std::vector<int> SignalChannel::Drain() {
  std::vector<int> signals;
  signalfd_siginfo info;
  while (::read(fd_.get(), &info, sizeof(info)) == static_cast<ssize_t>(sizeof(info))) {
    signals.push_back(static_cast<int>(info.ssi_signo));
  }
  return signals;
}

absl::StatusOr<OneShotTimer> OneShotTimer::Create() {
  const int fd = ::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, "timerfd_create");
  return OneShotTimer(UniqueFd(fd));
}

void OneShotTimer::Arm(absl::Duration after) {
  itimerspec spec{};
  spec.it_value = absl::ToTimespec(std::max(after, absl::Nanoseconds(1)));  // 0 would disarm
  ::timerfd_settime(fd_.get(), 0, &spec, nullptr);
}

void OneShotTimer::Disarm() {
  itimerspec spec{};
  ::timerfd_settime(fd_.get(), 0, &spec, nullptr);
}

bool OneShotTimer::Acknowledge() {
  uint64_t expirations = 0;
  return ::read(fd_.get(), &expirations, sizeof(expirations)) == sizeof(expirations);
}

}  // namespace ddprun
