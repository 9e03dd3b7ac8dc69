#include "node/accelerators.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "node/gpu_probe.h"

namespace ddprun {
namespace {

// CUDA_VISIBLE_DEVICES's entries as torchrun's --virtual-local-rank reads them: a plain
// comma split, each entry stripped, nothing validated.
std::vector<std::string> CudaListEntries(const std::string& list) {
  std::vector<std::string> entries;
  for (absl::string_view entry : absl::StrSplit(list, ',')) {
    entries.emplace_back(absl::StripAsciiWhitespace(entry));
  }
  return entries;
}

}  // namespace

absl::StatusOr<AcceleratorList> FindAccelerators(const EnvMap& env) {
  absl::StatusOr<std::vector<std::string>> nvidia = ProbeNvidiaGpus();
  if (!nvidia.ok()) return nvidia.status();
  if (!nvidia->empty()) {
    AcceleratorList list;
    list.vendor = AcceleratorVendor::kNvidia;
    for (size_t i = 0; i < nvidia->size(); ++i) {
      list.devices.push_back({(*nvidia)[i], absl::StrCat(i)});
    }
    return list;
  }
  AcceleratorList amd = FindAmdGpus("/sys", env);
  if (!amd.devices.empty()) return amd;
  AcceleratorList intel = FindIntelGpus("/sys", env);
  if (!intel.devices.empty() && !intel.integrated) return intel;
  return AcceleratorList{};
}

absl::StatusOr<std::vector<std::string>> VirtualDeviceValues(const AcceleratorList& accelerators,
                                                             const EnvMap& env, int nproc) {
  const std::string& variable = accelerators.visibility_variable;
  std::vector<std::string> values;
  auto inherited = env.find(variable);
  if (accelerators.vendor == AcceleratorVendor::kNvidia ||
      accelerators.vendor == AcceleratorVendor::kNone) {
    // torchrun's rule: the entry of the inherited list at the local rank, else the index.
    if (inherited == env.end()) {
      const bool counted = accelerators.vendor == AcceleratorVendor::kNvidia;
      const int devices = counted ? static_cast<int>(accelerators.devices.size()) : nproc;
      for (int i = 0; i < std::min(nproc, devices); ++i) values.push_back(absl::StrCat(i));
    } else {
      values = CudaListEntries(inherited->second);
    }
  } else {
    for (const Accelerator& device : accelerators.devices) values.push_back(device.select_value);
  }
  if (static_cast<int>(values.size()) < nproc) {
    return absl::FailedPreconditionError(
        absl::StrCat("--virtual-local-rank: ", values.size(), " devices are visible (",
                     inherited == env.end() ? std::string("found on this node")
                                            : absl::StrCat(variable, "='", inherited->second, "'"),
                     ") for ", nproc,
                     " local ranks; make one visible per local rank, or lower "
                     "--nproc-per-node"));
  }
  values.resize(nproc);
  return values;
}

}  // namespace ddprun
