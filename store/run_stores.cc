#include "store/run_stores.h"

#include <algorithm>
#include <atomic>

#include "absl/strings/str_cat.h"

namespace ddprun {

uint64_t RunStores::NextGeneration() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1);
}

RunStores::Entry& RunStores::Begin(const std::string& run_id) {
  Entry& run = runs_[run_id];
  KvStore::Limits store;
  store.max_keys = limits_.max_keys_per_run;
  store.max_waiters = limits_.max_waiters_per_run;
  store.max_reply_bytes = limits_.max_reply_bytes;
  const int64_t room = limits_.max_store_bytes - bytes_ + run.store.bytes();
  if (room < limits_.max_bytes_per_run) {
    store.max_bytes = room;
    store.bytes_limit = "the master's Store budget for every run together";
  } else {
    store.max_bytes = limits_.max_bytes_per_run;
  }
  run.store.set_limits(std::move(store));
  return run;
}

absl::Status RunStores::Call(const std::string& run_id,
                             absl::FunctionRef<absl::Status(KvStore&)> fn) {
  Entry& run = Begin(run_id);
  const int64_t before = run.store.bytes();
  absl::Status status = fn(run.store);
  End(run, before);
  return status;
}

void RunStores::End(Entry& run, int64_t before) {
  bytes_ += run.store.bytes() - before;
  Collect(run);
}

void RunStores::Collect(Entry& run) {
  for (auto& completion : run.store.TakeCompletions())
    completions_.push_back(std::move(completion));
}

void RunStores::Refuse(KvStore::Done done, const absl::Status& why) {
  completions_.push_back([done = std::move(done), why] { done(why); });
}

ParkedRead RunStores::Wait(const std::string& run_id, const std::string& peer,
                           std::vector<std::string> keys, absl::Time now, absl::Time deadline,
                           KvStore::Done done) {
  ParkedRead parked;
  absl::Status refused;
  if (closed_) {
    refused = absl::UnavailableError("the store is shutting down");
  } else {
    absl::MutexLock lock(&peers_mu_);
    auto it = waiters_by_peer_.find(peer);
    const int waiting = it == waiters_by_peer_.end() ? 0 : it->second;
    if (waiting >= limits_.max_waiters_per_connection) {
      refused = absl::ResourceExhaustedError(
          absl::StrCat("this connection has ", waiting,
                       " blocking store reads waiting, the most one connection may have"));
    } else {
      ++waiters_by_peer_[peer];
    }
  }
  if (!refused.ok()) {
    Refuse(std::move(done), refused);
    return parked;
  }
  KvStore::Done counted =
      [this, peer, done = std::move(done)](absl::StatusOr<std::vector<std::string>> values) {
        {
          absl::MutexLock lock(&peers_mu_);
          ReleaseWaiter(peer);
        }
        done(std::move(values));
      };
  Entry& run = Begin(run_id);
  parked.generation = run.generation;
  parked.peer = peer;
  const int64_t before = run.store.bytes();
  parked.deadline = std::min(deadline, now + limits_.max_store_wait);
  parked.waiter = run.store.WaitFor(std::move(keys), parked.deadline, std::move(counted));
  End(run, before);
  return parked;
}

void RunStores::ReleaseWaiter(const std::string& peer) {
  auto it = waiters_by_peer_.find(peer);
  if (it != waiters_by_peer_.end() && --it->second <= 0) waiters_by_peer_.erase(it);
}

bool RunStores::Cancel(const std::string& run_id, const ParkedRead& read) {
  if (read.waiter == 0) return false;
  auto it = runs_.find(run_id);
  if (it == runs_.end() || it->second.generation != read.generation) return false;
  if (!it->second.store.Cancel(read.waiter)) return false;
  absl::MutexLock lock(&peers_mu_);
  ReleaseWaiter(read.peer);  // its `done`, which would have, never runs now
  return true;
}

void RunStores::Drop(const std::string& run_id, const absl::Status& why) {
  auto it = runs_.find(run_id);
  if (it == runs_.end()) return;
  Entry& run = it->second;
  run.store.AbortAll(why);
  Collect(run);
  bytes_ -= run.store.bytes();
  run.store = KvStore();
  run.generation = NextGeneration();
}

void RunStores::Forget(const std::string& run_id, const absl::Status& why) {
  Drop(run_id, why);
  runs_.erase(run_id);
}

void RunStores::AbortAll(const absl::Status& why) {
  closed_ = true;
  for (auto& [id, run] : runs_) {
    run.store.AbortAll(why);
    Collect(run);
  }
}

void RunStores::Expire(absl::Time now) {
  for (auto& [id, run] : runs_) {
    run.store.Expire(now);
    Collect(run);
  }
}

absl::Time RunStores::NextDeadline() const {
  absl::Time next = absl::InfiniteFuture();
  for (const auto& [id, run] : runs_) next = std::min(next, run.store.NextDeadline());
  return next;
}

std::vector<std::function<void()>> RunStores::TakeCompletions() {
  return std::exchange(completions_, {});
}

int RunStores::Waiting() const {
  int n = 0;
  for (const auto& [id, run] : runs_) n += run.store.Waiting();
  return n;
}

std::pair<int64_t, int64_t> RunStores::Bytes() const {
  int64_t sum = 0;
  for (const auto& [id, run] : runs_) sum += run.store.bytes();
  return {bytes_, sum};
}

}  // namespace ddprun
