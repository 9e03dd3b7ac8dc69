#include <dlfcn.h>
#include <limits.h>
#include <unistd.h>

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "net/network_plugin.h"

namespace ddprun {

absl::StatusOr<NetworkPlugin> LoadNetworkPlugin(const std::string& half) {
  constexpr char kName[] = "libddprun_network.so";
  const std::string symbol = absl::StrCat("ddprun_network_", half, "_v3");
  std::vector<std::string> candidates;
  char exe[PATH_MAX] = {};
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n > 0) {
    std::string dir(exe, static_cast<size_t>(n));
    dir = dir.substr(0, dir.rfind('/'));
    candidates.push_back(absl::StrCat(dir, "/", kName));
    candidates.push_back(absl::StrCat(dir, "/../lib/ddprun/", kName));
  }
  candidates.push_back(kName);  // LD_LIBRARY_PATH and the system's library path
  std::vector<std::string> errors;
  for (const std::string& path : candidates) {
    void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      errors.push_back(::dlerror());
      continue;
    }
    using Entry = void (*)(NetworkPlugin*);
    auto entry = reinterpret_cast<Entry>(::dlsym(handle, symbol.c_str()));
    if (entry == nullptr) {
      errors.push_back(absl::StrCat(path, " has no network half '", half, "' (no ", symbol,
                                    ": from another ddprun version?)"));
      continue;
    }
    NetworkPlugin plugin{};
    entry(&plugin);
    return plugin;  // never unloaded: gRPC's threads live as long as the process
  }
  return absl::NotFoundError(absl::StrCat("multi-node jobs need ", kName,
                                          ", installed next to ddprun; it was not found or could "
                                          "not be loaded (",
                                          absl::StrJoin(errors, "; "), ")"));
}

}  // namespace ddprun
