#include "common/listen_socket.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <random>

#include "absl/strings/str_cat.h"

namespace ddprun {
namespace {

// A socket bound to `addr` and listening; not valid on failure, with `err` set.
//
// Two sockets with SO_REUSEADDR may both bind a free port (neither listens yet), and when
// they then listen at once both can fail with EADDRINUSE: each marks itself listening before
// it checks the others, and sees the other marked (Linux's inet_csk_listen_start). Agents
// of one job on one host race so for the master's port, and each would take the other for
// the port's holder. A listen() that fails so is tried again, bind and all, after a pause of
// random length: by then the port is held by a listener (bind says "in use") or free.
UniqueFd BindAndListen(const sockaddr* addr, socklen_t len, bool v6only, int& err) {
  constexpr int kTries = 8;
  for (int attempt = 1;; ++attempt) {
    UniqueFd fd(::socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd.valid()) {
      err = errno;
      return fd;
    }
    const int yes = 1, only = v6only ? 1 : 0;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    if (addr->sa_family == AF_INET6) {
      ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &only, sizeof only);
    }
    if (::bind(fd.get(), addr, len) != 0) {
      err = errno;
      return UniqueFd();
    }
    if (::listen(fd.get(), SOMAXCONN) == 0) return fd;
    err = errno;
    if (err != EADDRINUSE || attempt == kTries) return UniqueFd();
    fd.Reset();
    std::random_device random;
    ::usleep(100 + random() % 2000);
  }
}

// Every address at `port`: dual-stack IPv6, else IPv4 (a host without IPv6).
absl::StatusOr<std::vector<UniqueFd>> ListenEverywhere(int port) {
  sockaddr_in6 v6{};
  v6.sin6_family = AF_INET6;
  v6.sin6_addr = in6addr_any;
  v6.sin6_port = htons(static_cast<uint16_t>(port));
  int err = 0;
  UniqueFd fd = BindAndListen(reinterpret_cast<sockaddr*>(&v6), sizeof v6, false, err);
  if (!fd.valid() && err != EADDRINUSE) {
    sockaddr_in v4{};
    v4.sin_family = AF_INET;
    v4.sin_addr.s_addr = htonl(INADDR_ANY);
    v4.sin_port = htons(static_cast<uint16_t>(port));
    fd = BindAndListen(reinterpret_cast<sockaddr*>(&v4), sizeof v4, false, err);
  }
  if (!fd.valid()) {
    if (err == EADDRINUSE) {
      return absl::UnavailableError(absl::StrCat("cannot listen on port ", port, ": it is in use"));
    }
    return ErrnoStatus(err, absl::StrCat("cannot listen on port ", port));
  }
  std::vector<UniqueFd> fds;
  fds.push_back(std::move(fd));
  return fds;
}

}  // namespace

std::string HostPort(const std::string& host, int port) {
  return host.find(':') != std::string::npos ? absl::StrCat("[", host, "]:", port)
                                             : absl::StrCat(host, ":", port);
}

absl::StatusOr<std::vector<UniqueFd>> ListenTcp(const std::string& host, int port) {
  if (host.empty() || host == "::" || host == "0.0.0.0") return ListenEverywhere(port);
  const std::string where = HostPort(host, port);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  if (const int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &found); rc != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot listen on ", where, ": ", ::gai_strerror(rc)));
  }
  std::vector<UniqueFd> fds;
  int err = 0;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    sockaddr_storage addr{};
    std::memcpy(&addr, a->ai_addr, a->ai_addrlen);
    const int want = fds.empty() ? port : BoundPort(fds.front().get());
    if (addr.ss_family == AF_INET6) {
      reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port = htons(static_cast<uint16_t>(want));
    } else {
      reinterpret_cast<sockaddr_in*>(&addr)->sin_port = htons(static_cast<uint16_t>(want));
    }
    UniqueFd fd = BindAndListen(reinterpret_cast<sockaddr*>(&addr), a->ai_addrlen, true, err);
    if (fd.valid()) {
      fds.push_back(std::move(fd));
    } else if (err == EADDRINUSE) {
      fds.clear();  // one of its addresses is taken: the port is not this server's
      break;
    }
  }
  ::freeaddrinfo(found);
  if (!fds.empty()) return fds;
  return absl::UnavailableError(absl::StrCat(
      "cannot listen on ", where,
      ": the port is in use (another master?) or the address is not one of this host's"));
}

int BoundPort(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return 0;
  return addr.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port)
                                    : ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
}

UniqueFd OpenReserveFd() { return UniqueFd(::open("/dev/null", O_RDONLY | O_CLOEXEC)); }

int AcceptOrShed(int listen_fd, UniqueFd& reserve) {
  const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd >= 0) {
    // Every exchange here is a small message answered by another: with Nagle's algorithm a
    // reply waits for the peer's delayed ACK, about 40 ms each (gRPC sets this on sockets it
    // accepts itself, not on those it is handed).
    const int yes = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
    return fd;
  }
  if (errno != EMFILE && errno != ENFILE) return fd;
  // Out of descriptors: free the reserved one, take the connection and close it, so that the
  // client hears at once and the listener is not left readable.
  reserve.Reset();
  const int shed = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
  const int shed_errno = errno;
  if (shed >= 0) ::close(shed);
  reserve = OpenReserveFd();
  // EMFILE only when one was closed: callers go on accepting then, and stop otherwise.
  errno = shed >= 0 ? EMFILE : shed_errno == EMFILE ? EAGAIN : shed_errno;
  return -1;
}

namespace {
rlimit g_limit_before{};
bool g_limit_raised = false;
}  // namespace

long RaiseOpenFileLimit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return -1;
  if (limit.rlim_cur < limit.rlim_max) {
    if (!g_limit_raised) g_limit_before = limit;
    g_limit_raised = true;
    limit.rlim_cur = limit.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &limit);
    ::getrlimit(RLIMIT_NOFILE, &limit);
  }
  return limit.rlim_cur == RLIM_INFINITY ? -1 : static_cast<long>(limit.rlim_cur);
}

void RestoreOpenFileLimit() {
  if (g_limit_raised) ::setrlimit(RLIMIT_NOFILE, &g_limit_before);
}

}  // namespace ddprun
