#include "rendezvous/kv_store.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ddprun {
namespace {

std::string Shown(const std::string& key) {
  return key.size() <= 80 ? key : absl::StrCat(key.substr(0, 80), "... (", key.size(), " bytes)");
}

absl::Status CheckKeyCount(size_t count) {
  if (count == 0) return absl::InvalidArgumentError("no keys given");
  if (count > KvStore::kMaxKeysPerCall) {
    return absl::InvalidArgumentError(absl::StrCat(count, " keys in one call; the limit is ",
                                                   KvStore::kMaxKeysPerCall));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckKeyAndValue(const std::string& key, size_t value_size) {
  if (key.empty()) return absl::InvalidArgumentError("empty store key");
  if (key.size() > KvStore::kMaxKeyBytes) {
    return absl::InvalidArgumentError(absl::StrCat("store key '", Shown(key), "' is ", key.size(),
                                                   " bytes; the limit is ", KvStore::kMaxKeyBytes));
  }
  if (value_size > KvStore::kMaxValueBytes) {
    return absl::InvalidArgumentError(absl::StrCat("value for store key '", Shown(key), "' is ",
                                                   value_size, " bytes; the limit is ",
                                                   KvStore::kMaxValueBytes,
                                                   " (8 MiB): exchange large data otherwise"));
  }
  return absl::OkStatus();
}

absl::Status KvStore::Set(const std::string& key, std::string value) {
  if (absl::Status s = CheckKeyAndValue(key, value.size()); !s.ok()) return s;
  data_[key] = std::move(value);
  WakeWaiters();
  return absl::OkStatus();
}

absl::Status KvStore::MultiSet(const std::vector<std::string>& keys,
                               std::vector<std::string> values) {
  if (absl::Status s = CheckKeyCount(keys.size()); !s.ok()) return s;
  if (keys.size() != values.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(keys.size(), " keys but ", values.size(), " values in multi_set"));
  }
  for (size_t i = 0; i < keys.size(); ++i) {
    if (absl::Status s = CheckKeyAndValue(keys[i], values[i].size()); !s.ok()) return s;
  }
  for (size_t i = 0; i < keys.size(); ++i) data_[keys[i]] = std::move(values[i]);
  WakeWaiters();
  return absl::OkStatus();
}

absl::StatusOr<int64_t> KvStore::Add(const std::string& key, int64_t delta) {
  if (absl::Status s = CheckKeyAndValue(key, 0); !s.ok()) return s;
  int64_t value = 0;
  auto it = data_.find(key);
  if (it != data_.end() && !absl::SimpleAtoi(it->second, &value)) {
    return absl::FailedPreconditionError(
        absl::StrCat("store key '", Shown(key), "' holds a value that is not an integer; add() "
                     "needs one"));
  }
  // Found by fuzz_kv_store: adding past the int64 range was undefined behaviour.
  if (__builtin_add_overflow(value, delta, &value)) {
    return absl::OutOfRangeError(absl::StrCat("store key '", Shown(key), "': add(", delta,
                                              ") would overflow a 64-bit integer"));
  }
  data_[key] = absl::StrCat(value);
  WakeWaiters();
  return value;
}

absl::StatusOr<std::string> KvStore::CompareSet(const std::string& key, const std::string& expected,
                                                std::string desired) {
  if (absl::Status s = CheckKeyAndValue(key, desired.size()); !s.ok()) return s;
  auto it = data_.find(key);
  const bool matches = it == data_.end() ? expected.empty() : it->second == expected;
  if (!matches) return it == data_.end() ? expected : it->second;
  data_[key] = std::move(desired);
  WakeWaiters();
  return data_[key];
}

absl::StatusOr<bool> KvStore::Check(const std::vector<std::string>& keys) const {
  if (absl::Status s = CheckKeyCount(keys.size()); !s.ok()) return s;
  return AllPresent(keys);
}

absl::StatusOr<bool> KvStore::Delete(const std::string& key) {
  if (absl::Status s = CheckKeyAndValue(key, 0); !s.ok()) return s;
  return data_.erase(key) > 0;
}

bool KvStore::AllPresent(const std::vector<std::string>& keys) const {
  return std::all_of(keys.begin(), keys.end(),
                     [this](const std::string& k) { return data_.count(k) > 0; });
}

KvStore::WaiterId KvStore::WaitFor(std::vector<std::string> keys, absl::Time deadline, Done done) {
  absl::Status valid = CheckKeyCount(keys.size());
  for (const std::string& key : keys) {
    if (valid.ok()) valid = CheckKeyAndValue(key, 0);
  }
  if (!valid.ok()) {
    completions_.push_back([done = std::move(done), valid] { done(valid); });
    return 0;
  }
  const WaiterId id = next_waiter_++;
  waiters_[id] = Waiter{std::move(keys), deadline, std::move(done)};
  WakeWaiters();
  return id;
}

void KvStore::Cancel(WaiterId id) { waiters_.erase(id); }

void KvStore::WakeWaiters() {
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    if (!AllPresent(it->second.keys)) {
      ++it;
      continue;
    }
    std::vector<std::string> values;
    values.reserve(it->second.keys.size());
    for (const std::string& key : it->second.keys) values.push_back(data_.at(key));
    completions_.push_back(
        [done = std::move(it->second.done), values = std::move(values)]() mutable {
          done(std::move(values));
        });
    it = waiters_.erase(it);
  }
}

void KvStore::AbortAll(const absl::Status& status) {
  for (auto& [id, waiter] : waiters_) {
    completions_.push_back([done = std::move(waiter.done), status] { done(status); });
  }
  waiters_.clear();
}

void KvStore::Expire(absl::Time now) {
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    if (it->second.deadline > now) {
      ++it;
      continue;
    }
    std::vector<std::string> missing;
    for (const std::string& key : it->second.keys) {
      if (data_.count(key) == 0) missing.push_back(Shown(key));
    }
    absl::Status timeout = absl::DeadlineExceededError(absl::StrCat(
        "store keys not set in time: ", absl::StrJoin(missing, ", "),
        "; the rank that should set them may have crashed or not reached that point"));
    completions_.push_back([done = std::move(it->second.done), timeout] { done(timeout); });
    it = waiters_.erase(it);
  }
}

absl::Time KvStore::NextDeadline() const {
  absl::Time next = absl::InfiniteFuture();
  for (const auto& [id, waiter] : waiters_) next = std::min(next, waiter.deadline);
  return next;
}

std::vector<std::function<void()>> KvStore::TakeCompletions() {
  std::vector<std::function<void()>> out;
  out.swap(completions_);
  return out;
}

}  // namespace ddprun
