// The agent's TCPStore on real sockets (loopback): clients of both dialects, rounds, and
// the port it shares with the rendezvous master (connections that open as gRPC are handed
// over with their first bytes unread). PyTorch's own clients: tests/compat.

#include "store/tcp_store_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>

#include "absl/time/clock.h"
#include "common/unique_fd.h"
#include "store/tests/tcp_store_requests.h"
#include "tests/support/child_process.h"
#include "tests/support/tcp_sockets.h"

namespace ddprun {
namespace {

using tcpstore::Dialect;
using tcpstore::EncodeI64;
using tcpstore::EncodeString;
using tcpstore::EncodeU32;
using tcpstore::EncodeU8;
using tcpstore::Verb;
using tcpstore::testing::RequestBytes;
using tcpstore::testing::ValidateBytes;
using ::testing::HasSubstr;
using testing::TcpConnectionsOn;
using testing::TcpConnectionsOnPort;
using testing::WaitUntil;

// A blocking client on 127.0.0.1 (or ::1) that reads with a deadline.
class RawClient {
 public:
  explicit RawClient(int port, bool v6 = false) {
    sockaddr_in6 addr6{};
    addr6.sin6_family = AF_INET6;
    addr6.sin6_addr = in6addr_loopback;
    addr6.sin6_port = htons(static_cast<uint16_t>(port));
    sockaddr_in addr4{};
    addr4.sin_family = AF_INET;
    addr4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr4.sin_port = htons(static_cast<uint16_t>(port));
    fd_.Reset(::socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    connected_ = v6 ? ::connect(fd_.get(), reinterpret_cast<sockaddr*>(&addr6), sizeof addr6) == 0
                    : ::connect(fd_.get(), reinterpret_cast<sockaddr*>(&addr4), sizeof addr4) == 0;
  }
  bool connected() const { return connected_; }
  void Send(const std::string& bytes) { ASSERT_TRUE(WriteAll(fd_.get(), bytes).ok()); }
  // Exactly `n` bytes, or what came before the deadline or the close.
  std::string Read(size_t n, absl::Duration timeout = absl::Seconds(10)) {
    std::string got;
    const absl::Time deadline = absl::Now() + timeout;
    while (got.size() < n) {
      pollfd p{fd_.get(), POLLIN, 0};
      const int ms = static_cast<int>(absl::ToInt64Milliseconds(deadline - absl::Now()));
      if (ms <= 0 || ::poll(&p, 1, ms) <= 0) break;
      char buffer[4096];
      const ssize_t r = ::recv(fd_.get(), buffer, std::min(sizeof buffer, n - got.size()), 0);
      if (r <= 0) {
        closed_ = true;
        break;
      }
      got.append(buffer, static_cast<size_t>(r));
    }
    return got;
  }
  // Whether the server closed the connection within `timeout`.
  bool ClosedBy(absl::Duration timeout) {
    Read(1, timeout);
    return closed_;
  }
  int fd() const { return fd_.get(); }

 private:
  UniqueFd fd_;
  bool connected_ = false;
  bool closed_ = false;
};

std::unique_ptr<TcpStoreServer> StartServer(TcpStoreServerOptions options = {}) {
  absl::StatusOr<std::unique_ptr<TcpStoreServer>> server =
      TcpStoreServer::Start(std::move(options));
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? std::move(*server) : nullptr;
}

TEST(TcpStoreServerTest, ServesClientsOfBothDialectsOverIPv4AndIPv6) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  ASSERT_GT(server->port(), 0);
  server->BeginRound(0);
  RawClient old(server->port());
  RawClient now(server->port(), /*v6=*/true);
  ASSERT_TRUE(old.connected());
  ASSERT_TRUE(now.connected()) << "dual-stack: IPv6 clients too";
  now.Send(ValidateBytes() +
           std::string(RequestBytes(Verb::kPing, Dialect::kValidated).U32(31337)));
  EXPECT_EQ(now.Read(4), EncodeU32(31337));
  now.Send(RequestBytes(Verb::kWait, Dialect::kValidated).U64(1).Str("/addr"));
  old.Send(RequestBytes(Verb::kSet, Dialect::kLegacy).Str("/addr").Str("10.0.0.1:1234"));
  EXPECT_EQ(now.Read(1), EncodeU8(0));
  now.Send(RequestBytes(Verb::kGet, Dialect::kValidated).Str("/addr"));
  EXPECT_EQ(now.Read(8 + 13), EncodeString("10.0.0.1:1234"));
  // Every request answered is counted, by torch's name for it (the agent's metrics).
  const std::map<std::string, int64_t> expected = {
      {"validate", 1}, {"ping", 1}, {"wait", 1}, {"set", 1}, {"get", 1}};
  EXPECT_EQ(server->OperationCounts(), expected);
}

TEST(TcpStoreServerTest, ConnectionsWaitForTheirRoundAndAreClosedWhenTheNextBegins) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  RawClient early(server->port());
  early.Send(RequestBytes(Verb::kAdd, Dialect::kLegacy).Str("init/").I64(1));
  EXPECT_EQ(early.Read(8, absl::Milliseconds(300)), "") << "no round yet: held";
  server->BeginRound(0);
  EXPECT_EQ(early.Read(8), EncodeI64(1));
  early.Send(RequestBytes(Verb::kSet, Dialect::kLegacy).Str("/old").Str("x"));
  server->EndRound();
  early.Send(RequestBytes(Verb::kAdd, Dialect::kLegacy).Str("init/").I64(1));
  EXPECT_EQ(early.Read(8, absl::Milliseconds(300)), "") << "an ended round answers nothing";
  server->BeginRound(1);
  EXPECT_TRUE(early.ClosedBy(absl::Seconds(10)));
  RawClient next(server->port());
  next.Send(RequestBytes(Verb::kCheck, Dialect::kLegacy).U64(1).Str("/old"));
  EXPECT_EQ(next.Read(1), EncodeU8(tcpstore::kNotReady)) << "round 1 starts empty";
}

TEST(TcpStoreServerTest, ABadRequestClosesOnlyItsConnectionAndIsReported) {
  std::mutex mu;
  std::string reported;
  TcpStoreServerOptions options;
  options.on_refused = [&](const std::string& peer, const std::string& why) {
    std::lock_guard<std::mutex> lock(mu);
    reported = peer + ": " + why;
  };
  auto server = StartServer(options);
  ASSERT_NE(server, nullptr);
  server->BeginRound(0);
  RawClient good(server->port()), bad(server->port());
  bad.Send(ValidateBytes() + std::string(1, '\x40'));
  EXPECT_TRUE(bad.ClosedBy(absl::Seconds(10)));
  ASSERT_TRUE(WaitUntil(
      [&] {
        std::lock_guard<std::mutex> l(mu);
        return !reported.empty();
      },
      absl::Seconds(10)));
  EXPECT_THAT(reported, HasSubstr("127.0.0.1:"));
  EXPECT_THAT(reported, HasSubstr("it sent query code 64"));
  good.Send(RequestBytes(Verb::kNumKeys, Dialect::kLegacy));
  EXPECT_EQ(good.Read(8), EncodeI64(0));
}

// The port shared with the master: a gRPC client's connection (plaintext HTTP/2 or TLS) is
// handed over before a byte of it is read; a TCPStore client's is served here. Both without
// Nagle's delay (TCP_NODELAY), which held every small reply ~40 ms.
TEST(TcpStoreServerTest, ConnectionsThatOpenAsGrpcAreHandedOverUnread) {
  std::mutex mu;
  std::vector<std::string> handed;  // what each handed-over connection still has to read
  TcpStoreServerOptions options;
  options.grpc_handoff = [&](int listen_fd, int fd) {
    EXPECT_GE(listen_fd, 0);
    int nodelay = 0;
    socklen_t length = sizeof nodelay;
    EXPECT_EQ(::getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &nodelay, &length), 0);
    EXPECT_EQ(nodelay, 1) << "a connection handed to gRPC waits for Nagle";
    char buffer[64] = {};
    pollfd p{fd, POLLIN, 0};
    ::poll(&p, 1, 5000);
    const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
    std::lock_guard<std::mutex> lock(mu);
    handed.emplace_back(buffer, n > 0 ? static_cast<size_t>(n) : 0);
    ::close(fd);
  };
  auto server = StartServer(options);
  ASSERT_NE(server, nullptr);
  server->BeginRound(0);
  RawClient http2(server->port()), tls(server->port()), store(server->port()), idle(server->port());
  http2.Send("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
  tls.Send(std::string("\x16\x03\x01\x00\x05hello", 10));
  store.Send(RequestBytes(Verb::kAdd, Dialect::kLegacy).Str("init/").I64(1));
  EXPECT_EQ(store.Read(8), EncodeI64(1));
  const TcpConnectionsOnPort served = TcpConnectionsOn(server->port());
  EXPECT_GE(served.accepted, 1);
  EXPECT_EQ(served.accepted_without_nodelay, 0);
  ASSERT_TRUE(WaitUntil(
      [&] {
        std::lock_guard<std::mutex> l(mu);
        return handed.size() == 2;
      },
      absl::Seconds(10)));
  std::lock_guard<std::mutex> lock(mu);
  std::sort(handed.begin(), handed.end());
  EXPECT_EQ(handed[0], std::string("\x16\x03\x01\x00\x05hello", 10));
  EXPECT_EQ(handed[1], "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
}

TEST(TcpStoreServerTest, APortInUseIsAnError) {
  auto first = StartServer();
  ASSERT_NE(first, nullptr);
  TcpStoreServerOptions options;
  options.port = first->port();
  absl::StatusOr<std::unique_ptr<TcpStoreServer>> second = TcpStoreServer::Start(options);
  ASSERT_FALSE(second.ok());
  EXPECT_THAT(second.status().message(), HasSubstr("in use"));
}

// Many workers at once, each waiting for rank 0's key, released by one SET.
TEST(TcpStoreServerTest, HundredsOfWaitingClientsAreReleasedByOneSet) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  server->BeginRound(0);
  std::vector<std::unique_ptr<RawClient>> clients;
  for (int i = 0; i < 300; ++i) {
    clients.push_back(std::make_unique<RawClient>(server->port()));
    clients.back()->Send(
        ValidateBytes() +
        std::string(RequestBytes(Verb::kWait, Dialect::kValidated).U64(1).Str("/rank0")));
  }
  RawClient rank0(server->port());
  rank0.Send(ValidateBytes() +
             std::string(RequestBytes(Verb::kSet, Dialect::kValidated).Str("/rank0").Str("a")));
  for (auto& client : clients) ASSERT_EQ(client->Read(1), EncodeU8(0));
}

}  // namespace
}  // namespace ddprun
