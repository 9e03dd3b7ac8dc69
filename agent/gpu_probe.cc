#include "agent/gpu_probe.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "common/unique_fd.h"

namespace ddprun {
namespace {

int CountWithLibcuda() {
  void* lib = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) return -1;
  using InitFn = int (*)(unsigned int);
  using CountFn = int (*)(int*);
  auto init = reinterpret_cast<InitFn>(::dlsym(lib, "cuInit"));
  auto count = reinterpret_cast<CountFn>(::dlsym(lib, "cuDeviceGetCount"));
  int n = 0;
  if (init == nullptr || count == nullptr || init(0) != 0 || count(&n) != 0) return 0;
  return n;
}

int CountWithNvml() {
  void* lib = ::dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) return -1;
  using InitFn = int (*)();
  using CountFn = int (*)(unsigned int*);
  auto init = reinterpret_cast<InitFn>(::dlsym(lib, "nvmlInit_v2"));
  auto count = reinterpret_cast<CountFn>(::dlsym(lib, "nvmlDeviceGetCount_v2"));
  unsigned int n = 0;
  if (init == nullptr || count == nullptr || init() != 0 || count(&n) != 0) return 0;
  const char* visible = ::getenv("CUDA_VISIBLE_DEVICES");
  return ApplyCudaVisibleDevices(visible ? std::optional<std::string>(visible) : std::nullopt,
                                 static_cast<int>(n));
}

}  // namespace

int ApplyCudaVisibleDevices(const std::optional<std::string>& visible, int physical_count) {
  if (!visible) return physical_count;
  // PyTorch's reading of the list (torch.cuda._parse_visible_devices): it is all indices or
  // all UUIDs, ends at the first entry of another kind or out of range, and a repeated
  // index hides every device.
  std::set<int> indices;
  int uuids = 0;
  bool numeric = true;
  bool first = true;
  for (absl::string_view entry : absl::StrSplit(*visible, ',')) {
    entry = absl::StripAsciiWhitespace(entry);
    const bool uuid = absl::StartsWith(entry, "GPU-") || absl::StartsWith(entry, "MIG-");
    int index = -1;
    const bool is_index = absl::SimpleAtoi(entry, &index);
    if (first) numeric = !uuid;
    first = false;
    if (numeric) {
      if (!is_index || index < 0 || index >= physical_count) break;
      if (!indices.insert(index).second) return 0;
    } else {
      if (!uuid) break;
      ++uuids;
    }
  }
  return std::min(numeric ? static_cast<int>(indices.size()) : uuids, physical_count);
}

absl::StatusOr<int> CountVisibleGpus() {
  absl::StatusOr<Pipe> pipe = MakePipe(/*nonblocking_read=*/false);
  if (!pipe.ok()) return pipe.status();
  const pid_t pid = ::fork();
  if (pid < 0) return ErrnoStatus(errno, "fork (GPU probe)");
  if (pid == 0) {
    int n = CountWithLibcuda();
    if (n < 0) n = CountWithNvml();
    if (n < 0) n = 0;
    (void)!::write(pipe->write_end.get(), &n, sizeof(n));
    ::_exit(0);
  }
  pipe->write_end.Reset();
  int count = 0;
  ssize_t got;
  do {
    got = ::read(pipe->read_end.get(), &count, sizeof(count));
  } while (got < 0 && errno == EINTR);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (got != static_cast<ssize_t>(sizeof(count))) {
    return absl::InternalError("the GPU probe process died before answering (driver crash?)");
  }
  return count;
}

}  // namespace ddprun
