#include "common/tcp_probe.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "common/clock.h"
#include "common/unique_fd.h"

namespace ddprun {
namespace {

// A loopback port that listens, and one that did a moment ago and does not any more.
int ListeningPort(UniqueFd& fd) {
  fd = UniqueFd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof a;
  EXPECT_EQ(::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  EXPECT_EQ(::listen(fd.get(), 4), 0);
  EXPECT_EQ(::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&a), &length), 0);
  return ntohs(a.sin_port);
}

std::vector<TcpProbes::Done> PollUntilAnswered(TcpProbes& probes, size_t count) {
  std::vector<TcpProbes::Done> all;
  const absl::Time end = MonotonicNow() + absl::Seconds(10);
  while (all.size() < count && MonotonicNow() < end) {
    for (const TcpProbes::Done& d : probes.Poll(MonotonicNow())) all.push_back(d);
    absl::SleepFor(TcpProbes::kPollEvery);
  }
  return all;
}

TEST(TcpProbesTest, AListeningPortAndAClosedOneAreToldApart) {
  UniqueFd open_fd, closed_fd;
  const int open_port = ListeningPort(open_fd);
  const int closed_port = ListeningPort(closed_fd);
  closed_fd = UniqueFd();
  TcpProbes probes;
  const absl::Time now = MonotonicNow();
  ASSERT_TRUE(probes.Start(1, "127.0.0.1", open_port, now, absl::Seconds(5)));
  ASSERT_TRUE(probes.Start(2, "127.0.0.1", closed_port, now, absl::Seconds(5)));
  EXPECT_EQ(probes.NextPoll(now), now + TcpProbes::kPollEvery);
  std::vector<TcpProbes::Done> done = PollUntilAnswered(probes, 2);
  ASSERT_EQ(done.size(), 2u);
  for (const TcpProbes::Done& d : done) {
    EXPECT_EQ(d.answer, d.id == 1 ? TcpProbes::Answer::kListens : TcpProbes::Answer::kRefused)
        << d.id;
  }
  EXPECT_EQ(probes.in_flight(), 0u);
  EXPECT_EQ(probes.NextPoll(now), absl::InfiniteFuture());
}

TEST(TcpProbesTest, NamesAreNotLookedUpAndTheInFlightCountIsBounded) {
  TcpProbes probes;
  const absl::Time now = MonotonicNow();
  EXPECT_FALSE(probes.Start(1, "localhost", 80, now, absl::Seconds(1)));
  EXPECT_FALSE(probes.Start(1, "127.0.0.1", 0, now, absl::Seconds(1)));
  UniqueFd fd;
  const int port = ListeningPort(fd);
  for (size_t i = 0; i < TcpProbes::kMaxInFlight; ++i) {
    ASSERT_TRUE(probes.Start(i, "127.0.0.1", port, now, absl::Seconds(1)));
  }
  EXPECT_FALSE(probes.Start(999, "127.0.0.1", port, now, absl::Seconds(1)));
}

TEST(TcpProbesTest, AProbeWithoutAnAnswerInTimeSaysSo) {
  // A listener whose accept queue is full drops new connections' SYNs: no answer, as from a
  // host cut off.
  UniqueFd fd;
  const int port = ListeningPort(fd);
  ASSERT_EQ(::listen(fd.get(), 0), 0);
  TcpProbes fill;
  const absl::Time now = MonotonicNow();
  for (uint64_t i = 0; i < 8; ++i)
    ASSERT_TRUE(fill.Start(i, "127.0.0.1", port, now, absl::Seconds(1)));
  TcpProbes probes;
  absl::SleepFor(absl::Milliseconds(200));  // the queue fills with the first ones
  ASSERT_TRUE(probes.Start(7, "127.0.0.1", port, MonotonicNow(), absl::Milliseconds(300)));
  std::vector<TcpProbes::Done> done = PollUntilAnswered(probes, 1);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].id, 7u);
  EXPECT_EQ(done[0].answer, TcpProbes::Answer::kNoAnswer);
}

}  // namespace
}  // namespace ddprun
