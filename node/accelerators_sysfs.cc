// AMD and Intel GPUs counted from sysfs as their runtimes count them, so that a worker's device
// i is the agent's device i. AMD: libhsakmt topology.c, ROCr amd_filter_device.cpp, HIP
// rocdevice.cpp Device::init. Intel: NEO execution_environment.cpp, torch c10/xpu.

#include "node/accelerators.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "common/small_file.h"

namespace ddprun {
namespace {

bool PathExists(const std::string& path, bool as_directory = false) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && (!as_directory || S_ISDIR(st.st_mode));
}

// A sysfs attribute; nullopt when it cannot be opened or read (an attribute of a device the
// container's device cgroup hides answers EPERM to read()).
std::optional<std::string> ReadAttribute(const std::string& path) {
  absl::StatusOr<std::string> text = ReadSmallFile(path);
  if (!text.ok()) return std::nullopt;
  return *std::move(text);
}

std::vector<std::string> ListDirectory(const std::string& path) {
  std::vector<std::string> names;
  DIR* dir = opendir(path.c_str());
  if (dir == nullptr) return names;
  while (const dirent* entry = readdir(dir)) {
    const std::string name = entry->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  closedir(dir);
  return names;
}

// The last component of a symlink's target: sysfs names a device's driver and PCI address so.
std::optional<std::string> LinkTargetName(const std::string& path) {
  char target[4096];
  const ssize_t n = readlink(path.c_str(), target, sizeof(target) - 1);
  if (n <= 0) return std::nullopt;
  const absl::string_view text(target, static_cast<size_t>(n));
  const size_t slash = text.rfind('/');
  return std::string(slash == absl::string_view::npos ? text : text.substr(slash + 1));
}

// "<prefix><digits>", the shape of the kernel's numbered sysfs entries (card3, tile0, gt1).
bool IsNumbered(absl::string_view name, absl::string_view prefix) {
  if (!absl::ConsumePrefix(&name, prefix) || name.empty()) return false;
  return std::all_of(name.begin(), name.end(), [](char c) { return absl::ascii_isdigit(c); });
}

std::string EnvValue(const EnvMap& env, const std::string& name) {
  const auto it = env.find(name);
  return it == env.end() ? "" : it->second;
}

std::vector<size_t> AllIndices(size_t count) {
  std::vector<size_t> all(count);
  std::iota(all.begin(), all.end(), 0);
  return all;
}

// Split the way std::getline, HIP's ordinal loop and NEO's StringHelpers::split do: a trailing
// separator adds no empty last piece, an inner empty piece stays, and "" has no pieces at all.
std::vector<std::string> SplitLikeGetline(absl::string_view text, char separator) {
  std::vector<std::string> pieces = absl::StrSplit(text, separator);
  if (!pieces.empty() && pieces.back().empty()) pieces.pop_back();
  return pieces;
}

using KfdProperties = std::map<std::string, uint64_t, std::less<>>;

struct KfdGpu {
  std::string pci_address;
  uint64_t unique_id = 0;  // 0: the device has no UUID
};

// "<key> <unsigned>" lines; libhsakmt's sscanf loop stops at the first line of another shape.
KfdProperties ParseKfdProperties(absl::string_view text) {
  KfdProperties properties;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    const std::pair<absl::string_view, absl::string_view> key_value =
        absl::StrSplit(line, absl::MaxSplits(' ', 1));
    uint64_t value = 0;
    if (key_value.first.empty() || !absl::SimpleAtoi(key_value.second, &value)) break;
    properties[std::string(key_value.first)] = value;
  }
  return properties;
}

uint64_t PropertyOrZero(const KfdProperties& properties, absl::string_view key) {
  const auto it = properties.find(key);
  return it == properties.end() ? 0 : it->second;
}

// A node is a GPU to ROCr when libhsakmt supports it (gpu_id readable and not 0, a render
// node) and it has SIMDs. Captures without gpu_id files fall back to simd_count alone. A
// render minor of 0 is a dGPU whose initialisation failed: libhsakmt rejects it.
bool IsKfdGpu(const std::string& node_dir, const KfdProperties& properties) {
  const std::string gpu_id_path = node_dir + "/gpu_id";
  if (PathExists(gpu_id_path)) {
    const std::optional<std::string> text = ReadAttribute(gpu_id_path);
    uint64_t gpu_id = 0;
    if (!text || !absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &gpu_id) || gpu_id == 0) {
      return false;
    }
  }
  if (PropertyOrZero(properties, "simd_count") == 0) return false;
  const auto minor = properties.find("drm_render_minor");
  return minor == properties.end() || minor->second >= 128;
}

// location_id is (bus << 8) | devfn, with the partition index in the function bits when an
// MI300 is partitioned: such a function has no PCI device, so the partition's device is
// function 0. Bits 16-31 are ignored (some kernels put the partition there).
std::string KfdPciAddress(const std::string& sys_root, const KfdProperties& properties) {
  const uint64_t location = PropertyOrZero(properties, "location_id") & 0xffff;
  const unsigned domain = static_cast<unsigned>(PropertyOrZero(properties, "domain"));
  const unsigned bus = (location >> 8) & 0xff, device = (location >> 3) & 0x1f;
  char address[32];
  std::snprintf(address, sizeof(address), "%04x:%02x:%02x.%x", domain, bus, device,
                static_cast<unsigned>(location & 7));
  if (PathExists(absl::StrCat(sys_root, "/bus/pci/devices/", address))) return address;
  std::snprintf(address, sizeof(address), "%04x:%02x:%02x.0", domain, bus, device);
  return address;
}

// The GPU nodes in KFD node order, which is the order ROCr numbers GPUs in (not PCI order).
std::vector<KfdGpu> ReadKfdGpus(const std::string& sys_root) {
  const std::string nodes_dir = sys_root + "/class/kfd/kfd/topology/nodes";
  std::vector<uint64_t> node_ids;
  for (const std::string& name : ListDirectory(nodes_dir)) {
    uint64_t id = 0;
    if (IsNumbered(name, "") && absl::SimpleAtoi(name, &id)) node_ids.push_back(id);
  }
  std::sort(node_ids.begin(), node_ids.end());  // numerically: node 10 comes after node 9
  std::vector<KfdGpu> gpus;
  for (uint64_t id : node_ids) {
    const std::string node_dir = absl::StrCat(nodes_dir, "/", id);
    const std::optional<std::string> text = ReadAttribute(node_dir + "/properties");
    if (!text) continue;
    const KfdProperties properties = ParseKfdProperties(*text);
    if (!IsKfdGpu(node_dir, properties)) continue;
    gpus.push_back({KfdPciAddress(sys_root, properties), PropertyOrZero(properties, "unique_id")});
  }
  return gpus;
}

// ROCr compares upper-case UUIDs, with a string no token can match for a device without one.
// HIP searches HSA_AMD_AGENT_INFO_UUID: lower-case hex, or "GPU-XX" without a UUID.
std::string GpuUuid(uint64_t unique_id, bool for_rocr) {
  if (unique_id == 0) return for_rocr ? "Invalid-UUID" : "GPU-XX";
  char uuid[32];
  std::snprintf(uuid, sizeof(uuid), "GPU-%016llx", static_cast<unsigned long long>(unique_id));
  return for_rocr ? absl::AsciiStrToUpper(uuid) : uuid;
}

// ROCr's ProcessUuidToken: the token must be a prefix of exactly one device's UUID.
std::optional<size_t> RocrUuidIndex(const std::string& token, const std::vector<KfdGpu>& gpus) {
  if (token.size() < 5 || token.size() > 20) return std::nullopt;
  std::optional<size_t> match;
  for (size_t i = 0; i < gpus.size(); ++i) {
    if (!absl::StartsWith(GpuUuid(gpus[i].unique_id, true), token)) continue;
    if (match) return std::nullopt;  // ambiguous: the partitions of one MI300 share a UUID
    match = i;
  }
  return match;
}

// One upper-cased, trimmed ROCR_VISIBLE_DEVICES token as a KFD GPU index; nullopt ends the
// list. ROCr reads `token.at(0)` unguarded, so it aborts on an empty token; here it ends.
std::optional<size_t> RocrTokenIndex(const std::string& token, const std::vector<KfdGpu>& gpus) {
  if (token.empty()) return std::nullopt;
  if (token[0] == 'G') return RocrUuidIndex(token, gpus);
  char* end = nullptr;
  errno = 0;
  const long index = std::strtol(token.c_str(), &end, 0);  // base 0: "0x2" is 2, "010" is 8
  if (*end != '\0' || errno == ERANGE || index < 0) return std::nullopt;
  return static_cast<size_t>(index);
}

// ROCr's RvdFilter: the KFD GPU indices ROCR_VISIBLE_DEVICES surfaces, in its order. Set but
// empty surfaces none; tokens past the GPU count are ignored; a bad, out-of-range or repeated
// token ends the list, keeping what came before it.
std::vector<size_t> RocrSurfacedGpus(const std::vector<KfdGpu>& gpus, const EnvMap& env) {
  const auto value = env.find("ROCR_VISIBLE_DEVICES");
  if (value == env.end()) return AllIndices(gpus.size());
  std::vector<size_t> surfaced;
  const std::vector<std::string> tokens = SplitLikeGetline(value->second, ',');
  for (size_t i = 0; i < std::min(tokens.size(), gpus.size()); ++i) {
    const std::string token(absl::StripAsciiWhitespace(absl::AsciiStrToUpper(tokens[i])));
    const std::optional<size_t> index = RocrTokenIndex(token, gpus);
    if (!index || *index >= gpus.size()) break;
    if (std::find(surfaced.begin(), surfaced.end(), *index) != surfaced.end()) break;
    surfaced.push_back(*index);
  }
  return surfaced;
}

// One HIP_VISIBLE_DEVICES token as a position among `uuids`. A token holding "GPU-" names the
// first device whose UUID contains it. An index counts only when it reads back as itself
// (`str_id == std::to_string(atoi(str_id))`), so "01", "+1" and " 1" do not.
std::optional<size_t> HipTokenIndex(std::string token, const std::vector<std::string>& uuids) {
  if (absl::StrContains(token, "GPU-")) {
    const auto named = std::find_if(uuids.begin(), uuids.end(), [&](const std::string& uuid) {
      return absl::StrContains(uuid, token);
    });
    if (named != uuids.end()) token = std::to_string(named - uuids.begin());
  }
  size_t index = 0;
  const bool valid = absl::SimpleAtoi(token, &index) && std::to_string(index) == token;
  return valid && index < uuids.size() ? std::optional<size_t>(index) : std::nullopt;
}

// HIP's Device::init, on the GPUs ROCr surfaced (`uuids` in that order): the positions that
// HIP_VISIBLE_DEVICES (or CUDA_VISIBLE_DEVICES when that is empty) selects. Empty selects
// all, unlike ROCR_VISIBLE_DEVICES; an invalid token ends the list; a repeated one is skipped.
std::vector<size_t> HipSelectedGpus(const std::vector<std::string>& uuids, const EnvMap& env) {
  std::string ordinals = EnvValue(env, "HIP_VISIBLE_DEVICES");
  if (ordinals.empty()) ordinals = EnvValue(env, "CUDA_VISIBLE_DEVICES");
  if (ordinals.empty()) return AllIndices(uuids.size());
  std::vector<size_t> selected;
  for (const std::string& token : SplitLikeGetline(ordinals, ',')) {
    const std::optional<size_t> index = HipTokenIndex(token, uuids);
    if (!index) break;
    if (std::find(selected.begin(), selected.end(), *index) == selected.end()) {
      selected.push_back(*index);
    }
  }
  return selected;
}

struct IntelCard {
  std::string pci_address;
  uint32_t device_id = 0;
  bool integrated = false;
  uint32_t tiles = 1;
};

// Data Center GPU Max (Ponte Vecchio): NEO's pvcXl/pvcXt/pvcXtVg device ids.
bool IsDataCenterGpuMax(uint32_t device_id) {
  static const std::set<uint32_t> kIds = {0x0BD0, 0x0BD4, 0x0BD5, 0x0BD6, 0x0BD7, 0x0BD8,
                                          0x0BD9, 0x0BDA, 0x0BDB, 0x0B69, 0x0B6E};
  return kIds.count(device_id) > 0;
}

// KEY=value from a uevent file; empty when absent.
std::string UeventValue(absl::string_view uevent, absl::string_view key) {
  for (absl::string_view line : absl::StrSplit(uevent, '\n')) {
    if (absl::ConsumePrefix(&line, key) && absl::ConsumePrefix(&line, "=")) {
      return std::string(absl::StripAsciiWhitespace(line));
    }
  }
  return "";
}

// PCI_ID=VVVV:DDDD, the fallback for kernels and captures without device/vendor, device/device.
std::string UeventPciIdPart(absl::string_view uevent, int part) {
  const std::vector<std::string> ids = absl::StrSplit(UeventValue(uevent, "PCI_ID"), ':');
  return ids.size() == 2 ? ids[part] : "";
}

bool IsIntelVendor(const std::string& device_dir, absl::string_view uevent) {
  const std::optional<std::string> vendor = ReadAttribute(device_dir + "/vendor");
  if (vendor) return absl::EqualsIgnoreCase(absl::StripAsciiWhitespace(*vendor), "0x8086");
  return absl::EqualsIgnoreCase(UeventPciIdPart(uevent, 0), "8086");
}

uint32_t IntelDeviceId(const std::string& device_dir, absl::string_view uevent) {
  const std::optional<std::string> text = ReadAttribute(device_dir + "/device");
  uint32_t id = 0;
  if (text && absl::SimpleHexAtoi(absl::StripAsciiWhitespace(*text), &id)) return id;
  return absl::SimpleHexAtoi(UeventPciIdPart(uevent, 1), &id) ? id : 0;
}

uint32_t CountNumberedDirectories(const std::string& dir, absl::string_view prefix) {
  uint32_t count = 0;
  for (const std::string& name : ListDirectory(dir)) {
    if (IsNumbered(name, prefix) && PathExists(absl::StrCat(dir, "/", name), true)) ++count;
  }
  return count;
}

// xe lists tiles as device/tile<N>. i915 lists GTs as gt/gt<N>, which are tiles only on Data
// Center GPU Max: from Meteor Lake on, gt1 is the standalone media GT of a one-tile GPU.
uint32_t CountTiles(const std::string& card_dir, bool xe, uint32_t device_id) {
  if (xe) return std::max<uint32_t>(CountNumberedDirectories(card_dir + "/device", "tile"), 1);
  if (!IsDataCenterGpuMax(device_id)) return 1;
  return std::max<uint32_t>(CountNumberedDirectories(card_dir + "/gt", "gt"), 1);
}

// An Intel card that NEO drives (DRM driver i915 or xe); nullopt for any other card.
std::optional<IntelCard> ReadIntelCard(const std::string& card_dir) {
  const std::string device_dir = card_dir + "/device";
  const std::string uevent = ReadAttribute(device_dir + "/uevent").value_or("");
  if (!IsIntelVendor(device_dir, uevent)) return std::nullopt;
  const std::string driver =
      LinkTargetName(device_dir + "/driver").value_or(UeventValue(uevent, "DRIVER"));
  if (driver != "i915" && driver != "xe") return std::nullopt;
  IntelCard card;
  card.pci_address = absl::AsciiStrToLower(
      LinkTargetName(device_dir).value_or(UeventValue(uevent, "PCI_SLOT_NAME")));
  // Intel puts its integrated GPU at 00:02.0 on every platform; NEO assumes it too.
  card.integrated = card.pci_address == "0000:00:02.0";
  card.device_id = IntelDeviceId(device_dir, uevent);
  card.tiles = CountTiles(card_dir, driver == "xe", card.device_id);
  return card;
}

// NEO's root devices, ordered by PCI address as ZE_ENABLE_PCI_ID_DEVICE_ORDER orders them.
std::vector<IntelCard> ReadIntelCards(const std::string& sys_root) {
  const std::string drm_dir = sys_root + "/class/drm";
  std::vector<IntelCard> cards;
  for (const std::string& name : ListDirectory(drm_dir)) {
    if (!IsNumbered(name, "card")) continue;  // not card0-DP-1, not renderD128
    std::optional<IntelCard> card = ReadIntelCard(absl::StrCat(drm_dir, "/", name));
    if (card) cards.push_back(std::move(*card));
  }
  std::sort(cards.begin(), cards.end(),
            [](const IntelCard& a, const IntelCard& b) { return a.pci_address < b.pci_address; });
  return cards;
}

// NEO's setDeviceHierarchyMode: FLAT and COMBINED make each tile a device. Unset, NEO takes
// the default of its first root device's GPU family, FLAT only on Data Center GPU Max.
bool TilesAreDevices(const std::vector<IntelCard>& cards, const EnvMap& env) {
  const std::string mode = EnvValue(env, "ZE_FLAT_DEVICE_HIERARCHY");
  if (mode == "COMPOSITE") return false;
  if (mode == "FLAT" || mode == "COMBINED") return true;
  return IsDataCenterGpuMax(cards.front().device_id);
}

// NEO's StringHelpers::toUint32t, std::stoul(text, nullptr, 0) cast to 32 bits; nullopt where
// stoul throws (NEO does not catch it, so such an entry would end the process).
std::optional<uint32_t> NeoUint32(const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const unsigned long value = std::strtoul(text.c_str(), &end, 0);
  if (end == text.c_str() || errno == ERANGE) return std::nullopt;
  return static_cast<uint32_t>(value);
}

struct Tile {
  size_t card;
  uint32_t tile;
};

// Level Zero's FLAT numbering of tiles: those of card 0, then those of card 1, and so on.
std::vector<Tile> FlatTiles(const std::vector<IntelCard>& cards) {
  std::vector<Tile> tiles;
  for (size_t card = 0; card < cards.size(); ++card) {
    for (uint32_t tile = 0; tile < cards[card].tiles; ++tile) tiles.push_back({card, tile});
  }
  return tiles;
}

// One ZE_AFFINITY_MASK entry as NEO's parseAffinityMask reads it. Tiles as devices: X is a FLAT
// tile index, X.Y is ignored. Else X enables card X, X.Y its tile Y. Out of range: ignored.
void EnableAffinityEntry(const std::string& entry, bool tiles_are_devices,
                         const std::vector<Tile>& tiles, size_t card_count,
                         std::vector<bool>& enabled) {
  const std::vector<std::string> parts = SplitLikeGetline(entry, '.');
  const std::optional<uint32_t> index = parts.empty() ? std::nullopt : NeoUint32(parts[0]);
  if (!index) return;
  if (tiles_are_devices) {
    if (parts.size() == 1 && *index < tiles.size()) enabled[*index] = true;
    return;
  }
  if (*index >= card_count) return;
  const std::optional<uint32_t> tile = parts.size() == 2 ? NeoUint32(parts[1]) : std::nullopt;
  for (size_t i = 0; i < tiles.size(); ++i) {
    if (tiles[i].card == *index && (parts.size() == 1 || tiles[i].tile == tile)) {
      enabled[i] = true;
    }
  }
}

// Which FLAT tiles ZE_AFFINITY_MASK leaves on; all of them when it is unset, "" or "default".
std::vector<bool> AffinityMaskTiles(const std::vector<Tile>& tiles, size_t card_count,
                                    bool tiles_are_devices, const EnvMap& env) {
  const std::string mask = EnvValue(env, "ZE_AFFINITY_MASK");
  if (mask.empty() || mask == "default") return std::vector<bool>(tiles.size(), true);
  std::vector<bool> enabled(tiles.size(), false);
  for (const std::string& entry : SplitLikeGetline(mask, ',')) {
    EnableAffinityEntry(entry, tiles_are_devices, tiles, card_count, enabled);
  }
  return enabled;
}

struct LevelZeroDevice {
  Accelerator accelerator;
  bool integrated = false;
};

// zeDeviceGet's answer in driver order. Tiles as devices: the enabled tiles, each selected by
// its FLAT index. Else the cards with an enabled tile, each selected by its index, or by its
// X.Y entries when the mask left only some of its tiles on.
std::vector<LevelZeroDevice> LevelZeroDevices(const std::vector<IntelCard>& cards,
                                              const std::vector<Tile>& tiles,
                                              const std::vector<bool>& enabled,
                                              bool tiles_are_devices) {
  std::vector<LevelZeroDevice> devices;
  if (tiles_are_devices) {
    for (size_t i = 0; i < tiles.size(); ++i) {
      const IntelCard& card = cards[tiles[i].card];
      if (enabled[i]) devices.push_back({{card.pci_address, std::to_string(i)}, card.integrated});
    }
    return devices;
  }
  for (size_t card = 0; card < cards.size(); ++card) {
    std::vector<std::string> entries;
    bool all_on = true;
    for (size_t i = 0; i < tiles.size(); ++i) {
      if (tiles[i].card != card) continue;
      if (enabled[i]) entries.push_back(absl::StrCat(card, ".", tiles[i].tile));
      all_on = all_on && enabled[i];
    }
    if (entries.empty()) continue;
    const std::string select = all_on ? std::to_string(card) : absl::StrJoin(entries, ",");
    devices.push_back({{cards[card].pci_address, select}, cards[card].integrated});
  }
  return devices;
}

}  // namespace

AcceleratorList FindAmdGpus(const std::string& sys_root, const EnvMap& env) {
  const std::vector<KfdGpu> gpus = ReadKfdGpus(sys_root);
  if (gpus.empty()) return AcceleratorList{};
  AcceleratorList list;
  list.vendor = AcceleratorVendor::kAmd;
  list.visibility_variable = "HIP_VISIBLE_DEVICES";
  const std::vector<size_t> surfaced = RocrSurfacedGpus(gpus, env);
  std::vector<std::string> surfaced_uuids;
  for (size_t gpu : surfaced) surfaced_uuids.push_back(GpuUuid(gpus[gpu].unique_id, false));
  // The worker inherits ROCR_VISIBLE_DEVICES, so HIP_VISIBLE_DEVICES=<position among the GPUs
  // ROCr surfaces> shows it exactly this GPU.
  for (size_t position : HipSelectedGpus(surfaced_uuids, env)) {
    list.devices.push_back({gpus[surfaced[position]].pci_address, std::to_string(position)});
  }
  return list;
}

AcceleratorList FindIntelGpus(const std::string& sys_root, const EnvMap& env) {
  const std::vector<IntelCard> cards = ReadIntelCards(sys_root);
  if (cards.empty()) return AcceleratorList{};
  AcceleratorList list;
  list.vendor = AcceleratorVendor::kIntel;
  list.visibility_variable = "ZE_AFFINITY_MASK";
  const bool tiles_are_devices = TilesAreDevices(cards, env);
  const std::vector<Tile> tiles = FlatTiles(cards);
  const std::vector<LevelZeroDevice> devices =
      LevelZeroDevices(cards, tiles, AffinityMaskTiles(tiles, cards.size(), tiles_are_devices, env),
                       tiles_are_devices);
  // torch.xpu takes the discrete GPUs Level Zero shows, or its integrated ones when it shows
  // no discrete one. The mask counts integrated cards too: Level Zero numbers them all.
  const bool any_discrete = std::any_of(devices.begin(), devices.end(),
                                        [](const LevelZeroDevice& d) { return !d.integrated; });
  for (const LevelZeroDevice& device : devices) {
    if (device.integrated != any_discrete) list.devices.push_back(device.accelerator);
  }
  list.integrated = !list.devices.empty() && !any_discrete;
  return list;
}

}  // namespace ddprun
