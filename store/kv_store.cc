#include "store/kv_store.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace ddprun {
namespace {

// "32 MiB" for whole MiB, else the bytes.
std::string BytesText(int64_t bytes) {
  constexpr int64_t kMiB = int64_t{1} << 20;
  if (bytes >= kMiB && bytes % kMiB == 0) return absl::StrCat(bytes / kMiB, " MiB");
  return absl::StrCat(bytes, " bytes");
}

std::string Shown(const std::string& key) {
  return key.size() <= 80 ? key : absl::StrCat(key.substr(0, 80), "... (", key.size(), " bytes)");
}

absl::Status CheckKeyCount(size_t count) {
  if (count == 0) return absl::InvalidArgumentError("no keys given");
  if (count > KvStore::kMaxKeysPerCall) {
    return absl::InvalidArgumentError(
        absl::StrCat(count, " keys in one call; the limit is ", KvStore::kMaxKeysPerCall));
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> IntegerAt(const std::map<std::string, std::string>& data,
                                  const std::string& key, const char* verb) {
  int64_t value = 0;
  auto it = data.find(key);
  if (it != data.end() && !absl::SimpleAtoi(it->second, &value)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "store key '", Shown(key), "' holds a value that is not an integer; ", verb, " needs one"));
  }
  return value;
}

}  // namespace

absl::Status CheckKeyAndValue(const std::string& key, size_t value_size) {
  if (key.empty()) return absl::InvalidArgumentError("empty store key");
  if (key.size() > KvStore::kMaxKeyBytes) {
    return absl::InvalidArgumentError(absl::StrCat("store key '", Shown(key), "' is ", key.size(),
                                                   " bytes; the limit is ", KvStore::kMaxKeyBytes));
  }
  if (value_size > KvStore::kMaxValueBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "value for store key '", Shown(key), "' is ", value_size, " bytes; the limit is ",
        KvStore::kMaxValueBytes, " (8 MiB): exchange large data otherwise"));
  }
  return absl::OkStatus();
}

absl::Status KvStore::Admit(int64_t new_keys, int64_t new_bytes, const std::string& key) const {
  if (new_keys > 0 && NumKeys() + new_keys > limits_.max_keys) {
    return absl::ResourceExhaustedError(
        absl::StrCat("store key '", Shown(key), "' refused: the run's store holds ", NumKeys(),
                     " keys, the most one run may hold is ", limits_.max_keys,
                     "; delete keys the job no longer needs"));
  }
  if (new_bytes > 0 && bytes_ + new_bytes > limits_.max_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("store key '", Shown(key), "' refused: ", new_bytes, " more bytes would pass ",
                     limits_.bytes_limit, " (", limits_.max_bytes, " bytes, ", bytes_,
                     " held by this run); delete keys the job no longer needs"));
  }
  return absl::OkStatus();
}

absl::Status KvStore::Put(const std::string& key, std::string value) {
  auto it = data_.find(key);
  const int64_t before =
      it == data_.end() ? 0 : static_cast<int64_t>(key.size() + it->second.size());
  const int64_t after = static_cast<int64_t>(key.size() + value.size());
  DDPRUN_RETURN_IF_ERROR(Admit(it == data_.end() ? 1 : 0, after - before, key));
  bytes_ += after - before;
  if (it == data_.end()) {
    data_.emplace(key, std::move(value));
  } else {
    it->second = std::move(value);
  }
  return absl::OkStatus();
}

absl::Status KvStore::Set(const std::string& key, std::string value) {
  DDPRUN_RETURN_IF_ERROR(CheckKeyAndValue(key, value.size()));
  DDPRUN_RETURN_IF_ERROR(Put(key, std::move(value)));
  Written(key);
  return absl::OkStatus();
}

absl::Status KvStore::MultiSet(const std::vector<std::string>& keys,
                               std::vector<std::string> values) {
  DDPRUN_RETURN_IF_ERROR(CheckKeyCount(keys.size()));
  if (keys.size() != values.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(keys.size(), " keys but ", values.size(), " values in multi_set"));
  }
  int64_t most_bytes = 0;  // as if every key were new: a bound, so that all or none is stored
  for (size_t i = 0; i < keys.size(); ++i) {
    DDPRUN_RETURN_IF_ERROR(CheckKeyAndValue(keys[i], values[i].size()));
    most_bytes += static_cast<int64_t>(keys[i].size() + values[i].size());
  }
  DDPRUN_RETURN_IF_ERROR(Admit(static_cast<int64_t>(keys.size()), most_bytes, keys.front()));
  for (size_t i = 0; i < keys.size(); ++i) (void)Put(keys[i], std::move(values[i]));
  for (const std::string& key : keys) Written(key);
  return absl::OkStatus();
}

absl::StatusOr<int64_t> KvStore::Add(const std::string& key, int64_t delta) {
  DDPRUN_RETURN_IF_ERROR(CheckKeyAndValue(key, 0));
  absl::StatusOr<int64_t> value = IntegerAt(data_, key, "add()");
  if (!value.ok()) return value.status();
  int64_t sum = 0;
  // Found by fuzz_kv_store: adding past the int64 range was undefined behaviour.
  if (__builtin_add_overflow(*value, delta, &sum)) {
    return absl::OutOfRangeError(absl::StrCat("store key '", Shown(key), "': add(", delta,
                                              ") would overflow a 64-bit integer"));
  }
  DDPRUN_RETURN_IF_ERROR(Put(key, absl::StrCat(sum)));
  Written(key);
  return sum;
}

absl::Status KvStore::Append(const std::string& key, const std::string& value) {
  auto it = data_.find(key);
  const size_t before = it == data_.end() ? 0 : it->second.size();
  DDPRUN_RETURN_IF_ERROR(CheckKeyAndValue(key, before + value.size()));
  std::string joined = it == data_.end() ? std::string() : it->second;
  joined.append(value);
  DDPRUN_RETURN_IF_ERROR(Put(key, std::move(joined)));
  Written(key);
  return absl::OkStatus();
}

absl::StatusOr<std::string> KvStore::CompareSet(const std::string& key, const std::string& expected,
                                                std::string desired) {
  DDPRUN_RETURN_IF_ERROR(CheckKeyAndValue(key, desired.size()));
  auto it = data_.find(key);
  const bool matches = it == data_.end() ? expected.empty() : it->second == expected;
  if (!matches) return it == data_.end() ? expected : it->second;
  DDPRUN_RETURN_IF_ERROR(Put(key, std::move(desired)));
  Written(key);  // only a store wakes anyone (libuv's TCPStore also woke on a miss)
  return data_[key];
}

absl::StatusOr<bool> KvStore::Check(const std::vector<std::string>& keys) const {
  DDPRUN_RETURN_IF_ERROR(CheckKeyCount(keys.size()));
  return std::all_of(keys.begin(), keys.end(), [this](const std::string& k) { return Present(k); });
}

absl::StatusOr<bool> KvStore::Delete(const std::string& key) {
  DDPRUN_RETURN_IF_ERROR(CheckKeyAndValue(key, 0));
  auto it = data_.find(key);
  if (it == data_.end()) return false;
  bytes_ -= static_cast<int64_t>(key.size() + it->second.size());
  data_.erase(it);
  return true;  // wakes no one, as torch's stores
}

std::optional<std::string> KvStore::Find(const std::string& key) const {
  auto it = data_.find(key);
  if (it == data_.end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> KvStore::Keys() const {
  std::vector<std::string> keys;
  keys.reserve(data_.size());
  for (const auto& [key, value] : data_) keys.push_back(key);
  return keys;
}

bool KvStore::Present(const std::string& key) const {
  if (data_.count(key) > 0) return true;
  auto q = queues_.find(key);
  return q != queues_.end() && !q->second.empty();
}

KvStore::WaiterId KvStore::WaitFor(std::vector<std::string> keys, absl::Time deadline, Done done,
                                   bool want_values) {
  absl::Status valid = CheckKeyCount(keys.size());
  for (const std::string& key : keys) {
    if (valid.ok()) valid = CheckKeyAndValue(key, 0);
  }
  if (valid.ok()) valid = AdmitWaiter(keys.size());
  if (!valid.ok()) {
    completions_.push_back([done = std::move(done), valid] { done(valid); });
    return 0;
  }
  const WaiterId id = next_waiter_++;
  Waiter& waiter = waiters_[id];
  waited_keys_ += static_cast<int64_t>(keys.size());
  waiter.keys = std::move(keys);
  waiter.want_values = want_values;
  waiter.deadline = deadline;
  waiter.done = std::move(done);
  if (deadline != absl::InfiniteFuture()) by_deadline_.insert({deadline, id});
  Park(id);
  return waiters_.count(id) > 0 ? id : 0;
}

KvStore::WaiterId KvStore::Barrier(const std::string& key, int64_t world_size, Done done) {
  absl::Status valid = CheckKeyAndValue(key, 0);
  if (valid.ok()) valid = AdmitWaiter(1);
  absl::StatusOr<int64_t> count = valid.ok() ? IntegerAt(data_, key, "barrier()") : valid;
  if (!count.ok()) {
    completions_.push_back([done = std::move(done), s = count.status()] { done(s); });
    return 0;
  }
  const int64_t arrived = *count == INT64_MAX ? INT64_MAX : *count + 1;
  if (absl::Status s = Put(key, absl::StrCat(arrived)); !s.ok()) {
    completions_.push_back([done = std::move(done), s] { done(s); });
    return 0;
  }
  if (arrived >= world_size) {
    Written(key);  // releases the callers waiting on this barrier
    completions_.push_back([done = std::move(done)] { done(std::vector<std::string>{}); });
    return 0;
  }
  Written(key, /*release_barriers=*/false);  // a plain wait for the key sees it now
  const WaiterId id = next_waiter_++;
  Waiter& waiter = waiters_[id];
  waited_keys_ += 1;
  waiter.keys = {key};
  waiter.barrier = true;
  waiter.want_values = false;
  waiter.deadline = absl::InfiniteFuture();
  waiter.done = std::move(done);
  waiting_on_[key].insert(id);
  return id;
}

absl::Status KvStore::QueuePush(const std::string& key, std::string value) {
  DDPRUN_RETURN_IF_ERROR(CheckKeyAndValue(key, value.size()));
  const bool new_queue = queues_.count(key) == 0;
  const int64_t grows = static_cast<int64_t>(value.size() + (new_queue ? key.size() : 0));
  DDPRUN_RETURN_IF_ERROR(Admit(0, grows, key));
  bytes_ += grows;
  queues_[key].push_back(std::move(value));
  WakeOne(key);
  return absl::OkStatus();
}

absl::StatusOr<KvStore::Popped> KvStore::QueuePop(const std::string& key) {
  DDPRUN_RETURN_IF_ERROR(CheckKeyAndValue(key, 0));
  Popped popped;
  auto it = queues_.find(key);
  if (it == queues_.end()) return popped;
  popped.length_before = static_cast<int64_t>(it->second.size());
  if (!it->second.empty()) {
    bytes_ -= static_cast<int64_t>(it->second.front().size());
    popped.value = std::move(it->second.front());
    it->second.pop_front();
  }
  if (it->second.empty()) {
    bytes_ -= static_cast<int64_t>(key.size());
    queues_.erase(it);
  }
  return popped;
}

absl::StatusOr<int64_t> KvStore::QueueLength(const std::string& key) const {
  DDPRUN_RETURN_IF_ERROR(CheckKeyAndValue(key, 0));
  auto it = queues_.find(key);
  return it == queues_.end() ? 0 : static_cast<int64_t>(it->second.size());
}

void KvStore::Park(WaiterId id) {
  Waiter& waiter = waiters_.at(id);
  waiter.missing = 0;
  for (const std::string& key : waiter.keys) {
    if (!Present(key) && waiting_on_[key].insert(id).second) ++waiter.missing;
  }
  if (waiter.missing == 0) Complete(id, ValuesOf(waiter));
}

bool KvStore::AllPresent(const Waiter& waiter) const {
  return std::all_of(waiter.keys.begin(), waiter.keys.end(),
                     [this](const std::string& k) { return Present(k); });
}

void KvStore::Written(const std::string& key, bool release_barriers) {
  auto it = waiting_on_.find(key);
  if (it == waiting_on_.end()) return;
  const std::set<WaiterId> waiting = it->second;
  for (WaiterId id : waiting) {
    auto w = waiters_.find(id);
    if (w == waiters_.end()) continue;
    if (w->second.barrier) {
      if (release_barriers) Complete(id, std::vector<std::string>{});
      continue;
    }
    // `key` is present now: one less to wait for. Constant work per waiter and write, so
    // that ranks gathering every rank's key cost O(ranks^2), not O(ranks^3).
    auto& on_key = waiting_on_[key];
    on_key.erase(id);
    if (on_key.empty()) waiting_on_.erase(key);
    if (--w->second.missing > 0) continue;
    if (AllPresent(w->second)) {
      Complete(id, ValuesOf(w->second));
    } else {
      Park(id);  // a key it had was deleted since: wait for it again
    }
  }
}

void KvStore::WakeOne(const std::string& key) {
  auto it = waiting_on_.find(key);
  if (it == waiting_on_.end()) return;
  // As libuv's TCPStore: the push counts for the waiters in turn until one has nothing more
  // to wait for; that one is released, the ones after it wait for the next push.
  const std::set<WaiterId> waiting = it->second;
  for (WaiterId id : waiting) {
    Waiter& waiter = waiters_.at(id);
    if (waiter.barrier) continue;
    auto& on_key = waiting_on_[key];
    on_key.erase(id);
    if (on_key.empty()) waiting_on_.erase(key);
    if (--waiter.missing > 0) continue;
    Complete(id, ValuesOf(waiter));
    return;
  }
}

int64_t KvStore::KeyBytes() const {
  int64_t total = 0;
  for (const auto& [key, value] : data_) total += static_cast<int64_t>(key.size());
  return total;
}

absl::StatusOr<int64_t> KvStore::ReplyBytes(const std::vector<std::string>& keys) const {
  int64_t total = 0;
  for (const std::string& key : keys) {
    auto it = data_.find(key);
    if (it != data_.end()) total += static_cast<int64_t>(it->second.size());
    if (total > limits_.max_reply_bytes) {
      return absl::ResourceExhaustedError(
          absl::StrCat("the values of the ", keys.size(), " keys read at once come to more than ",
                       BytesText(limits_.max_reply_bytes),
                       ", the most one reply holds: read fewer keys at a time"));
    }
  }
  return total;
}

absl::StatusOr<std::vector<std::string>> KvStore::ValuesOf(const Waiter& waiter) const {
  std::vector<std::string> values;
  if (!waiter.want_values) return values;
  if (absl::StatusOr<int64_t> bytes = ReplyBytes(waiter.keys); !bytes.ok()) return bytes.status();
  values.reserve(waiter.keys.size());
  for (const std::string& key : waiter.keys) values.push_back(Find(key).value_or(""));
  return values;
}

void KvStore::Unindex(WaiterId id) {
  const Waiter& waiter = waiters_.at(id);
  for (const std::string& key : waiter.keys) {
    auto it = waiting_on_.find(key);
    if (it == waiting_on_.end()) continue;
    it->second.erase(id);
    if (it->second.empty()) waiting_on_.erase(it);
  }
}

absl::Status KvStore::AdmitWaiter(size_t keys) const {
  if (static_cast<int64_t>(waiters_.size()) >= limits_.max_waiters ||
      waited_keys_ + static_cast<int64_t>(keys) > limits_.max_waited_keys) {
    return absl::ResourceExhaustedError(
        absl::StrCat("too many blocking store reads wait in this run (", waiters_.size(),
                     " reads on ", waited_keys_, " keys; the limits are ", limits_.max_waiters,
                     " reads and ", limits_.max_waited_keys, " keys)"));
  }
  return absl::OkStatus();
}

void KvStore::Forget(std::map<WaiterId, Waiter>::iterator it) {
  Unindex(it->first);
  by_deadline_.erase({it->second.deadline, it->first});
  waited_keys_ -= static_cast<int64_t>(it->second.keys.size());
  waiters_.erase(it);
}

void KvStore::Complete(WaiterId id, absl::StatusOr<std::vector<std::string>> result) {
  auto it = waiters_.find(id);
  if (it == waiters_.end()) return;
  completions_.push_back([done = std::move(it->second.done), result = std::move(result)]() mutable {
    done(std::move(result));
  });
  Forget(it);
}

bool KvStore::Cancel(WaiterId id) {
  auto it = waiters_.find(id);
  if (it == waiters_.end()) return false;
  Forget(it);
  return true;
}

void KvStore::AbortAll(const absl::Status& status) {
  for (auto& [id, waiter] : waiters_) {
    completions_.push_back([done = std::move(waiter.done), status] { done(status); });
  }
  waiters_.clear();
  waited_keys_ = 0;
  waiting_on_.clear();
  by_deadline_.clear();
}

void KvStore::Expire(absl::Time now) {
  while (!by_deadline_.empty() && by_deadline_.begin()->first <= now) {
    const WaiterId id = by_deadline_.begin()->second;
    const Waiter& waiter = waiters_.at(id);
    std::vector<std::string> missing;
    for (const std::string& key : waiter.keys) {
      if (!Present(key)) missing.push_back(Shown(key));
    }
    Complete(id,
             absl::DeadlineExceededError(absl::StrCat(
                 "store keys not set in time: ", absl::StrJoin(missing, ", "),
                 "; the rank that should set them may have crashed or not reached that point")));
  }
}

absl::Time KvStore::NextDeadline() const {
  return by_deadline_.empty() ? absl::InfiniteFuture() : by_deadline_.begin()->first;
}

std::vector<std::function<void()>> KvStore::TakeCompletions() {
  std::vector<std::function<void()>> out;
  out.swap(completions_);
  return out;
}

}  // namespace ddprun
