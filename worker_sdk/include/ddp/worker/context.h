#pragma once
// The worker SDK's entry point:
//
//   absl::StatusOr<ddp::worker::Context> ctx = ddp::worker::Context::FromEnv();
//   if (!ctx.ok()) { std::cerr << ctx.status() << "\n"; return 1; }
//   ctx->Barrier("start");
//   auto comm = ctx->InitNccl();           // when built with NCCL (ddp/worker/nccl.h)
//
// Collectives here move small blobs through the Store (no GPU needed). Every rank must call
// them in the same order with the same names; a timeout names the ranks that never came.

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "ddp/worker/config.h"
#include "ddp/worker/environment.h"
#include "ddp/worker/store.h"
#if DDP_WORKER_HAS_NCCL
#include "ddp/worker/nccl.h"
#endif

namespace ddp::worker {

struct ContextOptions {
  // Deadline of one Store call that does not wait for keys (connecting included).
  absl::Duration store_call_timeout = absl::Seconds(300);
  // When rank 0 serves the store itself, how long its Context's destruction waits for the
  // other ranks' Contexts to be destroyed first (their last calls would fail otherwise).
  // Not waited for after a collective, InitNccl or a communicator of this Context failed:
  // the job is failing, and its failure must reach the agent at once.
  absl::Duration close_timeout = absl::Seconds(30);
};

namespace internal {
struct ContextAccess;
}  // namespace internal

class Context {
 public:
  /// Reads the environment (EnvironmentFromProcess), then connects to the Store: the ddprun
  /// master's (DDPRUN_STORE_ADDR), or else rank 0 starts one at MASTER_PORT and every rank
  /// connects to MASTER_ADDR:MASTER_PORT.
  static absl::StatusOr<Context> FromEnv(const ContextOptions& options = {});
  /// The same with an environment already parsed.
  static absl::StatusOr<Context> Create(const Environment& env, const ContextOptions& options = {});

  Context(Context&&) noexcept;
  Context& operator=(Context&&) noexcept;
  /// When rank 0 serves the store, it waits here (up to close_timeout) until every other
  /// rank has destroyed its Context, so that no rank loses the store while still using it.
  ~Context();

  const Environment& env() const;
  int rank() const { return env().rank; }
  int world_size() const { return env().world_size; }
  int local_rank() const { return env().local_rank; }
  int local_world_size() const { return env().local_world_size; }

  Store& store();

  /// Tells the agent this worker is alive (ddprun --worker-heartbeat-timeout: a worker that
  /// does not call it within the timeout is taken for hung and killed). Cheap: one write to
  /// a pipe, never blocking; call it from the training loop. A no-op when not asked for.
  absl::Status Heartbeat();

  /// Returns once every rank has called Barrier(name) (the same number of times).
  absl::Status Barrier(absl::string_view name, absl::Duration timeout = absl::Seconds(300));
  /// `root`'s `value` on every rank (`value` is ignored elsewhere).
  absl::StatusOr<std::string> Broadcast(absl::string_view name, int root, const std::string& value,
                                        absl::Duration timeout = absl::Seconds(300));
  /// Every rank's `value`, indexed by rank.
  absl::StatusOr<std::vector<std::string>> AllGather(absl::string_view name,
                                                     const std::string& value,
                                                     absl::Duration timeout = absl::Seconds(300));

#if DDP_WORKER_HAS_NCCL
  /// A communicator over every rank, on CUDA device LOCAL_RANK (of those CUDA_VISIBLE_DEVICES
  /// shows). Rank 0 (with more than `scalable_threshold` ranks: the first rank of each of
  /// NCCL's groups, see NcclOptions) makes the ncclUniqueId and publishes it in the store under a
  /// key scoped by run, round and `name`; every rank then initialises within `options.timeout`.
  /// Errors name the rank, the key and the likely cause. Without a visible device:
  /// FailedPrecondition "no CUDA device visible: ...".
  absl::StatusOr<NcclCommunicator> InitNccl(absl::string_view name = "world",
                                            const NcclOptions& options = {});
  /// When `signal` arrives (the agent's stop signal, SIGTERM by default), the watchdog aborts
  /// every communicator of this context, so that threads stuck in NCCL return, and then
  /// lets the signal take its previous course (the handler that was installed, or its
  /// default action). Call it after installing your own handler, if any.
  absl::Status AbortNcclOnSignal(int signal);
#endif

 private:
  friend struct internal::ContextAccess;  // the SDK's own sources (src/context_state.h)
  struct State;

  explicit Context(std::unique_ptr<State> state);
  /// The store key prefix of the next use of `name` by `kind` ("barrier", "nccl", ...):
  /// scoped by run, round, kind, name and how many times it was used before. Every rank gets
  /// the same prefixes when it makes the same calls in the same order.
  std::string NextKeyPrefix(absl::string_view kind, absl::string_view name);

  std::unique_ptr<State> state_;
};

}  // namespace ddp::worker
