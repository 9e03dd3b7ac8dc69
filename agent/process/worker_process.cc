#include "agent/process/worker_process.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/mempolicy.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/listen_socket.h"
#include "common/unique_fd.h"

namespace ddprun {
namespace {

std::vector<char*> CStrings(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (const std::string& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

constexpr char kExecCall[] = "execve";
constexpr char kBindCall[] = "sched_setaffinity";

struct ChildArgs {
  const SpawnSpec* spec;
  char** argv;
  char** envp;
  pid_t agent_pid;
  int exec_errno;           // written by the child when exec fails; read once the parent resumes
  const char* failed_call;  // what failed with exec_errno: kBindCall or kExecCall
  int mempolicy_errno;      // set_mempolicy's error; 0: applied or not asked for
  // The ProcessBinding as plain words, taken out of its vectors by the parent: the child
  // touches no container.
  const unsigned long* cpu_mask;
  size_t cpu_mask_bytes;  // 0: not bound
  const unsigned long* node_mask;
  unsigned long max_node;  // set_mempolicy's maxnode: the mask's bits + 1 (the kernel reads one
                           // bit fewer than it is told); 0: no policy
};

// Binds the child (see ProcessBinding). Async-signal-safe: two system calls.
__attribute__((no_sanitize("address", "undefined"))) bool BindChild(ChildArgs& args) {
  if (args.cpu_mask_bytes > 0 &&
      ::sched_setaffinity(0, args.cpu_mask_bytes,
                          reinterpret_cast<const cpu_set_t*>(args.cpu_mask)) != 0) {
    args.exec_errno = errno;
    args.failed_call = kBindCall;
    return false;
  }
  if (args.max_node > 0 &&
      ::syscall(SYS_set_mempolicy, MPOL_PREFERRED, args.node_mask, args.max_node) != 0) {
    args.mempolicy_errno = errno;
  }
  return true;
}

constexpr int kSignalsToReset[] = {SIGPIPE, SIGINT,  SIGQUIT, SIGTERM,
                                   SIGHUP,  SIGUSR1, SIGUSR2, SIGCHLD};

// Runs in the child before exec. The child shares the agent's memory (CLONE_VM) while the
// agent is suspended (CLONE_VFORK), as posix_spawn does: only async-signal-safe calls, and
// nothing written but `exec_errno`, `failed_call` and `mempolicy_errno`. Not instrumented: a
// sanitizer's shadow memory is shared too, and the child's stack bookkeeping there would corrupt
// the agent's.
__attribute__((no_sanitize("address", "undefined"))) int ExecChild(void* raw) {
  auto* args = static_cast<ChildArgs*>(raw);
  const SpawnSpec& spec = *args->spec;
  // First, so that everything it ever starts is in the attempt's cgroup with it.
  if (spec.cgroup_procs_fd >= 0) (void)!::write(spec.cgroup_procs_fd, "0", 1);
  // A session of its own (as torchrun's start_new_session=True): its own process group for
  // killpg, and no controlling terminal, so reading the terminal cannot stop it with
  // SIGTTIN the way a background process group of the agent's session would be.
  ::setsid();
  if (spec.guard_fd >= 0) {
    // "+<pgid>\n", formatted by hand: the child may call only async-signal-safe functions.
    char line[24];
    char* end = line + sizeof(line);
    char* p = end;
    *--p = '\n';
    for (pid_t pid = ::getpid(); pid > 0; pid /= 10) *--p = static_cast<char>('0' + pid % 10);
    *--p = '+';
    (void)!::write(spec.guard_fd, p, static_cast<size_t>(end - p));  // atomic: < PIPE_BUF
  }
  // The agent holds handled signals blocked; a worker starts with the default mask and
  // dispositions, as if launched from a shell.
  for (int sig : kSignalsToReset) ::signal(sig, SIG_DFL);
  sigset_t empty;
  sigemptyset(&empty);
  ::sigprocmask(SIG_SETMASK, &empty, nullptr);
  // Die with the agent, even on SIGKILL; and if the agent died before this line, now.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != args->agent_pid) ::_exit(127);
  RestoreOpenFileLimit();  // raised for the master this agent may host, not for workers
  if (!BindChild(*args)) ::_exit(127);
  if (spec.inherit_fd >= 0) ::fcntl(spec.inherit_fd, F_SETFD, 0);  // the child's copy only
  if ((spec.stdout_fd < 0 || ::dup2(spec.stdout_fd, STDOUT_FILENO) >= 0) &&
      (spec.stderr_fd < 0 || ::dup2(spec.stderr_fd, STDERR_FILENO) >= 0)) {
    // execvpe searches PATH of the agent's own environment, as a shell would.
    ::execvpe(args->argv[0], args->argv, args->envp);
  }
  args->exec_errno = errno;
  ::_exit(127);
}

}  // namespace

absl::StatusOr<pid_t> SpawnWorkerProcess(const SpawnSpec& spec) {
  if (spec.argv.empty()) return absl::InvalidArgumentError("empty worker command");
  std::vector<char*> argv = CStrings(spec.argv);
  std::vector<char*> envp = CStrings(spec.env);
  ChildArgs args{&spec, argv.data(), envp.data(), ::getpid(), 0, kExecCall,
                 0,     nullptr,     0,           nullptr,    0};
  if (spec.binding != nullptr) {
    args.cpu_mask = spec.binding->cpu_mask.data();
    args.cpu_mask_bytes = spec.binding->cpu_mask.size() * sizeof(unsigned long);
    args.node_mask = spec.binding->node_mask.data();
    args.max_node = spec.binding->node_mask.empty()
                        ? 0
                        : spec.binding->node_mask.size() * sizeof(unsigned long) * 8 + 1;
  }
  // vfork semantics: no copy of the agent's page tables and no copy-on-write faults
  // afterwards, which makes a spawn several times cheaper than fork on virtual machines.
  constexpr size_t kChildStack = 64 * 1024;
  alignas(16) static thread_local char stack[kChildStack];
  const pid_t pid =
      ::clone(ExecChild, stack + kChildStack, CLONE_VM | CLONE_VFORK | SIGCHLD, &args);
  if (pid < 0) return ErrnoStatus(errno, "clone");
  // The agent resumes once the child has exec'ed, or exited because exec failed.
  if (spec.mempolicy_errno != nullptr) *spec.mempolicy_errno = args.mempolicy_errno;
  if (args.exec_errno != 0) {
    ::waitpid(pid, nullptr, 0);
    if (spec.guard_fd >= 0) {  // the child registered its group; it is gone
      (void)WriteAll(spec.guard_fd, absl::StrCat("-", pid, "\n"));
    }
    if (args.failed_call == kBindCall) {
      return ErrnoStatus(args.exec_errno,
                         absl::StrCat("cannot bind '", spec.argv[0],
                                      "' to the CPUs planned at start (sched_setaffinity; were "
                                      "ddprun's allowed CPUs narrowed since?)"));
    }
    return ErrnoStatus(args.exec_errno, absl::StrCat("cannot execute '", spec.argv[0], "'"));
  }
  return pid;  // the child called setsid() before exec, so its group id is its pid
}

ProcessBinding MakeProcessBinding(const std::set<int>& cpus, int preferred_node) {
  constexpr int kBits = sizeof(unsigned long) * 8;
  ProcessBinding binding;
  if (!cpus.empty()) {
    // Whole words up to the highest CPU, at least a cpu_set_t: the kernel takes any length.
    binding.cpu_mask.assign(
        std::max<size_t>(*cpus.rbegin() / kBits + 1, sizeof(cpu_set_t) / sizeof(unsigned long)), 0);
    for (int cpu : cpus) binding.cpu_mask[cpu / kBits] |= 1UL << (cpu % kBits);
  }
  if (preferred_node >= 0) {
    binding.node_mask.assign(preferred_node / kBits + 1, 0);
    binding.node_mask[preferred_node / kBits] |= 1UL << (preferred_node % kBits);
  }
  return binding;
}

int KillStrayChildren(const std::vector<pid_t>& keep, const std::vector<pid_t>& known_groups) {
  // The agent is single-threaded, so its main task's list is all of its children.
  std::ifstream list(absl::StrCat("/proc/self/task/", ::getpid(), "/children"));
  int strays = 0;
  pid_t child;
  while (list >> child) {
    if (std::find(keep.begin(), keep.end(), child) != keep.end()) continue;
    // /proc/<pid>/stat: "pid (comm) state ppid pgrp ..."; comm may hold spaces and ')'.
    std::ifstream stat(absl::StrCat("/proc/", child, "/stat"));
    std::string content((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    const size_t paren = content.rfind(')');
    if (paren == std::string::npos || paren + 2 >= content.size()) continue;  // gone
    if (content[paren + 2] == 'Z') continue;  // already dead, only not reaped yet
    pid_t ppid = 0, pgrp = 0;
    std::istringstream fields(content.substr(paren + 4));
    fields >> ppid >> pgrp;
    if (::kill(child, SIGKILL) != 0) continue;
    if (std::find(known_groups.begin(), known_groups.end(), pgrp) == known_groups.end()) ++strays;
  }
  return strays;
}

}  // namespace ddprun
