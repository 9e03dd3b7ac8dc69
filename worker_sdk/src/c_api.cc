// The C API (include/ddp_worker.h) over Context.

#include "ddp_worker.h"

#include <exception>
#include <list>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "ddp/worker/context.h"

struct ddp_worker {
  explicit ddp_worker(ddp::worker::Context c) : ctx(std::move(c)) {}
  ddp::worker::Context ctx;
#if DDP_WORKER_HAS_NCCL
  std::list<ddp::worker::NcclCommunicator> comms;  // stable addresses; destroyed at finalize
#endif
};

namespace {

thread_local std::string g_last_error;

int Fail(const absl::Status& status) {
  g_last_error = std::string(status.message());
  return -1;
}

// The C API's timeouts: seconds, and <= 0 (or NaN) for none.
absl::Duration Seconds(double s) { return s > 0 ? absl::Seconds(s) : absl::InfiniteDuration(); }

int NullWorker(const char* function) {
  return Fail(absl::InvalidArgumentError(absl::StrCat(function, ": the ddp_worker is NULL")));
}

// Runs `body`, turning any exception (bad_alloc, a library's) into an error, never a throw
// across the C boundary.
template <typename Body>
int Guarded(Body body) {
  try {
    g_last_error.clear();
    return body();
  } catch (const std::exception& e) {
    return Fail(absl::InternalError(e.what()));
  } catch (...) {
    return Fail(absl::InternalError("unknown C++ exception"));
  }
}

}  // namespace

extern "C" {

int ddp_worker_init(ddp_worker** out) {
  return Guarded([&] {
    if (out == nullptr) return Fail(absl::InvalidArgumentError("ddp_worker_init: out is NULL"));
    *out = nullptr;
    absl::StatusOr<ddp::worker::Context> ctx = ddp::worker::Context::FromEnv();
    if (!ctx.ok()) return Fail(ctx.status());
    *out = new ddp_worker(std::move(*ctx));
    return 0;
  });
}

int ddp_worker_rank(const ddp_worker* w) {
  return w != nullptr ? w->ctx.rank() : NullWorker(__func__);
}
int ddp_worker_world_size(const ddp_worker* w) {
  return w != nullptr ? w->ctx.world_size() : NullWorker(__func__);
}
int ddp_worker_local_rank(const ddp_worker* w) {
  return w != nullptr ? w->ctx.local_rank() : NullWorker(__func__);
}
int ddp_worker_local_world_size(const ddp_worker* w) {
  return w != nullptr ? w->ctx.local_world_size() : NullWorker(__func__);
}

int ddp_worker_heartbeat(ddp_worker* w) {
  if (w == nullptr) return NullWorker(__func__);
  absl::Status s = w->ctx.Heartbeat();
  return s.ok() ? 0 : Fail(s);
}

int ddp_worker_barrier(ddp_worker* w, const char* name, double timeout_seconds) {
  if (w == nullptr) return NullWorker(__func__);
  return Guarded([&] {
    absl::Status s = w->ctx.Barrier(name != nullptr ? name : "barrier", Seconds(timeout_seconds));
    return s.ok() ? 0 : Fail(s);
  });
}

#if DDP_WORKER_HAS_NCCL
int ddp_worker_nccl_comm(ddp_worker* w, const char* name, double timeout_seconds, ncclComm_t* out) {
  if (w == nullptr) return NullWorker(__func__);
  return Guarded([&] {
    if (out == nullptr)
      return Fail(absl::InvalidArgumentError("ddp_worker_nccl_comm: out is NULL"));
    ddp::worker::NcclOptions options;
    options.timeout = Seconds(timeout_seconds);
    absl::StatusOr<ddp::worker::NcclCommunicator> comm =
        w->ctx.InitNccl(name != nullptr ? name : "world", options);
    if (!comm.ok()) return Fail(comm.status());
    w->comms.push_back(std::move(*comm));
    *out = w->comms.back().get();
    return 0;
  });
}
#endif

void ddp_worker_finalize(ddp_worker* w) { delete w; }

const char* ddp_worker_last_error(void) { return g_last_error.c_str(); }

}  // extern "C"
