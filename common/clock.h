#pragma once
// The one clock for deadlines and timeouts. CLOCK_MONOTONIC never jumps: an NTP step or a
// date change must not kill a healthy worker or abort a communicator. Its absl::Time values
// only compare with each other; they are not dates (for those, absl::Now()).

#include "absl/time/time.h"

namespace ddprun {

/// Monotonic time: seconds since boot, as an absl::Time.
absl::Time MonotonicNow();

}  // namespace ddprun
