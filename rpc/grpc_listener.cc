#include "rpc/grpc_listener.h"

#include <errno.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/listen_socket.h"
#include "common/log_limiter.h"
#include "spdlog/spdlog.h"

namespace ddprun {

absl::StatusOr<std::unique_ptr<GrpcListener>> GrpcListener::Listen(const std::string& host,
                                                                   int port) {
  absl::StatusOr<std::vector<UniqueFd>> sockets = ListenTcp(host, port);
  if (!sockets.ok()) return sockets.status();
  UniqueFd stop(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!stop.valid()) return ErrnoStatus(errno, "eventfd");
  return std::unique_ptr<GrpcListener>(new GrpcListener(std::move(*sockets), std::move(stop)));
}

GrpcListener::GrpcListener(std::vector<UniqueFd> sockets, UniqueFd stop)
    : sockets_(std::move(sockets)),
      stop_(std::move(stop)),
      reserve_(OpenReserveFd()),
      port_(BoundPort(sockets_.front().get())) {}

GrpcListener::~GrpcListener() {
  const uint64_t one = 1;
  (void)!::write(stop_.get(), &one, sizeof one);
  if (thread_.joinable()) thread_.join();
}

void GrpcListener::Start(Handoff handoff) {
  handoff_ = std::move(handoff);
  thread_ = std::thread([this] { Run(); });
}

namespace {

// At most once a second (LogLimiter): `shed` connections since the last line; 0: not now.
void LogShed(int shed) {
  if (shed == 0) return;
  spdlog::error(
      "out of file descriptors: closed {} new connection(s) at once; the master goes on "
      "serving the ones it has. Raise its limit (ulimit -n, systemd's LimitNOFILE=) or "
      "find what holds so many connections",
      shed);
}

}  // namespace

void GrpcListener::Run() {
  std::vector<pollfd> fds;
  for (const UniqueFd& s : sockets_) fds.push_back({s.get(), POLLIN, 0});
  fds.push_back({stop_.get(), POLLIN, 0});
  LogLimiter shed_lines;  // connections closed for want of a descriptor
  while (true) {
    if (::poll(fds.data(), fds.size(), -1) < 0 && errno != EINTR) return;
    if (fds.back().revents != 0) return;
    for (size_t i = 0; i + 1 < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      while (true) {
        const int fd = AcceptOrShed(fds[i].fd, reserve_);
        if (fd >= 0) {
          handoff_(fds[i].fd, fd);
        } else if (errno == EMFILE) {
          LogShed(shed_lines.Occurred(MonotonicNow()));
        } else {
          break;  // none waits any more
        }
      }
    }
  }
}

}  // namespace ddprun
