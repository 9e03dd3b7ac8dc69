#pragma once
// A worker that SIGKILL cannot end, for the hang tests: the test puts it in a new cgroup-v1
// freezer group and freezes it (from outside: a network namespace's /sys has no cgroups); a
// frozen task dies of SIGKILL only once its group is thawed. The tests thaw and remove the
// group at the end whatever happens, so that nothing is left behind.

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "absl/time/time.h"
#include "tests/support/child_process.h"

namespace ddprun::testing {

inline constexpr char kFreezerRoot[] = "/sys/fs/cgroup/freezer";

/// The cgroup-v1 freezer can be used here (root, and the hierarchy mounted).
inline bool FreezerUsable() { return ::access(kFreezerRoot, W_OK) == 0; }

/// Thaws `group` and removes it once its tasks are gone; true when it is gone (at once if
/// it was gone already).
inline bool ThawAndRemove(const std::string& group) {
  if (::access(group.c_str(), F_OK) != 0) return true;
  std::ofstream(group + "/freezer.state") << "THAWED" << std::endl;
  return WaitUntil([&] { return ::rmdir(group.c_str()) == 0; }, absl::Seconds(10));
}

/// Freezes `pid` in a new freezer group, and waits until it is FROZEN; the group's folder,
/// or "" when that failed.
inline std::string Freeze(const std::string& pid) {
  const std::string group = std::string(kFreezerRoot) + "/ddprun-test-" + pid;
  if (::mkdir(group.c_str(), 0755) != 0) return "";
  std::ofstream(group + "/cgroup.procs") << pid << std::endl;
  std::ofstream(group + "/freezer.state") << "FROZEN" << std::endl;
  const bool frozen = WaitUntil(
      [&] {
        std::string state;
        std::ifstream(group + "/freezer.state") >> state;
        return state == "FROZEN";
      },
      absl::Seconds(10));
  if (frozen) return group;
  ThawAndRemove(group);
  return "";
}

}  // namespace ddprun::testing
