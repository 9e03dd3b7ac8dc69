#pragma once
// Test support: run a program (usually ddprun) as a child with its output captured, wait for
// it with a deadline, and wait for files the workers write. Nothing here sleeps blindly:
// every wait has a condition and a deadline.

#include <sys/types.h>

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/time.h"
#include "tests/support/temp_dir.h"

namespace ddprun::testing {

struct ProcessResult {
  int exit_code = -1;      // the shell's view: code, or 128+signal
  bool timed_out = false;  // killed by the test after its deadline
  std::string out;
  std::string err;
};

class ChildProcess {
 public:
  /// Starts `argv` with this process's environment plus `extra_env` (a value of nullopt
  /// removes the variable), in its own process group.
  static std::unique_ptr<ChildProcess> Start(
      const std::vector<std::string>& argv,
      const std::map<std::string, std::optional<std::string>>& extra_env = {});
  ~ChildProcess();

  pid_t pid() const { return pid_; }
  /// What the process wrote to stderr until now.
  std::string ErrSoFar() const;
  /// What the process wrote to stdout until now.
  std::string OutSoFar() const;
  /// Waits for exit; after `timeout` the process group is SIGKILLed and timed_out is set.
  ProcessResult Wait(absl::Duration timeout);

 private:
  ChildProcess() = default;
  pid_t pid_ = -1;
  int out_fd_ = -1;
  int err_fd_ = -1;
  mutable std::mutex mu_;
  std::string out_, err_;  // guarded by mu_ while the reader runs
  std::thread reader_;
  bool waited_ = false;
};

/// Runs to completion (see ChildProcess::Start and Wait).
ProcessResult RunProcess(const std::vector<std::string>& argv,
                         const std::map<std::string, std::optional<std::string>>& extra_env = {},
                         absl::Duration timeout = absl::Seconds(60));

/// Polls `condition` every few milliseconds until it holds or `timeout` passes.
bool WaitUntil(const std::function<bool()>& condition, absl::Duration timeout);

bool FileExists(const std::string& path);
std::string ReadFile(const std::string& path);
void WriteFile(const std::string& path, const std::string& content, int mode = 0644);
/// KEY=VALUE lines as a map.
std::map<std::string, std::string> ParseEnvFile(const std::string& path);

/// True while `pid` exists and is not a zombie.
bool ProcessAlive(pid_t pid);

/// Makes this test process the reaper of orphans (so a killed agent's leftovers come here,
/// where the test can see them die) and reaps any that ended.
void BecomeSubreaper();
void ReapZombies();

/// A TCP port free on 127.0.0.1 right now, for a server the test starts later. It lies below
/// the kernel's ephemeral range (32768 up), so no connection of a busy machine takes it in
/// the meantime, and one process never gets the same port twice; each process starts at its
/// own place in the range, so that tests running side by side rarely try the same ones.
int FreeLoopbackPort();

/// Number of lines in `text` that contain `needle`.
int CountLinesContaining(const std::string& text, const std::string& needle);

}  // namespace ddprun::testing
