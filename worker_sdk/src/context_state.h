#pragma once
// What a Context holds; shared by context.cc and nccl.cc.

#include <map>
#include <memory>
#include <string>

#include "ddp/worker/context.h"

namespace ddp::worker {

#if DDP_WORKER_HAS_NCCL
class NcclWatchdog;
#endif

struct Context::State {
  ~State();
  Environment env;
  ContextOptions options;
  std::unique_ptr<StoreServer> server;  // rank 0, when the launcher gives no store
  std::unique_ptr<Store> store;
  std::map<std::string, int> uses;      // kind/name -> calls so far
  bool failed = false;                  // a collective (or InitNccl) returned an error

  // Records a failed collective on the way out.
  template <typename T>
  T Note(T result) {
    if (!StatusOf(result).ok()) failed = true;
    return result;
  }
  static const absl::Status& StatusOf(const absl::Status& s) { return s; }
  template <typename V>
  static const absl::Status& StatusOf(const absl::StatusOr<V>& s) { return s.status(); }
#if DDP_WORKER_HAS_NCCL
  std::shared_ptr<NcclWatchdog> watchdog;  // made by the first InitNccl that asks for it
#endif
};

}  // namespace ddp::worker
