#pragma once
// A client of the ddprun Store service (torch TCPStore's verbs over gRPC), and the server a
// rank 0 runs when no launcher provides one. Keys live in the namespace of one run id.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ddp::worker {

/// What a Store client shows the server: TLS with a client certificate, as the ddprun
/// master requires when it runs with TLS (PEM texts; all empty: plaintext), and the token
/// (empty: none), which a master or rank-0 store with a token requires on every call.
struct StoreAccess {
  std::string cert_pem, key_pem, ca_pem;
  std::string token;
};
using StoreTls = StoreAccess;  // its name before it carried the token

/// Where and for whom a rank-0 store serves.
struct StoreServerOptions {
  int port = 0;           // 0: the kernel picks one
  std::string bind_host;  // an address or name of this host; empty: every address
  std::string run_id;     // the one run it serves; empty: any
  std::string token;      // required on every call when not empty
};

class Store {
 public:
  /// A client of the Store at `address` (host:port) for run `run_id`. Connecting is lazy:
  /// until the server has answered once, each call waits for it up to its deadline
  /// (`call_timeout`, or the call's own timeout for blocking reads), so clients may start
  /// before the server; after that, a server that has gone fails calls at once.
  /// With `wait_for_server` false, a call fails at once when the server is not there.
  static std::unique_ptr<Store> Connect(const std::string& address, const std::string& run_id,
                                        absl::Duration call_timeout = absl::Seconds(300),
                                        bool wait_for_server = true,
                                        const StoreAccess& access = {});
  virtual ~Store() = default;

  virtual const std::string& address() const = 0;

  virtual absl::Status Set(const std::string& key, const std::string& value) = 0;
  /// Waits up to `timeout` for the key to exist.
  virtual absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) = 0;
  /// Adds `delta` to the number stored under `key` (0 when absent); returns the new value.
  virtual absl::StatusOr<int64_t> Add(const std::string& key, int64_t delta) = 0;
  /// Sets `desired` if the value is `expected` (or the key is absent and `expected` is
  /// empty); returns the value now stored.
  virtual absl::StatusOr<std::string> CompareSet(const std::string& key,
                                                 const std::string& expected,
                                                 const std::string& desired) = 0;
  /// Waits up to `timeout` for every key to exist.
  virtual absl::Status Wait(const std::vector<std::string>& keys, absl::Duration timeout) = 0;
  virtual absl::StatusOr<bool> Check(const std::vector<std::string>& keys) = 0;
  virtual absl::StatusOr<bool> Delete(const std::string& key) = 0;
  virtual absl::StatusOr<int64_t> NumKeys() = 0;
  virtual absl::StatusOr<std::vector<std::string>> MultiGet(const std::vector<std::string>& keys,
                                                            absl::Duration timeout) = 0;
  virtual absl::Status MultiSet(const std::vector<std::string>& keys,
                                const std::vector<std::string>& values) = 0;
};

/// A Store server in this process (what rank 0 runs when the launcher gives no store).
class StoreServer {
 public:
  /// Listens at options.bind_host (every address when empty) and options.port. The error
  /// names the port.
  static absl::StatusOr<std::unique_ptr<StoreServer>> Start(const StoreServerOptions& options);
  /// Every address, any run, no token.
  static absl::StatusOr<std::unique_ptr<StoreServer>> Start(int port);
  virtual ~StoreServer() = default;
  virtual int port() const = 0;
};

}  // namespace ddp::worker
