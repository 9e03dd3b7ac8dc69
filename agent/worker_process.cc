#include "agent/worker_process.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "agent/unique_fd.h"

namespace ddprun {
namespace {

std::vector<char*> CStrings(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (const std::string& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

// Runs in the forked child: async-signal-safe calls only.
[[noreturn]] void ExecChild(const SpawnSpec& spec, char** argv, char** envp, pid_t agent_pid,
                            int error_fd) {
  ::setpgid(0, 0);
  // The agent holds handled signals blocked; a worker starts with the default mask and
  // dispositions, as if launched from a shell.
  sigset_t empty;
  sigemptyset(&empty);
  ::sigprocmask(SIG_SETMASK, &empty, nullptr);
  for (int sig : {SIGPIPE, SIGINT, SIGQUIT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2, SIGCHLD}) {
    ::signal(sig, SIG_DFL);
  }
  // Die with the agent, even on SIGKILL; and if the agent died before this line, now.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != agent_pid) ::_exit(127);
  if (spec.stdout_fd >= 0 && ::dup2(spec.stdout_fd, STDOUT_FILENO) < 0) goto fail;
  if (spec.stderr_fd >= 0 && ::dup2(spec.stderr_fd, STDERR_FILENO) < 0) goto fail;
  // execvpe searches PATH of the agent's own environment, as a shell would.
  ::execvpe(argv[0], argv, envp);
fail:
  const int err = errno;
  (void)!::write(error_fd, &err, sizeof(err));
  ::_exit(127);
}

}  // namespace

absl::StatusOr<pid_t> SpawnWorkerProcess(const SpawnSpec& spec) {
  if (spec.argv.empty()) return absl::InvalidArgumentError("empty worker command");
  std::vector<char*> argv = CStrings(spec.argv);
  std::vector<char*> envp = CStrings(spec.env);
  absl::StatusOr<Pipe> exec_errors = MakePipe(/*nonblocking_read=*/false);
  if (!exec_errors.ok()) return exec_errors.status();
  const pid_t agent_pid = ::getpid();

  const pid_t pid = ::fork();
  if (pid < 0) return ErrnoStatus(errno, "fork");
  if (pid == 0) ExecChild(spec, argv.data(), envp.data(), agent_pid, exec_errors->write_end.get());

  ::setpgid(pid, pid);  // also here, so the group exists before the agent signals it
  exec_errors->write_end.Reset();
  // The close-on-exec pipe reads EOF once exec succeeded, or an errno when it failed.
  int child_errno = 0;
  ssize_t n;
  do {
    n = ::read(exec_errors->read_end.get(), &child_errno, sizeof(child_errno));
  } while (n < 0 && errno == EINTR);
  if (n == static_cast<ssize_t>(sizeof(child_errno))) {
    ::waitpid(pid, nullptr, 0);
    return ErrnoStatus(child_errno, absl::StrCat("cannot execute '", spec.argv[0], "'"));
  }
  return pid;
}

std::string SignalName(int signal) {
  const char* abbrev = ::sigabbrev_np(signal);
  if (abbrev == nullptr) return absl::StrCat("signal ", signal);
  return absl::StrCat("SIG", abbrev);
}

std::string DescribeWaitStatus(int wait_status) {
  if (WIFEXITED(wait_status)) return absl::StrCat("exit code ", WEXITSTATUS(wait_status));
  if (WIFSIGNALED(wait_status)) {
    const int sig = WTERMSIG(wait_status);
    return absl::StrCat("signal ", sig, " (", SignalName(sig), ")");
  }
  return absl::StrCat("wait status ", wait_status);
}

}  // namespace ddprun
