#pragma once
// RunStores: the Store of each run a server holds, the rendezvous master's or the worker SDK's
// rank-0 store, with the bounds on them together: the bytes of every run, the blocking reads
// of one client connection. Each run's store is a KvStore; a store is replaced at each round
// and when its run is forgotten.
//
// Not thread-safe: its owner calls it under the owner's mutex, then runs the completions it
// takes (TakeCompletions: Store replies) after releasing that mutex. Only the count of parked
// reads per connection has a lock of its own, since a reply that ends a read runs off the
// owner's mutex.

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "store/kv_store.h"

namespace ddprun {

/// What the Stores may hold (docs/security.md lists these).
struct StoreLimits {
  int64_t max_keys_per_run = 1'000'000;             // Store keys of one run
  int64_t max_bytes_per_run = int64_t{256} << 20;   // Store bytes of one run
  int64_t max_store_bytes = int64_t{1} << 30;       // Store bytes of every run together
  int64_t max_waiters_per_run = 100'000;            // blocking Store reads parked in one run
  int max_waiters_per_connection = 10'000;          // and from one client connection
  int64_t max_reply_bytes = int64_t{32} << 20;      // the values one Store read returns
  absl::Duration max_store_wait = absl::Hours(24);  // the longest a blocking read may wait
};

/// A blocking read parked in a run's store, for Cancel. The generation tells stores apart:
/// waiter ids start again in each.
struct ParkedRead {
  uint64_t generation = 0;
  KvStore::WaiterId waiter = 0;  // 0: it completed at once (or was refused)
  std::string peer;              // the client connection it counts against
  // When it fails unless answered: the read's deadline, held to max_store_wait (for the
  // owner's ticker); InfiniteFuture when it did not park.
  absl::Time deadline = absl::InfiniteFuture();
};

class RunStores {
 public:
  explicit RunStores(const StoreLimits& limits) : limits_(limits) {}
  RunStores(const RunStores&) = delete;
  RunStores& operator=(const RunStores&) = delete;

  bool Holds(const std::string& run_id) const { return runs_.count(run_id) != 0; }
  int size() const { return static_cast<int>(runs_.size()); }

  /// Runs `fn` on the run's store (empty if the run had none), within the limits of one
  /// call.
  absl::Status Call(const std::string& run_id, absl::FunctionRef<absl::Status(KvStore&)> fn);
  /// Parks a blocking read of `keys` in the run's store, waiting until `deadline` (at most
  /// max_store_wait after `now`). `done` runs once, from the completions; refused when
  /// `peer` has max_waiters_per_connection reads parked, or once AbortAll has run.
  ParkedRead Wait(const std::string& run_id, const std::string& peer, std::vector<std::string> keys,
                  absl::Time now, absl::Time deadline, KvStore::Done done);
  /// Answers `done` with `why` (a call refused before it reached a store), from the
  /// completions.
  void Refuse(KvStore::Done done, const absl::Status& why);
  /// The client gave the read up: drops its waiter. False when it is not parked any more
  /// (its `done` has run or is about to); `done` is never called after true.
  bool Cancel(const std::string& run_id, const ParkedRead& read);

  /// Empties the run's store, failing its waiters with `why` (a new round has begun).
  void Drop(const std::string& run_id, const absl::Status& why);
  /// Drops the run's store and forgets the run.
  void Forget(const std::string& run_id, const absl::Status& why);
  /// Ends every blocking read now, and refuses any that comes later (the server stops).
  void AbortAll(const absl::Status& why);
  /// Fails the reads whose deadline has passed.
  void Expire(absl::Time now);
  absl::Time NextDeadline() const;
  /// Store replies ready to run, in order: run them after releasing the owner's lock.
  std::vector<std::function<void()>> TakeCompletions();

  /// Blocking reads parked, across runs.
  int Waiting() const;
  /// The bytes accounted for, and the sum over the runs' stores now (equal unless the
  /// accounting is wrong: checked by fuzz_store_service).
  std::pair<int64_t, int64_t> Bytes() const;

 private:
  struct Entry {
    KvStore store;
    uint64_t generation = NextGeneration();
  };
  static uint64_t NextGeneration();
  // The run's store, made if new, with its limits for one call from what every run holds.
  Entry& Begin(const std::string& run_id);
  // Keeps the bytes of every run after a call that found `before` bytes, and takes its
  // completions.
  void End(Entry& run, int64_t before);
  void Collect(Entry& run);
  void ReleaseWaiter(const std::string& peer) ABSL_EXCLUSIVE_LOCKS_REQUIRED(peers_mu_);

  const StoreLimits limits_;
  std::map<std::string, Entry> runs_;
  int64_t bytes_ = 0;  // every run's store together
  bool closed_ = false;
  std::vector<std::function<void()>> completions_;
  absl::Mutex peers_mu_;
  std::map<std::string, int> waiters_by_peer_ ABSL_GUARDED_BY(peers_mu_);
};

}  // namespace ddprun
