// Context::InitNccl and NcclCommunicator (the watchdog: nccl_watchdog.h).
//
// Communicators are non-blocking (ncclConfig_t.blocking = 0): an NCCL call may return
// ncclInProgress, and no other call may be made on the communicator until
// ncclCommGetAsyncError stops saying ncclInProgress. NCCL offers no event to wait on, so
// waits here poll it, each with a deadline.

#include "ddp/worker/nccl.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/clock.h"
#include "ddp/worker/context.h"
#include "src/context_state.h"
#include "src/nccl_internal.h"
#include "src/nccl_watchdog.h"
#include "src/root_blobs.h"

namespace ddp::worker {

namespace {

std::string VisibleDevices() {
  const char* v = ::getenv("CUDA_VISIBLE_DEVICES");
  return v == nullptr ? "CUDA_VISIBLE_DEVICES unset" : absl::StrCat("CUDA_VISIBLE_DEVICES=", v);
}

// Sets this rank's device; the error says what is visible and what to change.
absl::StatusOr<int> SelectDevice(const Environment& env) {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess || count == 0) {
    (void)cudaGetLastError();  // do not leave the error for the caller's next CUDA call
    return absl::FailedPreconditionError(absl::StrCat(
        "no CUDA device visible: ",
        error != cudaSuccess ? absl::StrCat(cudaGetErrorString(error), " (cudaGetDeviceCount)")
                             : "cudaGetDeviceCount found 0 devices",
        "; ", VisibleDevices()));
  }
  if (env.local_rank >= count) {
    return absl::FailedPreconditionError(
        absl::StrCat("rank ", env.rank, ": LOCAL_RANK=", env.local_rank, " but only ", count,
                     " CUDA devices are visible (", VisibleDevices(), "); run at most ", count,
                     " workers on this node (--nproc-per-node=gpu)"));
  }
  if (const cudaError_t set = cudaSetDevice(env.local_rank); set != cudaSuccess) {
    return absl::InternalError(absl::StrCat("rank ", env.rank, ": cudaSetDevice(", env.local_rank,
                                            "): ", cudaGetErrorString(set)));
  }
  return env.local_rank;
}

// Waits until a communicator nobody else holds yet (being created) is ready; aborts it on
// an error or at the deadline.
absl::Status WaitUntilCreated(ncclComm_t comm, absl::Duration timeout, const std::string& what) {
  const ncclResult_t state = PollWhileInProgress(
      [&] {
        ncclResult_t s = ncclSuccess;
        const ncclResult_t r = ncclCommGetAsyncError(comm, &s);
        return r == ncclSuccess ? s : r;
      },
      ddprun::MonotonicNow() + timeout);
  if (state == ncclSuccess) return absl::OkStatus();
  ncclCommAbort(comm);
  if (state == ncclInProgress) {
    return absl::DeadlineExceededError(absl::StrCat(
        what, " did not complete within ", absl::FormatDuration(timeout),
        "; another rank may have failed or be stuck - see its log (NCCL_DEBUG=INFO for more)"));
  }
  return absl::InternalError(absl::StrCat(what, " failed: ", NcclError(state),
                                          "; set NCCL_DEBUG=INFO for NCCL's own account"));
}

}  // namespace

namespace {

absl::StatusOr<std::shared_ptr<NcclWatchdog>> WatchdogOf(internal::ContextAccess::State& state) {
  if (state.watchdog) return state.watchdog;
  absl::StatusOr<std::shared_ptr<NcclWatchdog>> started = NcclWatchdog::Start();
  if (!started.ok()) return started.status();
  state.watchdog = *started;
  return state.watchdog;
}

}  // namespace

Context::State::~State() {
  watchdog.reset();  // before the communicators' context goes
  Unregister();
}

NcclCommunicator::NcclCommunicator(std::shared_ptr<Handle> handle) : handle_(std::move(handle)) {}
NcclCommunicator::NcclCommunicator(NcclCommunicator&&) noexcept = default;
NcclCommunicator& NcclCommunicator::operator=(NcclCommunicator&&) noexcept = default;
NcclCommunicator::~NcclCommunicator() = default;

ncclComm_t NcclCommunicator::get() const { return handle_->aborted ? nullptr : handle_->comm; }
const std::string& NcclCommunicator::name() const { return handle_->name; }
int NcclCommunicator::rank() const { return handle_->rank; }
int NcclCommunicator::size() const { return handle_->size; }
int NcclCommunicator::device() const { return handle_->device; }
bool NcclCommunicator::aborted() const { return handle_->aborted; }

absl::Status NcclCommunicator::AsyncError() const {
  if (handle_->aborted) {
    std::lock_guard<std::mutex> lock(handle_->mu);
    return absl::CancelledError(absl::StrCat("rank ", handle_->rank, ": communicator '",
                                             handle_->name,
                                             "' was aborted: ", handle_->abort_reason));
  }
  if (handle_->comm == nullptr) return absl::OkStatus();
  const ncclResult_t state = handle_->State();
  if (state == ncclSuccess || state == ncclInProgress) return absl::OkStatus();
  if (handle_->aborted) return AsyncError();  // aborted meanwhile
  return absl::InternalError(absl::StrCat("rank ", handle_->rank, ": communicator '", handle_->name,
                                          "': ", NcclError(state)));
}

void NcclCommunicator::Abort(const std::string& why) {
  std::lock_guard<std::mutex> lock(handle_->mu);
  if (handle_->aborted || handle_->comm == nullptr) return;
  handle_->aborted = true;
  handle_->abort_reason = why;
  if (handle_->context_failed) handle_->context_failed->store(true);
  ncclCommAbort(handle_->comm);
}

absl::Status NcclCommunicator::WaitReady(absl::Duration timeout) {
  if (handle_->comm == nullptr) return absl::OkStatus();
  const ncclResult_t state =
      PollWhileInProgress([this] { return handle_->State(); }, ddprun::MonotonicNow() + timeout);
  if (state == ncclSuccess) return absl::OkStatus();
  if (absl::Status s = AsyncError(); !s.ok()) {
    Abort(std::string(s.message()));
    return s;
  }
  return AbortStuck("an NCCL call on it was still in progress after", timeout);
}

absl::Status NcclCommunicator::AbortStuck(const std::string& what, absl::Duration timeout) {
  Abort(absl::StrCat(what, " ", absl::FormatDuration(timeout)));
  return absl::DeadlineExceededError(
      absl::StrCat("rank ", handle_->rank, ": communicator '", handle_->name, "': ", what, " ",
                   absl::FormatDuration(timeout),
                   "; aborted it so that this process can exit; another rank "
                   "may have failed or be stuck - see its log"));
}

absl::Status NcclCommunicator::Synchronize(cudaStream_t stream, absl::Duration timeout) {
  const absl::Time deadline = ddprun::MonotonicNow() + timeout;
  // The last call must have been queued on the stream before the stream can be trusted.
  if (absl::Status s = WaitReady(timeout); !s.ok()) return s;
  while (true) {
    const cudaError_t q = cudaStreamQuery(stream);
    if (absl::Status s = AsyncError(); !s.ok()) {
      Abort(std::string(s.message()));
      return s;
    }
    if (q == cudaSuccess) return absl::OkStatus();
    if (q != cudaErrorNotReady) {
      return absl::InternalError(
          absl::StrCat("rank ", handle_->rank, ": cudaStreamQuery: ", cudaGetErrorString(q)));
    }
    if (ddprun::MonotonicNow() >= deadline)
      return AbortStuck("its work did not finish within", timeout);
    absl::SleepFor(absl::Microseconds(100));
  }
}

absl::StatusOr<NcclCommunicator> NcclCommunicator::Split(int color, int key,
                                                         const std::string& name,
                                                         absl::Duration timeout) {
  auto child = std::make_shared<Handle>();
  child->name = name;
  child->device = handle_->device;
  child->context_failed = handle_->context_failed;
  const std::string what =
      absl::StrCat("rank ", handle_->rank, ": splitting '", handle_->name, "' into '", name, "'");
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  config.commName = child->name.c_str();
  {
    std::lock_guard<std::mutex> lock(handle_->mu);
    if (handle_->aborted || handle_->comm == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat(
          "cannot split communicator '", handle_->name, "': it was aborted or is empty"));
    }
    const ncclResult_t r = ncclCommSplit(handle_->comm, color, key, &child->comm, &config);
    if (r != ncclSuccess && r != ncclInProgress) {
      return absl::InternalError(absl::StrCat(what, " failed: ", NcclError(r)));
    }
  }
  // The child's handle is written when the parent's call completes.
  if (absl::Status s = WaitReady(timeout); !s.ok()) {
    if (child->comm != nullptr) ncclCommAbort(child->comm);
    child->comm = nullptr;
    return absl::Status(s.code(), absl::StrCat(what, ": ", s.message()));
  }
  if (child->comm != nullptr) {
    if (absl::Status s = WaitUntilCreated(child->comm, timeout, what); !s.ok()) {
      child->comm = nullptr;  // aborted
      return s;
    }
    ncclCommUserRank(child->comm, &child->rank);
    ncclCommCount(child->comm, &child->size);
    if (auto watchdog = handle_->watchdog.lock()) watchdog->Watch(child);
  }
  return NcclCommunicator(child);
}

namespace {

// The ncclUniqueIds of a new communicator: made by the root ranks, read by every rank
// through the store.
absl::StatusOr<std::vector<ncclUniqueId>> ExchangeUniqueIds(Context& ctx, const std::string& prefix,
                                                            int roots,
                                                            const absl::StatusOr<int>& device,
                                                            absl::Duration timeout) {
  absl::StatusOr<std::vector<std::string>> ids = ExchangeRootBlobs(
      ctx, prefix, roots,
      [&]() -> absl::StatusOr<std::string> {
        if (!device.ok()) return device.status();  // published, so the others fail at once
        ncclUniqueId id;
        if (const ncclResult_t r = ncclGetUniqueId(&id); r != ncclSuccess) {
          return absl::InternalError(absl::StrCat("ncclGetUniqueId: ", NcclError(r)));
        }
        return std::string(id.internal, sizeof id.internal);
      },
      timeout, "ncclUniqueId");
  if (!device.ok()) return device.status();
  if (!ids.ok()) return ids.status();
  std::vector<ncclUniqueId> unique_ids(ids->size());
  for (size_t i = 0; i < ids->size(); ++i) {
    if ((*ids)[i].size() != sizeof unique_ids[i].internal) {
      return absl::DataLossError(absl::StrCat("rank ", ctx.env().rank, ": the ncclUniqueId under '",
                                              prefix, "/id/", i, "' has ", (*ids)[i].size(),
                                              " bytes, not ", sizeof unique_ids[i].internal));
    }
    std::copy((*ids)[i].begin(), (*ids)[i].end(), unique_ids[i].internal);
  }
  return unique_ids;
}

// Puts `handle` under the Context's watchdog, which also aborts it on SIGTERM if asked.
absl::Status WatchCommunicator(internal::ContextAccess::State& state,
                               const std::shared_ptr<internal::NcclAccess::Handle>& handle,
                               const NcclOptions& options) {
  if (!options.watchdog) return absl::OkStatus();
  absl::StatusOr<std::shared_ptr<NcclWatchdog>> watchdog = WatchdogOf(state);
  if (!watchdog.ok()) return watchdog.status();
  (*watchdog)->Watch(handle);
  if (options.abort_on_sigterm) {
    // AlreadyExists: another Context of this process owns the signal; it aborts its own.
    if (absl::Status s = (*watchdog)->AbortOnSignal(SIGTERM);
        !s.ok() && !absl::IsAlreadyExists(s)) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<NcclCommunicator> InitNcclOnce(Context& ctx, internal::ContextAccess::State& state,
                                              absl::string_view name, const NcclOptions& options) {
  const Environment& env = ctx.env();
  // NCCL_COMM_ID fixes the root's address, and NCCL then takes one id only.
  const bool scalable =
      env.world_size > options.scalable_threshold && ::getenv("NCCL_COMM_ID") == nullptr;
  const int roots = scalable ? RootCount(env.world_size, std::max(1, options.ranks_per_root)) : 1;
  // The key first: a rank that fails below must still use up its number, like the others.
  const std::string prefix = internal::ContextAccess::NextKeyPrefix(ctx, "nccl", name);
  const absl::StatusOr<int> device = SelectDevice(env);
  absl::StatusOr<std::vector<ncclUniqueId>> unique_ids =
      ExchangeUniqueIds(ctx, prefix, roots, device, options.timeout);
  if (!unique_ids.ok()) return unique_ids.status();

  auto handle = std::make_shared<internal::NcclAccess::Handle>();
  handle->name = std::string(name);
  handle->rank = env.rank;
  handle->size = env.world_size;
  handle->device = *device;
  handle->context_failed = state.failed;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  config.commName = handle->name.c_str();
  const ncclResult_t r = scalable
                             ? ncclCommInitRankScalable(&handle->comm, env.world_size, env.rank,
                                                        static_cast<int>(unique_ids->size()),
                                                        unique_ids->data(), &config)
                             : ncclCommInitRankConfig(&handle->comm, env.world_size,
                                                      (*unique_ids)[0], env.rank, &config);
  const std::string what =
      absl::StrCat("rank ", env.rank, ": NCCL init of communicator '", name, "' (", env.world_size,
                   " ranks", scalable ? absl::StrCat(", ", unique_ids->size(), " ids") : "", ")");
  if (r != ncclSuccess && r != ncclInProgress) {
    handle->comm = nullptr;
    return absl::InternalError(absl::StrCat(what, " failed: ", NcclError(r)));
  }
  if (absl::Status s = WaitUntilCreated(handle->comm, options.timeout, what); !s.ok()) {
    handle->comm = nullptr;  // aborted
    return s;
  }
  if (absl::Status s = WatchCommunicator(state, handle, options); !s.ok()) return s;
  return internal::NcclAccess::Make(handle);
}

}  // namespace

absl::StatusOr<NcclCommunicator> Context::InitNccl(absl::string_view name,
                                                   const NcclOptions& options) {
  return state_->Note(InitNcclOnce(*this, *state_, name, options));
}

absl::Status Context::AbortNcclOnSignal(int signal) {
  absl::StatusOr<std::shared_ptr<NcclWatchdog>> watchdog = WatchdogOf(*state_);
  if (!watchdog.ok()) return watchdog.status();
  return (*watchdog)->AbortOnSignal(signal);
}

}  // namespace ddp::worker
