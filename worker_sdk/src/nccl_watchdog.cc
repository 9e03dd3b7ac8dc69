#include "src/nccl_watchdog.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include <future>

#include "absl/strings/str_cat.h"

namespace ddp::worker {

absl::StatusOr<std::shared_ptr<NcclWatchdog>> NcclWatchdog::Start() {
  auto watchdog = std::shared_ptr<NcclWatchdog>(new NcclWatchdog);
  if (::pipe2(watchdog->pipe_, O_CLOEXEC | O_NONBLOCK) != 0) {
    return absl::InternalError(
        absl::StrCat("cannot start the NCCL watchdog: pipe2: ", strerror(errno)));
  }
  watchdog->weak_self_ = watchdog;
  watchdog->thread_ = std::thread([w = watchdog.get()] { w->Loop(); });
  return watchdog;
}

NcclWatchdog::~NcclWatchdog() {
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

void NcclWatchdog::Watch(const std::shared_ptr<internal::NcclAccess::Handle>& handle) {
  handle->watchdog = weak_self_;
  std::lock_guard<std::mutex> lock(mu_);
  watched_.push_back(handle);
}

absl::Status NcclWatchdog::AbortOnSignal(int sig) {
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

void NcclWatchdog::OnSignal(int sig) {
  const int saved = errno;
  const unsigned char byte = static_cast<unsigned char>(sig);
  const int fd = g_signal_pipe.load();
  if (fd >= 0) (void)!::write(fd, &byte, 1);
  errno = saved;
}

std::vector<std::shared_ptr<internal::NcclAccess::Handle>> NcclWatchdog::Live() {
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

void NcclWatchdog::CheckErrors() {
  for (auto& handle : Live()) {
    NcclCommunicator comm = internal::NcclAccess::Make(handle);
    if (absl::Status s = comm.AsyncError(); !s.ok() && !comm.aborted()) {
      comm.Abort(std::string(s.message()));
    }
  }
}

void NcclWatchdog::AbortAllWithin(const std::string& why) {
  auto live = std::make_shared<std::vector<std::shared_ptr<internal::NcclAccess::Handle>>>(Live());
  std::packaged_task<void()> task([live, why] {
    for (auto& handle : *live) internal::NcclAccess::Make(handle).Abort(why);
  });
  std::future<void> done = task.get_future();
  std::thread(std::move(task)).detach();
  (void)done.wait_for(absl::ToChronoSeconds(kAbortBudget));
}

void NcclWatchdog::Loop() {
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

void NcclWatchdog::RaiseAgain(int sig) {
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

void NcclWatchdog::RestoreSignals() {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [sig, old] : previous_) ::sigaction(sig, &old, nullptr);
  previous_.clear();
}

}  // namespace ddp::worker
