#pragma once
// KvStore: the data and the rules of one store, torch TCPStore's verbs. It backs the gRPC
// Store service (one per run) and the TCPStore an agent serves its workers (one per round).
// Pure: no locks, no threads, no clock. Blocking reads (get, wait, multi_get) are parked as
// waiters and completed when their keys appear or their deadline passes; completions are
// handed back to the caller (TakeCompletions) so that it runs them outside its lock.
//
// Waiters are indexed by the keys they still miss, so a write costs the waiters of the keys
// it touches, not every waiter: thousands of ranks may wait on one key at once.

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
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

  /// What one store may hold; a write past it fails with RESOURCE_EXHAUSTED. Keys count
  /// their name and value bytes; queues their name once and each element.
  struct Limits {
    int64_t max_keys = 1'000'000;
    int64_t max_bytes = int64_t{256} << 20;
    // Said after the byte figure when max_bytes refuses a write: which limit it is.
    std::string bytes_limit = "the limit of one run's store";
    // Blocking reads parked at once, and the keys they name together: each costs memory
    // and work on every write of its keys.
    int64_t max_waiters = 100'000;
    int64_t max_waited_keys = 4'000'000;
    // The most one read may return: the values of its keys together (one 8 MiB key named
    // 131,072 times would be a 1 TiB reply, built whole in memory).
    int64_t max_reply_bytes = int64_t{32} << 20;
  };

  /// What a blocking read gets: the values of its keys in order (none when it asked for
  /// none), or an error.
  using Done = std::function<void(absl::StatusOr<std::vector<std::string>>)>;
  using WaiterId = uint64_t;

  KvStore() = default;
  KvStore(KvStore&&) = default;
  KvStore& operator=(KvStore&&) = default;

  absl::Status Set(const std::string& key, std::string value);
  absl::Status MultiSet(const std::vector<std::string>& keys, std::vector<std::string> values);
  /// Adds `delta` to the decimal integer at `key` (absent: 0); the new value.
  absl::StatusOr<int64_t> Add(const std::string& key, int64_t delta);
  /// Appends `value` to the value at `key` (absent: empty), as torch's append.
  absl::Status Append(const std::string& key, const std::string& value);
  /// Stores `desired` if the value equals `expected` (an absent key matches an empty
  /// `expected`); returns the value stored afterwards, as torch's compare_set does.
  absl::StatusOr<std::string> CompareSet(const std::string& key, const std::string& expected,
                                         std::string desired);
  /// Whether every key is present now (a key, or a queue that holds something).
  absl::StatusOr<bool> Check(const std::vector<std::string>& keys) const;
  absl::StatusOr<bool> Delete(const std::string& key);
  /// The value at `key` now, if any; never blocks.
  std::optional<std::string> Find(const std::string& key) const;
  /// The bytes of the values of `keys` now (absent: empty), each counted as often as it is
  /// named, measured without a copy; RESOURCE_EXHAUSTED once they pass max_reply_bytes: a
  /// read of them must not be answered.
  absl::StatusOr<int64_t> ReplyBytes(const std::vector<std::string>& keys) const;
  /// Every key, in order (queues are not keys).
  std::vector<std::string> Keys() const;
  /// The bytes of every key's name together, measured without a copy.
  int64_t KeyBytes() const;
  int64_t NumKeys() const { return static_cast<int64_t>(data_.size()); }
  /// The bytes held (see Limits).
  int64_t bytes() const { return bytes_; }
  void set_limits(Limits limits) { limits_ = std::move(limits); }
  /// Blocking reads (and barriers) parked now.
  int Waiting() const { return static_cast<int>(waiters_.size()); }

  /// Calls `done` with the values of `keys` once all are present (at once if they are), or
  /// with DEADLINE_EXCEEDED naming the missing keys at `deadline`. Without `want_values`
  /// `done` gets no values (a plain wait: no copies). Returns an id for Cancel (0: it
  /// completed or failed at once).
  WaiterId WaitFor(std::vector<std::string> keys, absl::Time deadline, Done done,
                   bool want_values = true);

  /// torch TCPStore's barrier: counts one arrival in the decimal counter at `key` and
  /// completes `done` (with no values) once the count reaches `world_size`; until then the
  /// caller waits, and any other write to `key` also releases it. The counter is never
  /// reset: a key is good for one barrier. Returns an id for Cancel (0: it did not wait).
  WaiterId Barrier(const std::string& key, int64_t world_size, Done done);

  // FIFO queues (torch's queue_push, queue_pop, queue_len; the libuv TCPStore's). Queues
  // have names of their own, apart from the keys, but a non-empty queue counts as present
  // for Check and blocking reads; a push releases one read waiting for it.
  absl::Status QueuePush(const std::string& key, std::string value);
  /// The queue's length before the pop, and the value popped when it was not empty.
  struct Popped {
    int64_t length_before = 0;
    std::optional<std::string> value;
  };
  absl::StatusOr<Popped> QueuePop(const std::string& key);
  absl::StatusOr<int64_t> QueueLength(const std::string& key) const;

  /// Drops a waiter (its caller went away); it is never completed. False when there is no
  /// such waiter any more (it completed, or its completion is queued).
  bool Cancel(WaiterId id);
  /// Completes every waiter with `status` (the round they belong to has ended).
  void AbortAll(const absl::Status& status);
  /// Completes the waiters whose deadline is at or before `now`.
  void Expire(absl::Time now);
  absl::Time NextDeadline() const;

  /// Completions ready to run, in order; the caller runs them after releasing its lock.
  std::vector<std::function<void()>> TakeCompletions();

 private:
  struct Waiter {
    std::vector<std::string> keys;  // a barrier's: its one key
    int missing = 0;                // distinct keys it is indexed under (absent when parked)
    bool barrier = false;           // released by a write to its key, not by presence
    bool want_values = true;
    absl::Time deadline;
    Done done;
  };
  bool Present(const std::string& key) const;
  // OK when `new_keys` more keys and `new_bytes` more bytes stay within the limits.
  absl::Status Admit(int64_t new_keys, int64_t new_bytes, const std::string& key) const;
  // Stores `value` at `key` once admitted, keeping bytes_ right.
  absl::Status Put(const std::string& key, std::string value);
  // OK when one more waiter on `keys` keys stays within the limits.
  absl::Status AdmitWaiter(size_t keys) const;
  void Forget(std::map<WaiterId, Waiter>::iterator it);
  // Registers `id` on every key of its waiter that is absent now; completes it if none is.
  void Park(WaiterId id);
  // True when every key of `waiter` is present.
  bool AllPresent(const Waiter& waiter) const;
  // `key` was written: completes the waiters it completes, and releases its barrier's
  // waiters unless the write is a barrier's own count below its size.
  void Written(const std::string& key, bool release_barriers = true);
  // One waiter of `key` (the oldest whose other keys are present), for a queue push.
  void WakeOne(const std::string& key);
  void Complete(WaiterId id, absl::StatusOr<std::vector<std::string>> result);
  void Unindex(WaiterId id);
  absl::StatusOr<std::vector<std::string>> ValuesOf(const Waiter& waiter) const;

  Limits limits_;
  int64_t bytes_ = 0;
  std::map<std::string, std::string> data_;
  std::map<std::string, std::deque<std::string>> queues_;
  std::map<WaiterId, Waiter> waiters_;
  int64_t waited_keys_ = 0;                               // keys named by the waiters, together
  std::map<std::string, std::set<WaiterId>> waiting_on_;  // key -> waiters that miss it
  std::set<std::pair<absl::Time, WaiterId>> by_deadline_;
  WaiterId next_waiter_ = 1;
  std::vector<std::function<void()>> completions_;
};

/// InvalidArgument naming the key when it or its value is over the limits.
absl::Status CheckKeyAndValue(const std::string& key, size_t value_size);

}  // namespace ddprun
