#include "agent/process/orphan_guard.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/process/attempt_cgroup.h"
#include "common/unique_fd.h"

namespace ddprun {
namespace {

// The guard's whole life: read "+pgid\n" / "-pgid\n" until EOF, then kill what is listed.
[[noreturn]] void RunGuard(int from_agent) {
  // Terminal and job-control signals are for the agent, which forwards them to workers;
  // the guard must survive them to do its one job.
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGPIPE}) {
    ::signal(sig, SIG_IGN);
  }
  ::setpgid(0, 0);
  // Close everything else: the guard must not hold the agent's terminal pipes or sockets.
  if (from_agent != 3) {
    ::dup2(from_agent, 3);
    from_agent = 3;
  }
  CloseDescriptorsFrom(4);
  // Nor the agent's console: a pipe reading ddprun's output must end when the agent does.
  const int devnull = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (devnull >= 0) {
    for (int fd = 0; fd < 3; ++fd) ::dup2(devnull, fd);
    ::close(devnull);
  }
  std::set<pid_t> groups;
  std::set<std::string> cgroups;
  std::vector<std::string> leftovers;
  std::string pending;
  char buf[512];
  for (;;) {
    const ssize_t n = ::read(from_agent, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    pending.append(buf, static_cast<size_t>(n));
    size_t newline;
    while ((newline = pending.find('\n')) != std::string::npos) {
      const char op = pending[0];
      const std::string payload = pending.substr(1, newline - 1);
      const pid_t pgid = static_cast<pid_t>(std::atol(payload.c_str()));
      pending.erase(0, newline + 1);
      if (op == 'C') cgroups.insert(payload);
      if (op == 'R') leftovers.push_back(payload);
      if (op == 'D') cgroups.erase(payload);
      if (pgid <= 1) continue;
      if (op == '+') groups.insert(pgid);
      if (op == '-') groups.erase(pgid);
    }
  }
  for (pid_t pgid : groups) ::killpg(pgid, SIGKILL);
  // What left its process group (setsid, a daemon) is still in its attempt's cgroup.
  for (const std::string& path : cgroups) KillCgroup(path, 2000);
  // Gone already when the agent ended normally; a secret must not stay on disk otherwise.
  for (const std::string& path : leftovers) {
    if (::unlink(path.c_str()) != 0 && errno == EISDIR) ::rmdir(path.c_str());
  }
  ::_exit(0);
}

}  // namespace

absl::StatusOr<OrphanGuard> OrphanGuard::Start() {
  absl::StatusOr<Pipe> pipe = MakePipe(/*nonblocking_read=*/false);
  if (!pipe.ok()) return pipe.status();
  const pid_t pid = ::fork();
  if (pid < 0) return ErrnoStatus(errno, "fork (orphan guard)");
  if (pid == 0) {
    pipe->write_end.Reset();
    RunGuard(pipe->read_end.get());
  }
  pipe->read_end.Reset();
  return OrphanGuard(std::move(pipe->write_end), pid);
}

void OrphanGuard::Send(char op, pid_t pgid) {
  const std::string line = absl::StrCat(std::string(1, op), pgid, "\n");
  // A short line to a pipe is atomic; if the guard is gone there is nothing better to do.
  (void)WriteAll(to_guard_.get(), line);
}

void OrphanGuard::Forget(pid_t pgid) { Send('-', pgid); }

void OrphanGuard::Send(char op, const std::string& payload) {
  (void)WriteAll(to_guard_.get(), absl::StrCat(std::string(1, op), payload, "\n"));
}

void OrphanGuard::WatchCgroup(const std::string& path) { Send('C', path); }

void OrphanGuard::ForgetCgroup(const std::string& path) { Send('D', path); }

void OrphanGuard::RemoveIfAgentDies(const std::string& path) { Send('R', path); }

}  // namespace ddprun
