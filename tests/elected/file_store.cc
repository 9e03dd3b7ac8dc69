#include "tests/elected/file_store.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/file.h>

#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/unique_fd.h"

namespace ddprun {

absl::Status FileStore::Transact(const std::function<bool(State&)>& change) {
  const std::string lock_path = folder_ + "/lock";
  UniqueFd lock(::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  if (!lock.valid()) return ErrnoStatus(errno, lock_path);
  if (::flock(lock.get(), LOCK_EX) != 0) return ErrnoStatus(errno, "flock " + lock_path);
  absl::StatusOr<State> state = Load();
  if (!state.ok()) return state.status();
  bool changed = false;
  const absl::Time now = absl::Now();
  for (auto lease = state->leases.begin(); lease != state->leases.end();) {
    if (lease->second.renewed + lease->second.ttl >= now) {
      ++lease;
      continue;
    }
    for (auto key = state->keys.begin(); key != state->keys.end();) {
      key = key->second.lease == lease->first ? state->keys.erase(key) : std::next(key);
    }
    lease = state->leases.erase(lease);
    ++state->revision;
    changed = true;
  }
  changed = change(*state) || changed;
  return changed ? Save(*state) : absl::OkStatus();
}

// One line each: "revision N", "lease ID TTL_MS RENEWED_UNIX_MS", "key NAME LEASE CREATE
// MOD VALUE" with the name and the value in hex (the memory is bytes).
absl::StatusOr<FileStore::State> FileStore::Load() const {
  State state;
  std::ifstream in(folder_ + "/state");
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    std::string kind;
    words >> kind;
    if (kind == "revision") {
      words >> state.revision;
    } else if (kind == "lease") {
      int64_t id = 0, ttl_ms = 0, renewed_ms = 0;
      words >> id >> ttl_ms >> renewed_ms;
      state.leases[id] = {absl::Milliseconds(ttl_ms), absl::FromUnixMillis(renewed_ms)};
    } else if (kind == "key") {
      std::string name, value;
      StoredKey key;
      words >> name >> key.lease >> key.create_revision >> key.mod_revision >> value;
      key.value = absl::HexStringToBytes(value == "-" ? "" : value);
      state.keys[absl::HexStringToBytes(name)] = std::move(key);
    } else if (!kind.empty()) {
      return absl::DataLossError(absl::StrCat(folder_, "/state: a line of nothing known: ", line));
    }
  }
  return state;
}

absl::Status FileStore::Save(const State& state) const {
  std::ostringstream out;
  out << "revision " << state.revision << "\n";
  for (const auto& [id, lease] : state.leases) {
    out << "lease " << id << " " << absl::ToInt64Milliseconds(lease.ttl) << " "
        << absl::ToUnixMillis(lease.renewed) << "\n";
  }
  for (const auto& [name, key] : state.keys) {
    const std::string value = absl::BytesToHexString(key.value);
    out << "key " << absl::BytesToHexString(name) << " " << key.lease << " " << key.create_revision
        << " " << key.mod_revision << " " << (value.empty() ? "-" : value) << "\n";
  }
  const std::string path = folder_ + "/state", next = folder_ + "/state.next";
  {
    std::ofstream file(next, std::ios::trunc);
    file << out.str();
    if (!file.flush()) return absl::InternalError("cannot write " + next);
  }
  if (::rename(next.c_str(), path.c_str()) != 0) return ErrnoStatus(errno, "rename " + next);
  return absl::OkStatus();
}

absl::StatusOr<FileStore::Read> FileStore::Get(const std::string& key) {
  Read read;
  absl::Status s = Transact([&](State& state) {
    auto it = state.keys.find(key);
    if (it != state.keys.end()) read.key = it->second;
    read.revision = state.revision;
    return false;
  });
  if (!s.ok()) return s;
  return read;
}

absl::StatusOr<int64_t> FileStore::GrantLease(absl::Duration ttl) {
  int64_t id = 0;
  absl::Status s = Transact([&](State& state) {
    id = ++state.revision;
    state.leases[id] = {ttl, absl::Now()};
    return true;
  });
  if (!s.ok()) return s;
  return id;
}

absl::StatusOr<bool> FileStore::KeepAlive(int64_t lease) {
  bool held = false;
  absl::Status s = Transact([&](State& state) {
    auto it = state.leases.find(lease);
    held = it != state.leases.end();
    if (held) it->second.renewed = absl::Now();
    return held;
  });
  if (!s.ok()) return s;
  return held;
}

absl::Status FileStore::Revoke(int64_t lease) {
  return Transact([&](State& state) {
    if (state.leases.erase(lease) == 0) return false;
    for (auto key = state.keys.begin(); key != state.keys.end();) {
      key = key->second.lease == lease ? state.keys.erase(key) : std::next(key);
    }
    ++state.revision;
    return true;
  });
}

absl::StatusOr<FileStore::Campaign> FileStore::CreateUnlessPresent(const std::string& key,
                                                                   const std::string& value,
                                                                   int64_t lease) {
  Campaign campaign;
  absl::Status s = Transact([&](State& state) {
    auto it = state.keys.find(key);
    campaign.won = it == state.keys.end() && state.leases.count(lease) > 0;
    if (campaign.won) {
      const int64_t revision = ++state.revision;
      it = state.keys.emplace(key, StoredKey{value, lease, revision, revision}).first;
    }
    if (it != state.keys.end()) campaign.holder = it->second;
    campaign.revision = state.revision;
    return campaign.won;
  });
  if (!s.ok()) return s;
  return campaign;
}

absl::StatusOr<bool> FileStore::PutIfFenced(const std::string& fence, int64_t create_revision,
                                            const std::string& key, const std::string& value) {
  bool written = false;
  absl::Status s = Transact([&](State& state) {
    auto it = state.keys.find(fence);
    written = it != state.keys.end() && it->second.create_revision == create_revision;
    if (written) {
      StoredKey& stored = state.keys[key];
      const int64_t revision = ++state.revision;
      if (stored.create_revision == 0) stored.create_revision = revision;
      stored.mod_revision = revision;
      stored.value = value;
    }
    return written;
  });
  if (!s.ok()) return s;
  return written;
}

absl::StatusOr<bool> FileStore::DeletePrefixIfFenced(const std::string& fence,
                                                     int64_t create_revision,
                                                     const std::string& prefix) {
  bool deleted = false;
  absl::Status s = Transact([&](State& state) {
    auto it = state.keys.find(fence);
    deleted = it != state.keys.end() && it->second.create_revision == create_revision;
    if (!deleted) return false;
    for (auto key = state.keys.begin(); key != state.keys.end();) {
      key = absl::StartsWith(key->first, prefix) ? state.keys.erase(key) : std::next(key);
    }
    ++state.revision;
    return true;
  });
  if (!s.ok()) return s;
  return deleted;
}

}  // namespace ddprun
