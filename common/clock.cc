#include "common/clock.h"

#include <time.h>

namespace ddprun {

absl::Time MonotonicNow() {
  timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return absl::TimeFromTimespec(ts);
}

}  // namespace ddprun
