#include "launcher/launch_environment.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include "common/env_map.h"

namespace ddprun {

LaunchEnvironment LaunchEnvironment::OfThisProcess() {
  LaunchEnvironment env;
  env.vars = CurrentEnvironment();
  char cwd[4096];
  if (::getcwd(cwd, sizeof(cwd)) != nullptr) env.cwd = cwd;
  winsize size{};
  if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0) env.terminal_columns = size.ws_col;
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n > 0) env.own_path.assign(self, static_cast<size_t>(n));
  return env;
}

}  // namespace ddprun
