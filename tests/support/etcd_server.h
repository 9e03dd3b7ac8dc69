#pragma once
// Test support: a real etcd (Debian's etcd-server) for the etcd-v3 backend's tests, one member
// on loopback with its own data folder and ports, and etcdctl against it. A machine without
// etcd fails the test with what to install, rather than skipping it.

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "tests/support/child_process.h"
#include "tests/support/temp_dir.h"

namespace ddprun::testing {

class EtcdServer {
 public:
  /// Starts a member on 127.0.0.1 and waits until it answers; null (with a test failure
  /// saying why) when it cannot. With `certs` (test_certificates.h): TLS with its "node"
  /// certificate, and clients must show one signed by its "ca" (--client-cert-auth).
  static std::unique_ptr<EtcdServer> Start(const TempDir* certs = nullptr);
  ~EtcdServer();

  /// "127.0.0.1:PORT": its client address, as --rdzv-endpoint names it.
  std::string endpoint() const;
  pid_t pid() const { return process_->pid(); }
  /// etcdctl (API v3) against it, as root once authentication is on.
  ProcessResult Ctl(std::vector<std::string> args) const;
  /// The keys that begin with `prefix`, one per line ("" when there are none).
  std::string Keys(const std::string& prefix) const;
  /// N of the agent on 127.0.0.N whose master run `run`'s leader key names, once it names
  /// one (0 if not within 30 s): what etcd holds, not a line of an agent's log that a test's
  /// reader may not have read yet.
  int LeadingNode(const std::string& run) const;
  /// Turns authentication on, with `user`/`password` allowed to read and write under `prefix`.
  bool EnableAuth(const std::string& user, const std::string& password, const std::string& prefix);

 private:
  EtcdServer() = default;
  TempDir dir_;
  int client_port_ = 0;
  int peer_port_ = 0;
  bool auth_ = false;
  std::string certs_;  // the certificates' folder, with TLS
  std::unique_ptr<ChildProcess> process_;
};

}  // namespace ddprun::testing
