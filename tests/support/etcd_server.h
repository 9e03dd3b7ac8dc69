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
  /// saying why) when it cannot.
  static std::unique_ptr<EtcdServer> Start();
  ~EtcdServer();

  /// "127.0.0.1:PORT": its client address, as --rdzv-endpoint names it.
  std::string endpoint() const;
  pid_t pid() const { return process_->pid(); }
  /// etcdctl (API v3) against it, as root once authentication is on.
  ProcessResult Ctl(std::vector<std::string> args) const;
  /// The keys that begin with `prefix`, one per line ("" when there are none).
  std::string Keys(const std::string& prefix) const;
  /// Turns authentication on, with `user`/`password` allowed to read and write under `prefix`.
  bool EnableAuth(const std::string& user, const std::string& password, const std::string& prefix);

 private:
  EtcdServer() = default;
  TempDir dir_;
  int client_port_ = 0;
  int peer_port_ = 0;
  bool auth_ = false;
  std::unique_ptr<ChildProcess> process_;
};

}  // namespace ddprun::testing
