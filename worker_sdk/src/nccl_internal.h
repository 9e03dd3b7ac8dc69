#pragma once
// What nccl.cc and nccl_watchdog.cc share: a communicator's handle, NCCL's error text, and
// the wait on a non-blocking communicator.

#include <nccl.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "absl/time/time.h"
#include "common/clock.h"
#include "ddp/worker/nccl.h"

namespace ddp::worker {

class NcclWatchdog;

/// NCCL's words for `result`, with its last error when it has one.
std::string NcclError(ncclResult_t result);

/// Polls `state` until it is not ncclInProgress or `deadline` (monotonic) passes: spinning at
/// first (enqueueing a collective takes microseconds), then sleeping a little between checks.
ncclResult_t PollWhileInProgress(const std::function<ncclResult_t()>& state, absl::Time deadline);

struct NcclCommunicator::Handle {
  ~Handle() {
    std::lock_guard<std::mutex> lock(mu);
    if (comm == nullptr || aborted) return;
    // ncclCommDestroy frees nothing while work is pending or after an error: finalize
    // first, with a deadline, and abort a communicator that will not finish.
    const auto current = [&] {
      ncclResult_t s = ncclSuccess;
      const ncclResult_t r = ncclCommGetAsyncError(comm, &s);
      return r == ncclSuccess ? s : r;
    };
    ncclResult_t state = current();
    if (state == ncclSuccess) {
      const ncclResult_t r = ncclCommFinalize(comm);
      state = r == ncclSuccess || r == ncclInProgress
                  ? PollWhileInProgress(current, ddprun::MonotonicNow() + absl::Seconds(10))
                  : r;
    }
    if (state == ncclSuccess) {
      ncclCommDestroy(comm);
    } else {
      ncclCommAbort(comm);
    }
  }

  // NCCL's state of the communicator; ncclInvalidUsage once aborted. Under `mu`, so that an
  // abort on another thread never frees the communicator during the call.
  ncclResult_t State() {
    std::lock_guard<std::mutex> lock(mu);
    if (aborted || comm == nullptr) return ncclInvalidUsage;
    ncclResult_t state = ncclSuccess;
    const ncclResult_t r = ncclCommGetAsyncError(comm, &state);
    return r == ncclSuccess ? state : r;
  }

  std::mutex mu;  // guards comm against Abort, and abort_reason
  ncclComm_t comm = nullptr;
  std::atomic<bool> aborted{false};
  std::string abort_reason;
  std::string name;
  int rank = 0;
  int size = 0;
  int device = 0;
  std::shared_ptr<std::atomic<bool>> context_failed;  // the Context's "failed" flag
  std::weak_ptr<NcclWatchdog> watchdog;               // splits are watched by the same one
};

namespace internal {

// What the SDK's sources use of a communicator that its users do not see.
struct NcclAccess {
  using Handle = NcclCommunicator::Handle;
  static NcclCommunicator Make(std::shared_ptr<Handle> handle) {
    return NcclCommunicator(std::move(handle));
  }
};

}  // namespace internal
}  // namespace ddp::worker
