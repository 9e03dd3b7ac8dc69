#pragma once
// The FIFO torch's FileTimerClient writes to (TORCHELASTIC_TIMER_FILE), served by the agent
// for its whole life when TORCHELASTIC_ENABLE_FILE_TIMER=1, as torch's agent does. The
// requests are read by each attempt's HangWatch (file_timers.h has the rules).
//
// Where torch puts it at /tmp/watchdog_timer_<uuid>, which anyone could replace, ddprun makes
// it 0600 in a fresh 0700 folder under $TMPDIR, unless TORCHELASTIC_TIMER_FILE names a path.

#include <string>

#include "absl/status/statusor.h"
#include "common/unique_fd.h"

namespace ddprun {

class TimerFifo {
 public:
  /// `path` empty: a new private one. Else that path, replaced if something is there (as
  /// torch does); the error names the path.
  static absl::StatusOr<TimerFifo> Create(const std::string& path);
  TimerFifo(TimerFifo&&) = default;
  TimerFifo& operator=(TimerFifo&&) = delete;
  ~TimerFifo();  // removes the FIFO (and the folder ddprun made for it)

  const std::string& path() const { return path_; }
  /// The folder ddprun made for it; empty when the user named the path.
  const std::string& folder() const { return folder_; }
  /// Open for reading and writing, non-blocking: reads never see end-of-file between
  /// clients, and a client's non-blocking open always finds a reader.
  int fd() const { return fd_.get(); }

 private:
  TimerFifo(std::string folder, std::string path, UniqueFd fd)
      : folder_(std::move(folder)), path_(std::move(path)), fd_(std::move(fd)) {}
  std::string folder_;  // empty: the user's path
  std::string path_;
  UniqueFd fd_;
};

}  // namespace ddprun
