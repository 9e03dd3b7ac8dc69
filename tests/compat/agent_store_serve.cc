// Serves the agent's TCPStore alone (round 0), for PyTorch's own clients in tests/compat:
// prints "port N" on stderr once it listens, and serves until SIGTERM or SIGINT.
#include <signal.h>

#include <cstdio>
#include <string>

#include "store/tcp_store_server.h"

int main() {
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  ::pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  ddprun::TcpStoreServerOptions options;
  options.on_refused = [](const std::string& peer, const std::string& why) {
    std::fprintf(stderr, "refused %s: %s\n", peer.c_str(), why.c_str());
  };
  auto server = ddprun::TcpStoreServer::Start(options);
  if (!server.ok()) {
    std::fprintf(stderr, "%s\n", std::string(server.status().message()).c_str());
    return 1;
  }
  (*server)->BeginRound(0);
  std::fprintf(stderr, "port %d\n", (*server)->port());
  int sig = 0;
  sigwait(&stop, &sig);
  return 0;
}
