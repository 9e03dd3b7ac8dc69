#include "agent/free_port.h"

#include <errno.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent/unique_fd.h"

namespace ddprun {

absl::StatusOr<int> ReserveFreePort() {
  // Dual-stack when IPv6 exists, so the port is free for both families; IPv4 otherwise.
  UniqueFd sock(::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (sock.valid()) {
    sockaddr_in6 addr{};
    addr.sin6_family = AF_INET6;
    addr.sin6_addr = in6addr_any;
    socklen_t len = sizeof(addr);
    if (::bind(sock.get(), reinterpret_cast<sockaddr*>(&addr), len) == 0 &&
        ::getsockname(sock.get(), reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
      return ntohs(addr.sin6_port);
    }
  }
  sock.Reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!sock.valid()) return ErrnoStatus(errno, "socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t len = sizeof(addr);
  if (::bind(sock.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
      ::getsockname(sock.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return ErrnoStatus(errno, "cannot find a free TCP port for MASTER_PORT");
  }
  return ntohs(addr.sin_port);
}

std::string HostName() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "localhost";
  return name;
}

}  // namespace ddprun
