#pragma once
// The rules of torch's file-based watchdog (torch.distributed.elastic.timer.FileTimerClient),
// pure. Workers write one JSON request per line to the FIFO in TORCHELASTIC_TIMER_FILE:
//   {"version": 1, "pid": 1234, "scope_id": "train.py#42", "expiration_time": 1.7e9, "signal": 9}
// (torch 1.13 and main send the same fields; `version` may be absent). A request sets the
// timer of (pid, scope); a negative expiration_time releases it. A timer whose expiration
// (wall clock, seconds since the epoch) has passed has expired: its process is stopped with
// the signal of its earliest expired timer that has one (signal <= 0: reported, not stopped),
// and every timer of that pid is forgotten, as torch's FileTimerServer does.
//
// Also here, the rule of TORCHELASTIC_UNINTERRUPTIBLE_STATE_TIMEOUT (UninterruptibleDwell).

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace ddprun {

struct TimerRequest {
  int pid = 0;
  std::string scope;
  double expiration = 0;  // seconds since the epoch; < 0: release
  int signal = 0;
};

/// One line of the FIFO; the error names what is wrong with it.
absl::StatusOr<TimerRequest> ParseTimerRequest(absl::string_view line);

class FileTimers {
 public:
  /// The most timers held; requests past it are refused (a worker in a loop of new scopes).
  static constexpr size_t kMaxTimers = 100000;

  struct Expiry {
    int pid = 0;
    std::string scope;  // the timer whose signal is used (or the earliest, when none has one)
    absl::Time deadline;
    int signal = 0;  // <= 0: none requested; the process is not stopped
  };

  /// Sets or releases a timer; false when the request was refused (kMaxTimers).
  bool Apply(const TimerRequest& request);
  /// The processes whose timers have expired by `now` (wall clock); each is reported once
  /// and its timers forgotten.
  std::vector<Expiry> TakeExpired(absl::Time now);
  /// Forgets every timer of `pid` (it exited).
  void ForgetPid(int pid);
  /// The earliest expiration held (InfiniteFuture: none); wall clock.
  absl::Time NextDeadline() const;
  size_t size() const { return timers_.size(); }

 private:
  std::map<std::pair<int, std::string>, TimerRequest> timers_;
};

/// TORCHELASTIC_UNINTERRUPTIBLE_STATE_TIMEOUT: a worker whose process has a task in
/// uninterruptible sleep (state D) at every look for `timeout` is overdue. Time comes in
/// (monotonic); the caller looks often enough (see HangWatch).
class UninterruptibleDwell {
 public:
  explicit UninterruptibleDwell(absl::Duration timeout) : timeout_(timeout) {}

  /// What a look at `local_rank` found. Returns how long it has been in D state when that
  /// reaches the timeout, once; else nullopt.
  std::optional<absl::Duration> Observe(int local_rank, bool uninterruptible, absl::Time now);
  void Forget(int local_rank) { stretches_.erase(local_rank); }

 private:
  const absl::Duration timeout_;
  struct Stretch {
    absl::Time since;  // first seen in D state
    bool reported = false;
  };
  std::map<int, Stretch> stretches_;  // by local rank, while in D state
};

}  // namespace ddprun
