#pragma once
// What a Context holds; shared by context.cc and nccl.cc.

#include <atomic>
#include <map>
#include <memory>
#include <string>

#include "ddp/worker/context.h"

namespace ddp::worker {

#if DDP_WORKER_HAS_NCCL
class NcclWatchdog;
#endif

struct Context::State {
  ~State();  // unregisters the rank
  /// Claims `rank` for this process (FailedPrecondition while another Context has it) and
  /// returns how many Contexts this process made for it before.
  absl::StatusOr<int> Register(int rank);
  void Unregister();
  /// "ddp/r<round>/g<generation>": where this Context's keys live.
  std::string KeyRoot() const;
  /// The end of a Context whose store rank 0 serves: the others say they are done; rank 0
  /// waits for them (see ContextOptions::close_timeout).
  void Close();

  // Records a failed collective (or InitNccl) on the way out.
  template <typename T>
  T Note(T result) {
    if (!StatusOf(result).ok()) failed->store(true);
    return result;
  }
  static const absl::Status& StatusOf(const absl::Status& s) { return s; }
  template <typename V>
  static const absl::Status& StatusOf(const absl::StatusOr<V>& s) {
    return s.status();
  }

  Environment env;
  ContextOptions options;
  int registered_rank = -1;
  int generation = 0;
  std::unique_ptr<StoreServer> server;  // rank 0, when the launcher gives no store
  std::unique_ptr<Store> store;
  StoreAccess tls;                  // TLS to the master's Store (DDPRUN_TLS_*), and the token
  std::map<std::string, int> uses;  // kind/name -> calls so far
  // Set when a collective, InitNccl or a communicator of this Context failed; shared with
  // the communicators, which may outlive a moved Context's state.
  std::shared_ptr<std::atomic<bool>> failed = std::make_shared<std::atomic<bool>>(false);
#if DDP_WORKER_HAS_NCCL
  std::shared_ptr<NcclWatchdog> watchdog;  // made by the first InitNccl that asks for it
#endif
};

namespace internal {

// What the SDK's sources use of a Context that its users do not see.
struct ContextAccess {
  using State = Context::State;
  static State& StateOf(Context& ctx) { return *ctx.state_; }
  static std::string NextKeyPrefix(Context& ctx, absl::string_view kind, absl::string_view name) {
    return ctx.NextKeyPrefix(kind, name);
  }
};

}  // namespace internal
}  // namespace ddp::worker
