#pragma once
// NCCL communicators from the ddprun environment (only when the SDK is built with NCCL:
// DDP_WORKER_HAS_NCCL). Created by Context::InitNccl:
//
//   absl::StatusOr<ddp::worker::NcclCommunicator> world = ctx.InitNccl();
//   if (ncclAllReduce(send, recv, n, ncclFloat, ncclSum, world->get(), stream) == ncclInProgress)
//     world->WaitReady(absl::Seconds(60));   // before the next NCCL call on it
//   absl::Status done = world->Synchronize(stream, absl::Seconds(60));
//
// Communicators are non-blocking (ncclConfig_t.blocking = 0) so that every wait has a
// deadline and a stuck or failed peer ends in ncclCommAbort and an error, not a hang. The
// price is NCCL's rule for such communicators: a call may return ncclInProgress, and then
// no other NCCL call may be made on the communicator until WaitReady has returned.

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ddp::worker {

struct NcclOptions {
  // Deadline of the ncclUniqueId exchange, and then of NCCL's own initialisation.
  absl::Duration timeout = absl::Seconds(300);
  // Above this many ranks (and without NCCL_COMM_ID), ncclCommInitRankScalable with
  // ceil(WORLD_SIZE / ranks_per_root) ncclUniqueIds, split among the ranks as NCCL does (even
  // groups, the first ones a rank larger), each made by the first rank of its group.
  int scalable_threshold = 128;
  int ranks_per_root = 128;
  // The context's watchdog aborts the communicator on an asynchronous NCCL error and on the
  // signals given to Context::AbortNcclOnSignal.
  bool watchdog = true;
  // With the watchdog: also abort on SIGTERM, the agent's stop signal at the end of a round,
  // then let SIGTERM do what it did before (Context::AbortNcclOnSignal(SIGTERM)).
  bool abort_on_sigterm = true;
};

namespace internal {
struct NcclAccess;
}  // namespace internal

class NcclCommunicator {
 public:
  NcclCommunicator(NcclCommunicator&&) noexcept;
  NcclCommunicator& operator=(NcclCommunicator&&) noexcept;
  /// Destroys the communicator (nothing more once it was aborted).
  ~NcclCommunicator();

  /// NCCL's handle; nullptr for a rank left out of a split (NCCL_SPLIT_NOCOLOR) or once
  /// aborted. A copy of it must not be used once the communicator was aborted (the watchdog
  /// may abort it on another thread): check the result of WaitReady after NCCL calls.
  ncclComm_t get() const;
  const std::string& name() const;
  int rank() const;
  int size() const;
  int device() const;

  /// NCCL's asynchronous error for this communicator; OK while there is none.
  absl::Status AsyncError() const;
  /// Waits until the last NCCL call on this communicator has returned (no longer
  /// ncclInProgress). An NCCL error, or `timeout` passing, aborts the communicator and
  /// returns an error.
  absl::Status WaitReady(absl::Duration timeout);
  /// WaitReady, then waits until the work queued on `stream` is done. An NCCL error, or
  /// `timeout` passing, aborts the communicator (so that no rank stays stuck in it) and
  /// returns an error.
  absl::Status Synchronize(cudaStream_t stream, absl::Duration timeout);
  /// ncclCommAbort: in-flight operations end, the communicator is gone. Thread-safe.
  void Abort(const std::string& why);
  bool aborted() const;

  /// ncclCommSplit: ranks with the same `color` form a communicator named `name`, ordered by
  /// `key`. Every rank of this communicator must call it.
  absl::StatusOr<NcclCommunicator> Split(int color, int key, const std::string& name,
                                         absl::Duration timeout = absl::Seconds(300));

 private:
  friend struct internal::NcclAccess;  // the SDK's own sources (src/nccl_internal.h)
  struct Handle;

  explicit NcclCommunicator(std::shared_ptr<Handle> handle);
  // Aborts, and says that `what` (+ `timeout`) happened.
  absl::Status AbortStuck(const std::string& what, absl::Duration timeout);

  std::shared_ptr<Handle> handle_;
};

}  // namespace ddp::worker
