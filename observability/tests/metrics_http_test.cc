#include "observability/metrics_http.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "tests/support/child_process.h"
#include "tests/support/http_get.h"

namespace ddprun {
namespace {

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

}  // namespace
}  // namespace ddprun
