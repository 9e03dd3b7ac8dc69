#include "tests/support/delay_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace ddprun::testing {
namespace {

sockaddr_in Loopback(int port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return addr;
}

}  // namespace

absl::StatusOr<std::unique_ptr<DelayProxy>> DelayProxy::Start(int target_port, LinkShape shape) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr = Loopback(0);
  socklen_t len = sizeof addr;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(fd, 64) != 0 || ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    if (fd >= 0) ::close(fd);
    return absl::InternalError("the delay proxy cannot listen on loopback");
  }
  std::unique_ptr<DelayProxy> proxy(new DelayProxy(fd, ntohs(addr.sin_port), target_port, shape));
  proxy->acceptor_ = std::thread([p = proxy.get()] { p->AcceptLoop(); });
  return proxy;
}

DelayProxy::DelayProxy(int listen_fd, int port, int target_port, LinkShape shape)
    : listen_fd_(listen_fd), port_(port), target_port_(target_port), shape_(shape) {}

DelayProxy::~DelayProxy() {
  stopping_ = true;
  ::shutdown(listen_fd_, SHUT_RDWR);
  acceptor_.join();
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (int fd : fds_) ::shutdown(fd, SHUT_RDWR);
  }
  for (auto& t : threads_) t.join();
  for (int fd : fds_) ::close(fd);
  ::close(listen_fd_);
}

void DelayProxy::AcceptLoop() {
  while (!stopping_) {
    const int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) return;
    const int upstream = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in target = Loopback(target_port_);
    if (::connect(upstream, reinterpret_cast<sockaddr*>(&target), sizeof target) != 0) {
      ::close(client);
      ::close(upstream);
      continue;
    }
    const int one = 1;
    ::setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    ::setsockopt(upstream, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    std::lock_guard<std::mutex> lock(mu_);
    fds_.push_back(client);
    fds_.push_back(upstream);
    threads_.emplace_back([this, client, upstream] { Pump(client, upstream); });
    threads_.emplace_back([this, client, upstream] { Pump(upstream, client); });
  }
}

void DelayProxy::Pump(int from, int to) {
  char buf[64 * 1024];
  while (!stopping_) {
    const ssize_t n = ::read(from, buf, sizeof buf);
    if (n <= 0) break;
    absl::Duration wait = shape_.delay;
    if (shape_.stall_every > 0 && ++chunks_ % shape_.stall_every == 0) wait += shape_.stall;
    absl::SleepFor(wait);
    for (ssize_t sent = 0; sent < n;) {
      const ssize_t w = ::send(to, buf + sent, static_cast<size_t>(n - sent), MSG_NOSIGNAL);
      if (w <= 0) return;
      sent += w;
    }
  }
  ::shutdown(to, SHUT_WR);
}

}  // namespace ddprun::testing
