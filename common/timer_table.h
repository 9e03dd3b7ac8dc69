#pragma once
// TimerTable: a pure state machine's deadlines, one table indexed by an enum whose last
// member is kCount. Each timer is set or not; Next() is the earliest set one, and Fire()
// clears one that has passed. A timer is declared once, in the enum: it cannot be left out
// of NextDeadline() or of the Tick that serves it (a forgotten entry there was a silent hang).

#include <array>
#include <cstddef>
#include <optional>

#include "absl/time/time.h"

namespace ddprun {

template <typename Timer>
class TimerTable {
 public:
  static constexpr size_t kSize = static_cast<size_t>(Timer::kCount);

  void Set(Timer timer, absl::Time at) { at_[Index(timer)] = at; }
  void Clear(Timer timer) { at_[Index(timer)].reset(); }
  bool IsSet(Timer timer) const { return at_[Index(timer)].has_value(); }
  /// When `timer` is due; none: it is not set.
  const std::optional<absl::Time>& At(Timer timer) const { return at_[Index(timer)]; }
  /// The earliest set timer's time; InfiniteFuture when none is set.
  absl::Time Next() const {
    absl::Time next = absl::InfiniteFuture();
    for (const std::optional<absl::Time>& at : at_) {
      if (at && *at < next) next = *at;
    }
    return next;
  }
  /// True, and `timer` cleared, when it is set and `now` has reached it.
  bool Fire(Timer timer, absl::Time now) {
    std::optional<absl::Time>& at = at_[Index(timer)];
    if (!at || now < *at) return false;
    at.reset();
    return true;
  }
  /// Every timer, in the enum's order (the order a Tick serves them).
  static constexpr std::array<Timer, kSize> All() {
    std::array<Timer, kSize> all{};
    for (size_t i = 0; i < kSize; ++i) all[i] = static_cast<Timer>(i);
    return all;
  }

 private:
  static constexpr size_t Index(Timer timer) { return static_cast<size_t>(timer); }
  std::array<std::optional<absl::Time>, kSize> at_;
};

}  // namespace ddprun
