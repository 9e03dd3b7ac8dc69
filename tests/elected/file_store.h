#pragma once
// FileStore: the store of a test's second elected backend, in one folder. It has etcd's model
// in small: keys with the lease they are bound to and the revisions they were created and last
// changed at, leases that run out when not renewed within their TTL (and take their keys
// with them), one revision counted over every change. Each call reads the state, changes it
// and writes it whole (a new file renamed over the old) under an flock of the folder's lock,
// so that the agents of one machine share it. Lease times are the wall clock's: they are
// compared across processes.

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ddprun {

struct StoredKey {
  std::string value;
  int64_t lease = 0;
  int64_t create_revision = 0;
  int64_t mod_revision = 0;
};

class FileStore {
 public:
  explicit FileStore(std::string folder) : folder_(std::move(folder)) {}

  struct Read {
    std::optional<StoredKey> key;
    int64_t revision = 0;  // the store's, when read
  };
  absl::StatusOr<Read> Get(const std::string& key);
  absl::StatusOr<int64_t> GrantLease(absl::Duration ttl);
  /// false: the lease had run out (or was revoked).
  absl::StatusOr<bool> KeepAlive(int64_t lease);
  /// The lease and its keys are gone.
  absl::Status Revoke(int64_t lease);
  struct Campaign {
    bool won = false;
    StoredKey holder;  // the key after the call
    int64_t revision = 0;
  };
  /// `key` = `value`, bound to `lease`, unless the key is there.
  absl::StatusOr<Campaign> CreateUnlessPresent(const std::string& key, const std::string& value,
                                               int64_t lease);
  /// Writes `key` if `fence`'s create revision is `create_revision`; false if it is not.
  absl::StatusOr<bool> PutIfFenced(const std::string& fence, int64_t create_revision,
                                   const std::string& key, const std::string& value);
  /// Deletes every key under `prefix` if `fence`'s create revision is `create_revision`.
  absl::StatusOr<bool> DeletePrefixIfFenced(const std::string& fence, int64_t create_revision,
                                            const std::string& prefix);

 private:
  struct Lease {
    absl::Duration ttl;
    absl::Time renewed;
  };
  struct State {
    int64_t revision = 0;
    std::map<int64_t, Lease> leases;
    std::map<std::string, StoredKey> keys;
  };
  // Runs `change` on the state under the folder's lock, once the leases that ran out are gone
  // with their keys; writes the state back when anything changed (`change` returns true).
  absl::Status Transact(const std::function<bool(State&)>& change);
  absl::StatusOr<State> Load() const;
  absl::Status Save(const State& state) const;

  const std::string folder_;
};

}  // namespace ddprun
