#include "common/process_status.h"

#include <signal.h>
#include <sys/wait.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ddprun {

const char* SignalAbbreviation(int signal) {
  static constexpr struct {
    int number;
    const char* name;
  } kSignals[] = {
      {SIGHUP, "HUP"},   {SIGINT, "INT"},       {SIGQUIT, "QUIT"}, {SIGILL, "ILL"},
      {SIGTRAP, "TRAP"}, {SIGABRT, "ABRT"},     {SIGBUS, "BUS"},   {SIGFPE, "FPE"},
      {SIGKILL, "KILL"}, {SIGUSR1, "USR1"},     {SIGSEGV, "SEGV"}, {SIGUSR2, "USR2"},
      {SIGPIPE, "PIPE"}, {SIGALRM, "ALRM"},     {SIGTERM, "TERM"}, {SIGSTKFLT, "STKFLT"},
      {SIGCHLD, "CHLD"}, {SIGCONT, "CONT"},     {SIGSTOP, "STOP"}, {SIGTSTP, "TSTP"},
      {SIGTTIN, "TTIN"}, {SIGTTOU, "TTOU"},     {SIGURG, "URG"},   {SIGXCPU, "XCPU"},
      {SIGXFSZ, "XFSZ"}, {SIGVTALRM, "VTALRM"}, {SIGPROF, "PROF"}, {SIGWINCH, "WINCH"},
      {SIGPOLL, "POLL"}, {SIGPWR, "PWR"},       {SIGSYS, "SYS"},
  };
  for (const auto& known : kSignals) {
    if (known.number == signal) return known.name;
  }
  return nullptr;
}

std::string SignalName(int signal) {
  const char* abbrev = SignalAbbreviation(signal);
  if (abbrev == nullptr) return absl::StrCat("signal ", signal);
  return absl::StrCat("SIG", abbrev);
}

std::string SignalNames(const std::vector<int>& signals) {
  return absl::StrJoin(signals, ",",
                       [](std::string* out, int sig) { out->append(SignalName(sig)); });
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
