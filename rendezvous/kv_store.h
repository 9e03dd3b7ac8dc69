#pragma once
// KvStore: the data and the rules of the Store service for one run, torch TCPStore's verbs.
// Pure: no locks, no threads, no clock. Blocking reads (get, wait, multi_get) are parked as
// waiters and completed when their keys appear or their deadline passes; completions are
// handed back to the caller (TakeCompletions) so that it runs them outside its lock.

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ddprun {

class KvStore {
 public:
  static constexpr size_t kMaxKeyBytes = 8 * 1024;
  static constexpr size_t kMaxValueBytes = 8 * 1024 * 1024;
  static constexpr size_t kMaxKeysPerCall = 128 * 1024;

  /// What a blocking read gets: the values of its keys in order, or an error.
  using Done = std::function<void(absl::StatusOr<std::vector<std::string>>)>;
  using WaiterId = uint64_t;

  absl::Status Set(const std::string& key, std::string value);
  absl::Status MultiSet(const std::vector<std::string>& keys, std::vector<std::string> values);
  /// Adds `delta` to the decimal integer at `key` (absent: 0); the new value.
  absl::StatusOr<int64_t> Add(const std::string& key, int64_t delta);
  /// Stores `desired` if the value equals `expected` (an absent key matches an empty
  /// `expected`); returns the value stored afterwards, as torch's compare_set does.
  absl::StatusOr<std::string> CompareSet(const std::string& key, const std::string& expected,
                                         std::string desired);
  absl::StatusOr<bool> Check(const std::vector<std::string>& keys) const;
  absl::StatusOr<bool> Delete(const std::string& key);
  int64_t NumKeys() const { return static_cast<int64_t>(data_.size()); }
  /// Blocking reads waiting for keys.
  int Waiting() const { return static_cast<int>(waiters_.size()); }

  /// Calls `done` with the values of `keys` once all exist (at once if they do), or with
  /// DEADLINE_EXCEEDED naming the missing keys at `deadline`. Returns an id for Cancel.
  WaiterId WaitFor(std::vector<std::string> keys, absl::Time deadline, Done done);
  /// Drops a waiter (its caller went away); it is never completed.
  void Cancel(WaiterId id);
  /// Completes every waiter with `status` (the round they belong to has ended).
  void AbortAll(const absl::Status& status);
  /// Completes the waiters whose deadline is at or before `now`.
  void Expire(absl::Time now);
  absl::Time NextDeadline() const;

  /// Completions ready to run, in order; the caller runs them after releasing its lock.
  std::vector<std::function<void()>> TakeCompletions();

 private:
  struct Waiter {
    std::vector<std::string> keys;
    absl::Time deadline;
    Done done;
  };
  void WakeWaiters();
  bool AllPresent(const std::vector<std::string>& keys) const;

  std::map<std::string, std::string> data_;
  std::map<WaiterId, Waiter> waiters_;
  WaiterId next_waiter_ = 1;
  std::vector<std::function<void()>> completions_;
};

/// InvalidArgument naming the key when it or its value is over the limits.
absl::Status CheckKeyAndValue(const std::string& key, size_t value_size);

}  // namespace ddprun
