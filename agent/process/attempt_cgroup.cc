#include "agent/process/attempt_cgroup.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/small_file.h"

namespace ddprun {

absl::StatusOr<std::string> OwnCgroupV2Dir() {
  absl::StatusOr<std::string> cgroups = ReadSmallFile("/proc/self/cgroup");
  if (!cgroups.ok()) return cgroups.status();
  std::string own;
  bool found = false;
  for (absl::string_view line : absl::StrSplit(*cgroups, '\n')) {
    if (absl::StartsWith(line, "0::")) {
      own = std::string(line.substr(3));
      found = true;
    }
  }
  if (!found) return absl::UnavailableError("this process is in no cgroup v2 group");
  absl::StatusOr<std::string> mounts = ReadSmallFile("/proc/self/mountinfo");
  if (!mounts.ok()) return mounts.status();
  for (absl::string_view line : absl::StrSplit(*mounts, '\n')) {
    // "... <mount point> <options> ... - cgroup2 <source> <options>"
    std::vector<absl::string_view> halves = absl::StrSplit(line, " - ");
    if (halves.size() != 2 || !absl::StartsWith(halves[1], "cgroup2 ")) continue;
    std::vector<absl::string_view> fields = absl::StrSplit(halves[0], ' ');
    if (fields.size() < 5) continue;
    // The mount's root (field 4) is the part of the hierarchy it shows.
    const std::string root(fields[3]), point(fields[4]);
    if (!absl::StartsWith(own, root)) continue;
    const std::string rest = root == "/" ? own : own.substr(root.size());
    return rest == "/" ? point : point + rest;
  }
  return absl::UnavailableError("no cgroup v2 hierarchy is mounted");
}

absl::StatusOr<AttemptCgroup> AttemptCgroup::Create(const std::string& name) {
  // Read once: a process's cgroup does not change, and a restart should not re-read /proc.
  static const absl::StatusOr<std::string> own = OwnCgroupV2Dir();
  if (!own.ok()) return own.status();
  const std::string path = absl::StrCat(*own, "/", name);
  if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
    return absl::UnavailableError(
        absl::StrCat("cannot make cgroup ", path, ": ", ErrnoStatus(errno, "mkdir").message()));
  }
  if (::access((path + "/cgroup.kill").c_str(), W_OK) != 0) {
    ::rmdir(path.c_str());
    return absl::UnavailableError(
        absl::StrCat("cgroup ", path, " has no cgroup.kill (Linux 5.14 or later has it)"));
  }
  UniqueFd procs(::open((path + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC));
  if (!procs.valid()) {
    const absl::Status why = ErrnoStatus(errno, "open cgroup.procs");
    ::rmdir(path.c_str());
    return absl::UnavailableError(absl::StrCat("cannot use cgroup ", path, ": ", why.message()));
  }
  return AttemptCgroup(path, std::move(procs));
}

bool KillCgroup(const std::string& path, int bound_ms) {
  UniqueFd kill(::open((path + "/cgroup.kill").c_str(), O_WRONLY | O_CLOEXEC));
  if (kill.valid()) (void)!::write(kill.get(), "1", 1);
  // The kill is asynchronous: the group can be removed once "populated 0".
  for (int waited = 0; waited <= bound_ms; ++waited) {
    if (::rmdir(path.c_str()) == 0 || errno == ENOENT) return true;
    if (errno != EBUSY) return false;
    ::poll(nullptr, 0, 1);
  }
  return false;
}

void AttemptCgroup::KillAndRemove() {
  if (path_.empty()) return;
  procs_.Reset();
  KillCgroup(path_, 2000);
  path_.clear();
}

AttemptCgroup::~AttemptCgroup() { KillAndRemove(); }

}  // namespace ddprun
