#include "observability/metrics_http.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "common/unique_fd.h"
#include "tests/support/child_process.h"
#include "tests/support/http_get.h"
#include "tests/support/tcp_sockets.h"

namespace ddprun {
namespace {

using ::ddprun::testing::ConnectToLoopback;
using ::ddprun::testing::FreeLoopbackPort;
using ::ddprun::testing::HttpGet;
using ::ddprun::testing::HttpReply;

MetricsHttpOptions OnLoopback(int port) {
  MetricsHttpOptions options;
  options.host = "127.0.0.1";
  options.port = port;
  options.agent_metrics = [] { return std::vector<prometheus::MetricFamily>(); };
  return options;
}

// A client already polling the port as the server starts (Prometheus, a browser left open, a
// test waiting for the page) gets the server's own answer from its first request on. Its
// request could once arrive before the routes were set: civetweb then answered it itself, and
// the page of that answer overflowed civetweb's thread stack, killing the process.
// Busy threads make the machine as loaded as the one where the crash was seen: there, the
// start's thread lost the CPU between listening and setting the routes. A race, so many
// starts: with the routes set after the start, about one run of this test in three failed
// on a 2-core machine.
TEST(MetricsHttpTest, AClientPollingAsTheServerStartsGetsItsAnswerFromTheFirstRequest) {
  std::atomic<bool> done{false};
  std::vector<std::thread> busy;
  for (unsigned i = 0; i < std::max(2u, std::thread::hardware_concurrency()); ++i) {
    busy.emplace_back([&done] {
      while (!done.load(std::memory_order_relaxed)) {
      }
    });
  }
  for (int start = 0; start < 200; ++start) {
    const int port = FreeLoopbackPort();
    HttpReply first;
    std::thread client([&] {
      const absl::Time deadline = absl::Now() + absl::Seconds(30);
      while (first.status == 0 && absl::Now() < deadline) first = HttpGet(port, "/metrics");
    });
    absl::StatusOr<std::unique_ptr<MetricsHttp>> http = MetricsHttp::Start(OnLoopback(port));
    client.join();
    ASSERT_TRUE(http.ok()) << http.status();
    EXPECT_EQ(first.status, 200) << "start " << start << ": " << first.headers << first.body;
  }
  done = true;
  for (std::thread& t : busy) t.join();
}

TEST(MetricsHttpTest, EveryOtherUriAndMethodGetsTheServersOwnAnswer) {
  absl::StatusOr<std::unique_ptr<MetricsHttp>> http = MetricsHttp::Start(OnLoopback(0));
  ASSERT_TRUE(http.ok()) << http.status();
  const int port = (*http)->port();
  EXPECT_EQ(HttpGet(port, "/metrics").status, 200);
  const HttpReply page = HttpGet(port, "/");
  EXPECT_EQ(page.status, 404);
  EXPECT_NE(page.body.find("this agent serves /metrics only"), std::string::npos) << page.body;
  EXPECT_EQ(HttpGet(port, "/no/such/page").status, 404);
  const HttpReply propfind = HttpGet(port, "/", "PROPFIND");
  EXPECT_EQ(propfind.status, 405);
  EXPECT_NE(propfind.headers.find("Allow: GET"), std::string::npos) << propfind.headers;
}

// Issue 47: clients that open a connection and send no whole request (a slow-client hold)
// held every thread, and a scrape behind them timed out. 32 of them at once: the scrape is
// answered within HttpGet's 5 s (Prometheus allows 10 s), and each of them is dropped.
TEST(MetricsHttpTest, ClientsThatSendNoWholeRequestDelayAScrapeBrieflyAndAreDropped) {
  absl::StatusOr<std::unique_ptr<MetricsHttp>> http = MetricsHttp::Start(OnLoopback(0));
  ASSERT_TRUE(http.ok()) << http.status();
  const int port = (*http)->port();
  std::vector<UniqueFd> holds;
  for (int i = 0; i < 32; ++i) {
    UniqueFd fd = ConnectToLoopback(port);
    ASSERT_TRUE(fd.valid()) << "connection " << i;
    const std::string half = "GET /metrics HTTP/1.1\r\nHost: x\r\n";  // no blank line
    ASSERT_EQ(::send(fd.get(), half.data(), half.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(half.size()));
    holds.push_back(std::move(fd));
  }
  const HttpReply scrape = HttpGet(port, "/metrics");
  EXPECT_EQ(scrape.status, 200) << "the scrape waited behind the held connections";
  for (size_t i = 0; i < holds.size(); ++i) {
    // Dropped: closed, after an error answer at most (never the metrics: no request ended).
    std::string answer;
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    bool closed = false;
    while (!closed && absl::Now() < deadline) {
      pollfd p{holds[i].get(), POLLIN, 0};
      if (::poll(&p, 1, 1000) != 1) continue;
      char buffer[4096];
      const ssize_t n = ::recv(holds[i].get(), buffer, sizeof buffer, 0);
      if (n > 0) answer.append(buffer, n);
      closed = n <= 0;
    }
    EXPECT_TRUE(closed) << "connection " << i << " is still open after 30 s: " << answer;
    EXPECT_EQ(answer.find(" 200 "), std::string::npos) << "connection " << i << ": " << answer;
  }
}

}  // namespace
}  // namespace ddprun
