#include "tests/support/tcp_sockets.h"

#include <dirent.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace ddprun::testing {
namespace {

int IntOption(int fd, int level, int name) {
  int value = -1;
  socklen_t length = sizeof value;
  return ::getsockopt(fd, level, name, &value, &length) == 0 ? value : -1;
}

int PortOf(const sockaddr_storage& addr) {
  if (addr.ss_family == AF_INET6)
    return ntohs(reinterpret_cast<const sockaddr_in6&>(addr).sin6_port);
  if (addr.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in&>(addr).sin_port);
  return 0;
}

}  // namespace

TcpConnectionsOnPort TcpConnectionsOn(int port) {
  TcpConnectionsOnPort found;
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return found;
  const int dir_fd = ::dirfd(dir);
  while (const dirent* entry = ::readdir(dir)) {
    const int fd = std::atoi(entry->d_name);
    if (entry->d_name[0] == '.' || fd == dir_fd) continue;
    const int domain = IntOption(fd, SOL_SOCKET, SO_DOMAIN);
    if ((domain != AF_INET && domain != AF_INET6) ||
        IntOption(fd, SOL_SOCKET, SO_TYPE) != SOCK_STREAM ||
        IntOption(fd, SOL_SOCKET, SO_ACCEPTCONN) != 0) {
      continue;
    }
    sockaddr_storage local{}, remote{};
    socklen_t local_length = sizeof local, remote_length = sizeof remote;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_length) != 0 ||
        ::getpeername(fd, reinterpret_cast<sockaddr*>(&remote), &remote_length) != 0) {
      continue;  // not connected (yet, or any more)
    }
    const bool nodelay = IntOption(fd, IPPROTO_TCP, TCP_NODELAY) > 0;
    if (PortOf(local) == port) {
      ++found.accepted;
      found.accepted_without_nodelay += nodelay ? 0 : 1;
    } else if (PortOf(remote) == port) {
      ++found.connected;
      found.connected_without_nodelay += nodelay ? 0 : 1;
    }
  }
  ::closedir(dir);
  return found;
}

UniqueFd ConnectToLoopback(int port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (!fd.valid() || ::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    return UniqueFd();
  }
  return fd;
}

}  // namespace ddprun::testing
