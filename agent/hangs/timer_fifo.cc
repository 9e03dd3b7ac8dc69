#include "agent/hangs/timer_fifo.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"

namespace ddprun {

absl::StatusOr<TimerFifo> TimerFifo::Create(const std::string& path) {
  std::string folder;
  std::string fifo = path;
  if (fifo.empty()) {
    const char* tmp = ::getenv("TMPDIR");
    folder = absl::StrCat(tmp != nullptr && tmp[0] != '\0' ? tmp : "/tmp", "/ddprun-timer-XXXXXX");
    if (::mkdtemp(folder.data()) == nullptr) {
      return ErrnoStatus(errno, absl::StrCat("cannot make a folder for TORCHELASTIC_TIMER_FILE "
                                             "like ",
                                             folder, " (is TMPDIR writable?)"));
    }
    fifo = folder + "/watchdog_timer";
  } else {
    ::unlink(fifo.c_str());  // torch's FileTimerServer replaces what is there too
  }
  if (::mkfifo(fifo.c_str(), 0600) != 0) {
    const int err = errno;
    if (!folder.empty()) ::rmdir(folder.c_str());
    return ErrnoStatus(err, absl::StrCat("TORCHELASTIC_TIMER_FILE: cannot make the FIFO ", fifo,
                                         "; set TORCHELASTIC_TIMER_FILE to a path in a folder "
                                         "you can write, or unset it"));
  }
  UniqueFd fd(::open(fifo.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC));
  if (!fd.valid()) {
    const int err = errno;
    ::unlink(fifo.c_str());
    if (!folder.empty()) ::rmdir(folder.c_str());
    return ErrnoStatus(err, absl::StrCat("TORCHELASTIC_TIMER_FILE: cannot open ", fifo));
  }
  return TimerFifo(std::move(folder), std::move(fifo), std::move(fd));
}

TimerFifo::~TimerFifo() {
  if (!fd_.valid()) return;  // moved from
  ::unlink(path_.c_str());
  if (!folder_.empty()) ::rmdir(folder_.c_str());
}

}  // namespace ddprun
