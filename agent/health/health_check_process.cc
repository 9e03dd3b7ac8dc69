#include "agent/health/health_check_process.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "node/gpu_probe.h"

namespace ddprun {
namespace {

std::string GiB(int64_t bytes) {
  return absl::StrFormat("%.1f GiB", static_cast<double>(bytes) / (1024.0 * 1024 * 1024));
}

// NVML's C API, as much of it as the check uses (nvml.h, stable since driver 3xx).
using NvmlDevice = void*;
constexpr int kNvmlSuccess = 0;
constexpr int kNvmlUncorrected = 1;  // NVML_MEMORY_ERROR_TYPE_UNCORRECTED
constexpr int kNvmlVolatile = 0;     // NVML_VOLATILE_ECC: since the driver loaded
constexpr int kNvmlFeatureEnabled = 1;

// The indices of CUDA_VISIBLE_DEVICES when it lists indices; else every device.
std::vector<unsigned> DevicesToCheck(unsigned count) {
  std::vector<unsigned> all;
  for (unsigned i = 0; i < count; ++i) all.push_back(i);
  const char* visible = ::getenv("CUDA_VISIBLE_DEVICES");
  if (visible == nullptr) return all;
  std::vector<unsigned> listed;
  for (absl::string_view entry : absl::StrSplit(visible, ',', absl::SkipWhitespace())) {
    unsigned index = 0;
    if (!absl::SimpleAtoi(entry, &index) || index >= count) return all;  // UUIDs: check all
    listed.push_back(index);
  }
  return listed;
}

// Reads every checked GPU's state through NVML; false when NVML is not there.
bool ReadNvml(NodeFacts& facts) {
  void* lib = ::dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) return false;
  using InitFn = int (*)();
  using CountFn = int (*)(unsigned*);
  using HandleFn = int (*)(unsigned, NvmlDevice*);
  using EccFn = int (*)(NvmlDevice, int, int, unsigned long long*);
  using PendingFn = int (*)(NvmlDevice, int*);
  auto init = reinterpret_cast<InitFn>(::dlsym(lib, "nvmlInit_v2"));
  auto count = reinterpret_cast<CountFn>(::dlsym(lib, "nvmlDeviceGetCount_v2"));
  auto handle = reinterpret_cast<HandleFn>(::dlsym(lib, "nvmlDeviceGetHandleByIndex_v2"));
  auto ecc = reinterpret_cast<EccFn>(::dlsym(lib, "nvmlDeviceGetTotalEccErrors"));
  auto pending =
      reinterpret_cast<PendingFn>(::dlsym(lib, "nvmlDeviceGetRetiredPagesPendingStatus"));
  unsigned n = 0;
  if (init == nullptr || count == nullptr || handle == nullptr) return false;
  if (const int err = init(); err != kNvmlSuccess) {
    facts.unusable_gpus.push_back(
        absl::StrCat("NVML does not start (nvmlInit error ", err, "): the driver is not usable"));
    return true;
  }
  if (count(&n) != kNvmlSuccess) n = 0;
  const char* visible = ::getenv("CUDA_VISIBLE_DEVICES");
  facts.visible_gpus = ApplyCudaVisibleDevices(
      visible != nullptr ? std::optional<std::string>(visible) : std::nullopt, static_cast<int>(n));
  for (unsigned i : DevicesToCheck(n)) {
    NvmlDevice device = nullptr;
    if (const int err = handle(i, &device); err != kNvmlSuccess) {
      facts.unusable_gpus.push_back(
          absl::StrCat("GPU ", i, ": NVML cannot reach it (error ", err, ", 15: GPU is lost)"));
      continue;
    }
    unsigned long long errors = 0;
    if (ecc != nullptr && ecc(device, kNvmlUncorrected, kNvmlVolatile, &errors) == kNvmlSuccess &&
        errors > 0) {
      facts.unusable_gpus.push_back(
          absl::StrCat("GPU ", i, ": ", errors, " uncorrected ECC errors since the driver loaded"));
    }
    int is_pending = 0;
    if (pending != nullptr && pending(device, &is_pending) == kNvmlSuccess &&
        is_pending == kNvmlFeatureEnabled) {
      facts.unusable_gpus.push_back(
          absl::StrCat("GPU ", i, ": retired memory pages wait for a GPU reset"));
    }
  }
  return true;
}

}  // namespace

std::vector<std::string> BuiltinProblems(const NodeFacts& facts) {
  std::vector<std::string> problems;
  if (facts.expected_gpus > 0 && facts.visible_gpus < facts.expected_gpus) {
    problems.push_back(absl::StrCat(facts.visible_gpus, " GPUs are visible, ", facts.expected_gpus,
                                    " were when the agent started (--nproc-per-node=gpu): a GPU "
                                    "is lost (nvidia-smi, dmesg for Xid errors)"));
  }
  for (const std::string& gpu : facts.unusable_gpus) problems.push_back(gpu);
  if (facts.min_free_disk_bytes > 0 && facts.free_disk_bytes < facts.min_free_disk_bytes) {
    problems.push_back(
        absl::StrCat(GiB(facts.free_disk_bytes), " free in ", facts.disk_path,
                     ", below --health-check-min-free-disk=", GiB(facts.min_free_disk_bytes)));
  }
  return problems;
}

int RunHealthCheckProcess(const std::vector<std::string>& args) {
  NodeFacts facts;
  bool builtin = false;
  std::optional<std::string> command;
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    const bool has_value = i + 1 < args.size();
    if (a == "--builtin") {
      builtin = true;
    } else if (a == "--gpus" && has_value) {
      (void)absl::SimpleAtoi(args[++i], &facts.expected_gpus);
    } else if (a == "--min-free-disk" && has_value) {
      (void)absl::SimpleAtoi(args[++i], &facts.min_free_disk_bytes);
    } else if (a == "--disk-path" && has_value) {
      facts.disk_path = args[++i];
    } else if (a == "--" && has_value) {
      command = args[++i];
    }
  }
  if (builtin) {
    // NVML counts the GPUs too, in a fraction of cuInit's time (seconds on a big node),
    // which every restart would wait for. CUDA, which counted them at start, counts them
    // again only when NVML is not there or sees fewer (MIG instances are CUDA devices).
    const bool nvml = ReadNvml(facts);
    if (!nvml) {
      std::printf(
          "%sNVML (libnvidia-ml.so.1) could not be loaded: GPU health (ECC errors, "
          "lost GPUs, pending page retirement) is not checked\n",
          kHealthSkippedPrefix);
    }
    if (facts.expected_gpus > 0 && (!nvml || facts.visible_gpus < facts.expected_gpus)) {
      absl::StatusOr<std::vector<std::string>> visible = ProbeNvidiaGpus();
      facts.visible_gpus = visible.ok() ? static_cast<int>(visible->size()) : 0;
    }
    struct statvfs fs;
    if (facts.min_free_disk_bytes > 0 && ::statvfs(facts.disk_path.c_str(), &fs) == 0) {
      facts.free_disk_bytes = static_cast<int64_t>(fs.f_bavail) * static_cast<int64_t>(fs.f_frsize);
    } else if (facts.min_free_disk_bytes > 0) {
      std::printf("%sthe free space of %s could not be read (%s)\n", kHealthSkippedPrefix,
                  facts.disk_path.c_str(), ::strerror(errno));
      facts.min_free_disk_bytes = 0;
    }
    const std::vector<std::string> problems = BuiltinProblems(facts);
    for (const std::string& p : problems)
      std::fprintf(stderr, "ddprun built-in check: %s\n", p.c_str());
    std::fflush(stdout);
    if (!problems.empty()) return 1;
  }
  if (!command) return 0;
  std::fflush(stdout);
  ::execl("/bin/sh", "sh", "-c", command->c_str(), static_cast<char*>(nullptr));
  std::fprintf(stderr, "cannot run /bin/sh for --health-check: %s\n", ::strerror(errno));
  return 127;
}

}  // namespace ddprun
