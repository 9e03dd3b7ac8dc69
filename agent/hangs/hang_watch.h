#pragma once
// HangWatch: the ways a worker of one attempt is found hung, as fds in the agent's event
// loop. It decides nothing about what follows: it calls `on_hang` with what it found.
//   - its heartbeat pipe (--worker-heartbeat-timeout, WorkerHeartbeats);
//   - torch's FileTimer requests on the agent's FIFO (TORCHELASTIC_ENABLE_FILE_TIMER,
//     FileTimers): an expired timer with a signal;
//   - a look at /proc every tenth of TORCHELASTIC_UNINTERRUPTIBLE_STATE_TIMEOUT (at most every
//     second): a worker with a task in state D for that long (UninterruptibleDwell).

#include <sys/types.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "agent/hangs/file_timers.h"
#include "agent/hangs/worker_heartbeats.h"
#include "common/event_loop.h"
#include "common/log_limiter.h"
#include "common/unique_fd.h"

namespace ddprun {

struct HangSettings {
  absl::Duration heartbeat_timeout = absl::ZeroDuration();  // zero: off
  absl::Duration heartbeat_startup = absl::ZeroDuration();  // before the first beat; zero: none
  absl::Duration uninterruptible_timeout = absl::ZeroDuration();  // zero: off
  int timer_fifo = -1;  // the agent's FileTimer FIFO (TimerFifo::fd); -1: none
};

struct Hang {
  enum class Kind { kHeartbeat, kTimer, kUninterruptible };
  Kind kind = Kind::kHeartbeat;
  int local_rank = 0;
  absl::Duration duration;  // kHeartbeat: silent for; kUninterruptible: in D state for
  bool never_beat = false;  // kHeartbeat: no beat since its start (the startup bound)
  std::string scope;        // kTimer
  absl::Time deadline;      // kTimer: the timer's expiration (wall clock)
  int signal = 0;           // kTimer: what the client asked the process to be stopped with
  pid_t pid = 0;            // kTimer: the process that asked (the worker or one of its group)
};

/// Why a worker is taken for hung (or the node unhealthy), for the log, the failure summary
/// and the hang report: the rank, what was missed, and the option that set the bound.
/// `process_state` describes the worker's process for a kUninterruptible hang (proc_state.h).
std::string DescribeHang(const Hang& hang, int rank, const HangSettings& settings,
                         const std::string& process_state);

class HangWatch {
 public:
  HangWatch(HangSettings settings, EventLoop& loop, std::function<void(const Hang&)> on_hang);
  ~HangWatch();
  HangWatch(const HangWatch&) = delete;
  HangWatch& operator=(const HangWatch&) = delete;

  absl::Status Start();
  /// With --worker-heartbeat-timeout: the worker's heartbeat pipe; its write end is
  /// appended to `child_ends` and its number put in `child_end`.
  absl::Status SetUpHeartbeat(int local_rank, int& child_end, std::vector<UniqueFd>& child_ends);
  void WorkerStarted(int local_rank, pid_t pid);
  void WorkerEnded(int local_rank);
  /// No more hangs are declared (the attempt stops); the pipes and timers stay until Close.
  void Quiet() { quiet_ = true; }
  void Close();

 private:
  void OnHeartbeat(int local_rank);
  void OnHeartbeatDeadline();
  void ArmHeartbeatTimer();
  void OnTimerRequests();
  void OnTimerDeadline();
  void ArmFileTimer();
  void OnLook();
  int LocalRankOfProcess(pid_t pid) const;  // the worker whose group `pid` is in; -1: none
  void Declare(const Hang& hang);

  const HangSettings settings_;
  EventLoop& loop_;
  const std::function<void(const Hang&)> on_hang_;
  bool quiet_ = false;
  LogLimiter malformed_lines_;  // timer requests that are not FileTimerClient's
  bool said_stranger_ = false;
  std::map<int, pid_t> pids_;  // running workers, by local rank
  std::map<int, UniqueFd> heartbeat_pipes_;
  std::unique_ptr<OneShotTimer> heartbeat_timer_;
  std::unique_ptr<WorkerHeartbeats> heartbeats_;
  std::unique_ptr<OneShotTimer> file_timer_;
  FileTimers timers_;
  std::string fifo_partial_;
  std::unique_ptr<OneShotTimer> look_timer_;
  std::unique_ptr<UninterruptibleDwell> dwell_;
  std::vector<int> watched_fds_;
};

}  // namespace ddprun
