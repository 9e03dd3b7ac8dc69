// ddprun-storeload: N clients of PyTorch's TCPStore meeting on one server, as the ranks of a
// job meet when they form their process group: the workers' store at scale.
//
//   ddprun-storeload --serve=0                   hosts the TCPStore a ddprun agent serves its
//                                                workers (TcpStoreServer); prints its port
//   ddprun-storeload --connect=127.0.0.1:PORT --clients=N [--server-pid=PID]
//
// The clients speak torch 2.2+'s protocol (torch 2.14's bytes, shared/reference/
// tcpstore-protocol.md), from one thread over one epoll, one connection each. Every client:
//   connect  - opens its connection, sends VALIDATE and PING, reads the PING's echo (what
//              every torch 2.x client does before its first request);
//   barrier  - ADD init/ +1 (what init_process_group sends first), SET its own key, then a
//              store-based barrier: ADD barrier +1, the last to arrive sets barrier/done, and
//              every client WAITs for it;
//   peer     - reads the key of the next rank, as torch's get does (WAIT, then GET).
// A phase's time is from the start until the last client finished it. Gloo's full mesh
// would have every rank read every other rank's key: N x N requests, which no job of
// thousands of ranks does through one store (NCCL's bootstrap reads one peer); hence one.
//
// At most --window connections are being opened at once (the same for every server), so
// that a server's listen backlog (torch's legacy server: 2048) does not turn into SYN
// retransmissions of whole seconds. Each client binds the next free port of the ephemeral
// range itself: left to the kernel, 16,384 connections from one address outgrow the even half
// of the range it searches first, and its search took 12 s of this process's system time
// (the clients' cost, not the server's). All connect from 127.0.0.1: from other loopback
// addresses (127.1.x.y, which /etc/hosts does not name), torch's server took 96 s for 1,024
// clients while idle, against 0.3 s from 127.0.0.1.
//
// Prints one JSON object on stdout: the phases' times, the per-client connect latency
// (p50/p99) and, with --server-pid, the server's CPU time and peak RSS read from /proc.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "bench/measure.h"
#include "common/listen_socket.h"
#include "common/unique_fd.h"
#include "store/tcp_store_protocol.h"
#include "store/tcp_store_server.h"

namespace ddprun {
namespace {

// torch 2.2+'s query codes (tcpstore-protocol.md §2, generation C).
constexpr uint8_t kValidate = 0, kSet = 1, kGet = 3, kAdd = 4, kWait = 6, kPing = 13;
// A gloo address is 136 bytes: the value each rank sets has that size.
constexpr size_t kValueBytes = 136;

struct Options {
  std::string connect;
  int clients = 1024;
  int window = 1024;
  int server_pid = 0;
  double timeout_s = 300;
};

// One client's place in the exchange. Each state waits for one reply.
enum class Step {
  kConnecting,
  kPing,
  kInitAdd,
  kBarrierAdd,
  kBarrierWait,
  kPeerWait,
  kPeerGet,
  kDone
};

struct Client {
  UniqueFd fd;
  Step step = Step::kConnecting;
  std::string out;           // bytes not yet sent
  std::string in;            // bytes received, not yet a whole reply
  bool watching_out = true;  // its epoll interest holds EPOLLOUT (from the connect on)
  absl::Time started;
};

void PutU64(std::string& out, uint64_t n) { out.append(reinterpret_cast<const char*>(&n), 8); }
void PutString(std::string& out, const std::string& s) {
  PutU64(out, s.size());
  out += s;
}

class StoreLoad {
 public:
  StoreLoad(Options options, sockaddr_in server)
      : options_(std::move(options)), server_(server), clients_(options_.clients) {}

  absl::Status Run() {
    std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range");
    if (!(range >> first_port_ >> last_port_) || first_port_ < 1 || last_port_ > 65535 ||
        first_port_ > last_port_) {
      first_port_ = 32768, last_port_ = 60999;  // Linux's default
    }
    next_port_ = first_port_;
    // Keys of this run only, so that runs against one server do not meet each other's.
    prefix_ = absl::StrCat("/load", ::getpid(), "/");
    const long limit = RaiseOpenFileLimit();
    if (limit >= 0 && limit < options_.clients + 64) {
      return absl::ResourceExhaustedError(absl::StrCat(
          options_.clients, " clients need about ", options_.clients + 64,
          " open files here and as many in the server, but the hard limit (ulimit -Hn) is ", limit,
          ": raise it (as root: ulimit -Hn ", options_.clients + 1024, ") or use fewer --clients"));
    }
    epoll_ = UniqueFd(::epoll_create1(EPOLL_CLOEXEC));
    start_ = absl::Now();
    const absl::Time deadline = start_ + absl::Seconds(options_.timeout_s);
    std::vector<epoll_event> events(1024);
    while (done_ < options_.clients) {
      while (opening_ < options_.window && next_to_open_ < options_.clients) {
        if (absl::Status s = Open(next_to_open_++); !s.ok()) return s;
      }
      if (absl::Now() > deadline) {
        return absl::DeadlineExceededError(
            absl::StrCat("after ", options_.timeout_s, " s: ", connected_, " of ", options_.clients,
                         " clients connected, ", barrier_passed_, " passed the barrier, ", done_,
                         " read their peer's key"));
      }
      const int n = ::epoll_wait(epoll_.get(), events.data(), events.size(), 100);
      for (int i = 0; i < n; ++i) {
        const int rank = static_cast<int>(events[i].data.u32);
        if (absl::Status s = OnReady(rank, events[i].events); !s.ok()) return s;
      }
    }
    return absl::OkStatus();
  }

  void Print(ProcessReading before, ProcessReading after) const {
    std::printf(
        "{\"clients\": %d, \"window\": %d, \"connect_ms\": %.1f, \"barrier_ms\": %.1f, "
        "\"peer_ms\": %.1f, \"connect_p50_ms\": %.2f, \"connect_p99_ms\": %.2f, "
        "\"server_cpu_ms\": %.0f, \"server_peak_rss_mib\": %.1f}\n",
        options_.clients, options_.window, Ms(connect_done_), Ms(barrier_done_), Ms(peer_done_),
        Percentile(connect_latency_ms_, 0.5), Percentile(connect_latency_ms_, 0.99),
        after.cpu_ms - before.cpu_ms, after.peak_rss_mib);
  }

 private:
  double Ms(absl::Time t) const { return absl::ToDoubleMilliseconds(t - start_); }

  absl::Status Open(int rank) {
    Client& c = clients_[rank];
    c.fd = UniqueFd(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!c.fd.valid()) return absl::ErrnoToStatus(errno, "socket");
    const int one = 1;  // as torch's client: requests go out at once
    ::setsockopt(c.fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (absl::Status s = BindNextPort(c.fd.get(), rank); !s.ok()) return s;
    c.started = absl::Now();
    if (::connect(c.fd.get(), reinterpret_cast<const sockaddr*>(&server_), sizeof(server_)) != 0 &&
        errno != EINPROGRESS) {
      return absl::ErrnoToStatus(errno, absl::StrCat("connect (client ", rank, ")"));
    }
    epoll_event event{};
    event.events = EPOLLIN | EPOLLOUT;
    event.data.u32 = static_cast<uint32_t>(rank);
    ::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, c.fd.get(), &event);
    ++opening_;
    return absl::OkStatus();
  }

  // Binds `fd` to 127.0.0.1 and the next port of the ephemeral range that is free (or in
  // TIME_WAIT from an earlier run: SO_REUSEADDR).
  absl::Status BindNextPort(int fd, int rank) {
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in source{};
    source.sin_family = AF_INET;
    source.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (int tried = 0; tried <= last_port_ - first_port_; ++tried) {
      const int port = next_port_;
      next_port_ = next_port_ == last_port_ ? first_port_ : next_port_ + 1;
      source.sin_port = htons(static_cast<uint16_t>(port));
      if (::bind(fd, reinterpret_cast<const sockaddr*>(&source), sizeof(source)) == 0) {
        return absl::OkStatus();
      }
      if (errno != EADDRINUSE)
        return absl::ErrnoToStatus(errno, absl::StrCat("bind (client ", rank, ")"));
    }
    return absl::ResourceExhaustedError(
        absl::StrCat("client ", rank, ": no free port in the ephemeral range ", first_port_, "-",
                     last_port_, " (/proc/sys/net/ipv4/ip_local_port_range): use fewer --clients"));
  }

  absl::Status OnReady(int rank, uint32_t events) {
    Client& c = clients_[rank];
    if (c.step == Step::kConnecting) {
      int error = 0;
      socklen_t len = sizeof(error);
      ::getsockopt(c.fd.get(), SOL_SOCKET, SO_ERROR, &error, &len);
      if (error != 0)
        return absl::ErrnoToStatus(error, absl::StrCat("connect (client ", rank, ")"));
      c.out.push_back(static_cast<char>(kValidate));
      const uint32_t magic = tcpstore::kValidationMagic;
      c.out.append(reinterpret_cast<const char*>(&magic), 4);
      c.out.push_back(static_cast<char>(kPing));
      const uint32_t nonce = static_cast<uint32_t>(rank);
      c.out.append(reinterpret_cast<const char*>(&nonce), 4);
      c.step = Step::kPing;
    }
    if ((events & (EPOLLERR | EPOLLHUP)) != 0 && (events & EPOLLIN) == 0) {
      return absl::UnavailableError(
          absl::StrCat("the server closed client ", rank, "'s connection"));
    }
    if ((events & EPOLLIN) != 0) {
      char buffer[4096];
      for (;;) {
        const ssize_t n = ::read(c.fd.get(), buffer, sizeof(buffer));
        if (n > 0) {
          c.in.append(buffer, static_cast<size_t>(n));
          continue;
        }
        if (n == 0) {
          return absl::UnavailableError(absl::StrCat("the server closed client ", rank,
                                                     "'s connection during step ",
                                                     static_cast<int>(c.step)));
        }
        if (errno == EAGAIN) break;
        return absl::ErrnoToStatus(errno, absl::StrCat("read (client ", rank, ")"));
      }
      while (Advance(rank)) {
      }
    }
    return Flush(rank);
  }

  // Consumes one whole reply, if one is in, and sends the next request; false when it needs
  // more bytes (or the client is done).
  bool Advance(int rank) {
    Client& c = clients_[rank];
    const auto reply_bytes = [&](size_t n) {
      if (c.in.size() < n) return false;
      c.in.erase(0, n);
      return true;
    };
    switch (c.step) {
      case Step::kPing:
        if (!reply_bytes(4)) return false;
        --opening_;
        ++connected_;
        connect_latency_ms_.push_back(absl::ToDoubleMilliseconds(absl::Now() - c.started));
        if (connected_ == options_.clients) connect_done_ = absl::Now();
        Request(c, kAdd, "init/", 1);
        c.step = Step::kInitAdd;
        return true;
      case Step::kInitAdd:
        if (!reply_bytes(8)) return false;
        c.out.push_back(static_cast<char>(kSet));
        PutString(c.out, RankKey(rank));
        PutString(c.out, std::string(kValueBytes, 'a' + rank % 26));
        Request(c, kAdd, prefix_ + "barrier", 1);
        c.step = Step::kBarrierAdd;
        return true;
      case Step::kBarrierAdd: {
        if (c.in.size() < 8) return false;
        int64_t arrived = 0;
        std::memcpy(&arrived, c.in.data(), 8);
        c.in.erase(0, 8);
        if (arrived == options_.clients) {
          c.out.push_back(static_cast<char>(kSet));
          PutString(c.out, prefix_ + "barrier/done");
          PutString(c.out, "1");
        }
        Wait(c, prefix_ + "barrier/done");
        c.step = Step::kBarrierWait;
        return true;
      }
      case Step::kBarrierWait:
        if (!reply_bytes(1)) return false;
        if (++barrier_passed_ == options_.clients) barrier_done_ = absl::Now();
        Wait(c, RankKey((rank + 1) % options_.clients));
        c.step = Step::kPeerWait;
        return true;
      case Step::kPeerWait:
        if (!reply_bytes(1)) return false;
        c.out.push_back(static_cast<char>(kGet));
        PutString(c.out, RankKey((rank + 1) % options_.clients));
        c.step = Step::kPeerGet;
        return true;
      case Step::kPeerGet:
        if (!reply_bytes(8 + kValueBytes)) return false;
        c.step = Step::kDone;
        if (++done_ == options_.clients) peer_done_ = absl::Now();
        c.fd.Reset();  // closing also takes it off the epoll
        return false;
      case Step::kConnecting:
      case Step::kDone:
        return false;
    }
    return false;
  }

  std::string RankKey(int rank) const { return absl::StrCat(prefix_, "rank/", rank); }

  static void Request(Client& c, uint8_t code, const std::string& key, int64_t number) {
    c.out.push_back(static_cast<char>(code));
    PutString(c.out, key);
    c.out.append(reinterpret_cast<const char*>(&number), 8);
  }

  static void Wait(Client& c, const std::string& key) {
    c.out.push_back(static_cast<char>(kWait));
    PutU64(c.out, 1);
    PutString(c.out, key);
  }

  absl::Status Flush(int rank) {
    Client& c = clients_[rank];
    if (!c.fd.valid()) return absl::OkStatus();
    while (!c.out.empty()) {
      const ssize_t n = ::send(c.fd.get(), c.out.data(), c.out.size(), MSG_NOSIGNAL);
      if (n < 0 && errno == EAGAIN) break;
      if (n < 0) return absl::ErrnoToStatus(errno, absl::StrCat("send (client ", rank, ")"));
      c.out.erase(0, static_cast<size_t>(n));
    }
    // Asks for EPOLLOUT only while bytes wait, and says so to epoll only when that changes.
    if (c.watching_out != !c.out.empty()) {
      c.watching_out = !c.out.empty();
      epoll_event event{};
      event.events = c.watching_out ? EPOLLIN | EPOLLOUT : EPOLLIN;
      event.data.u32 = static_cast<uint32_t>(rank);
      ::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, c.fd.get(), &event);
    }
    return absl::OkStatus();
  }

  const Options options_;
  const sockaddr_in server_;
  std::vector<Client> clients_;
  std::string prefix_;
  UniqueFd epoll_;
  int first_port_ = 0, last_port_ = 0, next_port_ = 0;  // the ephemeral range, and where next
  int next_to_open_ = 0, opening_ = 0, connected_ = 0, barrier_passed_ = 0, done_ = 0;
  absl::Time start_, connect_done_, barrier_done_, peer_done_;
  std::vector<double> connect_latency_ms_;
};

// --serve: ddprun's agent-served TCPStore, alone, until SIGTERM or SIGINT.
int Serve(int port) {
  RaiseOpenFileLimit();
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);  // before the server's thread, which inherits it
  TcpStoreServerOptions options;
  options.port = port;
  absl::StatusOr<std::unique_ptr<TcpStoreServer>> server = TcpStoreServer::Start(options);
  if (!server.ok()) {
    std::fprintf(stderr, "ddprun-storeload: %s\n", server.status().ToString().c_str());
    return 1;
  }
  (*server)->BeginRound(0);
  std::printf("%d\nddprun\n", (*server)->port());  // as torch_store_server.py: port, backend
  std::fflush(stdout);
  int signal = 0;
  sigwait(&stop, &signal);
  return 0;
}

absl::StatusOr<sockaddr_in> ParseAddress(const std::string& text) {
  std::vector<std::string> parts = absl::StrSplit(text, ':');
  sockaddr_in address{};
  address.sin_family = AF_INET;
  int port = 0;
  if (parts.size() != 2 || ::inet_pton(AF_INET, parts[0].c_str(), &address.sin_addr) != 1 ||
      !absl::SimpleAtoi(parts[1], &port) || port < 1 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--connect=", text, ": give an IPv4 address and a port, e.g. 127.0.0.1:29500"));
  }
  address.sin_port = htons(static_cast<uint16_t>(port));
  return address;
}

}  // namespace
}  // namespace ddprun

int main(int argc, char** argv) {
  ddprun::Options options;
  int serve_port = -1;
  CLI::App app{"N TCPStore clients meeting on one server (torch 2.2+'s protocol)"};
  app.add_option("--serve", serve_port,
                 "Host ddprun's agent-served TCPStore on this port (0: any); print the port, "
                 "then \"ddprun\"");
  app.add_option("--connect", options.connect, "The server, IPv4:PORT");
  app.add_option("--clients", options.clients, "Clients, one connection each")
      ->check(CLI::Range(1, 65535));
  app.add_option("--window", options.window, "Connections being opened at once at most")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--server-pid", options.server_pid, "Read the server's CPU and RSS from /proc");
  app.add_option("--timeout", options.timeout_s, "Seconds before giving up");
  CLI11_PARSE(app, argc, argv);
  if (serve_port >= 0) return ddprun::Serve(serve_port);
  absl::StatusOr<sockaddr_in> server = ddprun::ParseAddress(options.connect);
  if (!server.ok()) {
    std::fprintf(stderr, "ddprun-storeload: %s\n", server.status().message().data());
    return 2;
  }
  const ddprun::ProcessReading before = ddprun::ReadProcess(options.server_pid);
  ddprun::StoreLoad load(options, *server);
  if (absl::Status status = load.Run(); !status.ok()) {
    std::fprintf(stderr, "ddprun-storeload: %s\n", status.ToString().c_str());
    return 1;
  }
  load.Print(before, ddprun::ReadProcess(options.server_pid));
  return 0;
}
