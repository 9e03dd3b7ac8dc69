#pragma once
// A TCP proxy on loopback that makes a link slow, for tests on a kernel without netem: every
// chunk it forwards, in either direction, waits `delay`, and every `stall_every`-th chunk
// waits `stall` more (TCP hides lost packets as such stalls). Ends its connections and
// threads in the destructor.

#include <atomic>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ddprun::testing {

struct LinkShape {
  absl::Duration delay = absl::Milliseconds(100);
  int stall_every = 0;  // 0: never
  absl::Duration stall = absl::Milliseconds(300);
};

class DelayProxy {
 public:
  /// Listens on 127.0.0.1 (a free port) and forwards to 127.0.0.1:`target_port`.
  static absl::StatusOr<std::unique_ptr<DelayProxy>> Start(int target_port, LinkShape shape);
  ~DelayProxy();
  int port() const { return port_; }

 private:
  DelayProxy(int listen_fd, int port, int target_port, LinkShape shape);
  void AcceptLoop();
  void Pump(int from, int to);

  const int listen_fd_;
  const int port_;
  const int target_port_;
  const LinkShape shape_;
  std::atomic<bool> stopping_{false};
  std::atomic<int> chunks_{0};
  std::mutex mu_;
  std::vector<int> fds_;  // every connection's sockets, shut down at the end
  std::vector<std::thread> threads_;
  std::thread acceptor_;
};

}  // namespace ddprun::testing
