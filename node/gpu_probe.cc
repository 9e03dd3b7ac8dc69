#include "node/gpu_probe.h"

#include <dlfcn.h>
#include <stdlib.h>

#include <algorithm>
#include <cstdio>
#include <set>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/child_answer.h"

namespace ddprun {
namespace {

// The count, and each device's PCI bus id in `bus_ids` ("" when libcuda cannot say).
int CountWithLibcuda(std::vector<std::string>& bus_ids) {
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
  for (int i = 0; i < n; ++i) {
    char text[32] = {};
    int device = 0;
    const bool known = get != nullptr && bus_id != nullptr && get(&device, i) == 0 &&
                       bus_id(text, sizeof(text) - 1, device) == 0;
    bus_ids.push_back(known ? text : "");
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
  // The child answers one line per GPU: its PCI bus id as libcuda gives it, or nothing.
  absl::StatusOr<std::string> answer = AnswerFromChild(
      [] {
        std::vector<std::string> bus_ids;
        const int n = CountWithLibcuda(bus_ids);
        if (n < 0) bus_ids.assign(std::max(CountWithNvml(), 0), "");  // NVML: the count only
        std::string lines;
        for (const std::string& bus_id : bus_ids) absl::StrAppend(&lines, bus_id, "\n");
        return lines;
      },
      "GPU probe");
  if (!answer.ok()) return answer.status();
  std::vector<std::string> addresses;
  for (absl::string_view line : absl::StrSplit(*answer, '\n')) {
    addresses.push_back(NormalizePciAddress(std::string(line)));
  }
  addresses.pop_back();  // after the last newline
  return addresses;
}

}  // namespace ddprun
