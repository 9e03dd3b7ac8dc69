#pragma once
// TcpProbes: non-blocking TCP connections that say whether anything listens at an address,
// for a caller with no event loop of its own (the master's ticker): started, then polled.
// A refusal means the host answered and nothing listens there; no answer means the path (or
// the host) is down, or busy.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/unique_fd.h"

namespace ddprun {

class TcpProbes {
 public:
  enum class Answer { kListens, kRefused, kNoAnswer };
  struct Done {
    uint64_t id = 0;
    Answer answer = Answer::kNoAnswer;
  };

  /// Starts a connection to `ip`:`port`, to be answered by Poll within `timeout`. `ip` must
  /// be an address, not a name (nothing is looked up). False when it cannot start: not an
  /// address, no socket, or kMaxInFlight probes out already.
  bool Start(uint64_t id, const std::string& ip, int port, absl::Time now, absl::Duration timeout);
  /// The probes answered by `now`; those whose time is up answer kNoAnswer.
  std::vector<Done> Poll(absl::Time now);
  /// When Poll must run again: a connection in flight raises no event here, so every
  /// kPollEvery while any is out; InfiniteFuture when none is.
  absl::Time NextPoll(absl::Time now) const;
  size_t in_flight() const { return probes_.size(); }

  static constexpr size_t kMaxInFlight = 256;
  static constexpr absl::Duration kPollEvery = absl::Milliseconds(10);

 private:
  struct Probe {
    uint64_t id = 0;
    UniqueFd fd;
    absl::Time deadline;
    std::optional<int> known;  // connect()'s own answer (an errno, 0: connected), if it gave one
  };
  std::vector<Probe> probes_;
};

}  // namespace ddprun
