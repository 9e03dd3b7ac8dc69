#include "agent/hangs/hang_watch.h"

#include <fcntl.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "agent/hangs/proc_state.h"
#include "common/clock.h"
#include "common/log_limiter.h"
#include "common/printable.h"
#include "common/process_status.h"
#include "spdlog/spdlog.h"

namespace ddprun {

namespace {

std::string Seconds(absl::Duration d) {
  return absl::FormatDuration(absl::Trunc(d, absl::Milliseconds(1)));
}

std::string WallTime(absl::Time t) {
  return absl::FormatTime("%Y-%m-%d %H:%M:%E3S", t, absl::LocalTimeZone());
}

}  // namespace

std::string DescribeHang(const Hang& hang, int rank, const HangSettings& settings,
                         const std::string& process_state) {
  switch (hang.kind) {
    case Hang::Kind::kHeartbeat:
      if (hang.never_beat) {
        return absl::StrCat("rank ", rank, " sent no first heartbeat in ", Seconds(hang.duration),
                            " since its start (--worker-heartbeat-startup-timeout=",
                            Seconds(settings.heartbeat_startup), "): taken for hung");
      }
      return absl::StrCat("rank ", rank, " sent no heartbeat for ", Seconds(hang.duration),
                          " (--worker-heartbeat-timeout=", Seconds(settings.heartbeat_timeout),
                          "): taken for hung");
    case Hang::Kind::kTimer:
      return absl::StrCat("rank ", rank, ": FileTimer scope '", hang.scope, "' expired at ",
                          WallTime(hang.deadline), " (pid ", hang.pid,
                          ", torch.distributed.elastic.timer.expires, signal ",
                          SignalName(hang.signal), "): taken for hung");
    case Hang::Kind::kUninterruptible:
      return absl::StrCat("rank ", rank, " has been in uninterruptible sleep for ",
                          Seconds(hang.duration), ": the node is unhealthy (", process_state,
                          "; TORCHELASTIC_UNINTERRUPTIBLE_STATE_TIMEOUT=",
                          Seconds(settings.uninterruptible_timeout), ")");
  }
  return "";
}

namespace {

absl::StatusOr<std::unique_ptr<OneShotTimer>> NewTimer() {
  absl::StatusOr<OneShotTimer> timer = OneShotTimer::Create();
  if (!timer.ok()) return timer.status();
  return std::make_unique<OneShotTimer>(std::move(*timer));
}

// One request line can be PIPE_BUF (4096) bytes; a longer run without '\n' is garbage.
constexpr size_t kMaxRequestLine = 64 * 1024;

}  // namespace

HangWatch::HangWatch(HangSettings settings, EventLoop& loop,
                     std::function<void(const Hang&)> on_hang)
    : settings_(settings), loop_(loop), on_hang_(std::move(on_hang)) {}

HangWatch::~HangWatch() { Close(); }

absl::Status HangWatch::Start() {
  auto watch = [this](std::unique_ptr<OneShotTimer>& timer,
                      std::function<void()> on_fire) -> absl::Status {
    absl::StatusOr<std::unique_ptr<OneShotTimer>> made = NewTimer();
    if (!made.ok()) return made.status();
    timer = std::move(*made);
    watched_fds_.push_back(timer->fd());
    return loop_.WatchReadable(timer->fd(), [on_fire](uint32_t) { on_fire(); });
  };
  if (settings_.heartbeat_timeout > absl::ZeroDuration()) {
    heartbeats_ = std::make_unique<WorkerHeartbeats>(settings_.heartbeat_timeout,
                                                     settings_.heartbeat_startup);
    if (absl::Status s = watch(heartbeat_timer_, [this] { OnHeartbeatDeadline(); }); !s.ok()) {
      return s;
    }
  }
  if (settings_.timer_fifo >= 0) {
    if (absl::Status s = watch(file_timer_, [this] { OnTimerDeadline(); }); !s.ok()) return s;
    watched_fds_.push_back(settings_.timer_fifo);
    if (absl::Status s =
            loop_.WatchReadable(settings_.timer_fifo, [this](uint32_t) { OnTimerRequests(); });
        !s.ok()) {
      return s;
    }
  }
  if (settings_.uninterruptible_timeout > absl::ZeroDuration()) {
    dwell_ = std::make_unique<UninterruptibleDwell>(settings_.uninterruptible_timeout);
    if (absl::Status s = watch(look_timer_, [this] { OnLook(); }); !s.ok()) return s;
    look_timer_->Arm(std::clamp(settings_.uninterruptible_timeout / 10, absl::Milliseconds(10),
                                absl::Seconds(1)));
  }
  return absl::OkStatus();
}

void HangWatch::Close() {
  for (int fd : watched_fds_) loop_.Unwatch(fd);
  watched_fds_.clear();
  for (auto& [rank, pipe] : heartbeat_pipes_) loop_.Unwatch(pipe.get());
  heartbeat_pipes_.clear();
  pids_.clear();
}

absl::Status HangWatch::SetUpHeartbeat(int local_rank, int& child_end,
                                       std::vector<UniqueFd>& child_ends) {
  if (!heartbeats_) return absl::OkStatus();
  absl::StatusOr<Pipe> pipe = MakePipe(/*nonblocking_read=*/true);
  if (!pipe.ok()) return pipe.status();
  // A worker's beat must never block it, even if the agent were slow to read.
  ::fcntl(pipe->write_end.get(), F_SETFL, O_NONBLOCK);
  if (absl::Status s = loop_.WatchReadable(
          pipe->read_end.get(), [this, local_rank](uint32_t) { OnHeartbeat(local_rank); });
      !s.ok()) {
    return s;
  }
  heartbeat_pipes_[local_rank] = std::move(pipe->read_end);
  heartbeats_->Watch(local_rank, MonotonicNow());  // the startup bound counts from now
  child_end = pipe->write_end.get();
  child_ends.push_back(std::move(pipe->write_end));
  ArmHeartbeatTimer();
  return absl::OkStatus();
}

void HangWatch::WorkerStarted(int local_rank, pid_t pid) { pids_[local_rank] = pid; }

void HangWatch::WorkerEnded(int local_rank) {
  auto it = pids_.find(local_rank);
  if (it != pids_.end()) {
    timers_.ForgetPid(it->second);
    pids_.erase(it);
  }
  if (heartbeats_) heartbeats_->Forget(local_rank);
  if (dwell_) dwell_->Forget(local_rank);
}

void HangWatch::OnHeartbeat(int local_rank) {
  auto it = heartbeat_pipes_.find(local_rank);
  if (it == heartbeat_pipes_.end()) return;
  char buf[256];
  ssize_t n;
  bool beat = false;
  while ((n = ::read(it->second.get(), buf, sizeof buf)) > 0) beat = true;
  if (n == 0) {  // the worker closed it (or exited): nothing more to wait for
    heartbeats_->Forget(local_rank);
    loop_.Unwatch(it->second.get());
    heartbeat_pipes_.erase(it);
  }
  if (beat) heartbeats_->Beat(local_rank, MonotonicNow());
  ArmHeartbeatTimer();
}

void HangWatch::ArmHeartbeatTimer() {
  const absl::Time next = heartbeats_->NextDeadline();
  if (next == absl::InfiniteFuture()) return heartbeat_timer_->Disarm();
  heartbeat_timer_->Arm(std::max(next - MonotonicNow(), absl::Milliseconds(1)));
}

void HangWatch::OnHeartbeatDeadline() {
  if (!heartbeat_timer_->Acknowledge()) return;
  for (const WorkerHeartbeats::Overdue& overdue : heartbeats_->TakeOverdue(MonotonicNow())) {
    Hang hang;
    hang.kind = Hang::Kind::kHeartbeat;
    hang.local_rank = overdue.local_rank;
    hang.duration = overdue.silent;
    hang.never_beat = overdue.never_beat;
    Declare(hang);
  }
  ArmHeartbeatTimer();
}

void HangWatch::OnTimerRequests() {
  char buf[8192];
  ssize_t n;
  while ((n = ::read(settings_.timer_fifo, buf, sizeof buf)) > 0) {
    fifo_partial_.append(buf, static_cast<size_t>(n));
  }
  size_t start = 0;
  for (size_t nl; (nl = fifo_partial_.find('\n', start)) != std::string::npos; start = nl + 1) {
    const std::string line = fifo_partial_.substr(start, nl - start);
    absl::StatusOr<TimerRequest> request = ParseTimerRequest(line);
    if (!request.ok()) {
      // One line a second at most: 2 MB of garbage once made 140 MB of log.
      const int malformed = malformed_lines_.Occurred(absl::Now());
      if (malformed == 0) continue;
      spdlog::warn(
          "TORCHELASTIC_TIMER_FILE: ignored a request that is not a FileTimerClient's "
          "({}): {}{}",
          std::string(request.status().message()), Printable(line.substr(0, 200)),
          malformed > 1 ? absl::StrCat(" (and ", malformed - 1, " more such since the last report)")
                        : "");
      continue;
    }
    // Only this attempt's workers (and what they started) may set timers: a timer is a
    // license to have a process killed.
    if (LocalRankOfProcess(request->pid) < 0) {
      if (!std::exchange(said_stranger_, true)) {
        spdlog::warn(
            "TORCHELASTIC_TIMER_FILE: ignored a timer for pid {}, which is not one "
            "of this attempt's workers or their children",
            request->pid);
      }
      continue;
    }
    if (!timers_.Apply(*request)) {
      spdlog::warn("TORCHELASTIC_TIMER_FILE: {} timers held already; ignored scope '{}'",
                   FileTimers::kMaxTimers, Printable(request->scope));
    }
  }
  fifo_partial_.erase(0, start);
  if (fifo_partial_.size() > kMaxRequestLine) fifo_partial_.clear();
  ArmFileTimer();
}

void HangWatch::ArmFileTimer() {
  const absl::Time next = timers_.NextDeadline();
  if (next == absl::InfiniteFuture()) return file_timer_->Disarm();
  file_timer_->Arm(std::max(next - absl::Now(), absl::Milliseconds(1)));
}

void HangWatch::OnTimerDeadline() {
  if (!file_timer_->Acknowledge()) return;
  for (const FileTimers::Expiry& expiry : timers_.TakeExpired(absl::Now())) {
    const int local_rank = LocalRankOfProcess(expiry.pid);
    if (local_rank < 0) continue;  // gone meanwhile
    if (expiry.signal <= 0) {
      spdlog::warn(
          "FileTimer scope '{}' of pid {} expired; it asked for no signal "
          "(signal={}): not stopping it",
          Printable(expiry.scope), expiry.pid, expiry.signal);
      continue;
    }
    Hang hang;
    hang.kind = Hang::Kind::kTimer;
    hang.local_rank = local_rank;
    hang.scope = expiry.scope;
    hang.deadline = expiry.deadline;
    hang.signal = expiry.signal;
    hang.pid = expiry.pid;
    Declare(hang);
  }
  ArmFileTimer();
}

void HangWatch::OnLook() {
  if (!look_timer_->Acknowledge()) return;
  const absl::Time now = MonotonicNow();
  for (const auto& [local_rank, pid] : pids_) {
    if (std::optional<absl::Duration> overdue =
            dwell_->Observe(local_rank, AnyTaskUninterruptible(pid), now)) {
      Hang hang;
      hang.kind = Hang::Kind::kUninterruptible;
      hang.local_rank = local_rank;
      hang.duration = *overdue;
      Declare(hang);
    }
  }
  look_timer_->Arm(
      std::clamp(settings_.uninterruptible_timeout / 10, absl::Milliseconds(10), absl::Seconds(1)));
}

int HangWatch::LocalRankOfProcess(pid_t pid) const {
  const pid_t group = ::getpgid(pid);
  if (group < 0) return -1;
  for (const auto& [local_rank, worker] : pids_) {
    if (worker == group) return local_rank;
  }
  return -1;
}

void HangWatch::Declare(const Hang& hang) {
  if (quiet_) return;
  on_hang_(hang);
}

}  // namespace ddprun
