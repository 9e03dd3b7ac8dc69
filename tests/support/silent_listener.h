#pragma once
// Test support: a program that holds a TCP port and never answers (the kernel accepts for
// it): what an agent finds at its master's address when another program holds the port.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>

#include "common/unique_fd.h"

namespace ddprun::testing {

struct SilentListener {
  UniqueFd fd{::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)};
  int port = 0;

  /// Listens on `address` (host order; loopback by default) at a port the kernel picks.
  explicit SilentListener(uint32_t address = INADDR_LOOPBACK) {
    sockaddr_in addr = {};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(address);
    socklen_t length = sizeof addr;
    if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), length) != 0 ||
        ::listen(fd.get(), 16) != 0 ||
        ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &length) != 0) {
      return;  // port stays 0: the test's connection then fails and says so
    }
    port = ntohs(addr.sin_port);
  }
};

}  // namespace ddprun::testing
