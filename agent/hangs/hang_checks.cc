#include "agent/hangs/hang_checks.h"

#include <string>
#include <utility>

#include "spdlog/spdlog.h"

namespace ddprun {
namespace {

constexpr char kEnableFileTimer[] = "TORCHELASTIC_ENABLE_FILE_TIMER";
constexpr char kTimerFile[] = "TORCHELASTIC_TIMER_FILE";
constexpr char kFaultHandler[] = "PYTHONFAULTHANDLER";

}  // namespace

absl::StatusOr<HangChecks> SetUpHangChecks(bool python_workers, EnvMap& env, OrphanGuard& guard) {
  HangChecks checks;
  if (python_workers) {
    // faulthandler prints every thread's traceback on SIGABRT (and on a crash), which is how
    // a hung Python worker's place is recorded with no change to its code. Set to empty,
    // the user keeps it off.
    env.emplace(kFaultHandler, "1");
    checks.python_dumps = !env[kFaultHandler].empty();
  }
  auto enable = env.find(kEnableFileTimer);
  auto path = env.find(kTimerFile);
  if (enable == env.end() || enable->second != "1") {
    if (path != env.end()) {
      spdlog::info(
          "{} is set but {} is not 1: workers get the path, and whatever serves it "
          "must (as with torchrun); set {}=1 to have ddprun serve it",
          kTimerFile, kEnableFileTimer, kEnableFileTimer);
    }
    return checks;
  }
  absl::StatusOr<TimerFifo> fifo = TimerFifo::Create(path != env.end() ? path->second : "");
  if (!fifo.ok()) return fifo.status();
  checks.timer_fifo.emplace(std::move(*fifo));
  guard.RemoveIfAgentDies(checks.timer_fifo->path());  // then its folder, once empty
  if (!checks.timer_fifo->folder().empty()) guard.RemoveIfAgentDies(checks.timer_fifo->folder());
  env[kTimerFile] = checks.timer_fifo->path();
  spdlog::info("serving torch's FileTimer watchdog at {}={}", kTimerFile,
               checks.timer_fifo->path());
  return checks;
}

}  // namespace ddprun
