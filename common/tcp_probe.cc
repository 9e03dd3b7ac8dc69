#include "common/tcp_probe.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <cstring>

namespace ddprun {

bool TcpProbes::Start(uint64_t id, const std::string& ip, int port, absl::Time now,
                      absl::Duration timeout) {
  if (probes_.size() >= kMaxInFlight || port < 1 || port > 65535) return false;
  sockaddr_storage address{};
  socklen_t length = 0;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&address);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&address);
  if (::inet_pton(AF_INET, ip.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<uint16_t>(port));
    length = sizeof *v4;
  } else if (::inet_pton(AF_INET6, ip.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<uint16_t>(port));
    length = sizeof *v6;
  } else {
    return false;
  }
  UniqueFd fd(::socket(address.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) return false;
  Probe probe{id, std::move(fd), now + timeout, std::nullopt};
  if (::connect(probe.fd.get(), reinterpret_cast<sockaddr*>(&address), length) == 0) {
    probe.known = 0;  // connected at once
  } else if (errno != EINPROGRESS) {
    probe.known = errno;  // refused at once (loopback does that): SO_ERROR no longer says so
  }
  probes_.push_back(std::move(probe));
  return true;
}

std::vector<TcpProbes::Done> TcpProbes::Poll(absl::Time now) {
  std::vector<Done> done;
  if (probes_.empty()) return done;
  std::vector<pollfd> fds(probes_.size());
  for (size_t i = 0; i < probes_.size(); ++i) fds[i] = {probes_[i].fd.get(), POLLOUT, 0};
  (void)::poll(fds.data(), fds.size(), 0);
  std::vector<Probe> pending;
  for (size_t i = 0; i < probes_.size(); ++i) {
    Probe& probe = probes_[i];
    if (!probe.known && fds[i].revents == 0 && now < probe.deadline) {
      pending.push_back(std::move(probe));
      continue;
    }
    int error = 0;
    socklen_t length = sizeof error;
    if (probe.known) {
      error = *probe.known;
    } else if (fds[i].revents == 0 ||
               ::getsockopt(probe.fd.get(), SOL_SOCKET, SO_ERROR, &error, &length) != 0) {
      error = ETIMEDOUT;
    }
    const Answer answer = error == 0              ? Answer::kListens
                          : error == ECONNREFUSED ? Answer::kRefused
                                                  : Answer::kNoAnswer;
    done.push_back(Done{probe.id, answer});
  }
  probes_ = std::move(pending);
  return done;
}

absl::Time TcpProbes::NextPoll(absl::Time now) const {
  return probes_.empty() ? absl::InfiniteFuture() : now + kPollEvery;
}

}  // namespace ddprun
