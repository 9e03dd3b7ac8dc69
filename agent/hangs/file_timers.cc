#include "agent/hangs/file_timers.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "agent/logs/json_fields.h"
#include "google/protobuf/util/json_util.h"

namespace ddprun {
namespace {

using google::protobuf::Struct;
using google::protobuf::Value;

absl::StatusOr<double> Number(const Struct& s, const std::string& name) {
  const Value* v = JsonField(s, name);
  if (v == nullptr || !v->has_number_value() || !std::isfinite(v->number_value())) {
    return absl::InvalidArgumentError(absl::StrCat("'", name, "' is missing or not a number"));
  }
  return v->number_value();
}

}  // namespace

absl::StatusOr<TimerRequest> ParseTimerRequest(absl::string_view line) {
  Struct json;
  if (!google::protobuf::util::JsonStringToMessage(std::string(line), &json).ok()) {
    return absl::InvalidArgumentError("not a JSON object");
  }
  TimerRequest request;
  absl::StatusOr<double> pid = Number(json, "pid");
  if (!pid.ok()) return pid.status();
  if (*pid < 1 || *pid > (1 << 22) || *pid != std::floor(*pid)) {
    return absl::InvalidArgumentError(absl::StrCat("'pid' ", *pid, " is not a process id"));
  }
  request.pid = static_cast<int>(*pid);
  const Value* scope = JsonField(json, "scope_id");
  if (scope == nullptr || !scope->has_string_value()) {
    return absl::InvalidArgumentError("'scope_id' is missing or not a string");
  }
  request.scope = scope->string_value();
  absl::StatusOr<double> expiration = Number(json, "expiration_time");
  if (!expiration.ok()) return expiration.status();
  request.expiration = *expiration;
  // torch 1.13 and main always send it; a release (negative expiration) sends 0.
  if (const Value* signal = JsonField(json, "signal"); signal != nullptr) {
    if (!signal->has_number_value() || signal->number_value() < -64 ||
        signal->number_value() > 64) {
      return absl::InvalidArgumentError("'signal' is not a signal number");
    }
    request.signal = static_cast<int>(signal->number_value());
  }
  return request;
}

bool FileTimers::Apply(const TimerRequest& request) {
  auto key = std::make_pair(request.pid, request.scope);
  if (request.expiration < 0) {
    timers_.erase(key);
    return true;
  }
  if (timers_.size() >= kMaxTimers && timers_.count(key) == 0) return false;
  timers_[key] = request;
  return true;
}

std::vector<FileTimers::Expiry> FileTimers::TakeExpired(absl::Time now) {
  const double now_s = absl::ToDoubleSeconds(now - absl::UnixEpoch());
  std::map<int, std::vector<const TimerRequest*>> expired;  // by pid
  for (const auto& [key, timer] : timers_) {
    if (timer.expiration <= now_s) expired[key.first].push_back(&timer);
  }
  std::vector<Expiry> out;
  for (auto& [pid, timers] : expired) {
    std::sort(timers.begin(), timers.end(), [](const TimerRequest* a, const TimerRequest* b) {
      return a->expiration < b->expiration;
    });
    const TimerRequest* chosen = timers.front();
    for (const TimerRequest* t : timers) {
      if (t->signal > 0) {
        chosen = t;
        break;
      }
    }
    out.push_back(Expiry{pid, chosen->scope, absl::UnixEpoch() + absl::Seconds(chosen->expiration),
                         chosen->signal});
  }
  for (const Expiry& e : out) ForgetPid(e.pid);
  return out;
}

void FileTimers::ForgetPid(int pid) {
  timers_.erase(timers_.lower_bound({pid, std::string()}),
                timers_.lower_bound({pid + 1, std::string()}));
}

absl::Time FileTimers::NextDeadline() const {
  double earliest = INFINITY;
  for (const auto& [key, timer] : timers_) earliest = std::min(earliest, timer.expiration);
  if (!std::isfinite(earliest)) return absl::InfiniteFuture();
  return absl::UnixEpoch() + absl::Seconds(earliest);
}

std::optional<absl::Duration> UninterruptibleDwell::Observe(int local_rank, bool uninterruptible,
                                                            absl::Time now) {
  if (!uninterruptible) {
    stretches_.erase(local_rank);
    return std::nullopt;
  }
  Stretch& stretch = stretches_.emplace(local_rank, Stretch{now}).first->second;
  if (now - stretch.since < timeout_ || stretch.reported) return std::nullopt;
  stretch.reported = true;
  return now - stretch.since;
}

}  // namespace ddprun
