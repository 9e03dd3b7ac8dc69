#include "src/nccl_internal.h"

#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace ddp::worker {

std::string NcclError(ncclResult_t result) {
  const char* last = ncclGetLastError(nullptr);
  return absl::StrCat(ncclGetErrorString(result),
                      last != nullptr && *last ? absl::StrCat(" (", last, ")") : "");
}

ncclResult_t PollWhileInProgress(const std::function<ncclResult_t()>& state, absl::Time deadline) {
  const absl::Time spin_until = ddprun::MonotonicNow() + absl::Milliseconds(1);
  while (true) {
    const ncclResult_t s = state();
    if (s != ncclInProgress) return s;
    const absl::Time now = ddprun::MonotonicNow();
    if (now >= deadline) return ncclInProgress;
    if (now < spin_until) {
      std::this_thread::yield();
    } else {
      absl::SleepFor(absl::Microseconds(50));
    }
  }
}

}  // namespace ddp::worker
