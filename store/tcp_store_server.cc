#include "store/tcp_store_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/clock.h"
#include "common/event_loop.h"
#include "common/ip_address.h"
#include "common/listen_socket.h"
#include "common/log_limiter.h"
#include "common/status_macros.h"
#include "common/unique_fd.h"
#include "node/host_info.h"
#include "store/tcp_store_service.h"

namespace ddprun {
namespace {

constexpr size_t kReadChunk = 64 * 1024;
constexpr int kReadsPerWakeup = 16;  // then the other connections get their turn
// A connection to a port shared with the master that has said nothing for this long.
constexpr absl::Duration kSilentLimit = absl::Seconds(10);

bool OpensAsGrpc(unsigned char first) {
  return first == 'P' || first == 0x16;  // "PRI * HTTP/2.0" or a TLS record
}

// A socket's address at one end (getpeername or getsockname) as text, an IPv4 client of the
// dual-stack socket as IPv4; and its port.
std::pair<std::string, int> EndOf(int fd, bool peer) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  const int rc = peer ? ::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len)
                      : ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  if (rc != 0) return {"", 0};
  char text[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    auto* in = reinterpret_cast<sockaddr_in*>(&addr);
    ::inet_ntop(AF_INET, &in->sin_addr, text, sizeof text);
    return {text, ntohs(in->sin_port)};
  }
  auto* in6 = reinterpret_cast<sockaddr_in6*>(&addr);
  if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
    ::inet_ntop(AF_INET, &in6->sin6_addr.s6_addr[12], text, sizeof text);
  } else {
    ::inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof text);
  }
  return {text, ntohs(in6->sin6_port)};
}

}  // namespace

class TcpStoreServer::Impl {
 public:
  Impl(TcpStoreServerOptions options, UniqueFd listen, std::unique_ptr<EventLoop> loop,
       UniqueFd wake, UniqueFd marked)
      : options_(std::move(options)),
        listen_(std::move(listen)),
        loop_(std::move(loop)),
        wake_(std::move(wake)),
        marked_(std::move(marked)),
        port_(BoundPort(listen_.get())) {}

  absl::Status Watch() {
    if (absl::Status s = loop_->WatchReadable(listen_.get(), [this](uint32_t) { Accept(); });
        !s.ok()) {
      return s;
    }
    return loop_->WatchReadable(wake_.get(), [this](uint32_t) { TakeCommands(); });
  }

  void Run() {
    ::pthread_setname_np(::pthread_self(), "ddprun-store");
    while (!stopping_) {
      if (!loop_->RunOnce(absl::InfiniteDuration()).ok()) break;
    }
    absl::MutexLock lock(&mu_);  // no one waits for a command that will never be applied
    exited_ = true;
    for (const Posted& posted : commands_) posted.applied->Notify();
    commands_.clear();
  }

  enum class Command { kBeginRound, kEndRound, kStop };
  // Returns once the server's thread has applied it: after EndRound returns, nothing more
  // is answered.
  void Post(Command command, int64_t round = 0, std::vector<std::string> clients = {},
            int world_size = 0) {
    absl::Notification applied;
    {
      absl::MutexLock lock(&mu_);
      if (exited_) return;
      commands_.push_back({command, round, std::move(clients), world_size, &applied});
    }
    const uint64_t one = 1;
    (void)!::write(wake_.get(), &one, sizeof one);
    applied.WaitForNotification();
  }

  int port() const { return port_; }
  int marks_fd() const { return marked_.get(); }
  std::vector<TimedMark> TakeMarks() {
    uint64_t count = 0;
    (void)!::read(marked_.get(), &count, sizeof count);
    absl::MutexLock lock(&mu_);
    return std::exchange(marks_, {});
  }
  std::string ArrivalAddress() const {
    absl::MutexLock lock(&mu_);
    return arrival_;
  }
  std::map<std::string, int64_t> OperationCounts() const {
    std::map<std::string, int64_t> counts;
    for (int v = 0; v <= static_cast<int>(tcpstore::Verb::kBarrier); ++v) {
      const auto verb = static_cast<tcpstore::Verb>(v);
      if (const int64_t n = service_.calls(verb); n > 0) {
        counts[absl::AsciiStrToLower(tcpstore::VerbName(verb))] = n;
      }
    }
    return counts;
  }
  std::thread thread;

 private:
  struct Connection {
    UniqueFd fd;
    std::string peer;
    std::string ip;           // the peer's address alone, canonical
    bool classified = false;  // known to be a TCPStore client (not gRPC)
    absl::Time accepted;
    std::string out;
    size_t out_sent = 0;
    bool want_writable = false;
  };

  void TakeCommands() {
    uint64_t count = 0;
    (void)!::read(wake_.get(), &count, sizeof count);
    std::deque<Posted> commands;
    {
      absl::MutexLock lock(&mu_);
      commands.swap(commands_);
    }
    for (const Posted& posted : commands) {
      if (posted.command == Command::kStop) stopping_ = true;
      if (posted.command == Command::kBeginRound) {
        BeginRound(posted.round, posted.clients, posted.world_size);
      }
      if (posted.command == Command::kEndRound) service_.EndRound();
    }
    Deliver();
    for (const Posted& posted : commands) posted.applied->Notify();
  }

  // Who may be served from now on; the held connections of anyone else are closed before
  // the round's store serves them.
  void BeginRound(int64_t round, const std::vector<std::string>& clients, int world_size) {
    allowed_.clear();
    for (const std::string& ip : OwnIpAddresses(/*limit=*/SIZE_MAX)) allowed_.insert(ip);
    for (const std::string& c : clients) allowed_.insert(CanonicalIp(c));
    std::vector<TcpStoreService::ConnectionId> strangers;
    for (const auto& [id, c] : connections_) {
      if (c.classified && !Allowed(c)) strangers.push_back(id);
    }
    for (TcpStoreService::ConnectionId id : strangers) RefuseStranger(id);
    service_.BeginRound(round, world_size);
  }

  bool Allowed(const Connection& c) const {
    return IsLoopbackOrUnspecified(c.ip) || allowed_.count(c.ip) > 0;
  }

  // A TCPStore client from an address that is not one of the round's nodes: closed, and
  // said at most once a second (an outsider's connections must not flood the log).
  void RefuseStranger(TcpStoreService::ConnectionId id) {
    auto it = connections_.find(id);
    if (it == connections_.end()) return;
    const std::string peer = it->second.peer;
    const std::string ip = it->second.ip;
    service_.Closed(id);
    Drop(id);
    const int refused = stranger_lines_.Occurred(MonotonicNow());
    if (refused == 0 || !options_.on_refused) return;
    options_.on_refused(
        peer,
        absl::StrCat(
            ip, " is not an address of a node in this round, nor of this host",
            refused > 1 ? absl::StrCat(" (", refused - 1, " more such connections closed)") : "",
            ": the workers' TCPStore serves only them (docs/security.md)"));
  }

  // A connection became a TCPStore client: served if it may be, held until the round begins
  // if none runs (BeginRound checks it then), closed otherwise.
  void OpenClient(TcpStoreService::ConnectionId id) {
    Connection& c = connections_.at(id);
    c.classified = true;
    if (service_.serving() && !Allowed(c)) return RefuseStranger(id);
    service_.Open(id);
  }

  void Accept() {
    DropSilent();
    while (true) {
      const int fd = AcceptOrShed(listen_.get(), reserve_);
      if (fd < 0 && errno == EMFILE) {
        LogShed();
        continue;
      }
      if (fd < 0) return;  // EAGAIN, or a connection that vanished meanwhile
      const TcpStoreService::ConnectionId id = next_id_++;
      Connection& c = connections_[id];
      c.fd.Reset(fd);
      c.accepted = MonotonicNow();
      if (options_.grpc_handoff) unclassified_.push_back(id);
      const auto [addr, port] = EndOf(fd, /*peer=*/true);
      c.peer = addr.empty() ? "?" : HostPort(addr, port);
      c.ip = CanonicalIp(addr);
      NoteArrival(fd);
      if (!loop_->WatchReadable(fd, [this, id](uint32_t events) { OnEvents(id, events); }).ok()) {
        Drop(id);
        continue;
      }
      if (!options_.grpc_handoff) OpenClient(id);
    }
  }

  // A connection that has sent nothing for kSilentLimit holds a descriptor for nobody: the
  // review held 1,030 such sockets to starve the master. Looked at on each new arrival.
  void DropSilent() {
    const absl::Time now = MonotonicNow();
    while (!unclassified_.empty()) {
      auto it = connections_.find(unclassified_.front());
      if (it != connections_.end() && !it->second.classified) {
        if (now - it->second.accepted < kSilentLimit) return;
        Drop(it->first);
      }
      unclassified_.pop_front();
    }
  }

  // Out of descriptors: said at most once a second, with how many were closed meanwhile.
  void LogShed() {
    const int shed = shed_lines_.Occurred(MonotonicNow());
    if (shed == 0 || !options_.on_refused) return;
    options_.on_refused("(new connections)",
                        absl::StrCat("this process is out of file descriptors: ", shed,
                                     " new connection(s) closed at once; raise its limit "
                                     "(ulimit -n, systemd's LimitNOFILE=) or find what holds "
                                     "them"));
  }

  void OnEvents(TcpStoreService::ConnectionId id, uint32_t events) {
    auto it = connections_.find(id);
    if (it == connections_.end()) return;
    if ((events & EPOLLOUT) != 0 && Flush(id)) {
      service_.Drained(id);
      Deliver();
    }
    if ((events & ~EPOLLOUT) == 0) return;
    it = connections_.find(id);
    if (it == connections_.end()) return;
    if (!it->second.classified && !Classify(id)) return;
    Read(id);
    Deliver();
  }

  void NoteArrival(int fd) {
    absl::MutexLock lock(&mu_);
    if (!arrival_.empty()) return;
    if (IsLoopbackOrUnspecified(EndOf(fd, /*peer=*/true).first)) return;  // this host
    arrival_ = EndOf(fd, /*peer=*/false).first;
  }

  // False when the connection left this server (handed to gRPC, or closed).
  bool Classify(TcpStoreService::ConnectionId id) {
    Connection& c = connections_.at(id);
    unsigned char first = 0;
    const ssize_t n = ::recv(c.fd.get(), &first, 1, MSG_PEEK);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return false;
    if (n <= 0) {
      Drop(id);
      return false;
    }
    if (OpensAsGrpc(first)) {
      loop_->Unwatch(c.fd.get());
      const int fd = c.fd.Release();
      connections_.erase(id);
      options_.grpc_handoff(listen_.get(), fd);  // its first bytes are still in the socket
      return false;
    }
    OpenClient(id);
    return connections_.count(id) > 0;
  }

  void Read(TcpStoreService::ConnectionId id) {
    char buffer[kReadChunk];
    for (int i = 0; i < kReadsPerWakeup; ++i) {
      auto it = connections_.find(id);
      if (it == connections_.end()) return;
      const ssize_t n = ::recv(it->second.fd.get(), buffer, sizeof buffer, 0);
      if (n > 0) {
        service_.Receive(id, absl::string_view(buffer, static_cast<size_t>(n)));
        continue;
      }
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
      service_.Closed(id);  // the peer hung up (or the connection broke)
      Drop(id);
      return;
    }
  }

  // Writes what the rules produced, and closes what they closed. A connection whose replies
  // are all written is Drained: the rules may serve its next requests, whose replies are
  // written in turn.
  void Deliver() {
    PassOnMarks();
    std::vector<TcpStoreService::Output> outputs;
    while (!(outputs = service_.TakeOutput()).empty()) {
      std::set<TcpStoreService::ConnectionId> written;
      for (TcpStoreService::Output& out : outputs) {
        auto it = connections_.find(out.connection);
        if (it == connections_.end()) continue;
        it->second.out += out.bytes;
        if (!out.close) {
          written.insert(out.connection);
          continue;
        }
        Flush(out.connection);
        it = connections_.find(out.connection);
        if (it == connections_.end()) continue;
        if (!out.why.empty() && options_.on_refused) options_.on_refused(it->second.peer, out.why);
        Drop(out.connection);
      }
      for (TcpStoreService::ConnectionId id : written) {
        if (Flush(id)) service_.Drained(id);
      }
    }
  }

  // The round's progress, stamped now (the requests that made it were just served).
  void PassOnMarks() {
    std::vector<StoreMark> marks = service_.TakeMarks();
    if (marks.empty()) return;
    const absl::Time now = MonotonicNow();
    {
      absl::MutexLock lock(&mu_);
      for (const StoreMark& mark : marks) marks_.push_back({mark, now});
    }
    const uint64_t one = 1;
    (void)!::write(marked_.get(), &one, sizeof one);
  }

  // True when every byte given to the connection has been written.
  bool Flush(TcpStoreService::ConnectionId id) {
    auto it = connections_.find(id);
    if (it == connections_.end()) return false;
    Connection& c = it->second;
    while (c.out_sent < c.out.size()) {
      const ssize_t n =
          ::send(c.fd.get(), c.out.data() + c.out_sent, c.out.size() - c.out_sent, MSG_NOSIGNAL);
      if (n > 0) {
        c.out_sent += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) break;
      service_.Closed(id);
      Drop(id);
      return false;
    }
    if (c.out_sent == c.out.size()) {
      c.out.clear();
      c.out_sent = 0;
    }
    const bool want = !c.out.empty();
    if (want != c.want_writable && loop_->WatchWritable(c.fd.get(), want).ok()) {
      c.want_writable = want;
    }
    return !want;
  }

  void Drop(TcpStoreService::ConnectionId id) {
    auto it = connections_.find(id);
    if (it == connections_.end()) return;
    loop_->Unwatch(it->second.fd.get());
    connections_.erase(it);
  }

  const TcpStoreServerOptions options_;
  UniqueFd listen_;
  std::unique_ptr<EventLoop> loop_;
  UniqueFd wake_;
  UniqueFd marked_;  // an eventfd: readable while marks_ holds something
  const int port_;
  struct Posted {
    Command command;
    int64_t round;
    std::vector<std::string> clients;
    int world_size;
    absl::Notification* applied;
  };
  mutable absl::Mutex mu_;
  std::deque<Posted> commands_ ABSL_GUARDED_BY(mu_);
  std::string arrival_ ABSL_GUARDED_BY(mu_);
  std::vector<TimedMark> marks_ ABSL_GUARDED_BY(mu_);
  bool exited_ ABSL_GUARDED_BY(mu_) = false;
  // Owned by the server's thread:
  bool stopping_ = false;
  TcpStoreService service_;
  std::map<TcpStoreService::ConnectionId, Connection> connections_;
  TcpStoreService::ConnectionId next_id_ = 1;
  UniqueFd reserve_ = OpenReserveFd();                      // see AcceptOrShed
  std::deque<TcpStoreService::ConnectionId> unclassified_;  // oldest first; may hold gone ones
  LogLimiter shed_lines_;          // connections closed for want of a descriptor
  std::set<std::string> allowed_;  // besides loopback: this host's and the round's nodes'
  LogLimiter stranger_lines_;      // connections from elsewhere, closed
};

absl::StatusOr<std::unique_ptr<TcpStoreServer>> TcpStoreServer::Start(
    TcpStoreServerOptions options) {
  absl::StatusOr<std::vector<UniqueFd>> listen = ListenTcp("", options.port);
  if (!listen.ok()) return listen.status();
  absl::StatusOr<std::unique_ptr<EventLoop>> loop = EventLoop::Create();
  if (!loop.ok()) return loop.status();
  UniqueFd wake(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  UniqueFd marked(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake.valid() || !marked.valid()) return ErrnoStatus(errno, "eventfd");
  auto impl = std::make_unique<Impl>(std::move(options), std::move(listen->front()),
                                     std::move(*loop), std::move(wake), std::move(marked));
  DDPRUN_RETURN_IF_ERROR(impl->Watch());
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->Run(); });
  return std::unique_ptr<TcpStoreServer>(new TcpStoreServer(std::move(impl)));
}

TcpStoreServer::TcpStoreServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

TcpStoreServer::~TcpStoreServer() {
  impl_->Post(Impl::Command::kStop);
  if (impl_->thread.joinable()) impl_->thread.join();
}

int TcpStoreServer::port() const { return impl_->port(); }

std::string TcpStoreServer::ArrivalAddress() const { return impl_->ArrivalAddress(); }

void TcpStoreServer::BeginRound(int64_t round, std::vector<std::string> clients, int world_size) {
  impl_->Post(Impl::Command::kBeginRound, round, std::move(clients), world_size);
}

std::vector<TcpStoreServer::TimedMark> TcpStoreServer::TakeMarks() { return impl_->TakeMarks(); }

int TcpStoreServer::marks_fd() const { return impl_->marks_fd(); }

void TcpStoreServer::EndRound() { impl_->Post(Impl::Command::kEndRound); }

std::map<std::string, int64_t> TcpStoreServer::OperationCounts() const {
  return impl_->OperationCounts();
}

}  // namespace ddprun
