#include "agent/gpu_probe.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <set>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "common/unique_fd.h"

namespace ddprun {
namespace {

// One visible device's PCI address as the probe child sends it: fixed size, so the parent
// reads whole records.
struct BusIdRecord {
  char text[32];
};
constexpr int kMaxProbedGpus = 64;

// The count, and each device's PCI bus id when `bus_ids` is not null.
int CountWithLibcuda(BusIdRecord* bus_ids) {
  void* lib = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) return -1;
  using InitFn = int (*)(unsigned int);
  using CountFn = int (*)(int*);
  using GetFn = int (*)(int*, int);
  using BusIdFn = int (*)(char*, int, int);
  auto init = reinterpret_cast<InitFn>(::dlsym(lib, "cuInit"));
  auto count = reinterpret_cast<CountFn>(::dlsym(lib, "cuDeviceGetCount"));
  auto get = reinterpret_cast<GetFn>(::dlsym(lib, "cuDeviceGet"));
  auto bus_id = reinterpret_cast<BusIdFn>(::dlsym(lib, "cuDeviceGetPCIBusId"));
  int n = 0;
  if (init == nullptr || count == nullptr || init(0) != 0 || count(&n) != 0) return 0;
  for (int i = 0; i < n && i < kMaxProbedGpus && get != nullptr && bus_id != nullptr; ++i) {
    int device = 0;
    if (get(&device, i) != 0 || bus_id(bus_ids[i].text, sizeof(bus_ids[i].text) - 1, device) != 0) {
      bus_ids[i].text[0] = '\0';
    }
  }
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

// Reads exactly `size` bytes, unless the writer goes first.
bool ReadFully(int fd, void* data, size_t size) {
  char* at = static_cast<char*>(data);
  while (size > 0) {
    const ssize_t got = ::read(fd, at, size);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    at += got;
    size -= static_cast<size_t>(got);
  }
  return true;
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

std::string NormalizePciAddress(const std::string& bus_id) {
  unsigned domain = 0, bus = 0, device = 0, function = 0;
  if (std::sscanf(bus_id.c_str(), "%x:%x:%x.%x", &domain, &bus, &device, &function) != 4) {
    return "";
  }
  char out[32];
  std::snprintf(out, sizeof(out), "%04x:%02x:%02x.%x", domain, bus, device, function);
  return out;
}

absl::StatusOr<std::vector<std::string>> ProbeNvidiaGpus() {
  absl::StatusOr<Pipe> pipe = MakePipe(/*nonblocking_read=*/false);
  if (!pipe.ok()) return pipe.status();
  const pid_t pid = ::fork();
  if (pid < 0) return ErrnoStatus(errno, "fork (GPU probe)");
  if (pid == 0) {
    static BusIdRecord bus_ids[kMaxProbedGpus] = {};
    int n = CountWithLibcuda(bus_ids);
    if (n < 0) n = CountWithNvml();  // the count only: the records stay empty
    if (n < 0) n = 0;
    (void)!::write(pipe->write_end.get(), &n, sizeof(n));
    (void)!::write(pipe->write_end.get(), bus_ids, sizeof(bus_ids));  // < 64 KiB: no wait
    ::_exit(0);
  }
  pipe->write_end.Reset();
  int count = 0;
  std::vector<BusIdRecord> records(kMaxProbedGpus);
  const bool answered =
      ReadFully(pipe->read_end.get(), &count, sizeof(count)) &&
      ReadFully(pipe->read_end.get(), records.data(), records.size() * sizeof(BusIdRecord));
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!answered) {
    return absl::InternalError("the GPU probe process died before answering (driver crash?)");
  }
  std::vector<std::string> addresses;
  for (int i = 0; i < count; ++i) {
    if (i >= kMaxProbedGpus) {
      addresses.push_back("");  // counted, not located
      continue;
    }
    records[i].text[sizeof(records[i].text) - 1] = '\0';
    addresses.push_back(NormalizePciAddress(records[i].text));
  }
  return addresses;
}

}  // namespace ddprun
