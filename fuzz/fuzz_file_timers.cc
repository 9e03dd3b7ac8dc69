// torch's FileTimer requests (agent/hangs/file_timers.h), as any process on the host may write them
// to the agent's FIFO: lines parsed by ParseTimerRequest, applied to FileTimers, with clock
// steps between them. What is accepted must be a request the rules can hold (a process id,
// a finite expiration, a signal number); the timers held stay within kMaxTimers; an expiry
// is given once, with a deadline not after the time it was taken at.

#include <cmath>
#include <cstdint>
#include <string>

#include "agent/hangs/file_timers.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ddprun::fuzz::FuzzInput in(data, size);
  ddprun::FileTimers timers;
  absl::Time now = absl::FromUnixSeconds(1700000000);
  while (!in.empty()) {
    if (in.Below(4) == 0) {
      now += absl::Milliseconds(in.Byte() * 37);
      for (const ddprun::FileTimers::Expiry& e : timers.TakeExpired(now)) {
        if (e.deadline > now || e.pid <= 0) __builtin_trap();
      }
      if (timers.NextDeadline() <= now) __builtin_trap();  // an expired timer was kept
      continue;
    }
    absl::StatusOr<ddprun::TimerRequest> request = ddprun::ParseTimerRequest(in.String(300));
    if (!request.ok()) continue;
    if (request->pid <= 0 || !std::isfinite(request->expiration) || request->signal < -64 ||
        request->signal > 64) {
      __builtin_trap();
    }
    timers.Apply(*request);
    if (timers.size() > ddprun::FileTimers::kMaxTimers) __builtin_trap();
  }
  return 0;
}
