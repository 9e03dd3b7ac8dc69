// Context::InitNccl, NcclCommunicator and the watchdog that aborts communicators.

#include "ddp/worker/nccl.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "ddp/worker/context.h"
#include "src/context_state.h"
#include "src/root_blobs.h"

namespace ddp::worker {

class NcclWatchdog;

struct NcclCommunicator::Handle {
  ~Handle() {
    std::lock_guard<std::mutex> lock(mu);
    if (comm != nullptr && !aborted) ncclCommDestroy(comm);
  }
  std::mutex mu;  // Abort vs. destruction
  ncclComm_t comm = nullptr;
  std::atomic<bool> aborted{false};
  std::string abort_reason;              // under mu, once aborted
  std::weak_ptr<NcclWatchdog> watchdog;  // splits are watched by the same one
  std::string name;
  int rank = 0;
  int size = 0;
  int device = 0;
};

namespace {

std::string NcclError(ncclResult_t result) {
  const char* last = ncclGetLastError(nullptr);
  return absl::StrCat(ncclGetErrorString(result), last != nullptr && *last ? absl::StrCat(" (", last, ")") : "");
}

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
    return absl::FailedPreconditionError(absl::StrCat(
        "rank ", env.rank, ": LOCAL_RANK=", env.local_rank, " but only ", count,
        " CUDA devices are visible (", VisibleDevices(), "); run at most ", count,
        " workers on this node (--nproc-per-node=gpu)"));
  }
  if (const cudaError_t set = cudaSetDevice(env.local_rank); set != cudaSuccess) {
    return absl::InternalError(absl::StrCat("rank ", env.rank, ": cudaSetDevice(", env.local_rank,
                                            "): ", cudaGetErrorString(set)));
  }
  return env.local_rank;
}

// Waits for a non-blocking communicator to leave ncclInProgress. NCCL offers no event to
// wait on, so this checks every millisecond, and aborts the communicator at the deadline.
// With `abort_on_failure` false the caller aborts (the communicator is held by a Handle).
absl::Status WaitUntilReady(ncclComm_t comm, absl::Duration timeout, const std::string& what,
                            bool abort_on_failure = true) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    ncclResult_t state = ncclInProgress;
    const ncclResult_t r = ncclCommGetAsyncError(comm, &state);
    if (r != ncclSuccess) state = r;
    if (state == ncclSuccess) return absl::OkStatus();
    if (state != ncclInProgress) {
      const std::string why = NcclError(state);
      if (abort_on_failure) ncclCommAbort(comm);
      return absl::InternalError(absl::StrCat(what, " failed: ", why,
                                              "; set NCCL_DEBUG=INFO for NCCL's own account"));
    }
    if (absl::Now() >= deadline) {
      if (abort_on_failure) ncclCommAbort(comm);
      return absl::DeadlineExceededError(absl::StrCat(
          what, " did not complete within ", absl::FormatDuration(timeout),
          "; another rank may have failed or be stuck - see its log (NCCL_DEBUG=INFO for more)"));
    }
    absl::SleepFor(absl::Milliseconds(1));
  }
}

}  // namespace

// Aborts communicators on an asynchronous NCCL error, and all of them on a chosen signal.
class NcclWatchdog {
 public:
  NcclWatchdog() {
    if (::pipe2(pipe_, O_CLOEXEC | O_NONBLOCK) != 0) pipe_[0] = pipe_[1] = -1;
    thread_ = std::thread([this] { Loop(); });
  }
  ~NcclWatchdog() {
    Wake(kStop);
    thread_.join();
    for (const auto& [sig, old] : previous_) ::sigaction(sig, &old, nullptr);
    if (g_watchdog_pipe == pipe_[1]) g_watchdog_pipe = -1;
    ::close(pipe_[0]);
    ::close(pipe_[1]);
  }

  void Watch(const std::shared_ptr<NcclCommunicator::Handle>& handle) {
    std::lock_guard<std::mutex> lock(mu_);
    watched_.push_back(handle);
  }

  absl::Status AbortOnSignal(int sig) {
    if (pipe_[1] < 0) return absl::InternalError("the NCCL watchdog has no pipe");
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (const auto& [s, old] : previous_) {
        if (s == sig) return absl::OkStatus();  // already handled
      }
    }
    g_watchdog_pipe = pipe_[1];
    struct sigaction action {};
    action.sa_handler = &OnSignal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    struct sigaction old {};
    if (::sigaction(sig, &action, &old) != 0) {
      return absl::InvalidArgumentError(absl::StrCat("cannot handle signal ", sig));
    }
    std::lock_guard<std::mutex> lock(mu_);
    previous_.emplace_back(sig, old);
    return absl::OkStatus();
  }

 private:
  static constexpr unsigned char kStop = 0;

  static void OnSignal(int sig) {
    const unsigned char byte = static_cast<unsigned char>(sig);
    if (g_watchdog_pipe >= 0) (void)!::write(g_watchdog_pipe, &byte, 1);
  }

  void Wake(unsigned char byte) { (void)!::write(pipe_[1], &byte, 1); }

  void AbortAll(const std::string& why) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& weak : watched_) {
      if (auto handle = weak.lock()) NcclCommunicator(handle).Abort(why);
    }
  }

  void CheckErrors() {
    std::vector<std::shared_ptr<NcclCommunicator::Handle>> live;
    {
      std::lock_guard<std::mutex> lock(mu_);
      std::vector<std::weak_ptr<NcclCommunicator::Handle>> kept;
      for (auto& weak : watched_) {
        if (auto handle = weak.lock()) {
          live.push_back(handle);
          kept.push_back(weak);
        }
      }
      watched_.swap(kept);
    }
    for (auto& handle : live) {
      NcclCommunicator comm(handle);
      if (absl::Status s = comm.AsyncError(); !s.ok()) comm.Abort(std::string(s.message()));
    }
  }

  void Loop() {
    while (true) {
      pollfd p{pipe_[0], POLLIN, 0};
      const int ready = ::poll(&p, 1, 1000);  // errors surface within a second
      if (ready <= 0) {
        CheckErrors();
        continue;
      }
      unsigned char byte = 0;
      while (::read(pipe_[0], &byte, 1) == 1) {
        if (byte == kStop) return;
        AbortAll(absl::StrCat("signal ", static_cast<int>(byte), " arrived: the round is over"));
        RaiseAgain(byte);
      }
    }
  }

  // The signal goes on to what would have handled it without us.
  void RaiseAgain(int sig) {
    struct sigaction old {};
    {
      // Handled once: a later AbortOnSignal(sig) installs the handler again.
      std::lock_guard<std::mutex> lock(mu_);
      for (auto it = previous_.begin(); it != previous_.end(); ++it) {
        if (it->first == sig) {
          old = it->second;
          previous_.erase(it);
          break;
        }
      }
    }
    ::sigaction(sig, &old, nullptr);
    ::kill(::getpid(), sig);
  }

  static inline std::atomic<int> g_watchdog_pipe{-1};
  int pipe_[2] = {-1, -1};
  std::mutex mu_;
  std::vector<std::weak_ptr<NcclCommunicator::Handle>> watched_;
  std::vector<std::pair<int, struct sigaction>> previous_;
  std::thread thread_;
};

Context::State::~State() = default;

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
                                             handle_->name, "' was aborted: ", handle_->abort_reason));
  }
  if (handle_->comm == nullptr) return absl::OkStatus();
  ncclResult_t state = ncclSuccess;
  const ncclResult_t r = ncclCommGetAsyncError(handle_->comm, &state);
  if (r != ncclSuccess) state = r;
  if (state == ncclSuccess || state == ncclInProgress) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("rank ", handle_->rank, ": communicator '", handle_->name,
                                          "': ", NcclError(state)));
}

void NcclCommunicator::Abort(const std::string& why) {
  std::lock_guard<std::mutex> lock(handle_->mu);
  if (handle_->aborted || handle_->comm == nullptr) return;
  handle_->aborted = true;
  handle_->abort_reason = why;
  ncclCommAbort(handle_->comm);
}

absl::Status NcclCommunicator::Synchronize(cudaStream_t stream, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    const cudaError_t q = cudaStreamQuery(stream);
    if (absl::Status s = AsyncError(); !s.ok()) {
      Abort(std::string(s.message()));
      return s;
    }
    if (q == cudaSuccess) return absl::OkStatus();
    if (q != cudaErrorNotReady) {
      return absl::InternalError(absl::StrCat("rank ", handle_->rank, ": cudaStreamQuery: ",
                                              cudaGetErrorString(q)));
    }
    if (absl::Now() >= deadline) {
      Abort("collective timeout");
      return absl::DeadlineExceededError(absl::StrCat(
          "rank ", handle_->rank, ": work on communicator '", handle_->name,
          "' did not finish within ", absl::FormatDuration(timeout),
          "; aborted it so that this process can exit; another rank may have failed or be "
          "stuck - see its log"));
    }
    absl::SleepFor(absl::Microseconds(100));
  }
}

absl::StatusOr<NcclCommunicator> NcclCommunicator::Split(int color, int key, const std::string& name,
                                                         absl::Duration timeout) {
  if (get() == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("cannot split communicator '", handle_->name,
                                                      "': it was aborted or is empty"));
  }
  auto child = std::make_shared<Handle>();
  child->name = name;
  child->device = handle_->device;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  config.commName = child->name.c_str();
  const ncclResult_t r = ncclCommSplit(handle_->comm, color, key, &child->comm, &config);
  const std::string what = absl::StrCat("rank ", handle_->rank, ": splitting '", handle_->name,
                                        "' into '", name, "'");
  if (r != ncclSuccess && r != ncclInProgress) {
    return absl::InternalError(absl::StrCat(what, " failed: ", NcclError(r)));
  }
  if (absl::Status s = WaitUntilReady(handle_->comm, timeout, what, /*abort_on_failure=*/false);
      !s.ok()) {
    Abort(std::string(s.message()));
    if (child->comm != nullptr) ncclCommAbort(child->comm);
    child->comm = nullptr;
    return s;
  }
  if (child->comm != nullptr) {
    if (absl::Status s = WaitUntilReady(child->comm, timeout, what); !s.ok()) {
      child->comm = nullptr;  // aborted
      return s;
    }
    ncclCommUserRank(child->comm, &child->rank);
    ncclCommCount(child->comm, &child->size);
    child->watchdog = handle_->watchdog;
    if (auto watchdog = child->watchdog.lock()) watchdog->Watch(child);
  }
  return NcclCommunicator(child);
}

namespace {

absl::StatusOr<NcclCommunicator> InitNcclOnce(Context& ctx, Context::State& state,
                                              absl::string_view name, const NcclOptions& options) {
  const Environment& env = ctx.env();
  absl::StatusOr<int> device = SelectDevice(env);
  if (!device.ok()) return device.status();

  const bool scalable = env.world_size > options.scalable_threshold;
  const int per_root = scalable ? options.ranks_per_root : env.world_size;
  const std::string prefix = ctx.NextKeyPrefix("nccl", name);
  absl::StatusOr<std::vector<std::string>> ids = ExchangeRootBlobs(
      ctx, prefix, per_root,
      [&]() -> absl::StatusOr<std::string> {
        ncclUniqueId id;
        if (const ncclResult_t r = ncclGetUniqueId(&id); r != ncclSuccess) {
          return absl::InternalError(absl::StrCat("ncclGetUniqueId: ", NcclError(r)));
        }
        return std::string(id.internal, sizeof id.internal);
      },
      options.timeout, "ncclUniqueId");
  if (!ids.ok()) return ids.status();
  std::vector<ncclUniqueId> unique_ids(ids->size());
  for (size_t i = 0; i < ids->size(); ++i) {
    if ((*ids)[i].size() != sizeof unique_ids[i].internal) {
      return absl::DataLossError(absl::StrCat("rank ", env.rank, ": the ncclUniqueId under '", prefix,
                                              "/id/", i, "' has ", (*ids)[i].size(), " bytes, not ",
                                              sizeof unique_ids[i].internal));
    }
    std::copy((*ids)[i].begin(), (*ids)[i].end(), unique_ids[i].internal);
  }

  auto handle = std::make_shared<NcclCommunicator::Handle>();
  handle->name = std::string(name);
  handle->rank = env.rank;
  handle->size = env.world_size;
  handle->device = *device;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  config.commName = handle->name.c_str();
  const ncclResult_t r =
      scalable ? ncclCommInitRankScalable(&handle->comm, env.world_size, env.rank,
                                          static_cast<int>(unique_ids.size()), unique_ids.data(), &config)
               : ncclCommInitRankConfig(&handle->comm, env.world_size, unique_ids[0], env.rank, &config);
  const std::string what = absl::StrCat("rank ", env.rank, ": NCCL init of communicator '", name,
                                        "' (", env.world_size, " ranks", scalable ? absl::StrCat(", ", unique_ids.size(), " roots") : "",
                                        ")");
  if (r != ncclSuccess && r != ncclInProgress) {
    handle->comm = nullptr;
    return absl::InternalError(absl::StrCat(what, " failed: ", NcclError(r)));
  }
  if (absl::Status s = WaitUntilReady(handle->comm, options.timeout, what); !s.ok()) {
    handle->comm = nullptr;  // aborted
    return s;
  }
  if (options.watchdog) {
    if (!state.watchdog) state.watchdog = std::make_shared<NcclWatchdog>();
    state.watchdog->Watch(handle);
    handle->watchdog = state.watchdog;
    if (options.abort_on_sigterm) {
      if (absl::Status s = state.watchdog->AbortOnSignal(SIGTERM); !s.ok()) return s;
    }
  }
  return NcclCommunicator(handle);
}

}  // namespace

absl::StatusOr<NcclCommunicator> Context::InitNccl(absl::string_view name, const NcclOptions& options) {
  return state_->Note(InitNcclOnce(*this, *state_, name, options));
}

absl::Status Context::AbortNcclOnSignal(int signal) {
  if (!state_->watchdog) state_->watchdog = std::make_shared<NcclWatchdog>();
  return state_->watchdog->AbortOnSignal(signal);
}

}  // namespace ddp::worker
