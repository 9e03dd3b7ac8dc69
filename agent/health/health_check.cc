#include "agent/health/health_check.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "agent/health/health_check_process.h"
#include "agent/process/worker_process.h"
#include "common/process_status.h"
#include "common/small_file.h"
#include "spdlog/spdlog.h"

namespace ddprun {
namespace {

// The end of the check's output (a memfd): a check that prints gigabytes must not cost the
// agent as much; its last lines are what the summaries show.
std::string OutputTail(int fd) {
  constexpr size_t kKept = 16 * kHealthCheckTailBytes;
  struct stat st;
  const uint64_t size = ::fstat(fd, &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
  return ReadFdPart(fd, size > kKept ? size - kKept : 0, kKept);
}

}  // namespace

std::vector<std::string> HealthCheckArgv(const std::string& executable,
                                         const HealthCheckSettings& settings) {
  std::vector<std::string> argv = {executable, kHealthCheckMode};
  if (settings.builtin) {
    argv.push_back("--builtin");
    if (settings.expected_gpus > 0) {
      argv.insert(argv.end(), {"--gpus", std::to_string(settings.expected_gpus)});
    }
    if (settings.min_free_disk_bytes > 0) {
      argv.insert(argv.end(), {"--min-free-disk", std::to_string(settings.min_free_disk_bytes),
                               "--disk-path", settings.disk_path});
    }
  }
  if (!settings.command.empty()) argv.insert(argv.end(), {"--", settings.command});
  return argv;
}

std::string HealthCheckTail(const std::string& output, std::vector<std::string>* skipped) {
  std::vector<std::string> lines;
  for (absl::string_view line : absl::StrSplit(output, '\n', absl::SkipWhitespace())) {
    if (absl::ConsumePrefix(&line, kHealthSkippedPrefix)) {
      if (skipped != nullptr) skipped->emplace_back(line);
      continue;
    }
    lines.emplace_back(absl::StripTrailingAsciiWhitespace(line));
  }
  if (lines.size() > static_cast<size_t>(kHealthCheckTailLines)) {
    lines.erase(lines.begin(), lines.end() - kHealthCheckTailLines);
  }
  std::string tail = absl::StrJoin(lines, "\n");
  if (tail.size() > kHealthCheckTailBytes) {
    tail = absl::StrCat("...", tail.substr(tail.size() - kHealthCheckTailBytes));
  }
  return tail;
}

HealthCheckRun::HealthCheckRun(EventLoop& loop, OrphanGuard& guard,
                               const HealthCheckSettings& settings, std::string executable,
                               std::vector<std::string> env, Done done)
    : loop_(loop),
      guard_(guard),
      settings_(settings),
      executable_(std::move(executable)),
      env_(std::move(env)),
      done_(std::move(done)) {}

HealthCheckRun::~HealthCheckRun() {
  if (timer_) loop_.Unwatch(timer_->fd());
  if (pid_ > 0) ::kill(-pid_, SIGKILL);  // reaped by the agent as a stray child
}

void HealthCheckRun::Start() {
  output_ = UniqueFd(::memfd_create("ddprun-health-check", MFD_CLOEXEC));
  if (!output_.valid()) {
    return Finish(
        absl::StrCat("the check could not start: ", ErrnoStatus(errno, "memfd_create").message()));
  }
  absl::StatusOr<OneShotTimer> timer = OneShotTimer::Create();
  if (!timer.ok())
    return Finish(absl::StrCat("the check could not start: ", timer.status().message()));
  timer_ = std::make_unique<OneShotTimer>(std::move(*timer));
  if (absl::Status s = loop_.WatchReadable(timer_->fd(), [this](uint32_t) { OnTimeout(); });
      !s.ok()) {
    timer_.reset();
    return Finish(absl::StrCat("the check could not start: ", s.message()));
  }
  SpawnSpec spec;
  spec.argv = HealthCheckArgv(executable_, settings_);
  spec.env = env_;
  spec.stdout_fd = spec.stderr_fd = output_.get();
  spec.guard_fd = guard_.registration_fd();  // it dies with the agent too
  absl::StatusOr<pid_t> pid = SpawnWorkerProcess(spec);
  if (!pid.ok()) return Finish(absl::StrCat("the check could not start: ", pid.status().message()));
  pid_ = *pid;
  timer_->Arm(settings_.timeout);
}

void HealthCheckRun::OnTimeout() {
  if (!timer_->Acknowledge() || pid_ <= 0) return;
  timed_out_ = true;
  ::kill(-pid_, SIGKILL);  // its whole process group: what the script started too
}

bool HealthCheckRun::OnProcessExited(pid_t pid, int wait_status) {
  if (pid <= 0 || pid != pid_) return false;
  pid_ = -1;
  guard_.Forget(pid);
  ::kill(-pid, SIGKILL);  // what it left running in its group
  const std::string tail = HealthCheckTail(OutputTail(output_.get()), &skipped_);
  std::string failure;
  if (timed_out_) {
    failure = absl::StrCat("it did not finish within ", absl::FormatDuration(settings_.timeout),
                           " (--health-check-timeout)");
  } else if (!WIFEXITED(wait_status) || WEXITSTATUS(wait_status) != 0) {
    failure = absl::StrCat("it ended with ", DescribeWaitStatus(wait_status));
  }
  if (!failure.empty() && !tail.empty()) absl::StrAppend(&failure, "; its last output:\n", tail);
  Finish(failure);
  return true;
}

void HealthCheckRun::Finish(const std::string& failure) {
  if (finished_) return;
  finished_ = true;
  if (timer_) timer_->Disarm();
  // Done may destroy this object: nothing of it is touched afterwards.
  Done done = std::move(done_);
  done(failure);
}

}  // namespace ddprun
