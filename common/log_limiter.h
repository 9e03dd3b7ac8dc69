#pragma once
// LogLimiter: a recurring occurrence logged at most once a period, with how many times it
// happened since it was last said (an outsider's connections, a flood of garbage lines:
// a log must not grow with what a peer sends). Pure: the caller gives the time.

#include <utility>

#include "absl/time/time.h"

namespace ddprun {

class LogLimiter {
 public:
  explicit LogLimiter(absl::Duration period = absl::Seconds(1)) : period_(period) {}

  /// One more occurrence at `now`. When it is time to say so: how many occurrences the line
  /// covers (this one and those held back since the last line); else 0.
  int Occurred(absl::Time now) {
    ++pending_;
    if (now - last_ < period_) return 0;
    last_ = now;
    return std::exchange(pending_, 0);
  }

 private:
  absl::Duration period_;
  absl::Time last_ = absl::InfinitePast();
  int pending_ = 0;
};

}  // namespace ddprun
