#include "tests/support/child_process.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <sstream>

#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

extern char** environ;

namespace ddprun::testing {

std::unique_ptr<ChildProcess> ChildProcess::Start(
    const std::vector<std::string>& argv,
    const std::map<std::string, std::optional<std::string>>& extra_env) {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string kv(*e);
    const size_t eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const auto& [key, value] : extra_env) {
    if (value) {
      env[key] = *value;
    } else {
      env.erase(key);
    }
  }
  std::vector<std::string> env_strings;
  for (const auto& [key, value] : env) env_strings.push_back(key + "=" + value);
  std::vector<char*> c_argv, c_env;
  for (const auto& a : argv) c_argv.push_back(const_cast<char*>(a.c_str()));
  c_argv.push_back(nullptr);
  for (const auto& e : env_strings) c_env.push_back(const_cast<char*>(e.c_str()));
  c_env.push_back(nullptr);

  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0) abort();
  auto child = std::unique_ptr<ChildProcess>(new ChildProcess());
  child->pid_ = fork();
  if (child->pid_ == 0) {
    setpgid(0, 0);
    dup2(out_pipe[1], 1);
    dup2(err_pipe[1], 2);
    execve(c_argv[0], c_argv.data(), c_env.data());
    _exit(127);
  }
  setpgid(child->pid_, child->pid_);
  close(out_pipe[1]);
  close(err_pipe[1]);
  child->out_fd_ = out_pipe[0];
  child->err_fd_ = err_pipe[0];
  ChildProcess* raw = child.get();
  child->reader_ = std::thread([raw] {
    pollfd fds[2] = {{raw->out_fd_, POLLIN, 0}, {raw->err_fd_, POLLIN, 0}};
    std::string* sinks[2] = {&raw->out_, &raw->err_};
    int open = 2;
    char buf[65536];
    while (open > 0) {
      if (poll(fds, 2, -1) < 0 && errno != EINTR) break;
      for (int i = 0; i < 2; ++i) {
        if (fds[i].fd < 0 || fds[i].revents == 0) continue;
        const ssize_t n = read(fds[i].fd, buf, sizeof(buf));
        if (n > 0) {
          std::lock_guard<std::mutex> lock(raw->mu_);
          sinks[i]->append(buf, static_cast<size_t>(n));
        } else if (!(n < 0 && errno == EINTR)) {
          close(fds[i].fd);
          fds[i].fd = -1;
          --open;
        }
      }
    }
  });
  return child;
}

std::string ChildProcess::ErrSoFar() const {
  std::lock_guard<std::mutex> lock(mu_);
  return err_;
}

std::string ChildProcess::OutSoFar() const {
  std::lock_guard<std::mutex> lock(mu_);
  return out_;
}

ChildProcess::~ChildProcess() {
  if (!waited_) Wait(absl::ZeroDuration());
}

ProcessResult ChildProcess::Wait(absl::Duration timeout) {
  ProcessResult result;
  int status = 0;
  const absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    const pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) break;
    if (r < 0 && errno == ECHILD) {  // reaped elsewhere (a test's ReapZombies): status unknown
      status = 0xff00;
      break;
    }
    if (absl::Now() >= deadline) {
      kill(-pid_, SIGKILL);
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
      result.timed_out = true;
      break;
    }
    usleep(2000);
  }
  waited_ = true;
  // The child's leftovers could hold the pipes open; a test that timed out kills them above.
  if (reader_.joinable()) reader_.join();
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.out = out_;
  result.err = err_;
  return result;
}

ProcessResult RunProcess(const std::vector<std::string>& argv,
                         const std::map<std::string, std::optional<std::string>>& extra_env,
                         absl::Duration timeout) {
  return ChildProcess::Start(argv, extra_env)->Wait(timeout);
}

bool WaitUntil(const std::function<bool()>& condition, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!condition()) {
    if (absl::Now() >= deadline) return false;
    usleep(2000);
  }
  return true;
}

bool FileExists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void WriteFile(const std::string& path, const std::string& content, int mode) {
  std::ofstream(path, std::ios::binary) << content;
  chmod(path.c_str(), mode);
}

std::map<std::string, std::string> ParseEnvFile(const std::string& path) {
  std::map<std::string, std::string> env;
  for (absl::string_view line : absl::StrSplit(ReadFile(path), '\n', absl::SkipEmpty())) {
    const size_t eq = line.find('=');
    if (eq != absl::string_view::npos) {
      env[std::string(line.substr(0, eq))] = std::string(line.substr(eq + 1));
    }
  }
  return env;
}

bool ProcessAlive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return false;
  std::string content((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const size_t paren = content.rfind(')');
  if (paren == std::string::npos || paren + 2 >= content.size()) return false;
  return content[paren + 2] != 'Z';
}

void BecomeSubreaper() { prctl(PR_SET_CHILD_SUBREAPER, 1); }

void ReapZombies() {
  while (waitpid(-1, nullptr, WNOHANG) > 0) {
  }
}

namespace {

constexpr int kFirstTestPort = 20000;
constexpr int kTestPorts = 12000;  // up to 31999: below the ephemeral range

bool FreeOnLoopback(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) abort();
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const bool free = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return free;
}

}  // namespace

int FreeLoopbackPort() {
  static std::atomic<long> next{getpid() * 7919L};
  for (int tries = 0; tries < kTestPorts; ++tries) {
    const int port = kFirstTestPort + static_cast<int>(next.fetch_add(1) % kTestPorts);
    if (FreeOnLoopback(port)) return port;
  }
  abort();  // every test port is taken
}

int CountLinesContaining(const std::string& text, const std::string& needle) {
  int count = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (line.find(needle) != absl::string_view::npos) ++count;
  }
  return count;
}

}  // namespace ddprun::testing
